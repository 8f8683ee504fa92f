#!/usr/bin/env python3
"""How export_model compiles convolutions, chosen by measurement: one
model (torchvision's ResNet-18 at 64x64, or the ViT of
tests/model/gpu_models.py), compiled Triton-only with each means, and the
GPU's kernel time of one forward under each (the profiler's sum of kernel
durations, the median of 20 forwards: what tbundle run --graph costs, less
its launch), against PyTorch's reduce-overhead (cuDNN) in the same script.

    python3 bench/bench_conv.py [resnet18|vit] [--means mm,mm_splitk,mm_prologue,template]

mm: a gather of the windows and a matrix product (conv_as_mm), the gather
its own kernel; mm_splitk: the same with K split where the product has
too few tiles; mm_prologue: the gather fused into the product's loads
(Inductor's prologue fusion); template: Inductor's convolution template."""

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "model"))
import triton_bundle as tb  # noqa: E402
import gpu_models  # noqa: E402


def kernel_us(torch, fn, runs=20):
    """(median kernel time of one call in us, [(kernel, us per call)] top 8)."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    sums, per = [], {}
    for _ in range(runs):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        t = 0.0
        for e in prof.events():
            if str(getattr(e, "device_type", "")).split(".")[-1] == "CUDA" and not getattr(e, "is_user_annotation",
                                                                                           False):
                us = e.time_range.end - e.time_range.start
                t += us
                per[e.name] = per.get(e.name, 0.0) + us / runs
        sums.append(t)
    return statistics.median(sums), sorted(per.items(), key=lambda x: -x[1])[:8]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default="resnet18")
    ap.add_argument("--means", default="mm,mm_splitk")
    a = ap.parse_args()
    import torch
    import torch.nn as nn
    model, inputs, _ = gpu_models.MODELS[a.model](torch, nn)
    opts = dict(tb.TRITON_ONLY)
    torch._inductor.config.fx_graph_cache = False  # each means compiled afresh
    with torch.no_grad():
        for means in a.means.split(","):
            torch._dynamo.reset()
            t0 = time.perf_counter()
            if means == "template":
                c = torch.compile(model, options=opts)
            else:
                c = torch.compile(model, backend=tb.conv_as_mm_backend(
                    torch, opts, split_k="splitk" in means, prologue_fusion="prologue" in means))
            c(*inputs)
            us, top = kernel_us(torch, lambda: c(*inputs))
            print("%s %s: kernel time %.1f us per forward (compile %.0f s); top: %s" % (
                a.model, means, us, time.perf_counter() - t0,
                "; ".join("%s %.1f" % (n[:48], t) for n, t in top)))
            sys.stdout.flush()
        torch._dynamo.reset()
        ro = torch.compile(model, mode="reduce-overhead")
        for _ in range(5):
            ro(*inputs)
        torch.cuda.synchronize()
        times = []
        for _ in range(200):
            t0 = time.perf_counter()
            ro(*inputs)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        us, top = kernel_us(torch, lambda: model(*inputs))
        print("%s reduce-overhead: %.1f us per forward; eager's kernel time (cuDNN) %.1f us; top: %s" % (
            a.model, statistics.median(times) * 1e6, us, "; ".join("%s %.1f" % (n[:48], t) for n, t in top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
