"""A decode step's attention as one Triton kernel of the exporter's own
(exporter_backend's attention; options["decode_attention"]).

Eager attention as transformers writes it (matmul(q, k^T) * scale, plus a
mask, softmax in float32, back to q's dtype, matmul with v), with one
query per head, is four of Inductor's kernels in a decode step: the
scores, the softmax's maximum and sum, the weighted values in two halves,
and their sum (PERFORMANCE.md section 23). Each waits for the one before,
so at a few hundred positions each costs its latency, not its bytes.
attention_pass() finds that pattern in the graph that Dynamo hands the
backend and calls triton_bundle::decode_attention in its place: one
program per query head, which reads its key/value head's rows (grouped
heads share them: repeat_kv's copy is never made). Where the query is
transformers' rotary embedding of another, the kernel applies it (2.14),
and it waits for the kernel before it (gdc_wait), so that the exporter
launches it with programmatic dependent launch (PDL_KERNELS).

The kernel rounds where eager rounds: the scores to q's dtype after the
product, after the scale and after the mask; the probabilities to it
before the product with v; it sums in float32 in another order than
eager's matmul and softmax, so it is close to eager, not bit-identical.
The exporter's compiled functions, which the bundle matches bit for bit,
include it.

The exporter imports this module only when a graph has such an
attention; without Triton it imports (as every module of the package
does), and only decode_attention_op and block_of need Triton."""

try:
    import triton
    import triton.language as tl
    try:
        from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
    except ImportError:  # a Triton without programmatic dependent launch
        gdc_launch_dependents = gdc_wait = None
except ImportError:
    class _NoTriton:
        """Stands in for triton and triton.language where Triton is not
        installed, so that the definitions below run."""
        constexpr = None

        @staticmethod
        def jit(fn):
            return fn
    triton = tl = _NoTriton()
    gdc_launch_dependents = gdc_wait = None


@triton.jit
def _scores(q, k, s, inside, mp, scale, msk, HAS_MASK: tl.constexpr):
    # positions s's scores from their keys k, rounded where eager rounds them
    dt = k.dtype
    x = tl.sum(k.to(tl.float32) * q[None, :], 1).to(dt).to(tl.float32)
    x = (x * scale).to(dt).to(tl.float32)
    if HAS_MASK:
        x = (x + tl.load(mp + s * msk, mask=inside, other=0.0).to(tl.float32)).to(dt).to(tl.float32)
    return tl.where(inside, x, float("-inf"))


@triton.jit
def _query(q, c, sn, unit, d, D: tl.constexpr, ROPE: tl.constexpr):
    # the query, in float32; with ROPE, transformers' rotary embedding of
    # it first, q * cos + cat(-q[D/2:], q[:D/2]) * sin, rounded to q's
    # dtype after each product and after the sum, as eager rounds it.
    # cos and sin are multiplied by unit (1.0, an argument): a product of
    # two values of q's dtype rounded to it is a product in that dtype to
    # LLVM, which it would fuse with the sum after it into one FMA that
    # rounds once (a quarter of the values then differed from eager's by a
    # unit in the last place); unit, unknown to it, keeps the products in
    # float32
    dt: tl.constexpr = q.dtype.element_ty
    if ROPE:
        lo = d < D // 2
        other = tl.load(q + tl.where(lo, d + D // 2, d - D // 2)).to(tl.float32)
        rot = tl.where(lo, -other, other)
        a = (tl.load(q + d).to(tl.float32) * (tl.load(c + d).to(tl.float32) * unit)).to(dt).to(tl.float32)
        b = (rot * (tl.load(sn + d).to(tl.float32) * unit)).to(dt).to(tl.float32)
        return (a + b).to(dt).to(tl.float32)
    return tl.load(q + d).to(tl.float32)


@triton.jit
def decode_attention_kernel(Q, K, V, M, O, C, SN, scale, unit, S,
                            sqb, sqh, skb, skh, sks, svb, svh, svs, smb, smh, sms, sob, soh, scb, ssb,
                            H: tl.constexpr, GROUP: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                            HAS_MASK: tl.constexpr, ROPE: tl.constexpr, PDL: tl.constexpr):
    # one program per (batch, query head), all S <= BS positions in one
    # block: the keys and values loaded at once, before any arithmetic, so
    # that their latencies overlap, and the scores kept in registers, so
    # that each probability is eager's exp(x - max) / sum before it is
    # rounded. (Three passes over blocks of 128 took 42 us at 2,048
    # positions, where Inductor's kernels take 12: longer rows are left to
    # Inductor, inductor.DECODE_ATTENTION_MOST.)
    if PDL:
        # launched with programmatic dependent launch, it may start while
        # the kernel before it (which may write what it reads) ends: it
        # waits here, before it touches memory, then lets the next start
        # (which waits in its turn), as Inductor's kernels do. The exporter
        # gives it the flag (Inductor launches a Triton op's kernel
        # without it).
        gdc_wait()
        gdc_launch_dependents()
    pid = tl.program_id(0)
    b = pid // H
    h = pid % H
    kvh = h // GROUP
    dt = O.dtype.element_ty
    d = tl.arange(0, D)
    s = tl.arange(0, BS)
    inside = s < S
    q = _query(Q + b * sqb + h * sqh, C + b * scb, SN + b * ssb, unit, d, D, ROPE)
    k = tl.load(K + b * skb + kvh * skh + s[:, None] * sks + d[None, :], mask=inside[:, None], other=0.0)
    v = tl.load(V + b * svb + kvh * svh + s[:, None] * svs + d[None, :], mask=inside[:, None], other=0.0)
    x = _scores(q, k, s, inside, M + b * smb + h * smh, scale, sms, HAS_MASK)
    m = tl.max(x, 0)
    e = tl.where(x == float("-inf"), 0.0, tl.exp(x - m))
    p = (e / tl.sum(e, 0)).to(dt).to(tl.float32)
    acc = tl.sum(p[:, None] * v.to(tl.float32), 0)
    tl.store(O + b * sob + h * soh + d, acc.to(dt))


# The kernels of this module that wait for the kernel before them before
# they touch memory (PDL true): the exporter launches them with
# programmatic dependent launch where it compiles a program with it
# (model._pdl_for_own). In a decode step of the 1B shape on an H200 that
# was 864.9 us a token against 901.9 without (PERFORMANCE.md section 24).
PDL_KERNELS = ("decode_attention_kernel",)


def block_of(s, d):
    """(BS, num_warps): the kernel's block for s positions of d, and its
    warps. Measured on an H200 (bench/attn_check.py, 32 query and 8
    key/value heads of 64): 256 positions 3.3 us with 4 warps, 3.4 with 8,
    4.5 with 16; 512 positions 5.5, 4.6 and 5.1."""
    bs = max(16, triton.next_power_of_2(s))
    return bs, max(4, min(8, bs * d // 4096))


def pdl_capable(torch, device):
    """Whether the kernel waits for the kernel before it (gdc_wait), for
    programmatic dependent launch: where Inductor's config has
    triton.enable_pdl (the op is traced inside the compile whose config
    says so; elsewhere the wait, inline assembly, would only make PyTorch
    take every argument as written), this Triton has it and the device
    (compute capability 9.0 or later) runs griddepcontrol."""
    config = getattr(getattr(getattr(torch, "_inductor", None), "config", None), "triton", None)
    return bool(getattr(config, "enable_pdl", False)) and gdc_wait is not None and device.type == "cuda" and \
        torch.cuda.get_device_capability(device)[0] >= 9


def _stride(t, i):
    return t.stride(i) if t.shape[i] != 1 else 0


def refusal(q, k, v, mask, group, most, dtypes, block=None, cos=None, sin=None):
    """Why the kernel cannot take these arguments (tensors, or anything
    with dim(), shape, dtype and stride()), or None: it indexes them as
    decode_attention_op's doc says, unchecked. dtypes: the two it takes
    (torch.float16, torch.bfloat16); most: positions at most; block: the
    positions rounded up to a power of two times the head's size at most;
    cos and sin: both or neither."""
    if q.dim() != 4 or k.dim() != 4 or tuple(v.shape) != tuple(k.shape) or q.shape[2] != 1:
        return "q [B, H, 1, D], k and v [B, H / group, S, D]: %s, %s, %s" % (
            tuple(q.shape), tuple(k.shape), tuple(v.shape))
    b, h, _, d = q.shape
    if b < 1 or h < 1 or k.shape[0] != b or k.shape[3] != d or group < 1 or k.shape[1] * group != h:
        return "k %s for q %s and a group of %d" % (tuple(k.shape), tuple(q.shape), group)
    if d & (d - 1) or not 16 <= d <= 256 or not 1 <= k.shape[2] <= most:
        return "a head of %d (a power of two from 16 to 256), %d positions (1 to %d)" % (d, k.shape[2], most)
    if block is not None and (1 << (k.shape[2] - 1).bit_length()) * d > block:
        return "%d positions of %d: a block of more than %d elements" % (k.shape[2], d, block)
    if k.dtype != q.dtype or v.dtype != q.dtype or q.dtype not in dtypes:
        return "q, k and v of one dtype, float16 or bfloat16 (%s, %s, %s)" % (q.dtype, k.dtype, v.dtype)
    if any(t.stride(3) != 1 for t in (q, k, v)):
        return "q, k and v with a last stride of 1"
    if mask is not None and (mask.dim() != 4 or mask.dtype != q.dtype or mask.shape[0] not in (1, b) or
                             mask.shape[1] not in (1, h) or mask.shape[2] != 1 or mask.shape[3] != k.shape[2]):
        return "a mask [B or 1, H or 1, 1, S] of q's dtype (%s %s)" % (tuple(mask.shape), mask.dtype)
    if (cos is None) != (sin is None):
        return "cos and sin both or neither"
    for t in (cos, sin) if cos is not None else ():
        if t.dim() not in (3, 4) or tuple(t.shape[1:]) != (1,) * (t.dim() - 2) + (d,) or \
                t.shape[0] not in (1, b) or t.dtype != q.dtype or t.stride(t.dim() - 1) != 1:
            return "cos and sin [B or 1, 1, 1, D] or [B or 1, 1, D] of q's dtype with a last stride of 1 (%s %s)" % (
                tuple(t.shape), t.dtype)
    return None


_OP = []


def decode_attention_op(torch, most, block):
    """torch.ops.triton_bundle.decode_attention (registered once, with the
    first call's `most` positions and `block` elements at most, which it
    keeps: inductor.DECODE_ATTENTION_MOST and _BLOCK; refusal() says what
    else it refuses):
    (q [B, H, 1, D], k [B, H / group, S, D], v like k, mask [B or 1, H or 1,
    1, S] or None, scale, group, cos=None, sin=None: [B or 1, 1, 1, D] or
    [B or 1, 1, D], the rotary embedding's, applied to q first as
    transformers does) -> [B, H, 1, D] in q's dtype; a
    torch.library.triton_op, so that Inductor compiles its kernel into the
    graph's code as a Triton kernel of the program. Its kernel waits for
    the kernel before it (pdl_capable) where Inductor's config has
    triton.enable_pdl, as the exporter sets it for a program with
    programmatic dependent launch."""
    if _OP:
        return _OP[0]
    from typing import Optional
    from torch.library import triton_op, wrap_triton
    Tensor = torch.Tensor

    @triton_op("triton_bundle::decode_attention", mutates_args=())
    def decode_attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], scale: float,
                         group: int, cos: Optional[Tensor] = None, sin: Optional[Tensor] = None) -> Tensor:
        bad = refusal(q, k, v, mask, group, most, (torch.float16, torch.bfloat16), block, cos, sin)
        if bad:
            raise ValueError("decode_attention: " + bad)
        b, h, _, d = q.shape
        s = k.shape[2]
        o = torch.empty((b, h, 1, d), dtype=q.dtype, device=q.device)
        bs, warps = block_of(s, d)
        m = mask if mask is not None else q
        rope = cos is not None
        wrap_triton(decode_attention_kernel)[(b * h,)](
            q, k, v, m, o, cos if rope else q, sin if rope else q, scale, 1.0, s,
            _stride(q, 0), _stride(q, 1), _stride(k, 0), _stride(k, 1), _stride(k, 2),
            _stride(v, 0), _stride(v, 1), _stride(v, 2),
            _stride(m, 0) if mask is not None else 0, _stride(m, 1) if mask is not None else 0,
            _stride(m, 3) if mask is not None else 0, _stride(o, 0), _stride(o, 1),
            _stride(cos, 0) if rope else 0, _stride(sin, 0) if rope else 0,
            H=h, GROUP=group, D=d, BS=bs, HAS_MASK=mask is not None, ROPE=rope, PDL=pdl_capable(torch, q.device),
            num_warps=warps)
        return o
    _OP.append(torch.ops.triton_bundle.decode_attention.default)
    return _OP[0]
