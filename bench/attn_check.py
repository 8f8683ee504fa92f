#!/usr/bin/env python3
"""triton_bundle::decode_attention (options["decode_attention"]) against
eager attention's math on random inputs, then the kernel's time in a CUDA
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
    for b, h, hkv, s, d, masked in ((1, 32, 8, 256, 64, True), (2, 8, 8, 100, 128, False), (1, 32, 8, 512, 64, True)):
        q = torch.randn(b, h, 1, d, device="cuda", dtype=torch.bfloat16)
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
        got = op(q, k, v, mask, d ** -0.5, n)
        torch.cuda.synchronize()
        err = (got.float() - ref.float()).abs().max().item()
        print("b %d h %d hkv %d s %d d %d mask %s: max |op - eager| %.4g (eager's scale %.3g), equal %.3f" % (
            b, h, hkv, s, d, masked, err, ref.float().abs().max().item(), (got == ref).float().mean().item()))


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
                    q, k, v, mask, o, 0.125, s, q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2),
                    v.stride(0), v.stride(1), v.stride(2), 0, 0, 1, o.stride(0), o.stride(1),
                    H=h, GROUP=h // hkv, D=d, BS=bs, HAS_MASK=True, num_warps=w)
            us = graph_us(torch, lambda _: run(), None, calls=50)
            print("%d positions, %d warps: %.2f us a call%s" % (s, w, us,
                                                               " (block_of's choice)" if w == chosen else ""))


main()
sweep()
