#!/usr/bin/env python3
"""Where a Llama-shaped decode step's time goes, kernel by kernel, under
variants of Inductor's options (issue 37: which options the exporter's
narrow_mm should set). On one GPU, random weights, no downloads.

    python3 bench/decode_kernels.py [--shape 1b|8b] [--layers N] [--variants a,b,...] [--budget SECONDS]

Builds transformers' LlamaForCausalLM in the shape (tests/model/
gpu_realsize.py's SIZES) with N layers (default 2: every layer's kernels
are the same, so per-layer figures carry to the full depth), a StaticCache
of 256 (gpu_realsize.py's build), and compiles its decode step (one token at position 40) with the
exporter's options for a narrow program (TRITON_ONLY plus
coordinate_descent_tuning, which decomposes the one-row products into
reductions) and each variant's additions; then the profiler's kernels of
five steps: per kernel name, the time per step and the count, the sum,
and per variant the sum against the first variant's. Prints one table
per variant and a last line per variant:

    variant NAME: kernel sum X us per step (R x the first), K kernels, compile S s
"""

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "model"))

VARIANTS = {
    "base": {},
    "all_dirs": {"coordinate_descent_check_all_directions": True},
    "radius2": {"coordinate_descent_search_radius": 2},
    "all_dirs_radius2": {"coordinate_descent_check_all_directions": True, "coordinate_descent_search_radius": 2},
}


def main(argv):
    args = argv[1:]
    opt = {"--shape": "8b", "--layers": "2", "--variants": "base,all_dirs,radius2", "--budget": "420"}
    for k in list(opt):
        if k in args:
            i = args.index(k)
            opt[k] = args[i + 1]
            del args[i:i + 2]
    if args:
        print(__doc__)
        return 2
    from pycheck import cuda_torch, step_kernels
    torch = cuda_torch()
    if torch is None:
        print("skipped: no torch with a GPU")
        return 0
    import triton_bundle as tb
    from gpu_realsize import build
    start, budget = time.time(), float(opt["--budget"])
    cfg, model, _, _, decode, _ = build(torch, opt["--shape"], int(opt["--layers"]))
    wbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    print("%s: %s shape, %d layers, %.2f GB of parameters" % (torch.cuda.get_device_name(), opt["--shape"],
                                                             cfg.num_hidden_layers, wbytes / 1e9))
    ids, pos = torch.tensor([[7]], device="cuda"), torch.tensor([40], device="cuda")
    first = None
    for name in opt["--variants"].split(","):
        if time.time() - start > budget * 0.6 and first is not None:
            print("variant %s: skipped (%.0f s left)" % (name, budget - (time.time() - start)))
            continue
        options = dict(tb.TRITON_ONLY, coordinate_descent_tuning=True, **VARIANTS[name])
        torch._dynamo.reset()
        t0 = time.time()
        fn = torch.compile(decode, options=options)
        with torch.no_grad():
            for _ in range(2):
                fn(ids, pos)
            torch.cuda.synchronize()
            compile_s = time.time() - t0
            per = step_kernels(torch, lambda: fn(ids, pos))
        total = sum(v[0] for v in per.values())
        count = sum(v[1] for v in per.values())
        first = first or total
        print("variant %s (%s):" % (name, VARIANTS[name] or "the exporter's options"))
        for k, (us, n) in sorted(per.items(), key=lambda x: -x[1][0]):
            print("   %9.1f us  %4.0f/step  %s" % (us, n, k[:110]))
        print("variant %s: kernel sum %.1f us per step (%.3f x the first), %.0f kernels, compile %.0f s" % (
            name, total, total / first, count, compile_s))
        sys.stdout.flush()
        del fn
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
