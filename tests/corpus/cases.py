"""The corpus's kernels: @triton.jit kernels written for it, and models that
torch.compile turns into Inductor's kernels. Each case runs once; every
Triton launch it makes is replayed by corpus.py."""
import collections

import torch
import triton
import triton.language as tl

Case = collections.namedtuple("Case", "name kind run")
CASES = []


def case(kind):
    def deco(fn):
        CASES.append(Case(fn.__name__, kind, fn))
        return fn
    return deco


def all_cases():
    return CASES


dev = "cuda"

# ------------------------------------------------------------ @triton.jit


@triton.jit
def k_scalars(out, a: tl.int8, b: tl.uint8, c: tl.int16, d: tl.uint16, e: tl.int32, f: tl.uint32, g: tl.int64,
              h: tl.uint64, x: tl.float16, y: tl.bfloat16, z: tl.float32, w: tl.float64):
    tl.store(out + 0, a.to(tl.float64))
    tl.store(out + 1, b.to(tl.float64))
    tl.store(out + 2, c.to(tl.float64))
    tl.store(out + 3, d.to(tl.float64))
    tl.store(out + 4, e.to(tl.float64))
    tl.store(out + 5, f.to(tl.float64))
    tl.store(out + 6, g.to(tl.float64))
    tl.store(out + 7, h.to(tl.float64))
    tl.store(out + 8, x.to(tl.float64))
    tl.store(out + 9, y.to(tl.float64))
    tl.store(out + 10, z.to(tl.float64))
    tl.store(out + 11, w)


@case("jit: every scalar type")
def jit_scalars():
    out = torch.zeros(16, dtype=torch.float64, device=dev)
    # Triton's launcher refuses a negative i8 (Python's "b" format), so it
    # gets 100 here; tests/test_gpu.c passes -7 through ours alone
    k_scalars[(1,)](out, 100, 200, -300, 60000, -70000, 4000000000, -(2**40), 2**63 + 5, 1.5, -2.25, 3.14159,
                    2.718281828459045)
    k_scalars[(1,)](out, 127, 255, 32767, 65535, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1, 65504.0, 1e30, -0.0,
                    1e-300)


@triton.jit
def k_flag(x, out, n, flag, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    v = tl.load(x + o, mask=m)
    v = tl.where(flag, v * 2, v - 1)
    tl.store(out + o, v, mask=m)


@case("jit: bool flag, aligned and unaligned")
def jit_bool_flag():
    x = torch.randn(4099, device=dev)
    out = torch.zeros(4099, device=dev)
    for flag in (True, False):
        k_flag[(5,)](x, out, 4096, flag, BLOCK=1024)            # aligned, n divisible by 16
        k_flag[(5,)](x[1:], out[3:], 4095, flag, BLOCK=1024)    # misaligned views, n not divisible


@triton.jit
def k_int_flag(x, out, n, flag: "i1", uflag: "u1", BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + o, mask=o < n)
    v = tl.where(flag, v + 1, v)
    v = tl.where(uflag, v * 3, v)
    tl.store(out + o, v, mask=o < n)


@case("jit: tl.int1 and tl.uint1 arguments")
def jit_int1():
    x = torch.arange(256, dtype=torch.int32, device=dev)
    out = torch.zeros_like(x)
    k_int_flag[(1,)](x, out, 256, True, False, BLOCK=256)
    k_int_flag[(1,)](x, out, 256, False, True, BLOCK=256)


@triton.jit
def k_grid3(out, X: tl.constexpr, Y: tl.constexpr):
    i, j, k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    idx = (k * Y + j) * X + i
    tl.store(out + idx, i * 10000 + j * 100 + k + tl.num_programs(2) * 1000000)


@case("jit: 3-D grid")
def jit_grid3():
    out = torch.zeros(5 * 6 * 7, dtype=torch.int32, device=dev)
    k_grid3[(5, 6, 7)](out, X=5, Y=6)


@triton.jit
def k_cluster(x, out, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + o, tl.load(x + o) + 1.0)


@case("jit: clusters (num_ctas=2)")
def jit_cluster():
    x = torch.randn(8 * 128, device=dev)
    out = torch.zeros_like(x)
    k_cluster[(8,)](x, out, BLOCK=128, num_ctas=2)


def many_args_kernel(n):
    names = ", ".join(f"a{i}" for i in range(n))
    body = " + ".join(f"tl.load(a{i}).to(tl.float32) * {i + 1}" for i in range(n - 1))
    src = f"def k_many_{n}({names}):\n    tl.store(a{n - 1}, {body})\n"
    ns = {"tl": tl}
    import linecache
    fname = f"<corpus k_many_{n}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    exec(compile(src, fname, "exec"), ns)
    return triton.jit(ns[f"k_many_{n}"])


K44 = None
K120 = None


@case("jit: 44 arguments")
def jit_44_args():
    global K44
    K44 = K44 or many_args_kernel(44)
    bufs = [torch.full((4,), float(i), device=dev) for i in range(44)]
    K44[(1,)](*bufs)


@case("jit: 120 arguments")
def jit_120_args():
    global K120
    K120 = K120 or many_args_kernel(120)
    bufs = [torch.full((4,), float(i % 7), device=dev) for i in range(120)]
    K120[(1,)](*bufs)


@triton.jit
def k_matmul(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k0 + rk)[None, :] * sak, mask=(rm[:, None] < M) & (k0 + rk[None, :] < K),
                    other=0.0)
        y = tl.load(b + (k0 + rk)[:, None] * sbk + rn[None, :] * sbn, mask=(k0 + rk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@case("jit: matmul over 48 KiB of shared memory")
def jit_big_smem():
    a = torch.randn(256, 256, device=dev, dtype=torch.float16)
    b = torch.randn(256, 256, device=dev, dtype=torch.float16)
    c = torch.empty(256, 256, device=dev, dtype=torch.float32)
    k_matmul[(2, 2)](a, b, c, 256, 256, 256, *a.stride(), *b.stride(), *c.stride(), BM=128, BN=128, BK=64,
                     num_stages=4, num_warps=8)


@case("jit: misaligned views and odd strides")
def jit_misaligned():
    a = torch.randn(130, 70, device=dev, dtype=torch.float16)[1:, 3:]
    b = torch.randn(70, 66, device=dev, dtype=torch.float16)[3:, 1:]
    c = torch.empty(129, 65, device=dev, dtype=torch.float32)
    k_matmul[(3, 2)](a, b, c, 129, 65, 67, *a.stride(), *b.stride(), *c.stride(), BM=64, BN=64, BK=32)


@triton.jit
def k_atomic(x, out, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out, tl.sum(tl.load(x + o, mask=o < n, other=0.0)))


@case("jit: atomics")
def jit_atomics():
    x = torch.rand(1 << 16, device=dev)
    out = torch.zeros(1, device=dev)
    k_atomic[(64,)](x, out, 1 << 16, BLOCK=1024)


@triton.jit(do_not_specialize=["n"])
def k_nospec(x, out, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out + o, tl.load(x + o, mask=o < n, other=-1.0), mask=o < BLOCK)


@case("jit: do_not_specialize")
def jit_nospec():
    x = torch.randn(64, device=dev)
    out = torch.zeros(64, device=dev)
    k_nospec[(1,)](x, out, 48, BLOCK=64)
    k_nospec[(1,)](x, out, 1, BLOCK=64)


@triton.jit
def k_desc(in_desc, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    t = in_desc.load([pm * BM, pn * BN])
    om = pm * BM + tl.arange(0, BM)[:, None]
    on = pn * BN + tl.arange(0, BN)[None, :]
    tl.store(out + om * N + on, t * 2, mask=(om < M) & (on < N))


@case("jit: tensor descriptor (TMA)")
def jit_tensordesc():
    from triton.tools.tensor_descriptor import TensorDescriptor
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=dev))
    x = torch.randn(128, 96, device=dev)
    y = torch.empty_like(x)
    k_desc[(4, 3)](TensorDescriptor.from_tensor(x, [32, 32]), y, 128, 96, BM=32, BN=32)


# ------------------------------------------------------------ torch.compile


def compiled(fn, *args, dynamic=False, **options):
    torch._dynamo.reset()
    f = torch.compile(fn, fullgraph=True, dynamic=dynamic, options=options or None)
    return f(*args)


def pointwise(dtype):
    def run():
        if dtype in (torch.int8, torch.uint8, torch.int32, torch.int64):
            a = torch.randint(0, 100, (3000,), device=dev, dtype=dtype)
            b = torch.randint(1, 100, (3000,), device=dev, dtype=dtype)
            compiled(lambda x, y: (x * 3 + y) // 2 - (x > y).to(x.dtype), a, b)
        elif dtype == torch.bool:
            a = torch.rand(3000, device=dev) > 0.5
            b = torch.rand(3000, device=dev) > 0.3
            compiled(lambda x, y: (x ^ y) | ~x, a, b)
        elif dtype == torch.float8_e4m3fn:
            a = torch.randn(3000, device=dev)
            compiled(lambda x: (x * 2).to(torch.float8_e4m3fn).to(torch.float32) + 1, a)
        else:
            a = torch.randn(3000, device=dev, dtype=dtype)
            b = torch.randn(3000, device=dev, dtype=dtype)
            compiled(lambda x, y: torch.nn.functional.gelu(x) * torch.sigmoid(y) + torch.sin(x), a, b)
    return run


for _dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int32,
            torch.int64, torch.bool, torch.float8_e4m3fn):
    _name = "inductor_pointwise_" + str(_dt).replace("torch.", "")
    CASES.append(Case(_name, f"inductor: pointwise {str(_dt).replace('torch.', '')}", pointwise(_dt)))


@case("inductor: reductions")
def inductor_sum_mean():
    x = torch.randn(512, 3000, device=dev)
    compiled(lambda t: (t.sum(1), t.mean(0), t.amax(1)), x)


@case("inductor: reductions")
def inductor_argmax_var():
    x = torch.randn(300, 700, device=dev, dtype=torch.float16)
    compiled(lambda t: (t.argmax(1), torch.var_mean(t.float(), dim=1)), x)


@case("inductor: persistent reductions")
def inductor_softmax():
    x = torch.randn(1024, 256, device=dev)
    compiled(lambda t: torch.softmax(t, -1), x)


@case("inductor: persistent reductions")
def inductor_layer_norm():
    x = torch.randn(512, 768, device=dev, dtype=torch.bfloat16)
    ln = torch.nn.LayerNorm(768, device=dev, dtype=torch.bfloat16)
    compiled(lambda t: ln(t), x)


@case("inductor: scans")
def inductor_cumsum():
    x = torch.randn(64, 1000, device=dev)
    compiled(lambda t: (torch.cumsum(t, 1), torch.cumprod(t[:, :32], 1)), x)


@case("inductor: scans")
def inductor_long_cumsum():
    x = torch.randn(1 << 18, device=dev)
    compiled(lambda t: torch.cumsum(t, 0), x)


@case("inductor: sorts")
def inductor_sort():
    x = torch.randn(256, 64, device=dev)
    compiled(lambda t: torch.sort(t, dim=1, stable=True)[0] + 1, x)


@case("inductor: 2-D tiled")
def inductor_transpose():
    x = torch.randn(1000, 1200, device=dev)
    y = torch.randn(1200, 1000, device=dev)
    compiled(lambda a, b: a + b.t() * 2, x, y)


@case("inductor: dynamic shapes")
def inductor_dynamic_pointwise():
    x = torch.randn(1234, device=dev)
    compiled(lambda t: torch.relu(t) * 3 + 1, x, dynamic=True)


@case("inductor: dynamic shapes")
def inductor_dynamic_reduction():
    x = torch.randn(77, 333, device=dev)
    compiled(lambda t: t.sum(1) / t.shape[1], x, dynamic=True)


@case("inductor: bool and integer tensors")
def inductor_masks():
    x = torch.randn(4096, device=dev)
    idx = torch.randint(0, 4096, (1000,), device=dev)
    compiled(lambda t, i: (t > 0).sum() + t[i].long().sum() + torch.where(t > 0, i.sum(), 0), x, idx)


@case("inductor: random numbers")
def inductor_random():
    torch.manual_seed(0)
    x = torch.randn(8192, device=dev)
    compiled(lambda t: torch.nn.functional.dropout(t, 0.3, training=True) + torch.rand_like(t), x)


@case("inductor: mm templates (max-autotune)")
def inductor_mm():
    a = torch.randn(256, 512, device=dev, dtype=torch.float16)
    b = torch.randn(512, 384, device=dev, dtype=torch.float16)
    compiled(lambda x, y: torch.relu(x @ y) + 1, a, b, max_autotune=True, max_autotune_gemm_backends="TRITON",
             max_autotune_gemm_search_space="DEFAULT")


@case("inductor: cooperative reductions")
def inductor_cooperative():
    import torch._inductor.config as cfg
    x = torch.randn(4, 1 << 20, device=dev)
    with cfg.patch({"triton.cooperative_reductions": True, "triton.force_cooperative_reductions": True}):
        compiled(lambda t: t.sum(1), x)


@case("inductor: combo kernels")
def inductor_combo():
    import torch._inductor.config as cfg
    a = torch.randn(1000, device=dev)
    b = torch.randn(3000, device=dev)
    with cfg.patch({"combo_kernels": True, "benchmark_combo_kernel": False}):
        compiled(lambda x, y: (torch.sin(x) + 1, torch.cos(y) * 2), a, b)


@case("inductor: split scans")
def inductor_split_scan():
    import torch._inductor.config as cfg
    x = torch.randn(1 << 20, device=dev)
    with cfg.patch({"triton.persistent_reductions": False}):
        compiled(lambda t: torch.cumsum(t, 0) * 2, x)


@triton.jit
def k_wide_grid(out, n):
    pid = tl.program_id(0)
    tl.store(out + pid, pid * 3, mask=pid < n)


@case("jit: a 1-D grid of 200,000 programs")
def jit_wide_grid():
    out = torch.zeros(200000, dtype=torch.int32, device=dev)
    k_wide_grid[(200000,)](out, 200000)


@triton.jit
def k_coop(x, out, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + o, tl.load(x + o, mask=o < n) * 5, mask=o < n)


@case("jit: cooperative launch, num_warps 1 and 16")
def jit_coop_warps():
    x = torch.randn(4096, device=dev)
    out = torch.zeros_like(x)
    k_coop[(4,)](x, out, 4096, BLOCK=1024, launch_cooperative_grid=True)
    k_coop[(64,)](x, out, 4096, BLOCK=64, num_warps=1)
    k_coop[(2,)](x, out, 4096, BLOCK=2048, num_warps=16)


@triton.jit
def k_half_scalars(x, out, n, alpha: tl.float16, beta: tl.bfloat16, gamma, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    v = tl.load(x + o, mask=o < n)
    tl.store(out + o, v * alpha.to(tl.float32) + beta.to(tl.float32) - gamma, mask=o < n)


@case("jit: fp16 and bf16 scalars (PyTorch passes them as 4-byte floats)")
def jit_half_scalars():
    x = torch.randn(100, device=dev)
    out = torch.zeros_like(x)
    k_half_scalars[(1,)](x, out, 100, 0.333, -1.7, 2.5, BLOCK=128)


@triton.jit
def k_pipelined(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in tl.range(0, K, BK, num_stages=3):
        acc += tl.dot(tl.load(a + rm[:, None] * K + (k0 + rk)[None, :]), tl.load(b + (k0 + rk)[:, None] * N + rn[None, :]))
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))


@case("jit: software-pipelined bf16 matmul")
def jit_pipelined():
    a = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
    b = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
    c = torch.empty(256, 256, device=dev, dtype=torch.bfloat16)
    k_pipelined[(2, 2)](a, b, c, 256, 256, 256, BM=128, BN=128, BK=32, num_warps=8)


def _unary(name, fn, dtype=torch.float32, shape=(4096,)):
    def run():
        x = torch.randn(*shape, device=dev).to(dtype)
        compiled(fn, x)
    CASES.append(Case("inductor_" + name, "inductor: more pointwise and reductions", run))


_unary("logsumexp", lambda t: torch.logsumexp(t, -1), shape=(64, 500))
_unary("std_norm", lambda t: (t.std(1), torch.linalg.vector_norm(t, dim=1)), shape=(128, 333))
_unary("min_prod_argmin", lambda t: (t.amin(0), t.prod(1), t.argmin(1)), shape=(50, 40))
_unary("log_softmax_bf16", lambda t: torch.log_softmax(t, -1), dtype=torch.bfloat16, shape=(256, 1000))
_unary("clamp_pow_rsqrt", lambda t: torch.clamp(t, -1, 1).pow(3) + torch.rsqrt(t.abs() + 1))
_unary("casts", lambda t: ((t * 100).to(torch.int16).to(torch.float32) + (t > 0).to(torch.int64)).to(torch.float16))
_unary("mean_3d", lambda t: t.mean(dim=(0, 2)), shape=(16, 64, 300))
_unary("avg_pool", lambda t: torch.nn.functional.avg_pool2d(t, 3, 2), shape=(4, 8, 33, 33))
_unary("max_pool_indices", lambda t: torch.nn.functional.max_pool2d(t, 2, return_indices=True), shape=(2, 4, 32, 32))
_unary("upsample_pad", lambda t: torch.nn.functional.pad(torch.nn.functional.interpolate(t, scale_factor=2), (1, 2)),
       shape=(2, 3, 16, 16))
_unary("cat_where", lambda t: torch.cat([t, torch.where(t > 0, t, -t), t.flip(0)]), shape=(1000,))
_unary("bitwise_int", lambda t: ((t * 1000).to(torch.int32) & 0xFF) ^ ((t * 77).to(torch.int32) >> 2), shape=(5000,))


@case("inductor: gather and scatter (atomics)")
def inductor_scatter():
    x = torch.randn(1000, device=dev)
    idx = torch.randint(0, 100, (1000,), device=dev)
    compiled(lambda t, i: torch.zeros(100, device=dev).index_add(0, i, t) + t.gather(0, i)[:100], x, idx)


@case("inductor: embedding")
def inductor_embedding():
    w = torch.randn(500, 64, device=dev)
    idx = torch.randint(0, 500, (32, 17), device=dev)
    compiled(lambda ww, ii: torch.nn.functional.embedding(ii, ww).sum(-1), w, idx)


@case("inductor: bmm templates (max-autotune)")
def inductor_bmm():
    a = torch.randn(4, 128, 64, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4, 64, 96, device=dev, dtype=torch.bfloat16)
    compiled(lambda x, y: torch.bmm(x, y) * 0.5, a, b, max_autotune=True, max_autotune_gemm_backends="TRITON",
             max_autotune_gemm_search_space="DEFAULT")


@case("inductor: dynamic shapes")
def inductor_dynamic_softmax():
    x = torch.randn(37, 129, device=dev)
    compiled(lambda t: torch.softmax(t * 2, -1), x, dynamic=True)


@triton.jit
def k_desc_matmul(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        acc = tl.dot(a_desc.load([pm * BM, k0]), b_desc.load([k0, pn * BN]), acc)
    c_desc.store([pm * BM, pn * BN], acc.to(tl.float16))


@case("jit: tensor descriptors (TMA) in a matmul")
def jit_desc_matmul():
    from triton.tools.tensor_descriptor import TensorDescriptor
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=dev))
    a = torch.randn(256, 128, device=dev, dtype=torch.float16)
    b = torch.randn(128, 192, device=dev, dtype=torch.float16)
    c = torch.empty(256, 192, device=dev, dtype=torch.float16)
    k_desc_matmul[(2, 3)](TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [64, 64]),
                          TensorDescriptor.from_tensor(c, [128, 64]), 128, BM=128, BN=64, BK=64, num_warps=4)


@triton.jit
def k_desc3(in_desc, out, D0, D1, D2, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr):
    i = tl.program_id(0)
    t = in_desc.load([i * B0, 0, 0])
    o0 = i * B0 + tl.arange(0, B0)[:, None, None]
    o1 = tl.arange(0, B1)[None, :, None]
    o2 = tl.arange(0, B2)[None, None, :]
    tl.store(out + (o0 * D1 + o1) * D2 + o2, t + 1, mask=(o0 < D0) & (o1 < D1) & (o2 < D2))


@case("jit: a 3-D tensor descriptor with NaN padding")
def jit_desc3():
    from triton.tools.tensor_descriptor import TensorDescriptor
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=dev))
    x = torch.randn(20, 8, 16, device=dev)
    y = torch.zeros(20, 8, 16, device=dev)
    k_desc3[(3,)](TensorDescriptor(x, list(x.shape), list(x.stride()), [8, 8, 16], padding="nan"), y, 20, 8, 16,
                  B0=8, B1=8, B2=16)
