#!/usr/bin/env python3
"""The small model that ships with the repository (examples/model/), so
that `tbundle list` shows a program on any machine and `make demo` runs a
whole model from C where a GPU is: a two-layer MLP (16 -> 32, GELU,
32 -> 8) on a batch of 4, float32, random weights from a fixed seed.

Exported once, on a GPU, with the Python companion's export_model (its
kernels without Triton's IR: keep_ir=False), with the input and the
compiled model's output beside it:

    python3 examples/model/export_tiny.py [OUTDIR]     (default: examples/model)

writes tiny.tbundle, tiny.in0.npy (the input) and tiny.ref0.npy (what the
compiled model gives for it), which examples/run_model.c compares with
`build/run_model examples/model/tiny.tbundle examples/model/tiny.in0.npy
--expect examples/model/tiny.ref0.npy`. The cubins are for the GPU it was
exported on (an H100: sm_90); elsewhere, export again."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))


def main(argv):
    import numpy as np
    import torch
    import triton_bundle as tb
    out = argv[1] if len(argv) > 1 else HERE
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).cuda().eval()
    x = torch.randn(4, 16, device="cuda")
    report = tb.export_model(model, (x,), os.path.join(out, "tiny.tbundle"), {"keep_ir": False})
    with torch.no_grad():
        y = report.compiled(x)
    np.save(os.path.join(out, "tiny.in0.npy"), x.cpu().numpy())
    np.save(os.path.join(out, "tiny.ref0.npy"), y.cpu().numpy())
    print(report)
    print("bundle %d bytes; %s" % (os.path.getsize(os.path.join(out, "tiny.tbundle")), torch.cuda.get_device_name()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
