#!/usr/bin/env python3
"""Probe (issue 37): each kernel of a 1B-shaped decode step given other
configs one at a time, the whole step timed in a CUDA graph each time.

    python3 bench/step_tune_probe.py [--layers N] [--budget S]
"""

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "model"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

RED = [(1, 1024, 4), (1, 2048, 8), (2, 1024, 4), (2, 2048, 8), (4, 1024, 4), (4, 1024, 8), (4, 2048, 8),
       (8, 512, 4), (8, 1024, 8), (16, 512, 8), (16, 1024, 8), (32, 256, 4), (32, 512, 8)]
PER = [(1, 1), (1, 4), (2, 4), (4, 4), (8, 4), (16, 4), (32, 8), (64, 8)]


def main(argv):
    layers = int(argv[argv.index("--layers") + 1]) if "--layers" in argv else 4
    budget = float(argv[argv.index("--budget") + 1]) if "--budget" in argv else 480
    from pycheck import cuda_torch, step_kernels
    torch = cuda_torch()
    import gemv_probe
    gemv_probe.torch = torch
    import triton_bundle as tb
    from triton_bundle.inductor import narrow_product_configs
    import torch._inductor.runtime.triton_heuristics as th
    from gpu_realsize import build
    t0 = time.time()
    cfg, model, cache, _, decode, state = build(torch, "1b", layers)
    state0 = [t.clone() for t in state()]

    def reset():
        for t, s0 in zip(state(), state0):
            t.copy_(s0)
    tuners = {}
    orig_run = th.CachingAutotuner.run

    def run(self, *a, **k):
        tuners.setdefault((self.inductor_meta or {}).get("kernel_name", "?"), self)
        return orig_run(self, *a, **k)
    th.CachingAutotuner.run = run
    ids, pos = torch.tensor([[7]], device="cuda"), torch.tensor([40], device="cuda")
    options = dict(tb.TRITON_ONLY, coordinate_descent_tuning=True, autotune_local_cache=False)
    with narrow_product_configs(), torch.no_grad():
        fn = torch.compile(decode, options=options)
        for _ in range(2):
            reset()
            fn(ids, pos)
        torch.cuda.synchronize()
    th.CachingAutotuner.run = orig_run
    print("compiled in %.0f s, %d layers, %d kernels" % (time.time() - t0, layers, len(tuners)))

    def step():
        with torch.no_grad():
            return min(gemv_probe.time_graph(lambda: fn(ids, pos), 20, reset) for _ in range(2))
    with torch.no_grad():
        reset()
        per = step_kernels(torch, lambda: fn(ids, pos))
    base = step()
    print("base graph step %.1f us" % base)
    order = sorted(tuners, key=lambda n: -per.get(n, [0])[0])
    best = {}
    for name in order:
        if time.time() - t0 > budget:
            print("out of time at %s" % name)
            break
        tu = tuners[name]
        if getattr(tu.fn, "fn", True) is None:
            tu.fn = tu._reload_kernel().fn
        cur = tu.launchers[0]
        kw = dict(cur.config.kwargs)
        hints = dict(tu.size_hints or {})
        if set(kw) == {"XBLOCK", "R0_BLOCK"}:
            cands = [({"XBLOCK": min(x, hints["x"]), "R0_BLOCK": min(r, hints["r0_"])}, w) for x, r, w in RED]
        elif set(kw) == {"XBLOCK"}:
            cands = [({"XBLOCK": min(x, hints.get("x", x))}, w) for x, w in PER]
        else:
            continue
        seen, rows = set(), []
        for c, w in cands:
            key = (tuple(sorted(c.items())), w)
            if key in seen:
                continue
            seen.add(key)
            try:
                ln = tu._precompile_config(th.Config(c, num_warps=w, num_stages=1)).make_launcher()
            except Exception as e:  # noqa: BLE001
                rows.append((float("inf"), c, w, "fail %s" % type(e).__name__))
                continue
            tu.launchers = [ln]
            try:
                rows.append((step(), c, w, "spills %s" % getattr(ln, "n_spills", "?")))
            except Exception as e:  # noqa: BLE001
                rows.append((float("inf"), c, w, "run fail %s" % e))
            tu.launchers = [cur]
        rows.sort(key=lambda r: r[0])
        print("%s (%.2f us/step, %.0f launches; now %s w%d):" % (name[:90], per.get(name, [0, 0])[0],
                                                                per.get(name, [0, 0])[1], kw, cur.config.num_warps))
        for t, c, w, note in rows[:5]:
            print("    %8.1f us (%+.1f)  %s w%d %s" % (t, t - base, c, w, note))
        sys.stdout.flush()
        if rows and rows[0][0] < base - 1.0:
            cfg = th.Config(rows[0][1], num_warps=rows[0][2], num_stages=1)
            best[name] = tu._precompile_config(cfg).make_launcher()
    for name, ln in best.items():
        tuners[name].launchers = [ln]
    allbest = step()
    print("every kernel's best together: %.1f us against %.1f (%.3fx), %d kernels changed" % (
        allbest, base, allbest / base, len(best)))
    with torch.no_grad():
        reset()
        per2 = step_kernels(torch, lambda: fn(ids, pos))
    for k, (us, n) in sorted(per2.items(), key=lambda x: -x[1][0])[:16]:
        print("   %8.2f us (was %8.2f) %3.0f/step %s" % (us, per.get(k, [0])[0], n, k[:90]))
    print("done in %.0f s" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
