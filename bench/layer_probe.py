#!/usr/bin/env python3
"""Probe (issue 37): every kernel of a 1B-shaped decode step (2 layers by
default) compiled as the exporter compiles it (its backend, the narrow
products' config; not the in-step tuning), per step, without and with
options["decode_attention"]'s kernel, each compile's step in a CUDA graph
and its largest difference from eager. (Set TORCH_LOGS=output_code to see
Inductor's code as well.)

    python3 bench/layer_probe.py [--layers N]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_util import compile_step, measure_step, probe_setup  # noqa: E402


def main(argv):
    p = probe_setup(argv, 2)
    if p is None:
        return 0
    torch, tb, gemv_probe, step_kernels, narrow_product_configs, layers, decode, reset, ids, pos = p
    with torch.no_grad():
        reset()
        eager = [t.float().clone() for t in tb.output_tensors(decode(ids, pos))]
    for attention in (False, True):
        t0 = time.time()
        options = dict(tb.TRITON_ONLY, coordinate_descent_tuning=True, autotune_local_cache=False)
        backend = tb.exporter_backend(torch, options, attention=attention)
        torch._dynamo.reset()
        fn = compile_step(torch, narrow_product_configs, decode, reset, ids, pos, backend=backend)
        compiled = time.time() - t0
        us, per, got = measure_step(torch, gemv_probe, step_kernels, fn, reset, ids, pos, graphs=2)
        got = [t.float() for t in got]
        diff = max((a - b).abs().max().item() for a, b in zip(got, eager))
        print("attention %s (%s replaced): step %.1f us, kernels %.1f us, %d launches (%d layers; compiled in %.0f s);"
              " max |compiled - eager| %.4g, token %s eager %s" % (
                  attention, backend.attentions, us, sum(t for t, _ in per.values()),
                  sum(n for _, n in per.values()), layers, compiled, diff, got[-1].flatten().tolist(),
                  eager[-1].flatten().tolist()))
        for k, (t, n) in sorted(per.items(), key=lambda x: -x[1][0]):
            print("   %8.2f us %3.0f/step %s" % (t, n, k[:90]))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
