#!/usr/bin/env python3
"""Where the one-row products of a decode step stand, and which config the
exporter gives them (issue 37; inductor.py's NARROW_PRODUCT_CONFIG came
from it). On one GPU, random weights, no downloads.

    python3 bench/gemv_probe.py OUTDIR [--skip-sweep] [--skip-model] [--shape 1b|8b]
                                [--layers N] [--variants base,fixed,x1,x2,x4,x8,r512]

The sweep: each product of a Llama-3.2-1B-shaped step alone (one row
times a bf16 weight, the weight in several copies so that no launch finds
it in L2, timed in a CUDA graph) over 80 configs of a plain Triton kernel
(outputs per program, reduction step, warps, stages), against cuBLAS and
Inductor's decomposition tuned by coordinate descent. The model: the whole
decode step (gpu_realsize.py's build, all layers unless --layers), compiled
with the exporter's options once per variant: "base" lets coordinate
descent tune every kernel, "fixed" gives the products NARROW_PRODUCT_CONFIG
(narrow_product_configs), x1 to x8 give them 1 to 8 outputs per program,
r512 one output and 512-element steps;
per variant the step's time in a CUDA graph (the cache's state put back
before each replay of 20 steps), the profiler's kernels and the configs:

    variant NAME: graph step X us, kernel sum Y us, K kernels, products N, compile S s
"""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "model"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def gemv_rows(x_ptr, w_ptr, y_ptr, N, K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N, BLOCK_K), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rk).to(tl.float32)
        w = tl.load(w_ptr + rn[:, None] * K + rk[None, :], mask=rn[:, None] < N, other=0.0).to(tl.float32)
        acc += w * x[None, :]
    y = tl.sum(acc, 1)
    tl.store(y_ptr + rn, y.to(tl.bfloat16), mask=rn < N)


def time_graph(fn, reps=20, reset=lambda: None):
    reset()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    reset()
    g.replay()
    torch.cuda.synchronize()
    best = None
    for _ in range(5):
        reset()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        t = a.elapsed_time(b) * 1e3 / reps
        best = t if best is None else min(best, t)
    return best


def sweep(shapes):
    bw = 4200e9
    for (name, n, k) in shapes:
        nbytes = n * k * 2
        copies = max(2, (384 << 20) // nbytes)
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
        ys = [torch.empty(n, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        ref = (ws[0].float() @ x.float())
        res = []
        for bn in (1, 2, 4, 8, 16):
            for bk in (256, 512, 1024, 2048):
                if bk > k or bn * bk > 32768:
                    continue
                for nw in (4, 8):
                    for ns in (1, 3):
                        grid = (triton.cdiv(n, bn),)

                        def run():
                            for w, y in zip(ws, ys):
                                gemv_rows[grid](x, w, y, n, k, BLOCK_N=bn, BLOCK_K=bk, num_warps=nw, num_stages=ns)
                        try:
                            run()
                            torch.cuda.synchronize()
                            err = (ys[0].float() - ref).abs().max().item()
                            t = time_graph(run, 3) / copies
                        except Exception as e:  # noqa: BLE001
                            print("  %s bn=%d bk=%d nw=%d ns=%d: %s" % (name, bn, bk, nw, ns, str(e)[:80]))
                            continue
                        res.append((t, bn, bk, nw, ns, err))
        res.sort()

        def cublas():
            for w, y in zip(ws, ys):
                torch.mm(x[None], w.t(), out=y[None])
        tc = time_graph(cublas, 3) / copies
        from triton_bundle import TRITON_ONLY
        torch._dynamo.reset()
        f = torch.compile(lambda a, b: a @ b.t(), options=dict(TRITON_ONLY, coordinate_descent_tuning=True))
        f(x[None], ws[0])

        def ind():
            for w in ws:
                f(x[None], w)
        ti = time_graph(ind, 3) / copies
        floor = nbytes / bw * 1e6
        print("%-8s N=%6d K=%5d %7.2f MB floor %6.2f us | cublas %6.2f | inductor %6.2f | best rows %6.2f "
              "(%.2f TB/s) bn=%d bk=%d nw=%d ns=%d err %.3g" % (
                  name, n, k, nbytes / 1e6, floor, tc, ti, res[0][0], nbytes / res[0][0] / 1e6, *res[0][1:]))
        for r in res[1:6]:
            print("      next %6.2f us bn=%d bk=%d nw=%d ns=%d" % r[:5])
        sys.stdout.flush()
        del ws, ys


def model(out, shape, layers, variants):
    from gpu_realsize import build
    from pycheck import step_kernels
    import triton_bundle as tb
    from triton_bundle.inductor import narrow_product_configs
    cfg, m, cache, _, decode, state = build(torch, shape, layers)
    state0 = [t.clone() for t in state()]

    def reset():
        for t, s0 in zip(state(), state0):
            t.copy_(s0)
    ids, pos = torch.tensor([[7]], device="cuda"), torch.tensor([40], device="cuda")
    confs = {"base": False, "fixed": None,
             "x1": {"XBLOCK": 1, "R0_BLOCK": 1024, "num_warps": 4, "num_stages": 1},
             "x2": {"XBLOCK": 2, "R0_BLOCK": 2048, "num_warps": 8, "num_stages": 1},
             "x4": {"XBLOCK": 4, "R0_BLOCK": 2048, "num_warps": 8, "num_stages": 1},
             "x8": {"XBLOCK": 8, "R0_BLOCK": 1024, "num_warps": 8, "num_stages": 1},
             "r512": {"XBLOCK": 1, "R0_BLOCK": 512, "num_warps": 4, "num_stages": 1}}
    for v in variants:
        torch._dynamo.reset()
        t0 = time.time()
        ctx = narrow_product_configs(confs[v]) if confs[v] is not False else None
        if ctx:
            ctx.__enter__()
        try:
            fn = torch.compile(decode, options=dict(tb.TRITON_ONLY, coordinate_descent_tuning=True,
                                                    autotune_local_cache=False))
            with torch.no_grad():
                for _ in range(2):
                    reset()
                    fn(ids, pos)
                torch.cuda.synchronize()
        finally:
            if ctx:
                ctx.__exit__(None, None, None)
        compile_s = time.time() - t0
        with torch.no_grad():
            step = time_graph(lambda: fn(ids, pos), 20, reset)
            reset()
            per = step_kernels(torch, lambda: fn(ids, pos))
        for k, (us, n) in sorted(per.items(), key=lambda x: -x[1][0])[:14]:
            print("   %9.1f us  %4.0f/step  %s" % (us, n, k[:120]))
        print("variant %s: graph step %.1f us, kernel sum %.1f us, %d kernels, products %s, compile %.0f s" % (
            v, step, sum(x[0] for x in per.values()), round(sum(x[1] for x in per.values())),
            len(ctx.chosen) if ctx else "-", compile_s))
        if ctx:
            print("   chosen: %s" % sorted(ctx.chosen.items()))
        sys.stdout.flush()
        del fn


def main(argv):
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    shape = argv[argv.index("--shape") + 1] if "--shape" in argv else "1b"
    if "--skip-sweep" not in argv:
        sweep([("q", 2048, 2048), ("kv", 512, 2048), ("qkv", 3072, 2048), ("gate", 8192, 2048),
               ("gateup", 16384, 2048), ("down", 2048, 8192), ("head", 128256, 2048)])
    if "--skip-model" not in argv:
        layers = int(argv[argv.index("--layers") + 1]) if "--layers" in argv else None
        variants = argv[argv.index("--variants") + 1].split(",") if "--variants" in argv else ["base", "fixed"]
        model(out, shape, layers, variants)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
