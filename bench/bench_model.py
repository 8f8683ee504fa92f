#!/usr/bin/env python3
"""One forward of a whole model: PyTorch (eager, torch.compile's default,
Triton-only torch.compile, mode="reduce-overhead") against the C runner
(tbundle run, plain and with a CUDA graph), on the models of
tests/model/gpu_models.py (gpt and mlp by default). Also the load-time
baseline: one host-to-device copy of the constants' bytes from pageable
memory, against tbundle's load time.

    python3 bench/bench_model.py --tbundle build/tbundle [--outdir DIR] [--iters N] [--models gpt,mlp]

Each PyTorch variant is timed per call: synchronize, perf_counter, the
call, synchronize, perf_counter; the median of --iters calls after warm-up
runs (reduce-overhead records its CUDA graphs in them). The bundle is
written by export_model, whose Triton-only compilation is the one timed;
tbundle runs as `tbundle run BUNDLE --in NAME.in0.npy ... --bench N
[--graph]` and prints `median <float> us` (and `load <float> ms`).
Prints a table with each time's ratio to reduce-overhead's and to
Triton-only's; --json FILE writes the numbers too."""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "model"))
import triton_bundle as tb  # noqa: E402
import gpu_models  # noqa: E402


def median_us(torch, fn, iters, warmup):
    """The median wall time of one call, synchronized on both sides, in
    microseconds."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def tbundle_run(exe, bundle, inputs, iters, graph, out=None):
    """(median us, load ms or None, the output) of tbundle run."""
    cmd = [exe, "run", bundle] + (["--out", out] if out else [])
    for p in inputs:
        cmd += ["--in", p]
    cmd += ["--bench", str(iters)] + (["--graph"] if graph else [])
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    out = r.stdout
    m = re.search(r"median\s+([0-9.eE+-]+)\s*us", out)
    if r.returncode != 0 or m is None:
        raise RuntimeError("%s exited %d without a median:\n%s" % (" ".join(cmd), r.returncode, out[-2000:]))
    load = {k: float(v) for k, v in re.findall(r"^(load|upload|h2d)\s+([0-9.eE+-]+)\s*ms", out, re.M)}
    return float(m.group(1)), load, out


def h2d_ms(torch, n, reps=5):
    """The median time of one copy of n bytes from pageable host memory to
    the GPU (the pages touched first), in milliseconds."""
    host = torch.ones(max(n, 1), dtype=torch.uint8)
    dev = torch.empty(max(n, 1), dtype=torch.uint8, device="cuda")
    dev.copy_(host)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        dev.copy_(host)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def bench_model(torch, nn, name, args):
    import numpy as np
    model, inputs, _ = gpu_models.MODELS[name](torch, nn)
    bundle = os.path.join(args.outdir, name + ".tbundle")
    opts = dict(gpu_models.OPTIONS.get(name) or {})
    if name in gpu_models.WEIGHTS_FILE:
        opts["weights"] = os.path.join(args.outdir, name + ".safetensors")
    t0 = time.perf_counter()
    report = tb.export_model(model, inputs, bundle, opts)
    export_s = time.perf_counter() - t0
    import resource
    host_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # the process's so far: torch included
    in_paths = gpu_models.save_all(torch, [t for t in inputs if torch.is_tensor(t)],
                                   os.path.join(args.outdir, name + ".in"))
    rows = {}
    with torch.no_grad():
        ref = [t.clone() for t in tb.output_tensors(report.compiled(*inputs))]
        eager = [t.float() for t in tb.output_tensors(model(*inputs))]
    eager_diff = max(float((a.float() - b).abs().max()) for a, b in zip(ref, eager)) if ref else 0.0
    with torch.no_grad():
        rows["eager"] = median_us(torch, lambda: model(*inputs), args.iters, args.warmup)
        rows["triton-only"] = median_us(torch, lambda: report.compiled(*inputs), args.iters, args.warmup)
        if not args.no_default:
            default = torch.compile(model)
            rows["compile default"] = median_us(torch, lambda: default(*inputs), args.iters, args.warmup)
        ro = torch.compile(model, mode="reduce-overhead")
        rows["reduce-overhead"] = median_us(torch, lambda: ro(*inputs), args.iters, max(args.warmup, 5))
    load, identical = {}, []
    for graph in (False, True):
        label = "tbundle --graph" if graph else "tbundle"
        out = os.path.join(args.outdir, "%s.out%s" % (name, ".graph" if graph else ""))
        try:
            us, ms, _ = tbundle_run(args.tbundle, bundle, in_paths, args.iters, graph, out)
            rows[label] = us
            if not graph:
                load = ms
            identical.append(all(np.array_equal(np.load(os.path.join(out, "out%d.npy" % k)),
                                                gpu_models.to_numpy(torch, t)) for k, t in enumerate(ref)))
        except (OSError, RuntimeError) as e:
            print("%s: %s" % (label, e))
            rows[label] = None
            identical.append(False)
    base_ms = h2d_ms(torch, report.constant_bytes)
    return {"model": name, "us": rows, "constant_bytes": report.constant_bytes, "h2d_pageable_ms": base_ms,
            "tbundle_load_ms": load, "workspace_size": report.workspace_size, "pytorch_peak": report.pytorch_peak,
            "launches": report.launches, "device": torch.cuda.get_device_name(), "export_s": export_s,
            "identical": identical, "eager_max_abs_diff": eager_diff, "weights": report.weights,
            "bundle_bytes": os.path.getsize(bundle), "host_peak_rss": host_peak}


def table(res):
    rows = res["us"]
    ro, tr = rows.get("reduce-overhead"), rows.get("triton-only")
    print("%s (%s): %d launches, constants %d bytes, workspace %d bytes (PyTorch peak %d); export %.1f s (the "
          "process's peak resident memory after it %.0f MB), bundle "
          "%d bytes%s; the runner's outputs %s the compiled model's (plain, graph: %s); compiled vs eager: max abs "
          "diff %.3g" % (
              res["model"], res["device"], res["launches"], res["constant_bytes"], res["workspace_size"],
              res["pytorch_peak"], res["export_s"], res["host_peak_rss"] / 1e6, res["bundle_bytes"],
              ", weights file %d bytes (%d tensors)" % (res["weights"]["bytes"], res["weights"]["external"])
              if res["weights"] else "", "bit-identical to" if all(res["identical"]) else "DIFFER from",
              res["identical"], res["eager_max_abs_diff"]))
    print("  %-18s %12s %16s %14s" % ("variant", "median us", "/reduce-overhead", "/triton-only"))
    for label, us in rows.items():
        if us is None:
            print("  %-18s %12s" % (label, "failed"))
            continue
        print("  %-18s %12.1f %16s %14s" % (label, us, "%.2fx" % (us / ro) if ro else "-",
                                           "%.2fx" % (us / tr) if tr else "-"))
    ld = res["tbundle_load_ms"]
    if ld.get("upload") and ld.get("h2d"):
        print("  load: tb_model_load %.3f ms with its kernels loaded (kernels too: %.3f ms); one pageable "
              "host-to-device copy of the constants %.3f ms in the same process (torch's: %.3f ms): %.2fx" % (
                  ld["upload"], ld.get("load", 0.0), ld["h2d"], res["h2d_pageable_ms"], ld["upload"] / ld["h2d"]))
    else:
        print("  load: tbundle printed no load times; torch's pageable copy %.3f ms" % res["h2d_pageable_ms"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tbundle", required=True, help="the tbundle command line program")
    ap.add_argument("--outdir", default="bench-model-out")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--models", default="gpt,mlp")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--no-default", action="store_true", help="leave out torch.compile's default mode (a large "
                    "model's compile time)")
    args = ap.parse_args()
    import torch
    import torch.nn as nn
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 1
    os.makedirs(args.outdir, exist_ok=True)
    results = []
    for name in [n for n in args.models.split(",") if n]:
        res = bench_model(torch, nn, name, args)
        table(res)
        results.append(res)
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
