#!/usr/bin/env python3
"""Probe (issue 37): a 1B-shaped decode step (4 layers by default)
compiled as the exporter compiles it with programmatic dependent launch
(its backend with the decode attention, the narrow products' config,
triton.enable_pdl; not the in-step tuning), without and with
options["store_activation"] (inductor.activation_pass), alternated; each step
timed in a CUDA graph, its kernels under the profiler, its outputs against
eager's (the greedy token, and the largest difference over them all).

    python3 bench/activation_probe.py [--layers N]
"""

import sys
import time

from probe_util import compile_step, measure_step, probe_setup  # noqa: E402 - also sets the import paths


def main(argv):
    p = probe_setup(argv, 4)
    if p is None:
        return 0
    torch, tb, gemv_probe, step_kernels, narrow_product_configs, layers, decode, reset, ids, pos = p
    if not hasattr(torch._inductor.config.triton, "enable_pdl"):
        print("skip: this PyTorch's Inductor has no triton.enable_pdl")
        return 0
    with torch.no_grad():
        reset()
        eager = [t.float().clone() for t in tb.output_tensors(decode(ids, pos))]
    torch._inductor.config.triton.enable_pdl = True
    results = {}
    for on in (False, True, False, True):
        t0 = time.time()
        torch._dynamo.reset()
        options = dict(tb.TRITON_ONLY, coordinate_descent_tuning=True, autotune_local_cache=False)
        options["triton.enable_pdl"] = True
        backend = tb.exporter_backend(torch, options, attention=True, activation=on)
        fn = compile_step(torch, narrow_product_configs, decode, reset, ids, pos, backend=backend)
        compiled = time.time() - t0
        step, per, out = measure_step(torch, gemv_probe, step_kernels, fn, reset, ids, pos)
        results.setdefault(on, []).append(step)
        print("activation=%s (%s stored, %s attentions): compiled %.0f s, graph step %.1f us, kernel sum %.1f us "
              "(%d launches), eager's token: %s, max |compiled - eager| over the outputs %.4g" % (
                  on, backend.activations, backend.attentions, compiled, step, sum(v[0] for v in per.values()),
                  sum(v[1] for v in per.values()), bool(torch.equal(out[-1].float(), eager[-1])),
                  max((a.float() - b).abs().max().item() for a, b in zip(out, eager))))
        for k, (t, n) in sorted(per.items(), key=lambda x: -x[1][0])[:16]:
            print("   %8.2f us %3.0f/step %s" % (t, n, k[:90]))
        sys.stdout.flush()
    print("best of each (%d layers): without %.1f us, with %.1f us" % (layers, min(results[False]), min(results[True])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
