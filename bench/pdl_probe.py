#!/usr/bin/env python3
"""Probe (issue 37): a 1B-shaped decode step compiled with the exporter's
options, with and without Inductor's programmatic dependent launch
(triton.enable_pdl), timed in a CUDA graph; the outputs compared.

    python3 bench/pdl_probe.py [--layers N]
"""

import re
import sys
import time

from probe_util import compile_step, decode_step, measure_step  # noqa: E402 - also sets the import paths


def show_source(torch):
    """Where Inductor writes the grid-dependency calls (its version's)."""
    import torch._inductor.codegen.triton as ct
    src = open(ct.__file__).read().splitlines()
    for i, line in enumerate(src):
        if re.search(r"gdc_|GDC_|enable_pdl|launch_pdl", line):
            print("  triton.py:%d: %s" % (i + 1, line.strip()[:110]))


def main(argv):
    layers = int(argv[argv.index("--layers") + 1]) if "--layers" in argv else 4
    from pycheck import cuda_torch, step_kernels
    torch = cuda_torch()
    import gemv_probe
    gemv_probe.torch = torch
    import triton_bundle as tb
    from triton_bundle.inductor import narrow_product_configs
    print("torch %s, enable_pdl in config: %s" % (torch.__version__,
                                                   hasattr(torch._inductor.config.triton, "enable_pdl")))
    show_source(torch)
    if not hasattr(torch._inductor.config.triton, "enable_pdl"):
        return 0
    decode, reset, ids, pos = decode_step(torch, layers)
    results = {}
    for pdl in (False, True, False, True):
        t0 = time.time()
        torch._dynamo.reset()
        options = dict(tb.TRITON_ONLY, coordinate_descent_tuning=True, autotune_local_cache=False)
        options["triton.enable_pdl"] = pdl
        fn = compile_step(torch, narrow_product_configs, decode, reset, ids, pos, options=options)
        compiled = time.time() - t0
        step, per, out = measure_step(torch, gemv_probe, step_kernels, fn, reset, ids, pos)
        first = out[0]
        results.setdefault(pdl, []).append(step)
        same = ""
        if False in results and pdl:
            same = "; output equal to no-PDL's: %s" % bool(torch.equal(first, results["out"]))
        results["out"] = first.clone()
        print("pdl=%s: compiled %.0f s, graph step %.1f us, kernel sum %.1f us (%d launches)%s" % (
            pdl, compiled, step, sum(v[0] for v in per.values()), sum(v[1] for v in per.values()), same))
        sys.stdout.flush()
    a, b = min(results[False]), min(results[True])
    print("best of each: without %.1f us, with %.1f us: %.3fx" % (a, b, b / a))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
