#!/usr/bin/env python3
"""triton_bundle::decode_attention (options["decode_attention"]) against
eager attention's math on random inputs (with the rotary embedding of q
and without), then the kernel's time in a CUDA
graph of 50 calls at 256 and 512 positions with 2 to 16 warps (GPU).

    python3 bench/attn_check.py
"""
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from argmax_probe import graph_us  # noqa: E402 - the median of five replays of a CUDA graph of calls


def main():
    import torch
    from triton_bundle.attention import decode_attention_op
    from triton_bundle.inductor import DECODE_ATTENTION_BLOCK, DECODE_ATTENTION_MOST
    op = decode_attention_op(torch, DECODE_ATTENTION_MOST, DECODE_ATTENTION_BLOCK)
    torch.manual_seed(0)
    for b, h, hkv, s, d, masked, rope in ((1, 32, 8, 256, 64, True, False), (2, 8, 8, 100, 128, False, False),
                                          (1, 32, 8, 512, 64, True, False), (1, 32, 8, 256, 64, True, True),
                                          (2, 8, 4, 100, 128, False, True)):
        x = torch.randn(b, h, 1, d, device="cuda", dtype=torch.bfloat16)
        cos = sin = None
        q = x
        if rope:  # transformers' apply_rotary_pos_emb, eager
            ang = torch.rand(b, 1, 1, d // 2, device="cuda") * 6.3
            cos = torch.cat((ang, ang), -1).cos().to(x.dtype)
            sin = torch.cat((ang, ang), -1).sin().to(x.dtype)
            q = x * cos + torch.cat((-x[..., d // 2:], x[..., :d // 2]), -1) * sin
        k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
        mask = None
        if masked:
            mask = torch.zeros(b, 1, 1, s, device="cuda", dtype=torch.bfloat16)
            mask[..., s // 2:] = torch.finfo(torch.bfloat16).min
        n = h // hkv
        kr = k[:, :, None].expand(b, hkv, n, s, d).reshape(b, h, s, d)
        vr = v[:, :, None].expand(b, hkv, n, s, d).reshape(b, h, s, d)
        w = torch.matmul(q, kr.transpose(2, 3)) * d ** -0.5
        if mask is not None:
            w = w + mask
        ref = torch.matmul(torch.softmax(w, -1, dtype=torch.float32).to(q.dtype), vr)
        got = op(x, k, v, mask, d ** -0.5, n, cos, sin)
        torch.cuda.synchronize()
        err = (got.float() - ref.float()).abs().max().item()
        print("b %d h %d hkv %d s %d d %d mask %s rope %s: max |op - eager| %.4g (eager's scale %.3g), equal %.3f" % (
            b, h, hkv, s, d, masked, rope, err, ref.float().abs().max().item(), (got == ref).float().mean().item()))


def _embed_kernel():
    """A kernel that stores attention._query's rotary embedding of each
    row of Q (heads of D) in O, in float32."""
    import triton
    import triton.language as tl
    from triton_bundle.attention import _query

    def embed(Q, C, SN, O, unit, D: tl.constexpr):
        d = tl.arange(0, D)
        h = tl.program_id(0)
        tl.store(O + h * D + d, _query(Q + h * D, C, SN, unit, d, D, True))
    embed.__globals__.update(tl=tl, _query=_query)
    return triton.jit(embed)


def rope_alone():
    """The kernel's rotary embedding of q (attention._query) against
    eager's, element for element."""
    import torch
    embed = _embed_kernel()
    torch.manual_seed(1)
    for d in (64, 128):
        x = torch.randn(32, d, device="cuda", dtype=torch.bfloat16)
        ang = torch.rand(1, d // 2, device="cuda") * 6.3
        cos = torch.cat((ang, ang), -1).cos().to(x.dtype)
        sin = torch.cat((ang, ang), -1).sin().to(x.dtype)
        ref = x * cos + torch.cat((-x[..., d // 2:], x[..., :d // 2]), -1) * sin
        out = torch.empty(32, d, device="cuda", dtype=torch.float32)
        embed[(32,)](x, cos, sin, out, 1.0, D=d)
        torch.cuda.synchronize()
        print("rope alone, heads of %d: equal %.4f, max |kernel - eager| %.4g" % (
            d, (out == ref.float()).float().mean().item(), (out - ref.float()).abs().max().item()))


def sweep():
    import torch
    from triton_bundle import attention as A
    torch.manual_seed(0)
    b, h, hkv, d = 1, 32, 8, 64
    for s in (256, 512):
        q = torch.randn(b, h, 1, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
        mask = torch.zeros(b, 1, 1, s, device="cuda", dtype=torch.bfloat16)
        o = torch.empty_like(q)
        bs, chosen = A.block_of(s, d)
        for w in (2, 4, 8, 16):
            def run():
                A.decode_attention_kernel[(b * h,)](
                    q, k, v, mask, o, q, q, 0.125, 1.0, s, q.stride(0), q.stride(1),
                    k.stride(0), k.stride(1), k.stride(2),
                    v.stride(0), v.stride(1), v.stride(2), 0, 0, 1, o.stride(0), o.stride(1), 0, 0,
                    H=h, GROUP=h // hkv, D=d, BS=bs, HAS_MASK=True, ROPE=False, PDL=False, num_warps=w)
            us = graph_us(torch, lambda _: run(), None, calls=50)
            print("%d positions, %d warps: %.2f us a call%s" % (s, w, us,
                                                               " (block_of's choice)" if w == chosen else ""))


main()
rope_alone()
sweep()
