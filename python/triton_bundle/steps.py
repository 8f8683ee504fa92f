"""What turns a captured run into a program's steps, without torch: a
scalar's LITERAL bits (literal_bits), a fill's MEMSET pattern
(memset_pattern), whether a tensor is dense and its extent, the workspace
plan (plan_workspace; pdl_lives, the lives it gives with programmatic
dependent launch), and the profiler's GPU operations matched to the steps
(match_gpu_events, gpu_event_hint). tests/test_model.py checks them;
model.py builds with them."""

import operator
import struct

from .spec import ARG_CODES, KIND_BOOL, KIND_DESC, KIND_FLOAT, KIND_PTR, KIND_SINT, BundleError

WORKSPACE_ALIGN = 256
_U64 = (1 << 64) - 1
_CODES = {r.code: r for r in ARG_CODES}


def literal_bits(code, value, what="a scalar argument"):
    """The LITERAL operand of scalar `value` passed as argument code `code`:
    tb_arg's 64 bits as an unsigned int (an integer or bool two's
    complement, a float the IEEE-754 bits of the double)."""
    row = _CODES.get(code)
    if row is None or row.kind in (KIND_PTR, KIND_DESC):
        raise BundleError("unsupported_type", "%s: code %r takes no literal" % (what, code))
    if row.kind == KIND_FLOAT:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            value = _as_number(value, what)
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        v = operator.index(value)
    except TypeError:
        raise BundleError("unsupported_type", "%s: %r (%s) is not an integer for code %r"
                          % (what, value, type(value).__name__, code))
    bits = 8 * row.bytes
    if row.kind == KIND_BOOL:
        lo, hi = 0, 1
    elif row.kind == KIND_SINT:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:  # unsigned: its own range, or the signed reading of the same bits
        lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
    if not lo <= v <= hi:
        raise BundleError("arg_range", "%s: %d does not fit code %r" % (what, v, code))
    return v & _U64


def _as_number(value, what):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise BundleError("unsupported_type", "%s: %r (%s) is not a number" % (what, value, type(value).__name__))


def memset_pattern(element):
    """(width, value, repeat) of a memset that sets elements whose bytes
    (little-endian) are `element`: width 1, 2 or 4 bytes, the pattern, and
    how many pattern units make one element. An 8-byte element is two
    4-byte units when its halves are equal (0.0, 0, -1...); else refused."""
    n = len(element)
    if n in (1, 2, 4):
        return n, int.from_bytes(bytes(element), "little"), 1
    if n == 8 and element[:4] == element[4:]:
        return 4, int.from_bytes(bytes(element[:4]), "little"), 2
    raise BundleError("unsupported", "a fill with the %d-byte pattern %s: a memset takes 1, 2 or 4 bytes (an 8-byte "
                      "one only when its halves are equal)" % (n, bytes(element).hex()))


def is_dense(shape, strides):
    """Whether a tensor's elements fill its extent, each byte once: its
    strides, ordered, are a contiguous tensor's (the dimensions in any
    order; dimensions of size 1 take any stride)."""
    if any(n == 0 for n in shape):
        return True
    expect = 1
    for st, n in sorted((st, n) for n, st in zip(shape, strides) if n != 1):
        if st != expect:
            return False
        expect *= n
    return True


def extent(shape, strides, element_bytes):
    """FORMAT.md's extent: bytes from the first element to the end of the last."""
    if any(n == 0 for n in shape):
        return 0
    return (1 + sum((n - 1) * st for n, st in zip(shape, strides))) * element_bytes


def _round_up(n, a):
    return -(-n // a) * a


def _place(buffers, order, align, best_fit):
    """One placement of buffers [(size, first, last)] in the given order:
    each in a gap of the buffers already placed whose lifetimes meet its
    own, the lowest such gap (first fit) or the tightest (best fit; the
    space above the last buffer counts as an endless gap). (offsets, size)."""
    offsets = [0] * len(buffers)
    placed = []  # (offset, end, first, last)
    for i in order:
        size, first, last = buffers[i]
        if size == 0:
            continue
        busy = sorted((o, e) for o, e, f, l in placed if f <= last and first <= l)
        off, best, best_gap = 0, None, None
        for o, e in busy:  # sorted by start
            if off + size <= o:
                gap = o - off
                if not best_fit:
                    best = off
                    break
                if best_gap is None or gap < best_gap:
                    best, best_gap = off, gap
            off = max(off, _round_up(e, align))
        if best is None:
            best = off
        offsets[i] = best
        placed.append((best, best + size, first, last))
    return offsets, _round_up(max((e for _, e, _, _ in placed), default=0), align)


def pdl_lives(lives, pdl_at, skippable=()):
    """The (first, last) lives a workspace plan gives buffers in a program
    with programmatic dependent launch: pdl_at, the steps whose launch may
    start while the step that ran just before it ends; skippable, the steps
    that may do nothing at run time (a launch of zero blocks, a memset or
    copy of none, which the runner skips: the step before them then runs
    just before the next). A life whose last step may run beside a later
    launch in pdl_at (the next step, or one after skippable steps only)
    ends at that launch, so that the two never share bytes."""
    out = []
    for first, last in lives:
        k, end = last + 1, last
        while True:
            if k in pdl_at:
                end = k
            if k not in skippable:
                break
            k += 1
        out.append((first, end))
    return out


def plan_workspace(buffers, align=WORKSPACE_ALIGN, tries=64):
    """(offsets, workspace_size) for buffers given as (size, first, last):
    no two buffers whose lifetimes (first..last, inclusive) meet share a
    byte, each offset a multiple of `align`. Several orders (largest
    first, by first use, by last use, by lifetime, by size times lifetime,
    then seeded shuffles) each placed first fit and best fit; the smallest
    plan wins (the most bytes live at one step is a floor no plan beats,
    and the search stops when it reaches it)."""
    n = len(buffers)
    if not n:
        return [], 0
    steps = max(l for _, _, l in buffers) + 1
    live = [0] * (steps + 1)
    for size, first, last in buffers:
        live[first] += _round_up(size, align)
        live[last + 1] -= _round_up(size, align)
    floor, run = 0, 0
    for d in live:
        run += d
        floor = max(floor, run)
    idx = list(range(n))
    keys = [lambda i: (-buffers[i][0], buffers[i][1], i), lambda i: (buffers[i][1], -buffers[i][0], i),
            lambda i: (-buffers[i][2], -buffers[i][0], i), lambda i: (buffers[i][1] - buffers[i][2], -buffers[i][0], i),
            lambda i: (-buffers[i][0] * (buffers[i][2] - buffers[i][1] + 1), i)]
    orders = [sorted(idx, key=k) for k in keys]
    import random
    rnd = random.Random(0)
    for _ in range(tries if n <= 256 else tries // 8 if n <= 2048 else 0):  # each placement is O(n^2)
        o = orders[0][:]
        rnd.shuffle(o)
        orders.append(o)
    best = None
    for order in orders:
        for best_fit in (False, True):
            plan = _place(buffers, order, align, best_fit)
            if best is None or plan[1] < best[1]:
                best = plan
            if best[1] <= floor:
                return best
    return best


# The GPU operations a step shows in the profiler: a launch its kernel's
# name; aten's zero_/fill_ a FillFunctor elementwise kernel (never a
# cudaMemset); a contiguous device-to-device copy_ a cudaMemcpyAsync
# ("Memcpy DtoD"), or aten's copy kernel; the snapshot of a constant found
# during the run a device-to-host memcpy.
def _event_fits(kind, name, event):
    if kind == "launch":
        return event == name or event.startswith(name + "(")
    if kind == "memset":
        return "FillFunctor" in event or event.startswith("Memset")
    if kind == "copy":
        return event.startswith("Memcpy DtoD") or "copy_kernel" in event
    if kind == "snapshot":
        return event.startswith("Memcpy DtoH")
    return False


def match_gpu_events(expected, observed):
    """Walks the steps' expected GPU operations, [(kind, kernel name)], and
    the profiler's, [event name], both in order. Returns (foreign, missing):
    the observed events no step accounts for, [(position, name)], and the
    expected ones never seen, [index]."""
    i, foreign = 0, []
    for j, ev in enumerate(observed):
        if i < len(expected) and _event_fits(expected[i][0], expected[i][1], ev):
            i += 1
        else:
            foreign.append((j, ev))
    return foreign, list(range(i, len(expected)))


_HINTS = (
    # first: the efficient attention kernel's name holds "cutlass" ("fmha_cutlassF_f32_aligned_64x64_rf_sm80")
    (("flash", "fmha", "attention", "attn"),
     "a fused attention kernel: aten._scaled_dot_product_flash_attention, _efficient_attention or _cudnn_attention, "
     "which Inductor calls as an extern kernel for scaled_dot_product_attention; export with options "
     "{\"sdpa\": \"math\"} (the default), which compiles it into Triton kernels"),
    (("nvjet", "gemm", "gemv", "cublas", "cutlass", "xmma_gemm", "sm90_xmma", "sm80_xmma", "Kernel2", "splitKreduce"),
     'a cuBLAS/CUTLASS matrix product: compile with max_autotune=True and max_autotune_gemm_backends="TRITON"'),
    (("cudnn", "implicit_convolve", "fprop", "dgrad", "wgrad", "winograd", "conv2d", "convolve", "fft2d"),
     'a cuDNN convolution: compile with max_autotune=True and max_autotune_conv_backends="TRITON"'),
    (("FillFunctor",), "an aten fill_/zero_ that is no plain memset (a non-dense tensor), or a factory (zeros, full)"),
    (("copy_kernel", "Memcpy"), "an aten copy that is no contiguous device-to-device copy (a cast, a strided or a "
                                "host copy)"),
    (("nccl",), "a collective (NCCL): a program runs on one GPU"),
)


def gpu_event_hint(name):
    """What a GPU operation the steps do not account for probably is, and
    the option that turns it into Triton where one does."""
    if name.startswith("triton"):
        return ("a Triton kernel launched outside CachingAutotuner.run (a CUDA graph replay: compile without "
                "triton.cudagraphs and not with mode=\"reduce-overhead\"; or an aten operation written in Triton)")
    low = name.lower()
    for keys, hint in _HINTS:
        if any(k.lower() in low for k in keys):
            return hint
    return "an aten kernel: a fallback Inductor has no Triton lowering for"
