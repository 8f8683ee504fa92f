#!/usr/bin/env python3
"""Probe (issue 37): where a 1B-shaped decode layer's time goes, kernel by
kernel with each kernel's config, and what a decode-attention Triton kernel
of our own takes against the compiled eager attention.

    python3 bench/attn_probe.py OUTDIR [--layers N]
"""

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "model"))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def eager_scores(K, M, q, kv, s0, S, scale, D: tl.constexpr, BS: tl.constexpr):
    # positions s0..s0+BS of one key/value head: the scores rounded to bf16
    # where eager attention rounds them (the product, the scale, the mask),
    # and the positions
    d = tl.arange(0, D)
    s = s0 + tl.arange(0, BS)
    k = tl.load(K + kv * S * D + s[:, None] * D + d[None, :], mask=s[:, None] < S, other=0.0).to(tl.float32)
    sc = tl.sum(k * q[None, :], 1).to(tl.bfloat16).to(tl.float32)
    sc = (sc * scale).to(tl.bfloat16).to(tl.float32)
    sc = (sc + tl.load(M + s, mask=s < S, other=float("-inf")).to(tl.float32)).to(tl.bfloat16).to(tl.float32)
    return sc, s


@triton.jit
def attn_one(Q, K, V, M, O, S, scale, GROUP: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
             HKV: tl.constexpr):
    # one query head a program, the whole softmax first (eager's order)
    h = tl.program_id(0)
    kv = h // GROUP
    d = tl.arange(0, D)
    q = tl.load(Q + h * D + d).to(tl.float32)
    m = tl.full([BS], float("-inf"), tl.float32)
    for s0 in range(0, S, BS):
        sc, s = eager_scores(K, M, q, kv, s0, S, scale, D, BS)
        m = tl.maximum(m, tl.where(s < S, sc, float("-inf")))
    mx = tl.max(m, 0)
    lsum = tl.zeros([BS], tl.float32)
    for s0 in range(0, S, BS):
        sc, s = eager_scores(K, M, q, kv, s0, S, scale, D, BS)
        lsum += tl.where(s < S, tl.exp(sc - mx), 0.0)
    l = tl.sum(lsum, 0)
    acc = tl.zeros([BS, D], tl.float32)
    for s0 in range(0, S, BS):
        sc, s = eager_scores(K, M, q, kv, s0, S, scale, D, BS)
        w = tl.where(s < S, tl.exp(sc - mx) / l, 0.0).to(tl.bfloat16).to(tl.float32)
        v = tl.load(V + kv * S * D + s[:, None] * D + d[None, :], mask=s[:, None] < S, other=0.0).to(tl.float32)
        acc += w[:, None] * v
    tl.store(O + h * D + d, tl.sum(acc, 0).to(tl.bfloat16))


@triton.jit
def attn_online(Q, K, V, M, O, S, scale, GROUP: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                HKV: tl.constexpr):
    h = tl.program_id(0)
    kv = h // GROUP
    d = tl.arange(0, D)
    q = tl.load(Q + h * D + d).to(tl.float32)
    mx = tl.max(tl.full([BS], float("-inf"), tl.float32), 0)
    l = tl.sum(tl.zeros([BS], tl.float32), 0)
    acc = tl.zeros([D], tl.float32)
    for s0 in range(0, S, BS):
        s = s0 + tl.arange(0, BS)
        k = tl.load(K + kv * S * D + s[:, None] * D + d[None, :], mask=s[:, None] < S, other=0.0).to(tl.float32)
        sc = tl.sum(k * q[None, :], 1) * scale + tl.load(M + s, mask=s < S, other=float("-inf")).to(tl.float32)
        nm = tl.maximum(mx, tl.max(sc, 0))
        p = tl.exp(sc - nm)
        a = tl.exp(mx - nm)
        v = tl.load(V + kv * S * D + s[:, None] * D + d[None, :], mask=s[:, None] < S, other=0.0).to(tl.float32)
        acc = acc * a + tl.sum(p[:, None] * v, 0)
        l = l * a + tl.sum(p, 0)
        mx = nm
    tl.store(O + h * D + d, (acc / l).to(tl.bfloat16))

@triton.jit
def attn_split(Q, K, V, M, P, S, scale, GROUP: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
               HKV: tl.constexpr):
    # one (kv head, chunk of BS positions) a program, its GROUP query heads together
    kv = tl.program_id(0)
    c = tl.program_id(1)
    g = tl.arange(0, GROUP)
    d = tl.arange(0, D)
    s = c * BS + tl.arange(0, BS)
    q = tl.load(Q + (kv * GROUP + g)[:, None] * D + d[None, :]).to(tl.float32)          # [G, D]
    k = tl.load(K + kv * S * D + s[:, None] * D + d[None, :], mask=s[:, None] < S, other=0.0).to(tl.float32)
    sc = tl.sum(q[:, None, :] * k[None, :, :], 2) * scale                                # [G, BS]
    sc += tl.load(M + s, mask=s < S, other=float("-inf")).to(tl.float32)[None, :]
    mx = tl.max(sc, 1)                                                                   # [G]
    p = tl.exp(sc - mx[:, None])
    l = tl.sum(p, 1)
    v = tl.load(V + kv * S * D + s[:, None] * D + d[None, :], mask=s[:, None] < S, other=0.0).to(tl.float32)
    acc = tl.sum(p[:, :, None] * v[None, :, :], 1)                                      # [G, D]
    nc = tl.num_programs(1)
    base = ((kv * GROUP + g) * nc + c) * (D + 2)
    tl.store(P + base[:, None] + d[None, :], acc)
    tl.store(P + base + D, mx)
    tl.store(P + base + D + 1, l)

@triton.jit
def attn_combine(P, O, NC: tl.constexpr, D: tl.constexpr):
    h = tl.program_id(0)
    c = tl.arange(0, NC)
    d = tl.arange(0, D)
    base = (h * NC + c) * (D + 2)
    mx = tl.load(P + base + D)
    l = tl.load(P + base + D + 1)
    acc = tl.load(P + base[:, None] + d[None, :])
    m = tl.max(mx, 0)
    a = tl.exp(mx - m)
    tl.store(O + h * D + d, (tl.sum(acc * a[:, None], 0) / tl.sum(l * a, 0)).to(tl.bfloat16))


def main(argv):
    out_dir = argv[1]
    layers = int(argv[argv.index("--layers") + 1]) if "--layers" in argv else 2
    os.makedirs(out_dir, exist_ok=True)
    from pycheck import cuda_torch, step_kernels
    torch = cuda_torch()
    import triton_bundle as tb
    from triton_bundle.inductor import narrow_product_configs
    import torch._inductor.runtime.triton_heuristics as th
    from torch._inductor.utils import run_and_get_code
    from gpu_realsize import build
    t0 = time.time()

    # --- 1. the decode step's kernels and their configs
    cfg, model, _, _, decode, _ = build(torch, "1b", layers)
    configs = {}
    orig_run = th.CachingAutotuner.run

    def run(self, *a, **k):
        r = orig_run(self, *a, **k)
        name = (self.inductor_meta or {}).get("kernel_name", "?")
        if name not in configs and self.launchers:
            c = self.launchers[0].config
            configs[name] = "%s w%d s%d" % (dict(c.kwargs), c.num_warps, c.num_stages)
        return r
    th.CachingAutotuner.run = run
    options = dict(tb.TRITON_ONLY, coordinate_descent_tuning=True, autotune_local_cache=False)
    ids, pos = torch.tensor([[7]], device="cuda"), torch.tensor([40], device="cuda")
    with narrow_product_configs(), torch.no_grad():
        fn = torch.compile(decode, options=options)
        _, code = run_and_get_code(fn, ids, pos)
        fn(ids, pos)
        torch.cuda.synchronize()
        per = step_kernels(torch, lambda: fn(ids, pos))
    with open(os.path.join(out_dir, "step_code.py"), "w") as f:
        f.write("\n\n# ======== next\n".join(code))
    print("compiled in %.0f s; %d layers" % (time.time() - t0, layers))
    total = sum(v[0] for v in per.values())
    for k, (us, n) in sorted(per.items(), key=lambda x: -x[1][0]):
        print("   %8.2f us %3.0f/step  %-60s %s" % (us, n, k[:60], configs.get(k, "")))
    print("kernel sum %.1f us, %.0f launches" % (total, sum(v[1] for v in per.values())))
    sys.stdout.flush()

    # --- 2. attention alone: compiled eager against ours
    H, HKV, D = 32, 8, 64
    G = H // HKV
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

    def eager(q, k, v, m):
        k = k[:, :, None].expand(1, HKV, G, k.shape[2], D).reshape(1, H, k.shape[2], D)
        v = v[:, :, None].expand(1, HKV, G, v.shape[2], D).reshape(1, H, v.shape[2], D)
        w = torch.matmul(q, k.transpose(2, 3)) * 0.125
        w = w + m
        w = torch.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(w, v).transpose(1, 2).contiguous()

    for S in (256, 2048, 8192):
        torch.manual_seed(1)
        q = torch.randn(1, H, 1, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, HKV, S, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(1, HKV, S, D, device="cuda", dtype=torch.bfloat16)
        m = torch.zeros(1, 1, 1, S, device="cuda", dtype=torch.bfloat16)
        m[..., S // 6:] = torch.finfo(torch.bfloat16).min
        torch._dynamo.reset()
        with narrow_product_configs():
            ce = torch.compile(eager, options=options)
            ref = ce(q, k, v, m)
        exact = eager(q.float(), k.float(), v.float(), m.float()).to(torch.bfloat16)
        o = torch.empty(1, H, D, device="cuda", dtype=torch.bfloat16)
        mm = m.reshape(S)

        def timed(label, f, check=True):
            f()
            torch.cuda.synchronize()

            def step():
                flush.zero_()
                f()
            per = step_kernels(torch, step, 20)
            us = sum(t for name, (t, n) in per.items() if "elementwise" not in name and "fill" not in name)
            n = sum(c for name, (t, c) in per.items() if "elementwise" not in name and "fill" not in name)
            err = ""
            if check:
                got = o.reshape(1, 1, H, D)
                err = "max|d| vs compiled %.4f, vs fp32 %.4f, identical %s" % (
                    (got.float() - ref.float()).abs().max().item(), (got.float() - exact.float()).abs().max().item(),
                    torch.equal(got, ref))
            print("S=%5d %-28s %7.2f us %2.0f kernels  %s" % (S, label, us, n, err))
        timed("compiled eager", lambda: ce(q, k, v, m), check=False)
        for bs in (32, 64, 128):
            timed("one head/prog bs=%d" % bs, lambda: attn_one[(H,)](q, k, v, mm, o, S, 0.125, G, D, bs, HKV,
                                                                      num_warps=4))
        for bs in (64, 128):
            timed("online bs=%d" % bs, lambda: attn_online[(H,)](q, k, v, mm, o, S, 0.125, G, D, bs, HKV,
                                                                   num_warps=4))
        for bs in (32, 64, 128, 256):
            nc = triton.cdiv(S, bs)
            if nc > 256 or nc < 2:
                continue
            p = torch.empty(H * nc * (D + 2), device="cuda", dtype=torch.float32)
            for nw in (2, 4):
                def sp():
                    attn_split[(HKV, nc)](q, k, v, mm, p, S, 0.125, G, D, bs, HKV, num_warps=nw)
                    attn_combine[(H,)](p, o, nc, D, num_warps=1)
                timed("split bs=%d nc=%d w%d" % (bs, nc, nw), sp)
        sys.stdout.flush()
    print("done in %.0f s" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
