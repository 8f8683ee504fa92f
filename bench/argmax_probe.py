#!/usr/bin/env python3
"""An argmax over a vocabulary's logits: Inductor's own kernel (one program
a row) against the exporter's split_argmax (two stages: each chunk's
maximum over many programs, then the chunks'), both compiled with
TRITON_ONLY, each timed in a CUDA graph of 100 calls (the median of five
graphs), on rows of bfloat16 logits; the two indices compared with eager
PyTorch's. Needs a GPU and PyTorch.

    python3 bench/argmax_probe.py"""

import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402


def graph_us(torch, f, x, calls=100):
    f(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            f(x)
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def main():
    import torch
    if not torch.cuda.is_available():
        print("skip: no CUDA device")
        return 0
    print("device: %s" % torch.cuda.get_device_name())
    for rows, n in ((1, 128256), (8, 128256), (1, 151936), (1, 32000)):
        x = torch.randn(rows, n, device="cuda").to(torch.bfloat16)
        row = []
        for name, backend in (("Inductor", None), ("split", tb.exporter_backend(torch, dict(tb.TRITON_ONLY)))):
            torch._dynamo.reset()
            kw = {"backend": backend} if backend else {"options": tb.TRITON_ONLY}
            f = torch.compile(lambda v: v.argmax(-1), **kw)
            same = torch.equal(f(x), x.argmax(-1))
            row.append("%s %.2f us%s" % (name, graph_us(torch, f, x), "" if same else " (WRONG INDEX)"))
        print("argmax over %d x %d bf16: %s" % (rows, n, ", ".join(row)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
