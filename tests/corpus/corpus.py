"""The GPU differential corpus: real Triton kernels, launched by Triton and by
triton_bundle.h from identical copies of memory, compared bit for bit.

    python3 tests/corpus/corpus.py [--lib build/libtriton_bundle.so] [--table docs/GPU_CORPUS.md] [--only SUBSTR]

Needs a CUDA GPU, PyTorch and Triton (3.6); exits 0 with a "skipped" summary
elsewhere. It compiles @triton.jit kernels and torch.compile'd models into a
fresh Triton cache. Every launch Triton makes goes through a hook that, before
letting Triton launch for the program, replays the launch four times:

  triton     Triton's own launcher, on a copy of every buffer the launch can
             touch (the whole storage of each tensor argument);
  exact      tb_load_from_cache with the codes of Triton's own signature,
             tb_launch with flags 0, on another copy;
  checked    the same with TB_LAUNCH_CHECKED;
  derived    the record `tbundle pack` derives (codes read from the IR,
             TB_CONFIG_TYPES_FROM_IR), checked mode;

and compares each copy with Triton's byte for byte. A kernel whose Triton run
differs from a second Triton run, or whose IR holds atomics, is reported as
nondeterministic (when ours differs from Triton's run),
not as a failure. A launch that triton_bundle.h refuses counts as "refused"
with the library's message; the table explains each. The derived record is
also compared with Triton's signature and specialization (the codes, the
divisibility string), and every difference is listed.

Ends with "N passed, N failed, N skipped" (kernels: identical or refused on
purpose, anything else, not run) and writes the coverage table.
"""
import argparse
import collections
import ctypes
import os
import re
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def skip_all(reason):
    print(f"skip the GPU corpus: {reason}")
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(0)


# ---------------------------------------------------------------- ctypes API
class TbError(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("sys_errno", ctypes.c_int), ("cuda_result", ctypes.c_int),
                ("offset", ctypes.c_longlong), ("kernel", ctypes.c_char * 128), ("file", ctypes.c_char * 256),
                ("message", ctypes.c_char * 640)]


class TbArg(ctypes.Union):
    _fields_ = [("i", ctypes.c_int64), ("u", ctypes.c_uint64), ("f", ctypes.c_double), ("p", ctypes.c_void_p)]


class TbLaunchParams(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint32 * 3), ("stream", ctypes.c_void_p), ("args", ctypes.POINTER(TbArg)),
                ("arg_count", ctypes.c_uint32), ("flags", ctypes.c_uint), ("global_scratch", ctypes.c_void_p),
                ("profile_scratch", ctypes.c_void_p), ("grid_args", ctypes.POINTER(ctypes.c_int64)),
                ("grid_arg_count", ctypes.c_uint32), ("arg_bytes", ctypes.c_void_p)]


class TbTensorDesc(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("rank", ctypes.c_uint32), ("shape", ctypes.c_int64 * 5),
                ("strides", ctypes.c_int64 * 5), ("padding_nan", ctypes.c_int)]


class TbKernelInfo(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("registers", ctypes.c_int), ("spills", ctypes.c_int),
                ("static_shared", ctypes.c_int), ("max_threads_per_block", ctypes.c_int), ("arg_count", ctypes.c_uint32),
                ("param_count", ctypes.c_uint32), ("param_check", ctypes.c_int)]


TB_LAUNCH_CHECKED = 1


class Lib:
    def __init__(self, path):
        self.l = ctypes.CDLL(path)
        self.l.tb_load_from_cache.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                              ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                              ctypes.POINTER(TbError)]
        self.l.tb_launch.argtypes = [ctypes.c_void_p, ctypes.POINTER(TbLaunchParams), ctypes.POINTER(TbError)]
        self.l.tb_unload.argtypes = [ctypes.c_void_p]
        self.l.tb_loaded_kernel_info.argtypes = [ctypes.c_void_p, ctypes.POINTER(TbKernelInfo)]
        self.l.tb_parse_ttfunc.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p,
                                           ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(TbError)]
        self.l.tb_arg_types_from_signature.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
                                                       ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(TbError)]
        self.cache = {}

    def load(self, cache_dir, kdir, name, codes):
        key = (kdir, name, codes)
        if key in self.cache:
            return self.cache[key]
        k = ctypes.c_void_p()
        e = TbError()
        r = self.l.tb_load_from_cache(cache_dir.encode(), kdir.encode(), name.encode(),
                                      codes.encode() if codes is not None else None, None, None, ctypes.byref(k),
                                      ctypes.byref(e))
        res = (k.value, None) if r == 0 else (None, e.message.decode(errors="replace"))
        self.cache[key] = res
        return res

    def launch(self, k, grid, stream, args, flags, gscratch, pscratch):
        arr = (TbArg * max(1, len(args)))()
        for i, a in enumerate(args):
            arr[i] = a
        p = TbLaunchParams()
        p.grid[0], p.grid[1], p.grid[2] = grid
        p.stream = stream
        p.args = arr
        p.arg_count = len(args)
        p.flags = flags
        p.global_scratch = gscratch
        p.profile_scratch = pscratch
        e = TbError()
        r = self.l.tb_launch(k, ctypes.byref(p), ctypes.byref(e))
        return None if r == 0 else e.message.decode(errors="replace")

    def triton_codes(self, types):
        arr = (ctypes.c_char_p * max(1, len(types)))(*[t.encode() for t in types])
        out = ctypes.create_string_buffer(1024)
        e = TbError()
        r = self.l.tb_arg_types_from_signature(arr, len(types), out, 1024, ctypes.byref(e))
        return (out.value.decode(), None) if r == 0 else (None, e.message.decode(errors="replace"))

    def ttfunc(self, text, name):
        t = ctypes.create_string_buffer(1024)
        d = ctypes.create_string_buffer(1024)
        e = TbError()
        raw = text.encode()
        r = self.l.tb_parse_ttfunc(raw, len(raw), name.encode(), t, d, 1024, ctypes.byref(e))
        return (t.value.decode(), d.value.decode(), None) if r == 0 else (None, None, e.message.decode(errors="replace"))


# ---------------------------------------------------------------- the hook
def is_desc(a):
    return type(a).__name__ == "TensorDescriptor" and hasattr(a, "base") and hasattr(a, "block_shape")


Result = collections.namedtuple("Result", "case kind kernel outcome detail")


class Corpus:
    def __init__(self, lib, cache_dir):
        import torch
        self.torch = torch
        self.lib = lib
        self.cache_dir = cache_dir
        self.results = []
        self.case = "?"
        self.kind = "?"
        self.sig_diffs = []
        self.seen = set()
        self.hash_dirs = {}
        self.active = True

    def kernel_dir(self, meta_hash, name):
        """The cache directory holding NAME.json with this hash."""
        if meta_hash in self.hash_dirs:
            return self.hash_dirs[meta_hash]
        import json
        for d in os.listdir(self.cache_dir):
            p = os.path.join(self.cache_dir, d, name + ".json")
            if os.path.exists(p):
                try:
                    with open(p) as f:
                        h = json.load(f).get("hash")
                except Exception:
                    continue
                self.hash_dirs[h] = d
        return self.hash_dirs.get(meta_hash)

    def snapshot(self, tensors):
        """A copy of each storage the tensors use, by the storage's address."""
        out = {}
        for t in tensors:
            st = t.untyped_storage()
            if st.data_ptr() not in out:
                out[st.data_ptr()] = self.torch.empty(0, dtype=self.torch.uint8, device=t.device).set_(st).clone()
        return out

    def record(self, outcome, kernel, detail=""):
        self.results.append(Result(self.case, self.kind, kernel, outcome, detail))

    def on_launch(self, launcher, grid, stream, function, args):
        torch = self.torch
        src, md = launcher._tb_src, launcher._tb_meta
        name = md.name
        kargs = list(args[4:])  # after packed metadata, launch metadata, enter and exit hooks
        sig = list(src.signature.values())
        if len(kargs) != len(sig):
            self.record("error", name, f"{len(kargs)} arguments for a signature of {len(sig)}")
            return
        key = (md.hash, tuple(grid))
        if key in self.seen:
            return
        self.seen.add(key)
        kdir = self.kernel_dir(md.hash, name)
        if not kdir:
            self.record("error", name, "its cache directory was not found")
            return
        torch.cuda.synchronize()
        tensors = [a for a in kargs if hasattr(a, "data_ptr") and hasattr(a, "untyped_storage")]
        tensors += [a.base for a in kargs if is_desc(a)]
        base = self.snapshot(tensors)
        copies = {n: {k: v.clone() for k, v in base.items()} for n in ("triton", "triton2", "exact", "checked", "derived")}

        def remap(copy, descs_as=None):
            out = []
            for a in kargs:
                if hasattr(a, "untyped_storage"):
                    st = a.untyped_storage()
                    off = a.data_ptr() - st.data_ptr()
                    out.append(copy[st.data_ptr()].data_ptr() + off)
                elif is_desc(a):
                    # the same descriptor over the copy of its base
                    b = a.base
                    view = torch.empty(0, dtype=b.dtype, device=b.device).set_(
                        copy[b.untyped_storage().data_ptr()].untyped_storage(), b.storage_offset(), b.size(), b.stride())
                    if descs_as == "ours":
                        d = TbTensorDesc()
                        d.base = view.data_ptr()
                        d.rank = len(a.shape)
                        for q, (sh, sd) in enumerate(zip(a.shape, a.strides)):
                            d.shape[q], d.strides[q] = int(sh), int(sd)
                        d.padding_nan = 1 if getattr(a, "padding", "zero") == "nan" else 0
                        keep.append(d)
                        out.append(d)
                    else:
                        out.append(type(a)(view, a.shape, a.strides, a.block_shape,
                                           **({"padding": a.padding} if hasattr(a, "padding") else {})))
                else:
                    out.append(a)
            return out

        keep = []

        # Triton, twice (atomics make some kernels differ from themselves)
        for n in ("triton", "triton2"):
            launcher._tb_orig(launcher, grid[0], grid[1], grid[2], stream, function, *args[:4], *remap(copies[n]))
        torch.cuda.synchronize()
        nondet = any(not torch.equal(copies["triton"][k], copies["triton2"][k]) for k in base)
        # ours
        types = [t for t in sig]
        exact, err = self.lib.triton_codes(types)
        if err:
            self.record("refused", name, err)
            return
        with open(os.path.join(self.cache_dir, kdir, name + ".ttir")) as f:
            ir = f.read()
        ir_codes, ir_div, ir_err = self.lib.ttfunc(ir, name)
        # atomics make a kernel's result depend on the order its programs
        # ran in; two Triton runs that happened to agree prove nothing
        nondet = nondet or "tt.atomic" in ir
        self.compare_records(name, src, sig, exact, ir_codes, ir_div, ir_err)
        gsz = md.global_scratch_size * grid[0] * grid[1] * grid[2] * getattr(md, "num_ctas", 1)
        psz = md.profile_scratch_size * grid[0] * grid[1] * grid[2] * getattr(md, "num_ctas", 1)
        outcomes = []
        for variant, codes, flags in (("exact", exact, 0), ("checked", exact, TB_LAUNCH_CHECKED),
                                      ("derived", None, TB_LAUNCH_CHECKED)):
            k, lerr = self.lib.load(self.cache_dir, kdir, name, codes)
            if lerr:
                outcomes.append((variant, "refused", lerr))
                continue
            gs = torch.empty(max(gsz, 1), dtype=torch.uint8, device="cuda") if gsz else None
            ps = torch.empty(max(psz, 1), dtype=torch.uint8, device="cuda") if psz else None
            targs = []
            mapped = remap(copies[variant], "ours")
            for a, ty in zip(mapped, sig):
                if ty == "constexpr":
                    continue
                v = TbArg()
                if isinstance(a, TbTensorDesc):
                    v.p = ctypes.addressof(a)
                elif ty.startswith("*"):
                    v.u = 0 if a is None else int(a)
                elif ty in ("fp16", "bf16", "fp32", "f32", "fp64"):
                    v.f = float(a)
                else:
                    v.i = int(a) if int(a) < 2**63 else int(a) - 2**64
                targs.append(v)
            lerr = self.lib.launch(k, grid, stream, targs, flags, gs.data_ptr() if gs is not None else None,
                                   ps.data_ptr() if ps is not None else None)
            if lerr:
                outcomes.append((variant, "refused", lerr))
                continue
            torch.cuda.synchronize()
            same = all(torch.equal(copies["triton"][kk], copies[variant][kk]) for kk in base)
            outcomes.append((variant, "identical" if same else ("nondeterministic" if nondet else "DIFFERS"), ""))
        for variant, outcome, detail in outcomes:
            self.results.append(Result(self.case, self.kind, f"{name} [{variant}]", outcome, detail))

    def compare_records(self, name, src, sig, exact, ir_codes, ir_div, ir_err):
        """What tbundle pack derives against what Triton knows."""
        if ir_err:
            self.sig_diffs.append((self.case, name, f"the IR could not be read: {ir_err}"))
            return
        diffs = []
        if ir_codes != exact:
            diffs = [f"arg {i}: Triton {a!r} ({t}), IR {b!r}"
                     for i, (a, b, t) in enumerate(zip(exact, ir_codes, [t for t in sig if t != 'constexpr']))
                     if a != b]
            if len(exact) != len(ir_codes):
                diffs.append(f"{len(exact)} codes from Triton, {len(ir_codes)} from the IR")
        # the specialization: Triton's attrs say which arguments it assumed divisible by 16
        attrs = getattr(src, "attrs", {}) or {}
        names = list(src.signature.keys())
        want = []
        for i, t in enumerate(sig):
            if t == "constexpr":
                continue
            props = attrs.get((i,), attrs.get(names[i], [])) if isinstance(attrs, dict) else []
            want.append("1" if any(p[0] == "tt.divisibility" and p[1] == 16 for p in props) else "0")
        want = "".join(want)
        if ir_div is not None and len(want) == len(ir_div) and want != ir_div:
            diffs.append(f"divisibility: Triton {want}, IR {ir_div}")
        if diffs:
            self.sig_diffs.append((self.case, name, "; ".join(diffs)))


def install_hook(corpus):
    from triton.backends.nvidia import driver as nvd
    cls = nvd.CudaLauncher
    if getattr(cls, "_tb_hooked", False):
        return
    orig_init, orig_call = cls.__init__, cls.__call__

    def init(self, src, metadata):
        orig_init(self, src, metadata)
        self._tb_src, self._tb_meta, self._tb_orig = src, metadata, orig_call

    def call(self, gridX, gridY, gridZ, stream, function, *args):
        if corpus.active:
            corpus.active = False  # our own Triton launches inside must not recurse
            try:
                corpus.on_launch(self, (gridX, gridY, gridZ), stream, function, args)
            except Exception as ex:
                corpus.record("error", getattr(self, "_tb_meta", None) and self._tb_meta.name,
                              f"{type(ex).__name__}: {ex}")
                traceback.print_exc()
            finally:
                corpus.active = True
        return orig_call(self, gridX, gridY, gridZ, stream, function, *args)

    cls.__init__, cls.__call__, cls._tb_hooked = init, call, True


# ---------------------------------------------------------------- the cases
def run_cases(corpus, only):
    import cases
    for case in cases.all_cases():
        if only and only not in case.name:
            continue
        corpus.case, corpus.kind = case.name, case.kind
        before = len(corpus.results)
        print(f"-- {case.name} ({case.kind})", flush=True)
        try:
            case.run()
        except Exception as ex:
            corpus.record("error", "-", f"the case itself failed: {type(ex).__name__}: {str(ex)[:300]}")
            traceback.print_exc()
        if len(corpus.results) == before:
            corpus.record("error", "-", "no Triton launch was seen")
        for r in corpus.results[before:]:
            print(f"   {r.outcome:16s} {r.kernel} {r.detail[:200]}", flush=True)


def write_table(corpus, path):
    by_kind = collections.OrderedDict()
    for r in corpus.results:
        by_kind.setdefault(r.kind, collections.Counter())[r.outcome] += 1
    outcomes = ["identical", "refused", "nondeterministic", "DIFFERS", "error"]
    lines = ["# The GPU differential corpus", "",
             "Written by `make test-gpu-corpus` (`tests/corpus/corpus.py`) on a GPU machine. Each real",
             "launch is replayed by Triton and by triton_bundle.h (`exact`: Triton's own codes, flags 0;",
             "`checked`: TB_LAUNCH_CHECKED; `derived`: the record `tbundle pack` derives from the IR, checked)",
             "from identical copies of every buffer, and the buffers are compared bit for bit. Each",
             "kernel is replayed at its first launch of each grid; how many mm template configs max-autotune",
             "benchmarks, and so the count of those rows, varies a little from run to run.", "",
             "| kernel kind | " + " | ".join(outcomes) + " |", "|---|" + "---:|" * len(outcomes)]
    for kind, c in by_kind.items():
        lines.append(f"| {kind} | " + " | ".join(str(c.get(o, 0)) for o in outcomes) + " |")
    tot = collections.Counter(r.outcome for r in corpus.results)
    lines.append("| **all** | " + " | ".join(f"**{tot.get(o, 0)}**" for o in outcomes) + " |")
    refusals = sorted({(r.kernel.split(" [")[0], r.detail) for r in corpus.results if r.outcome == "refused"})
    lines += ["", "## Refusals", ""]
    lines += [f"- `{k}`: {d}" for k, d in refusals] or ["None."]
    nd = sorted({r.kernel.split(" [")[0] for r in corpus.results if r.outcome == "nondeterministic"})
    lines += ["", "## Nondeterministic in Triton itself", "",
              "Two Triton runs from the same memory differ, or the kernel's IR holds atomics (whose result",
              "depends on the order the programs ran in) and ours differed from Triton's run: ours is then",
              "not compared, and these are not failures.", ""]
    lines += [f"- `{k}`" for k in nd] or ["None."]
    lines += ["", "## Derived records against Triton's signature", "",
              "`tbundle pack` reads argument types and divisibility from the `tt.func` line of the IR. The",
              "divisibility string is compared with Triton's specialization (its `attrs`), the codes with",
              "those of Triton's signature. The IR has no signedness, so an unsigned integer argument reads",
              "as the signed one of its width: such records carry `TB_CONFIG_TYPES_FROM_IR`, checked mode",
              "then takes either range, and the bits passed are the same (the `derived` replays above are",
              "identical). Every difference found:", ""]
    lines += [f"- {c}: `{k}`: {d}" for c, k, d in sorted(set(corpus.sig_diffs))] or ["No difference."]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libtriton_bundle.so"))
    ap.add_argument("--table", default=None, help="write the coverage table here (markdown)")
    ap.add_argument("--only", default=None, help="run the cases whose name holds this")
    a = ap.parse_args()
    try:
        import torch
        import triton  # noqa: F401
    except Exception as ex:
        skip_all(f"no PyTorch or Triton ({type(ex).__name__}: {ex})")
    if not torch.cuda.is_available():
        skip_all("no CUDA device")
    cache_dir = tempfile.mkdtemp(prefix="tbcorpus-")
    os.environ["TRITON_CACHE_DIR"] = cache_dir
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="tbcorpus-inductor-"))
    import torch._inductor.config as icfg
    icfg.use_static_cuda_launcher = False  # every launch through Triton's launcher, where the hook sees it
    icfg.fx_graph_cache = False
    icfg.autotune_local_cache = False
    lib = Lib(a.lib)
    corpus = Corpus(lib, cache_dir)
    install_hook(corpus)
    sys.path.insert(0, HERE)
    run_cases(corpus, a.only)
    ok = sum(1 for r in corpus.results if r.outcome in ("identical", "refused", "nondeterministic"))
    bad = sum(1 for r in corpus.results if r.outcome not in ("identical", "refused", "nondeterministic"))
    kernels = len({(r.case, r.kernel.split(" [")[0]) for r in corpus.results})
    if a.table:
        write_table(corpus, a.table)
    print(f"corpus: {kernels} kernels, {len(corpus.results)} replays: "
          + ", ".join(f"{k} {v}" for k, v in collections.Counter(r.outcome for r in corpus.results).items()))
    print(f"{ok} passed, {bad} failed, 0 skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
