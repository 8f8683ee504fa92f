#!/usr/bin/env python3
"""Probe (issue 37): a 1B-shaped decode step (3 layers by default)
compiled as the exporter compiles it with programmatic dependent launch,
without and with Inductor's combo kernels (independent kernels, such as
the query, key and value products of one input, launched as one), each
step timed in a CUDA graph, its kernels under the profiler and its outputs
against eager's. With --dump DIR, the combo kernels' sources are copied
there.

    python3 bench/combo_probe.py [--layers N] [--dump DIR]
"""

import glob
import os
import shutil
import sys
import tempfile
import time

from probe_util import compile_step, measure_step, probe_setup  # noqa: E402 - also sets the import paths

VARIANTS = (
    ("off", {}),
    ("combo", {"combo_kernels": True}),
    ("off", {}),
    ("combo", {"combo_kernels": True}),
)


def main(argv):
    p = probe_setup(argv, 3)
    if p is None:
        return 0
    torch, tb, gemv_probe, step_kernels, narrow_product_configs, layers, decode, reset, ids, pos = p
    dump = argv[argv.index("--dump") + 1] if "--dump" in argv else None
    print("Inductor's combo options:", {k: getattr(torch._inductor.config, k)
                                        for k in dir(torch._inductor.config) if "combo" in k})
    with torch.no_grad():
        reset()
        eager = [t.float().clone() for t in tb.output_tensors(decode(ids, pos))]
    for name, extra in VARIANTS:
        if any(not hasattr(torch._inductor.config, k) for k in extra):
            print("skip %s: this Inductor lacks %s" % (name, extra))
            continue
        cache = tempfile.mkdtemp(prefix="combo_probe_")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        t0 = time.time()
        torch._dynamo.reset()
        options = dict(tb.TRITON_ONLY, coordinate_descent_tuning=True, autotune_local_cache=False,
                       fx_graph_cache=False)
        options["triton.enable_pdl"] = True
        options.update(extra)
        backend = tb.exporter_backend(torch, options, attention=True)
        try:
            fn = compile_step(torch, narrow_product_configs, decode, reset, ids, pos, backend=backend)
        except Exception as e:  # noqa: BLE001 - a probe reports and goes on
            print("%s: the compile failed: %s" % (name, str(e)[:2000]))
            continue
        compiled = time.time() - t0
        step, per, out = measure_step(torch, gemv_probe, step_kernels, fn, reset, ids, pos)
        print("%s: compiled %.0f s, graph step %.1f us, kernel sum %.1f us (%d launches, %d layers), eager's token: %s,"
              " max |compiled - eager| %.4g" % (
                  name, compiled, step, sum(v[0] for v in per.values()), sum(v[1] for v in per.values()), layers,
                  bool(torch.equal(out[-1].float(), eager[-1])),
                  max((a.float() - b).abs().max().item() for a, b in zip(out, eager))))
        for k, (t, n) in sorted(per.items(), key=lambda x: -x[1][0]):
            print("   %8.2f us %3.0f/step %s" % (t, n, k[:100]))
        if dump:
            os.makedirs(dump, exist_ok=True)
            for i, f in enumerate(sorted(glob.glob(os.path.join(cache, "**", "*.py"), recursive=True))):
                with open(f, errors="replace") as fh:
                    text = fh.read()
                if "pid_offset" in text and "@triton.jit" in text:
                    shutil.copy(f, os.path.join(dump, "%s_%d.py" % (name.replace(",", "").replace(" ", "_"), i)))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
