#!/usr/bin/env python3
"""The exporters on a GPU, end to end: from PyTorch and Triton into a bundle,
then every kernel launched by the C library (through ctypes) with the grid
the library computes from the record's rule, compared bit for bit.

    python3 tests/export/gpu_export.py [--lib build/libtriton_bundle.so]

1. torch.compile: a model of several graphs (graph breaks), compiled with
   max-autotune (no CUDA graphs) and pointwise autotuning, so that records
   hold several configs: an mm template (a fixed grid), pointwise, reduction,
   persistent-reduction and scan kernels. A second call runs under
   TorchCapture, which records each launch (kernel, chosen config,
   arguments); the snapshot hook copies every tensor's whole storage before
   and after PyTorch's launch. The bundle is written, read back by the C
   library, and every launch is replayed in PyTorch's order on copies of
   the "before" storages: tb_kernel_table_launch by cache key, the config
   PyTorch chose, TB_LAUNCH_GRID_AUTO. Every storage must equal PyTorch's
   "after" bytes, and the library's grid PyTorch's grid.
2. Triton: @triton.jit kernels, one autotuned (three configs, a grid lambda
   reading meta['n'] and meta['BLOCK']), one 2-D with grid strings and two
   constexpr choices, one with bool, u32 and i8 arguments and a lambda grid
   using max(); every config of every record is launched by the library
   (auto grid) and by Triton itself on identical inputs.

Ends with "N passed, N failed, N skipped"; skips without a GPU, torch or
triton.
"""
import argparse
import os
import sys
import tempfile
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
from pycheck import check, summary  # noqa: E402



class Storages:
    """Copies of the storages a launch's tensors live in, shared when two
    arguments share one, so aliasing is kept."""

    def __init__(self, torch, args):
        self.torch = torch
        self.copies = {}
        self.where = {}
        for name, a in args.items():
            if torch.is_tensor(a):
                st = a.untyped_storage()
                key = st.data_ptr()
                if key not in self.copies:
                    self.copies[key] = torch.empty(st.nbytes(), dtype=torch.uint8, device=a.device)
                    if st.nbytes():
                        self.copies[key].copy_(torch.empty(0, dtype=torch.uint8, device=a.device).set_(st, 0, (st.nbytes(),)))
                self.where[name] = (key, a.data_ptr() - key)

    def clone(self):
        other = Storages.__new__(Storages)
        other.torch = self.torch
        other.copies = {k: v.clone() for k, v in self.copies.items()}
        other.where = dict(self.where)
        return other

    def ptr(self, name):
        key, off = self.where[name]
        return self.copies[key].data_ptr() + off

    def equal(self, other):
        return all(self.torch.equal(self.copies[k], other.copies[k]) for k in self.copies)


def torch_cases():
    """(name, inductor config patches, function, inputs): several graphs
    and every grid type we can provoke at static shapes."""
    import torch
    import triton
    import triton.language as tl

    def graph_a(x, w):
        return torch.relu(x @ w) * 0.5

    def graph_b(y):
        z = torch.softmax(y * 2.0, dim=-1)
        return z, torch.cumsum(z, dim=1)

    def graph_c(z, y):
        return z.sum(dim=0) + z.mean(dim=1).sum(), (y.to(torch.float16) * 3).float() + y.amax(dim=0)

    def graphs(x, w):
        y = graph_a(x, w)
        torch._dynamo.graph_break()
        z, c = graph_b(y)
        torch._dynamo.graph_break()
        s, t = graph_c(z, y)
        return s, c, t

    def tiled(x, y):
        return x.t() * 2.0 + y, (x + 1.0).sum()

    def coop(x):
        return x.sum(dim=1), x.amax(dim=1)

    def combo(a, b, c):
        return a * 2.0, b + 3.0, torch.sin(c)

    def scan(x):
        return torch.cumsum(x, 0), torch.cumsum(x.view(64, -1), 1)

    @triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=8)],
                     key=["n"])
    @triton.jit
    def tb_user_scale(x, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=m) * 3.0 + 1.0, mask=m)

    def user(x):
        out = torch.empty_like(x)
        tb_user_scale[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
        return out * 2.0

    d = "cuda"
    r = torch.randn
    return [
        ("graphs", {"max_autotune_pointwise": True}, graphs, (r(256, 512, device=d), r(512, 384, device=d))),
        ("2-D tiles", {"max_autotune_pointwise": True}, tiled, (r(512, 1024, device=d), r(1024, 512, device=d))),
        ("cooperative", {"triton.cooperative_reductions": True, "triton.force_cooperative_reductions": True}, coop,
         (r(8, 1 << 18, device=d),)),
        ("combo", {"combo_kernels": True}, combo, (r(1000, device=d), r(3000, device=d), r(77, 13, device=d))),
        ("scan", {}, scan, (r(1 << 16, device=d),)),
        ("user kernel", {}, user, (r(100003, device=d),)),
    ]


def torch_part(lib, tmp):
    import torch
    import torch._inductor.config as ic
    import torch._inductor.runtime.triton_heuristics as th

    ic.force_disable_caches = True
    torch.manual_seed(0)
    total_n = total_same = total_grid = total_several = total_nondet = 0
    grid_types = set()
    for name, patches, fn, inputs in torch_cases():
        torch._dynamo.reset()
        try:
            with ic.patch(patches):
                compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs")
                compiled(*inputs)  # compile and autotune
                torch.cuda.synchronize()
                snaps = []
                with tb.TorchCapture(keep_args=True) as cap:
                    inner = th.CachingAutotuner.run

                    def snap_run(tuner, *args, stream, benchmark_run=False, **kwargs):
                        if benchmark_run:
                            return inner(tuner, *args, stream=stream, benchmark_run=benchmark_run, **kwargs)
                        named = {"a%d" % i: a for i, a in enumerate(args)}
                        before = Storages(torch, named)
                        r = inner(tuner, *args, stream=stream, benchmark_run=benchmark_run, **kwargs)
                        torch.cuda.synchronize()
                        snaps.append((before, Storages(torch, named)))
                        return r
                    th.CachingAutotuner.run = snap_run
                    try:
                        compiled(*inputs)
                        torch.cuda.synchronize()
                    finally:
                        th.CachingAutotuner.run = inner
        except Exception as e:  # noqa: BLE001 - a case PyTorch cannot compile here is reported, not failed
            print("    %s: PyTorch could not run it here (%s: %s); skipped" % (name, type(e).__name__, str(e)[:200]))
            continue
        n, same, grids, sev, nd = replay(lib, tmp, torch, name, cap, snaps)
        total_several += sev
        total_nondet += nd
        grid_types |= {l["grid_type"] for l in cap.launches}
        total_n += n
        total_same += same
        total_grid += grids
    print("torch.compile export: %d launches of %d cases replayed in PyTorch's order, %d bit-identical, %d "
          "nondeterministic (atomics), %d grids equal to PyTorch's; grid types %s" % (
              total_n, len(torch_cases()), total_same, total_nondet, total_grid, sorted(t for t in grid_types if t)))
    check(total_n >= 15 and total_same + total_nondet == total_n and total_nondet <= 2,
          "every launch bit-identical to PyTorch's but those of kernels with atomics (%d + %d of %d)" % (
              total_same, total_nondet, total_n))
    check(total_grid == total_n, "every grid computed by the library equals PyTorch's (%d of %d)" % (
        total_grid, total_n))
    check(total_several >= 4, "max-autotune: %d records hold several configs" % total_several)


def atomics(bundle, cfg):
    k = bundle.kernel(cfg.kernel_hash)
    stem = cfg.binary_name[:-len(".cubin")]
    for a in k.artifacts:
        if a.name in (stem + ".ttir", stem + ".source") and b"atomic" in a.data:
            return True
    return False


def replay(lib, tmp, torch, case, cap, snaps):
    bundle = cap.bundle()
    path = os.path.join(tmp, "model.tbundle")
    tb.write_file(bundle, path)
    several = [r for r in bundle.records if len(r.configs) > 1]
    print("    %s: %d launches, %d records (%d with several configs), grid types %s" % (
        case, len(cap.launches), len(bundle.records), len(several), sorted({l["grid_type"] for l in cap.launches})))
    for r in bundle.records:
        print("      %s: %d configs, args %s, mutated %s, grid[0] %s" % (
            r.kernel_name, len(r.configs), ",".join(r.call.arg_names), [r.call.arg_names[i] for i in r.call.mutated],
            r.configs[0].grid.text(r.call.arg_names, r.configs[0].params) if r.configs[0].grid else None))
    check(len(snaps) == len(cap.launches) and len(tb.read_file(path).records) == len(bundle.records),
          "%s: %d launches captured and exported" % (case, len(snaps)))
    b = lib.read_file(path)
    t = lib.table(b)
    stream = torch.cuda.current_stream().cuda_stream
    identical = grids_same = nondet = 0
    for i, (launch, (before, after)) in enumerate(zip(cap.launches, snaps)):
        rec = bundle.record(launch["key"])
        cfg = rec.configs[launch["config"]]
        pos = {n: "a%d" % k for k, n in enumerate(launch["args"].keys())}
        mine = before.clone()
        values = []
        for n in rec.call.arg_names:
            v = launch["args"][n]
            values.append(mine.ptr(pos[n]) if torch.is_tensor(v) else (float(v) if isinstance(v, float) else int(v)))
        keep = []
        try:
            ri = [j for j, r in enumerate(bundle.records) if r.cache_key == rec.cache_key][0]
            grid = lib.grid(b, ri, launch["config"], values, launch["grid_args"])
            scratch = [None, None]
            for s, (size, _al, present) in enumerate((cfg.global_scratch, cfg.profile_scratch)):
                if present and size:
                    keep.append(torch.zeros(size * grid[0] * grid[1] * grid[2] * cfg.num_ctas, dtype=torch.uint8,
                                            device="cuda"))
                    scratch[s] = keep[-1].data_ptr()
            lib.launch(t, rec.cache_key, launch["config"], values, None, launch["grid_args"], stream, tuple(scratch))
            torch.cuda.synchronize()
        except tb.BundleError as e:
            print("      launch %d %s: %s" % (i, rec.kernel_name, e))
            continue
        same = mine.equal(after)
        if not same:
            differ = [n for n in rec.call.arg_names if torch.is_tensor(launch["args"][n]) and
                      not torch.equal(mine.copies[mine.where[pos[n]][0]], after.copies[after.where[pos[n]][0]])]
            print("      launch %d %s: these arguments' storages differ: %s" % (i, rec.kernel_name, differ))
            if atomics(bundle, cfg):
                # an atomic kernel (split scans' decoupled look-back): what it
                # leaves may depend on the order blocks finish, run to run
                nondet += 1
                print("      (its IR holds atomics: nondeterministic, counted apart)")
        identical += same
        grids_same += grid == launch["grid"]
        if not same or grid != launch["grid"]:
            print("      launch %d %s config %d: %s, grid %s vs PyTorch's %s" % (
                i, rec.kernel_name, launch["config"], "identical" if same else "DIFFERS", grid, launch["grid"]))
    lib.free_table(t)
    lib.free(b)
    return len(cap.launches), identical, grids_same, len(several), nondet


def triton_part(lib, tmp):
    import torch
    import triton
    import triton.language as tl

    configs = [triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 256}, num_warps=4),
               triton.Config({"BLOCK": 1024}, num_warps=8)]

    @triton.autotune(configs=configs, key=["n"])
    @triton.jit
    def tb_x_add(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=m) * 1.5 + tl.load(y + offs, mask=m), mask=m)

    @triton.jit
    def tb_x_scale2d(x, out, M, N, stride, s, BM: tl.constexpr, BN: tl.constexpr):
        r = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
        c = tl.program_id(1) * BN + tl.arange(0, BN)[None, :]
        m = (r < M) & (c < N)
        tl.store(out + r * stride + c, tl.load(x + r * stride + c, mask=m) * s, mask=m)

    @triton.jit
    def tb_x_flags(x, out, n, neg: tl.int1, mask_bits: tl.uint32, shift: tl.int8, B: tl.constexpr):
        offs = tl.program_id(0) * B + tl.arange(0, B) + tl.program_id(1) * n
        m = offs < 2 * n
        v = tl.load(x + offs, mask=m)
        v = tl.where(neg, -v, v)
        v = (v.to(tl.int32, bitcast=True) & mask_bits.to(tl.int32, bitcast=True)).to(tl.float32, bitcast=True)
        tl.store(out + offs, v + shift.to(tl.float32), mask=m)

    n = 100003
    x = torch.randn(2 * n, device="cuda")
    y = torch.randn(2 * n, device="cuda")
    add_grid = lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)  # noqa: E731
    tb_x_add[add_grid](x, y, torch.empty_like(x), n)  # autotunes: all three configs compile
    M, N = 300, 200
    a = torch.randn(M, N, device="cuda")
    for bm, bn in ((32, 64), (16, 128)):
        tb_x_scale2d[(triton.cdiv(M, bm), triton.cdiv(N, bn))](a, torch.empty_like(a), M, N, N, 0.75, BM=bm, BN=bn)
    flags_grid = lambda META: (max(1, triton.cdiv(META["n"], 256)), 2)  # noqa: E731
    tb_x_flags[flags_grid](x, torch.empty_like(x), n, True, 0xFFFFFF00, 5, B=256)
    torch.cuda.synchronize()
    bundle = tb.export_triton([tb_x_add, tb_x_scale2d, tb_x_flags],
                              grids={"tb_x_add": add_grid, "tb_x_scale2d": ("cdiv(M, BM)", "cdiv(N, BN)"),
                                     "tb_x_flags": flags_grid})
    path = os.path.join(tmp, "triton.tbundle")
    tb.write_file(bundle, path)
    for r in bundle.records:
        print("    %s: %d configs, types %s, grid %s" % (r.kernel_name, len(r.configs), r.configs[0].arg_types,
                                                         r.configs[0].grid.text(r.call.arg_names, r.configs[0].params)))
    add = [r for r in bundle.records if r.kernel_name == "tb_x_add"]
    check(len(add) == 1 and len(add[0].configs) == 3, "the autotuned kernel: one record of three configs")
    fl = [r for r in bundle.records if r.kernel_name == "tb_x_flags"]
    check(len(fl) == 1 and fl[0].configs[0].arg_types == "OOi?Ib" and not fl[0].configs[0].flags & tb.CONFIG_TYPES_FROM_IR,
          "exact types: bool, u32 and i8 kept (%s), not read from the IR" % (fl[0].configs[0].arg_types if fl else None))
    b = lib.read_file(path)
    t = lib.table(b)
    stream = torch.cuda.current_stream().cuda_stream
    runs = same = 0
    for r in bundle.records:
        for ci, cfg in enumerate(r.configs):
            p = dict(cfg.params)
            if r.kernel_name == "tb_x_add":
                ins = [x, y]
                out_t, out_ours = torch.zeros_like(x), torch.zeros_like(x)
                conf = [c for c in configs if c.kwargs["BLOCK"] == p["BLOCK"]][0]
                tb_x_add.fn[add_grid](x, y, out_t, n, **conf.all_kwargs())
                vals = [x.data_ptr(), y.data_ptr(), out_ours.data_ptr(), n]
            elif r.kernel_name == "tb_x_scale2d":
                out_t, out_ours = torch.zeros_like(a), torch.zeros_like(a)
                tb_x_scale2d[(triton.cdiv(M, p["BM"]), triton.cdiv(N, p["BN"]))](a, out_t, M, N, N, 0.75, BM=p["BM"],
                                                                                BN=p["BN"])
                vals = [a.data_ptr(), out_ours.data_ptr(), M, N, N, 0.75]
            else:
                out_t, out_ours = torch.zeros_like(x), torch.zeros_like(x)
                tb_x_flags[flags_grid](x, out_t, n, True, 0xFFFFFF00, 5, B=256)  # (Triton refuses a negative i8)
                vals = [x.data_ptr(), out_ours.data_ptr(), n, 1, 0xFFFFFF00, 5]
            try:
                lib.launch(t, r.cache_key, ci, vals, None, (), stream)
            except tb.BundleError as e:
                print("    %s config %d: %s" % (r.kernel_name, ci, e))
                continue
            torch.cuda.synchronize()
            runs += 1
            ok = torch.equal(out_t.view(torch.int32), out_ours.view(torch.int32))
            same += ok
            if not ok:
                print("    %s config %d differs" % (r.kernel_name, ci))
    # autotuning the same three configs: Triton's autotuner and the library's, first call
    import time
    add_rec = add[0]
    out_t, out_ours = torch.zeros_like(x), torch.zeros_like(x)
    tb_x_add.cache.clear()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    tb_x_add[add_grid](x, y, out_t, n)
    torch.cuda.synchronize()
    t_triton = time.perf_counter() - t0
    t2 = lib.table(b)
    vals = [x.data_ptr(), y.data_ptr(), out_ours.data_ptr(), n]
    t0 = time.perf_counter()
    lib.launch(t2, add_rec.cache_key, tb.CONFIG_AUTOTUNE, vals, None, (), stream,
               arg_bytes=[x.numel() * 4, y.numel() * 4, out_ours.numel() * 4, 0])
    torch.cuda.synchronize()
    t_ours = time.perf_counter() - t0
    cfg, ms = lib.choice(t2, add_rec.cache_key, vals)
    best = tb_x_add.best_config
    print("autotune, 3 configs of tb_x_add: Triton's autotuner %.0f ms (chose BLOCK=%s), the library %.0f ms (chose "
          "config %d, BLOCK=%d, %.4f ms): %.2fx" % (t_triton * 1e3, best.kwargs["BLOCK"], t_ours * 1e3, cfg,
                                                   dict(add_rec.configs[cfg].params)["BLOCK"], ms, t_ours / t_triton))
    check(torch.equal(out_t.view(torch.int32), out_ours.view(torch.int32)),
          "an autotuned launch by the library computes what Triton's does")
    lib.free_table(t2)
    total = sum(len(r.configs) for r in bundle.records)
    print("triton export: %d configs of %d kernels launched with library grids, %d bit-identical to Triton" % (
        runs, len(bundle.records), same))
    check(runs == total and same == total, "every Triton config bit-identical to Triton's launch (%d of %d)" % (
        same, total))
    lib.free_table(t)
    lib.free(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libtriton_bundle.so"))
    ns = ap.parse_args()
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("no CUDA device")
        import triton  # noqa: F401
    except ImportError as e:
        print("skip: %s" % e)
        print("0 passed, 0 failed, 1 skipped")
        return 0
    lib = tb.CLibrary(ns.lib)
    tmp = tempfile.mkdtemp(prefix="tbexport-")
    for part in (torch_part, triton_part):
        try:
            part(lib, tmp)
        except Exception:  # noqa: BLE001 - report and go on with the other part
            traceback.print_exc()
            check(False, "%s ran to the end" % part.__name__)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
