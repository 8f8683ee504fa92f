#!/usr/bin/env python3
"""export_model without a GPU: its pure helpers (literal bits, memset
patterns, density, the workspace plan, the profiler's events against the
steps and the hints), and the program it builds from a capture, with a
stand-in for torch and for the capture run: spaces and offsets, a memset
and a copy, an output that is its storage, one that is a view and one that
is an input, a constant found during the run, state by mutation and by
changed bytes (and their restoration), a launch of zero blocks, the
workspace plan, the outputs a kernel with atomics reaches, the refusals
(cuBLAS, a tensor descriptor, a non-dense output view). With a format
module that checks programs (check_program), the program is checked too.
usage: tests/test_model.py  (from the repository root)"""

import contextlib
import os
import struct
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402
from triton_bundle import model as M  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
from pycheck import check, summary  # noqa: E402


def raises(f, code=None, text=""):
    try:
        f()
    except tb.BundleError as e:
        return (code is None or e.code == code) and text in str(e)
    return False


def raises_any(f, kind):
    try:
        f()
    except kind:
        return True
    return False


def plan_ok(bufs, offs, ws):
    """FORMAT.md's R-program-plan, and 256-aligned offsets within ws."""
    for i, (si, fi, li) in enumerate(bufs):
        if offs[i] % 256 or offs[i] + si > ws:
            return False
        for j, (sj, fj, lj) in enumerate(bufs):
            if i < j and si and sj and fi <= lj and fj <= li and offs[i] < offs[j] + sj and offs[j] < offs[i] + si:
                return False
    return ws % 256 == 0


# ------------------------------------------------------------ the helpers
def helpers():
    check(M.literal_bits("i", 7) == 7 and M.literal_bits("i", -1) == (1 << 64) - 1, "literal: i32 7 and -1")
    check(M.literal_bits("?", True) == 1 and M.literal_bits("l", -(1 << 63)) == 1 << 63, "literal: bool, i64 min")
    check(M.literal_bits("f", 1.5) == struct.unpack("<Q", struct.pack("<d", 1.5))[0], "literal: a float as a double")
    check(M.literal_bits("d", 2) == struct.unpack("<Q", struct.pack("<d", 2.0))[0], "literal: an int for a float code")
    check(M.literal_bits("I", 4294967295) == 4294967295, "literal: u32 max")
    check(raises(lambda: M.literal_bits("i", 1 << 31), "arg_range"), "literal: 2^31 does not fit i32")
    check(raises(lambda: M.literal_bits("?", 2), "arg_range"), "literal: 2 is no bool")
    check(raises(lambda: M.literal_bits("O", 0), "unsupported_type"), "literal: a pointer code takes none")
    check(raises(lambda: M.literal_bits("i", "x"), "unsupported_type"), "literal: a string is no integer")

    check(M.memset_pattern(b"\0\0\x80\x3f") == (4, 0x3F800000, 1), "memset: float32 1.0")
    check(M.memset_pattern(b"\x80\x3f") == (2, 0x3F80, 1), "memset: bfloat16 1.0")
    check(M.memset_pattern(b"\x01") == (1, 1, 1), "memset: a bool")
    check(M.memset_pattern(bytes(8)) == (4, 0, 2), "memset: float64 0.0 is two 4-byte zeros")
    check(M.memset_pattern(b"\xff" * 8) == (4, 0xFFFFFFFF, 2), "memset: int64 -1, equal halves")
    check(raises(lambda: M.memset_pattern(struct.pack("<d", 1.0)), "unsupported", "8-byte"),
          "memset: float64 1.0 refused")

    check(M.element_bytes("uint32", 0) == bytes(4) and M.element_bytes("int64", -1) == b"\xff" * 8,
          "element: uint32 0, int64 -1")
    check(M.element_bytes("float32", 1.0) == b"\0\0\x80\x3f" and M.element_bytes("float64", -0.0)[7] == 0x80,
          "element: float32 1.0, float64 -0.0 keeps its sign")
    check(M.element_bytes("bool", 5) == b"\x01" and M.element_bytes("float16", 65504.0) == b"\xff\x7b",
          "element: bool, float16 max")
    check(M.element_bytes("int8", 200) is None and M.element_bytes("bfloat16", 1.0) is None and
          M.element_bytes("int32", 0.5) is None, "element: out of range, bfloat16 and fractions left to torch")
    check(M.is_dense((2, 3), (3, 1)) and M.is_dense((2, 3), (1, 2)), "dense: contiguous and transposed")
    check(M.is_dense((4, 1, 5), (5, 99, 1)) and M.is_dense((0, 3), (7, 7)), "dense: size-1 and empty dimensions")
    check(not M.is_dense((2, 3), (4, 1)) and not M.is_dense((4, 3), (0, 1)), "not dense: padded, broadcast")
    check(not M.is_dense((2, 2), (1, 1)), "not dense: overlapping")
    check(M.extent((2, 3), (4, 1), 4) == 28 and M.extent((0, 3), (3, 1), 4) == 0, "extent")

    bufs = [(1000, 0, 2), (500, 1, 3), (1000, 3, 5), (10, 4, 4), (0, 0, 9)]
    offs, ws = M.plan_workspace(bufs)
    check(offs[0] == 0 and offs[2] == 0 and offs[1] == 1024 and ws == 1536 and offs[4] == 0,
          "plan: a dead buffer's bytes are reused, live ones kept apart (%s, %d)" % (offs, ws))
    check(offs[3] == 1024, "plan: a small buffer takes the bytes of one dead by then")
    check(plan_ok(bufs, offs, ws), "plan: no two buffers live together share a byte")
    import random
    rnd = random.Random(7)
    good = True
    for _ in range(200):
        bufs = []
        for _ in range(rnd.randrange(1, 30)):
            a = rnd.randrange(20)
            bufs.append((rnd.choice([0, 1, 100, 256, 300, 1000, 4096]), a, a + rnd.randrange(5)))
        offs, ws = M.plan_workspace(bufs)
        good = good and plan_ok(bufs, offs, ws)
    check(good, "plan: 200 random sets of buffers, each plan valid")
    offs, ws = M.plan_workspace([(300, 0, 0), (300, 0, 0), (300, 0, 0)])
    check(sorted(offs) == [0, 512, 1024] and ws == 1536, "plan: 256-aligned offsets, size rounded up")
    check(M.plan_workspace([]) == ([], 0), "plan: nothing")

    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1> >"
    expected = [("launch", "triton_poi_0"), ("memset", ""), ("copy", ""), ("snapshot", ""), ("launch", "triton_mm")]
    observed = ["triton_poi_0", fill, "Memcpy DtoD (Device -> Device)", "Memcpy DtoH (Device -> Pageable)",
                "triton_mm"]
    check(M.match_gpu_events(expected, observed) == ([], []), "events: each step's GPU operation, in order")
    foreign, missing = M.match_gpu_events(expected, observed[:1] + ["sm90_xmma_gemm_f32f32"] + observed[1:4])
    check(foreign == [(1, "sm90_xmma_gemm_f32f32")] and missing == [4], "events: a foreign kernel, a missing one")
    check("max_autotune_gemm_backends" in M.gpu_event_hint("nvjet_tst_128x64_64x4_h_bz_TNT"), "hint: cuBLAS nvjet")
    check("max_autotune_conv_backends" in M.gpu_event_hint("cudnn::engines_precompiled::nchwToNhwcKernel"),
          "hint: cuDNN")
    # weights_from's name matching (pure): exact, another name of the storage, a unique suffix; none when two fit
    from triton_bundle import weights as W
    hd = {n: None for n in ("wte.weight", "h.0.attn.c_attn.weight", "h.1.attn.c_attn.weight", "ln_f.weight")}
    got = W.match_names(["transformer.wte.weight", "transformer.h.0.attn.c_attn.weight", "lm_head.weight",
                         "attn.c_attn.weight", "ln_f.weight", "other"],
                        {"lm_head.weight": ["lm_head.weight", "transformer.wte.weight"]}, hd)
    check(got == {"transformer.wte.weight": "wte.weight", "transformer.h.0.attn.c_attn.weight": "h.0.attn.c_attn.weight",
                  "lm_head.weight": "wte.weight", "ln_f.weight": "ln_f.weight"},
          "match_names: a module prefix dropped, a tied weight by its other name, an ambiguous suffix and an unknown "
          "name left out (%r)" % (got,))
    check('"sdpa": "math"' in M.gpu_event_hint("flash_fwd_kernel"), "hint: flash attention")
    check('"sdpa": "math"' in M.gpu_event_hint("fmha_cutlassF_f32_aligned_64x64_rf_sm80") and
          "_efficient_attention" in M.gpu_event_hint("fmha_cutlassF_f32_aligned_64x64_rf_sm80"),
          "hint: the efficient attention kernel (its name holds cutlass) is attention, not a matrix product")
    check("CUDA graph" in M.gpu_event_hint("triton_poi_fused_convolution_0"),
          "hint: an unseen Triton kernel is no cuDNN convolution")


# ------------------------------------------------- a stand-in for torch
class DType:
    def __init__(self, name, size):
        self.name, self.size = name, size

    def __str__(self):
        return "torch." + self.name


F32, I64 = DType("float32", 4), DType("int64", 8)


class Device:
    type, index = "cuda", 0


DEV = Device()


class Storage:
    def __init__(self, ptr, nbytes, fill=0):
        self.ptr, self.data = ptr, bytearray([fill]) * nbytes

    def data_ptr(self):
        return self.ptr

    def nbytes(self):
        return len(self.data)


class T:
    """A device tensor: a view of a Storage."""

    def __init__(self, storage, shape, strides=None, offset=0, dtype=F32):
        self.st, self.shape, self.dtype, self.offset = storage, tuple(shape), dtype, offset
        if strides is None:
            strides, n = [], 1
            for d in reversed(shape):
                strides.insert(0, n)
                n *= d
        self.strides, self.device = tuple(strides), DEV

    def stride(self):
        return self.strides

    def storage_offset(self):
        return self.offset

    def untyped_storage(self):
        return self.st

    def data_ptr(self):
        return self.st.ptr + self.offset * self.dtype.size

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def element_size(self):
        return self.dtype.size


def fake_torch():
    torch = types.ModuleType("torch")
    torch.is_tensor = lambda x: isinstance(x, T)
    torch.equal = lambda a, b: bytes(a) == bytes(b)
    torch.cuda = types.SimpleNamespace(synchronize=lambda: None)
    torch.dtype, torch.device, torch.Size = DType, Device, tuple
    pytree = types.ModuleType("torch.utils._pytree")

    def tree_flatten(obj):
        if isinstance(obj, (list, tuple)):
            return [x for o in obj for x in tree_flatten(o)[0]], None
        if isinstance(obj, dict):
            return [x for o in obj.values() for x in tree_flatten(o)[0]], None
        return [obj], None
    pytree.tree_flatten = tree_flatten
    utils = types.ModuleType("torch.utils")
    utils._pytree = pytree
    torch.utils = utils
    return torch, {"torch": torch, "torch.utils": utils, "torch.utils._pytree": pytree}


class FakeCap:
    def __init__(self, bundle, launches, tuners):
        self._bundle, self.launches = bundle, launches
        self._tuners = {i: kt for i, kt in enumerate(tuners)}

    def bundle(self):
        return self._bundle


def config(name, types_, div=None):
    return tb.Config("h_" + name, name, name + ".cubin", types_, div if div is not None else "1" * len(types_))


def record(name, arg_names, types_, mutated=(), div=None):
    return tb.Record("inductor:%s:x" % name, name, [config(name, types_, div)],
                     tb.CallInfo(arg_names, [arg_names.index(m) for m in mutated]))


class World:
    """A captured forward: x -> mm (w1) -> buf0; memset buf1; atomic kernel
    (buf0, a tensor attribute) -> buf1; copy buf0 -> buf3; bn kernel (buf3,
    b1, running mean: mutated) -> buf2; a launch of zero blocks. Outputs:
    buf2 (its storage), the first rows of buf1 (a view), x (an input)."""

    def __init__(self, extra_events=(), out_view=None, foreign_gpu=(), desc=False):
        S = Storage
        self.x = T(S(0x10000, 128, 1), (8, 4))
        self.w1, self.b1 = T(S(0x20000, 64, 2), (4, 4)), T(S(0x20100, 16, 3), (4,))
        self.running = T(S(0x20200, 16, 4), (4,))
        self.counter = T(S(0x20300, 8, 5), (1,), dtype=I64)
        self.unused = T(S(0x20400, 16, 6), (4,))
        self.attr = T(S(0x30000, 16, 7), (4,))
        self.buf0, self.buf1 = T(S(0x40000, 128), (8, 4)), T(S(0x50000, 256), (8, 8))
        self.buf2, self.buf3 = T(S(0x60000, 128), (8, 4)), T(S(0x70000, 128), (8, 4))
        self.view = out_view if out_view is not None else T(self.buf1.st, (4, 8))
        b = tb.Bundle()
        b.kernels = [tb.Kernel("h_k_atomic", 0, [tb.Artifact("k_atomic.ttir", b'%0 = "tt.atomic_rmw"(%a)')]),
                     tb.Kernel("h_k_mm", 0, [tb.Artifact("k_mm.ttir", b"tt.load tt.store")])]
        b.records = [
            record("k_mm", ["in_ptr0", "in_ptr1", "out_ptr0", "xnumel"], "OOTi" if desc else "OOOi"),
            record("k_atomic", ["in_ptr0", "in_ptr1", "out_ptr0", "xnumel"], "OOOi"),
            record("k_bn", ["in_ptr0", "in_ptr1", "in_ptr2", "in_ptr3", "out_ptr0", "out_ptr1", "xnumel", "eps"],
                   "OOOOOOif", mutated=["in_ptr2", "out_ptr1"], div="11111110"),
            record("k_empty", ["out_ptr0", "xnumel"], "Oi")]
        keys = [r.cache_key for r in b.records]
        tuners = [(keys[0], types.SimpleNamespace(inductor_meta={})),
                  (keys[1], types.SimpleNamespace(inductor_meta={"atomic_add_found": True})),
                  (keys[2], types.SimpleNamespace(inductor_meta={})), (keys[3], types.SimpleNamespace())]
        launches = [
            {"key": keys[0], "config": 0, "grid": (1, 1, 1),
             "args": {"in_ptr0": self.x, "in_ptr1": self.w1, "out_ptr0": self.buf0, "xnumel": 32}},
            {"key": keys[1], "config": 0, "grid": (2, 1, 1),
             "args": {"in_ptr0": self.buf0, "in_ptr1": self.attr, "out_ptr0": self.buf1, "xnumel": 64}},
            {"key": keys[2], "config": 0, "grid": (2, 1, 1),
             "args": {"in_ptr0": self.buf3, "in_ptr1": self.b1, "in_ptr2": self.running, "in_ptr3": self.counter,
                      "out_ptr0": self.buf2, "out_ptr1": self.running, "xnumel": 32, "eps": 1e-5}},
            {"key": keys[3], "config": 0, "grid": (0, 1, 1), "args": {"out_ptr0": self.buf2, "xnumel": 0}}]
        self.torch, self.modules = fake_torch()
        consts = [("fc.weight", self.w1), ("fc.bias", self.b1), ("bn.running_mean", self.running),
                  ("counter", self.counter), ("unused", self.unused)]
        ex = M._Export.__new__(M._Export)
        ex.opts, _, _ = M._options({"write": False})
        ex.torch, ex.device, ex.path, ex.timings, ex.warnings = self.torch, DEV, "t.tbundle", {}, []
        ex.inputs, ex.input_of = [self.x], {self.x.st.ptr: 0}
        ex.consts = consts
        ex.const_of = {t.st.ptr: j for j, (_, t) in enumerate(consts)}
        ex.before = {t.st.ptr: bytes(t.st.data) for _, t in consts}
        # the run changed the counter (a kernel wrote it through in_ptr3) and the running mean
        self.counter.st.data[0] = 99
        self.running.st.data[0] = 98
        ex.attr_names = {self.attr.st.ptr: "blocks.0.table"}
        rec = M._Recorder(self.torch, set(ex.input_of) | set(ex.const_of), {self.attr.st.ptr})
        rec.external[self.attr.st.ptr] = {"tensor": self.attr, "host": bytes(self.attr.st.data), "touched": True}
        rec.events = [(1, "memset", {"dst": self.buf1, "width": 4, "value": 0, "count": 64, "name": "aten.zero_"}),
                      (1, "snapshot", self.attr.st.ptr),
                      (2, "copy", {"dst": self.buf3, "src": self.buf0, "count": 128, "name": "aten.copy_"})]
        rec.events += list(extra_events)
        ex.rec = rec
        ex.cap = FakeCap(b, launches, tuners)
        ex.out = {"logits": self.buf2, "rows": self.view, "same": self.x, "n": 3, "none": None}
        fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >"
        ex.gpu_events = ["k_mm", fill, "Memcpy DtoH (Device -> Pageable)", "k_atomic",
                         "Memcpy DtoD (Device -> Device)"] + list(foreign_gpu) + ["k_bn"]
        ex.pytorch_peak, ex.compiled_here, ex.compile_options, ex.compiled = 4096, True, {}, None
        self.ex = ex

    def build(self):
        saved = {k: sys.modules.get(k) for k in self.modules}
        sys.modules.update(self.modules)
        real = (M._storage_to_host, M._host_bytes, M._storage_from_host)
        M._storage_to_host = lambda torch, t: bytes(t.st.data)
        M._host_bytes = bytes

        def back(torch, t, host):
            t.st.data[:] = host
        M._storage_from_host = back
        try:
            return self.ex.build()
        finally:
            M._storage_to_host, M._host_bytes, M._storage_from_host = real
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v


def program_checks():
    w = World()
    r = w.build()
    p = r.bundle.program
    check(r.steps == {"launch": 3, "memset": 1, "copy": 3} and r.skipped_launches == 1,
          "steps: 3 launches (one of zero blocks left out), the memset, the copy and 2 output copies (%s)" % r.steps)
    kinds = [s.kind for s in p.steps]
    check(kinds == [tb.model.LAUNCH, tb.model.MEMSET, tb.model.LAUNCH, tb.model.COPY, tb.model.LAUNCH,
                    tb.model.COPY, tb.model.COPY], "steps in the order they ran, the output copies last")
    check([i.name for i in p.inputs] == ["input0"] and p.inputs[0].shape == [8, 4] and p.inputs[0].align == 16,
          "the input's spec")
    check([o.name for o in p.outputs] == ["output0", "output1", "output2"] and p.outputs[1].shape == [4, 8],
          "outputs: the tensors of the returned pytree, in order (numbers and None left out)")
    names = [c.name for c in p.constants]
    check(names == ["fc.weight", "fc.bias", "bn.running_mean", "counter", "blocks.0.table"],
          "constants: the module's that a step uses, in order, then the tensor attribute found in the run (%s)" % names)
    check([c.state for c in p.constants] == [False, False, True, True, False],
          "state: the running mean (mutated argument) and the counter (its bytes changed)")
    check(bytes(p.constants[3].data) == bytes([5]) * 8 and bytes(p.constants[2].data) == bytes([4]) * 16,
          "state constants hold their bytes from before the run")
    check(bytes(w.counter.st.data) == bytes([5]) * 8 and bytes(w.running.st.data) == bytes([4]) * 16,
          "and the live ones are restored to them")
    check(bytes(p.constants[4].data) == bytes([7]) * 16 and r.external_constants == ["blocks.0.table"],
          "the tensor attribute's bytes, named by its attribute")
    check(r.unused_module_constants == 1, "a parameter no step uses is left out")
    L0, MS, L1, CP, L2, C1, C2 = p.steps
    check(L0.operands == [(tb.model.INPUT, 0, 0), (tb.model.CONSTANT, 0, 0), (tb.model.BUFFER, 0, 0),
                          (tb.model.LITERAL, 0, 32)], "launch 0: input, constant, buffer, literal")
    check(L1.operands[1] == (tb.model.CONSTANT, 4, 0) and MS.operands == [(tb.model.BUFFER, 1, 0)] and
          (MS.width, MS.value, MS.count) == (4, 0, 64), "the memset and the external constant")
    check(CP.operands == [(tb.model.BUFFER, 2, 0), (tb.model.BUFFER, 0, 0)] and CP.count == 128, "the copy")
    check(L2.operands[4] == (tb.model.OUTPUT, 0, 0) and L2.operands[5] == (tb.model.CONSTANT, 2, 0) and
          L2.operands[7] == (tb.model.LITERAL, 0, struct.unpack("<Q", struct.pack("<d", 1e-5))[0]),
          "launch 2 writes output 0 directly; a float literal")
    check(C1.operands == [(tb.model.OUTPUT, 1, 0), (tb.model.BUFFER, 1, 0)] and C1.count == 128 and
          C2.operands == [(tb.model.OUTPUT, 2, 0), (tb.model.INPUT, 0, 0)] and C2.count == 128,
          "a view and a returned input are copied out")
    check(r.output_copies == ["output1", "output2"], "the report names the copied outputs")
    life = [(b.first, b.last, b.size) for b in p.buffers]
    check(life == [(0, 3, 128), (1, 5, 256), (3, 4, 128)], "buffers: lifetimes from first to last use (%s)" % life)
    for i, a in enumerate(p.buffers):
        for j, b in enumerate(p.buffers):
            if i < j and a.first <= b.last and b.first <= a.last:
                check(not (a.offset < b.offset + b.size and b.offset < a.offset + a.size),
                      "buffers %d and %d, live together, do not overlap" % (i, j))
    check(p.workspace_size % 256 == 0 and all(b.offset % 256 == 0 and b.offset + b.size <= p.workspace_size
                                              for b in p.buffers), "the workspace holds every buffer, 256-aligned")
    check(r.outputs_with_atomics == ["output1"], "atomics reach output 1 only (%s)" % r.outputs_with_atomics)
    check(r.pytorch_peak == 4096 and r.as_dict()["inputs"][0]["shape"] == [8, 4] and "bundle" not in r.as_dict(),
          "the report as data")
    if hasattr(tb, "check_program"):
        try:
            tb.check_program(r.bundle)
            ok = True
        except tb.BundleError as e:
            print("    %s" % e)
            ok = False
        check(ok, "check_program takes the program")
    else:
        print("    (this format module has no check_program: not checked)")


def refusals():
    w = World(foreign_gpu=["sm90_xmma_gemm_f32f32_tn_n_tilesize128x128x32"])
    check(raises(w.build, "unsupported", "max_autotune_gemm_backends"), "a cuBLAS kernel is refused, naming the option")
    w = World(out_view=None)
    w.ex.out["rows"] = T(w.buf1.st, (4, 4), (8, 1))
    check(raises(w.build, "unsupported", "not dense"), "an output view that is not dense is refused")
    w = World(desc=True)
    check(raises(w.build, "unsupported", "tensor descriptor"), "a tensor descriptor argument is refused")
    w = World()
    w.ex.cap.launches[0]["grid"] = None
    check(raises(w.build, "unsupported", "grid"), "a launch without a grid is refused")
    w = World()
    w.ex.cap.launches[0]["args"]["in_ptr0"] = T(w.x.st, (2, 4), offset=40)
    check(raises(w.build, "unsupported", "input"), "a pointer past an input's extent is refused")
    w = World()
    w.ex.out["bad"] = object()
    check(raises(w.build, "unsupported_type", "neither a tensor"), "an output that is no tensor or pytree is refused")
    w = World()
    w.ex.gpu_events = []
    check(raises(w.build, "unsupported", "CUPTI"), "no GPU event at all: a clear error")


def options():
    opts, comp, kw = M._options({"max_autotune": False, "warmup": 3, "coordinate_descent_tuning": True})
    check(opts["warmup"] == 3 and comp["max_autotune"] is False and comp["coordinate_descent_tuning"] is True and
          comp["max_autotune_gemm_backends"] == "TRITON" and kw == {"dynamic": False},
          "options: export's own, Inductor's added to or overriding TRITON_ONLY")
    check(raises(lambda: M._options({"intercept": "x"}), "invalid_argument"), "options: a bad intercept")
    check(raises(lambda: M._options({"cpp_wrapper": True}), "unsupported"), "options: cpp_wrapper refused")
    check(raises(lambda: M._names(["a", "a"], 2, "input", "input"), "invalid_argument"), "names: unique")
    # transformers' caches, by class name (stand-ins: no transformers here)
    fake_torch = type("FakeTorch", (), {"is_tensor": staticmethod(lambda x: False)})
    cache = type("Cache", (), {"__module__": "transformers.cache_utils"})
    dyn = type("DynamicCache", (cache,), {"__module__": "transformers.cache_utils"})
    static = type("StaticCache", (cache,), {"__module__": "transformers.cache_utils"})
    check(raises(lambda: M._caches_of(fake_torch, 'options["names"]', [dyn()]), "unsupported",
                 'options["names"] holds a transformers DynamicCache, which grows'),
          "caches: a DynamicCache among the named tensors is refused by name")
    check(raises(lambda: M._caches_of(fake_torch, "program 'decode'", (1, {"past_key_values": dyn()})), "unsupported",
                 "DynamicCache"), "caches: a DynamicCache among a program's inputs is refused by name")
    s = static()
    check(M._caches_of(fake_torch, "program 'decode'", (1, {"past_key_values": s}, [s])) == [s, s],
          "caches: a StaticCache is taken")


def merge():
    """merge_programs (export_programs' joining of captured programs) on
    stand-in reports: kernels by hash, records by key, constants by
    storage, state shared where two programs use it, names made unique."""
    C, I, O = tb.CONSTANT, tb.INPUT, tb.OUTPUT
    k1, k2 = tb.Kernel("H1", 0, [tb.Artifact("a.cubin", b"1")]), tb.Kernel("H2", 0, [tb.Artifact("b.cubin", b"2")])
    cf = lambda h, b, w=4: tb.Config(h, "f", b, "O", "0", num_warps=w)
    r1, r2 = tb.Record("R1", "f", [cf("H1", "a.cubin")]), tb.Record("R2", "f", [cf("H2", "b.cubin")])
    # R1 autotuned again in B: another config first, then A's
    r1b = tb.Record("R1", "f", [cf("H1", "a.cubin", 8), cf("H1", "a.cubin")])
    t = tb.TensorSpec("x", "float32", [4], [1])

    class Rep:
        def __init__(self, bundle, storages):
            self.bundle, self.constant_storages = bundle, storages
    # A: launches R1 on kv (state, storage 20), reads w (storage 10); B: records R2, R1 (another order),
    # reads kv and w in the other order, and a constant of its own named w too (storage 30)
    a = tb.Bundle([k1], [r1], tb.Program([t], [], [tb.Constant("w", "float32", b"w" * 16),
                                                  tb.Constant("kv", "float32", b"\0" * 16, state=True)],
                                         steps=[tb.Step(tb.LAUNCH, [(C, 1, 0)], record=0, grid=(1, 1, 1)),
                                                tb.Step(tb.COPY, [(C, 1, 0), (I, 0, 0)], count=16)], name="fill"))
    b = tb.Bundle([k2, k1], [r2, r1b], tb.Program([], [t], [tb.Constant("kv", "float32", b"\0" * 16, state=True),
                                                           tb.Constant("w", "float32", b"w" * 16),
                                                           tb.Constant("w", "int8", b"z" * 4)],
                                                  steps=[tb.Step(tb.LAUNCH, [(C, 2, 0)], record=1, config=1,
                                                                 grid=(1, 1, 1)),
                                                         tb.Step(tb.LAUNCH, [(C, 0, 0)], record=0, grid=(1, 1, 1)),
                                                         tb.Step(tb.COPY, [(O, 0, 0), (C, 1, 0)], count=16),
                                                         tb.Step(tb.LAUNCH, [(C, 0, 0)], record=1, config=0,
                                                                 grid=(1, 1, 1))],
                                                  name="step"))
    import collections
    bundle, shared = M.merge_programs(collections.OrderedDict([("fill", Rep(a, [10, 20])), ("step", Rep(b, [20, 10, 30]))]),
                                      {"generate.max_seq": "4"})
    table = bundle.programs[0].constants
    check([k.hash for k in bundle.kernels] == ["H1", "H2"] and [r.cache_key for r in bundle.records] == ["R1", "R2"],
          "merge: kernels by hash, records by cache key, each once")
    check([k.name for k in table] == ["w", "kv", "w#2"] and [k.state for k in table] == [False, True, False] and
          [k.shared for k in table] == [False, True, False] and shared == ["kv"] and
          all(p.constants is table for p in bundle.programs),
          "merge: constants by storage, one table, kv state and shared, another storage's w named w#2")
    st = bundle.programs[1].steps
    check(st[0].operands == [(C, 2, 0)] and st[0].record == 0 and st[1].operands == [(C, 1, 0)] and st[1].record == 1
          and st[2].operands == [(O, 0, 0), (C, 0, 0)], "merge: the steps' constant and record indexes renumbered")
    got = bundle.records[0].configs
    check([c.num_warps for c in got] == [4, 8] and st[0].config == 0 and st[3].config == 1 and
          bundle.programs[0].steps[0].config == 0 and len(r1.configs) == 1 and got[0] is not r1.configs[0],
          "merge: a record both programs tuned holds both's configs once, the steps' config indexes renumbered "
          "(the reports' records untouched)")
    r1c = tb.Record("R1", "f", [cf("H1", "a.cubin")], tb.CallInfo(["x"], [0], []))
    c = tb.Bundle([k1], [r1c], tb.Program([], [], [tb.Constant("kv", "float32", b"\0" * 16, state=True)],
                                          steps=[tb.Step(tb.LAUNCH, [(C, 0, 0)], record=0, grid=(1, 1, 1))],
                                          name="other"))
    check(raises(lambda: M.merge_programs(collections.OrderedDict([("fill", Rep(a, [10, 20])),
                                                                    ("other", Rep(c, [20]))])), "unsupported",
                 "other arguments"), "merge: one record called with other arguments in two programs is refused")
    back = tb.read(tb.write(bundle))
    check(back == bundle and back.properties == {"generate.max_seq": "4"},
          "merge: the bundle writes (section 6) and reads back equal, its properties too")
    check(M.unique_names(["a", "a", "a#2", "b"]) == ["a", "a#2", "a#2#2", "b"], "unique_names: suffixes, never a clash")
    # a rule that reads a size baked in (4 blocks) where a step launched 8
    one = lambda: [(tb.CONST, 0, 1)]
    rule = lambda n: tb.GridRule([(tb.CONST, 0, n)], one(), one())
    d = tb.Bundle([k1], [tb.Record("R1", "f", [tb.Config("H1", "f", "a.cubin", "i", "0", grid=rule(4)),
                                               tb.Config("H1", "f", "a.cubin", "i", "0", num_warps=8, grid=rule(8))])],
                  tb.Program([], [], [], steps=[tb.Step(tb.LAUNCH, [(tb.LITERAL, 0, 8)], record=0, grid=(8, 1, 1)),
                                                tb.Step(tb.LAUNCH, [(tb.LITERAL, 0, 8)], record=0, config=1,
                                                        grid=(8, 1, 1))]))
    check(raises(lambda: tb.write(d), "malformed", "grid rule gives (4, 1, 1)"),
          "a step whose grid its config's rule contradicts is refused (R-program-grid)")
    w = M.drop_wrong_rules(d)
    check(len(w) == 1 and "config 0" in w[0] and "step 0" in w[0] and d.records[0].configs[0].grid is None and
          d.records[0].configs[1].grid == rule(8) and tb.read(tb.write(d)) == d,
          "drop_wrong_rules: the contradicted rule taken, the right one kept, the bundle writes")


def weights_check():
    """export_programs' weights: the merged table keeps external constants,
    merged_tensors gives each constant's tensor in table order, and
    check_written (the read-back check every export runs before it reports
    success) refuses the bundle that a weights option once wrote for several
    programs: weights with neither bytes nor a tensor of the file."""
    import collections
    import tempfile
    import zlib
    C = tb.CONSTANT
    k1 = tb.Kernel("H1", 0, [tb.Artifact("a.cubin", b"1")])
    rec = tb.Record("R1", "f", [tb.Config("H1", "f", "a.cubin", "O", "0")])
    W, KV = b"weights!" * 2, b"\0" * 16

    def prog(name, consts):
        return tb.Bundle([k1], [rec], tb.Program([], [], consts, steps=[tb.Step(tb.LAUNCH, [(C, 0, 0)], record=0,
                                                                                grid=(1, 1, 1))], name=name))

    class Rep:
        def __init__(self, bundle, storages, tensors):
            self.bundle, self.constant_storages, self.constant_tensors = bundle, storages, tensors
    ext = tb.External("model.w", [4], zlib.crc32(W))
    reps = collections.OrderedDict([
        ("prefill", Rep(prog("prefill", [tb.Constant("w", "float32", b"", external=ext),
                                         tb.Constant("kv", "float32", KV, state=True)]), [10, 20], ["tw", "tkv"])),
        ("decode", Rep(prog("decode", [tb.Constant("kv", "float32", KV, state=True),
                                       tb.Constant("w", "float32", b"", external=ext)]), [20, 10], ["tkv", "tw"]))])
    bundle, shared = M.merge_programs(reps)
    table = bundle.programs[0].constants
    check([k.external for k in table] == [ext, None] and shared == ["kv"],
          "merge: an external constant stays external (2.5.0 dropped the marking: no bytes, no tensor)")
    check(M.merged_tensors(reps) == ["tw", "tkv"] and M.table_storages(reps) == [10, 20],
          "merged_tensors, table_storages: each constant's tensor and storage in the table's order")
    d = tempfile.mkdtemp(prefix="tbw-")
    path, wpath = os.path.join(d, "m.tbundle"), os.path.join(d, "m.safetensors")
    expected = [(16, zlib.crc32(W)), (16, zlib.crc32(KV))]
    # the bundle of the bug: weights with no bytes and no external marking
    bad = M.merge_programs(collections.OrderedDict(
        (n, Rep(prog(n, [tb.Constant("w", "float32", b""), tb.Constant("kv", "float32", KV, state=True)]),
                [10, 20], [0, 1])) for n in ("prefill", "decode")))[0]
    tb.write_file(bad, path)
    check(raises(lambda: M.check_written(path, expected), "malformed", "constant w with 0 bytes where the model's "
                 "tensor has 16, and no weights-file tensor"),
          "check_written: a weight with neither bytes nor a weights-file tensor is refused, by name")
    good = M.merge_programs(collections.OrderedDict(
        (n, Rep(prog(n, [tb.Constant("w", "float32", W), tb.Constant("kv", "float32", KV, state=True)]),
                [10, 20], [0, 1])) for n in ("prefill", "decode")))[0]
    tb.write_file(good, path)
    check(M.check_written(path, expected) == 2, "check_written: inline constants equal to the model's pass")
    check(raises(lambda: M.check_written(path, [(16, zlib.crc32(W) ^ 1), expected[1]]), "malformed", "other bytes"),
          "check_written: an inline constant with other bytes than the model's is refused")
    check(raises(lambda: M.check_written(path, expected[:1]), "malformed", "2 constants where the model has 1"),
          "check_written: a table of another length is refused")
    # external: the weights file written as export_programs writes it
    tb.weights.write_file(wpath, [("model.w", "float32", [4], W)])
    bundle.properties["weights.file"] = "m.safetensors"
    tb.write_file(bundle, path)
    check(M.check_written(path, expected) == 2, "check_written: an external constant whose file tensor is the "
          "model's passes (the file found by the bundle's weights.file)")
    check(raises(lambda: M.check_written(path, [(16, zlib.crc32(b"x" * 16)), expected[1]]), "malformed",
                 "other bytes"), "check_written: an external constant whose tensor holds other bytes is refused")
    tb.weights.write_file(wpath, [("other", "float32", [4], W)])
    check(raises(lambda: M.check_written(path, expected), "malformed", "which it lacks"),
          "check_written: an external constant whose tensor the file lacks is refused")
    del bundle.properties["weights.file"]
    tb.write_file(bundle, path)
    check(raises(lambda: M.check_written(path, expected), "malformed", "no weights.file property"),
          "check_written: external constants and no weights.file property are refused")
    for f in (path, wpath):
        os.remove(f)
    os.rmdir(d)
    # before_run: every uncaptured run of an export starts from the state put back (export_programs' put_back)
    runs = []
    e = M._Export(lambda: None, (), None, {"before_run": lambda: runs.append(1)})
    e.fresh()
    check(runs == [1] and M.EXPORT_OPTIONS["before_run"] is None, "before_run: called by fresh(), none by default")
    # a failure of the compiled model names the program and the stage and keeps the original
    orig = RuntimeError("CUDA error: device-side assert triggered\nmore")
    e = M.ExportStageError("prefill", "capture", "at sizes {'T': 32}", orig)
    check(e.code == "cuda" and "program 'prefill', capture at sizes {'T': 32}" in str(e) and
          "device-side assert triggered" in str(e) and "more" not in str(e) and e.original is orig and
          isinstance(e, tb.BundleError), "ExportStageError: program, stage, sizes and the original's first line")
    e = M.ExportStageError("decode", "capture", "at the example inputs' sizes",
                           RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    check(e.code == "out_of_memory" and "context is lost" not in str(e),
          "ExportStageError: PyTorch's out of memory is out_of_memory, not a lost context")
    e = M.ExportStageError("decode", "capture", "", ValueError("shapes do not match"))
    check(e.code == "unsupported" and "context is lost" not in str(e), "ExportStageError: another error is unsupported")


@contextlib.contextmanager
def stand_in_heuristics(tuner_class, config_class):
    """Inductor's triton_heuristics module replaced, while the context
    lasts, by one whose CachingAutotuner and Config are the classes given
    (torch itself need not be installed)."""
    th = types.ModuleType("torch._inductor.runtime.triton_heuristics")
    th.CachingAutotuner, th.Config = tuner_class, config_class
    names = ["torch", "torch._inductor", "torch._inductor.runtime", "torch._inductor.runtime.triton_heuristics"]
    saved = {n: sys.modules.get(n) for n in names}
    for n in names[:-1]:
        sys.modules[n] = sys.modules.get(n) or types.ModuleType(n)
    sys.modules[names[-1]] = th
    runtime = sys.modules["torch._inductor.runtime"]
    saved_attr = runtime.__dict__.get("triton_heuristics")
    runtime.triton_heuristics = th
    try:
        yield th
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m
        if saved_attr is not None:
            runtime.triton_heuristics = saved_attr
        else:
            runtime.__dict__.pop("triton_heuristics", None)


def narrow_configs():
    """inductor.narrow_product_configs against a stand-in for Inductor's
    triton_heuristics module: which kernels get the fixed config, how it
    is compiled, when Inductor's tuning takes over, nesting, and that the
    original tuning comes back; then the exporter's wiring."""
    from triton_bundle import inductor as I
    calls = []

    class Config:
        def __init__(self, kwargs, num_warps=4, num_stages=1):
            self.kwargs, self.num_warps, self.num_stages = kwargs, num_warps, num_stages

    class Tuner:
        spills, fail = 0, False

        def __init__(self, name="triton_red_fused_add_mean_mm_t_19", kind="REDUCTION", hint="ReductionHint.INNER",
                     sizes=None, deterministic=False, combo=False):
            self.inductor_meta = {"kernel_name": name, "reduction_hint": hint}
            if combo:
                self.inductor_meta["combo_grid_meta"] = {"num_kernels": 2, "xnumel_0": 2048, "xnumel_1": 512}
            self.heuristic_type = "HeuristicType." + kind
            self.size_hints = sizes or {"x": 2048, "r0_": 8192}
            self.deterministic_mode = deterministic
            self.lock = contextlib.nullcontext()
            self.fn = types.SimpleNamespace(fn=None)

        def _reload_kernel(self):
            calls.append("reload")
            return types.SimpleNamespace(fn=types.SimpleNamespace(fn="loaded"))

        def _precompile_config(self, cfg):
            calls.append(("compile", dict(cfg.kwargs), cfg.num_warps, cfg.num_stages))
            if self.fail:
                raise RuntimeError("out of resources")
            return types.SimpleNamespace(make_launcher=lambda: types.SimpleNamespace(config=cfg, n_spills=self.spills))

        def coordinate_descent_tuning(self, launcher, *args, **kwargs):
            calls.append(("tuned", self.inductor_meta["kernel_name"]))
            return launcher

    orig = Tuner.coordinate_descent_tuning
    launcher = types.SimpleNamespace(config=Config({"XBLOCK": 1, "R0_BLOCK": 64}))

    def tuned_as_before(tuner):
        del calls[:]
        got = tuner.coordinate_descent_tuning(launcher)
        return got is launcher and calls[-1][0] == "tuned"
    with stand_in_heuristics(Tuner, Config):
        with I.narrow_product_configs() as ctx:
            got = Tuner().coordinate_descent_tuning(launcher, "a", b=1)
            check(calls == ["reload", ("compile", {"XBLOCK": 2, "R0_BLOCK": 2048}, 8, 1)] and
                  got.config.found_by_coordesc is True and got is not launcher and
                  launcher.config.kwargs == {"XBLOCK": 1, "R0_BLOCK": 64} and
                  ctx.chosen == {"triton_red_fused_add_mean_mm_t_19": {"XBLOCK": 2, "R0_BLOCK": 2048}},
                  "narrow_product_configs: a one-row product gets the fixed config (a new one), compiled "
                  "as coordinate descent compiles, marked as its choice, not tuned")
            del calls[:]
            Tuner(name="triton_red_fused_mm_2", sizes={"x": 1, "r0_": 1024}).coordinate_descent_tuning(launcher)
            check(calls[-1] == ("compile", {"XBLOCK": 1, "R0_BLOCK": 1024}, 8, 1),
                  "narrow_product_configs: the block sizes clamped to the kernel's sizes")
            del calls[:]
            Tuner(name="triton_red_fused_16", sizes={"x": 2048, "r0_": 2048}, combo=True).coordinate_descent_tuning(
                launcher)
            check(calls[-1] == ("compile", {"XBLOCK": 2, "R0_BLOCK": 2048}, 8, 1) and "triton_red_fused_16" in ctx.chosen,
                  "narrow_product_configs: a combo kernel of reductions (no mm in its name) gets the config too")
            del calls[:]
            Tuner(name="triton_red_fused_12", sizes={"x": 2048, "r0_": 2048}).coordinate_descent_tuning(launcher)
            check(calls[-1] == ("compile", {"XBLOCK": 2, "R0_BLOCK": 2048}, 8, 1) and "triton_red_fused_12" in ctx.chosen,
                  "narrow_product_configs: a reduction whose name says nothing (Inductor's names with combo kernels "
                  "on) gets the config too")
            check(tuned_as_before(Tuner(name="triton_red_fused_16", combo=True, kind="PERSISTENT_REDUCTION")) and
                  tuned_as_before(Tuner(name="triton_poi_fused_0", combo=True, kind="POINTWISE")),
                  "narrow_product_configs: a combo kernel of persistent reductions or of pointwise kernels: tuned as "
                  "before")
            others = [Tuner(name="triton_red_fused_add_mean_pow_3"), Tuner(kind="PERSISTENT_REDUCTION"),
                      Tuner(kind="POINTWISE"), Tuner(hint="ReductionHint.OUTER"),
                      Tuner(sizes={"x": 2048, "r0_": 512}), Tuner(sizes={"x": 64, "y": 64, "r0_": 4096}),
                      Tuner(name="triton_red_fused_bmm_softmax_7"), Tuner(deterministic=True),
                      Tuner(name="triton_red_fused_12_mean"), Tuner(name="triton_red_fused_12", sizes={"x": 1, "r0_": 512})]
            check(all(tuned_as_before(t) for t in others),
                  "narrow_product_configs: no mm in the name, a persistent reduction, a pointwise kernel, an outer "
                  "reduction, fewer than 1,024 elements, a tiled reduction, a bmm, deterministic mode, a name that is "
                  "not only a number, a nameless one of 512 elements: tuned as before")
            three = types.SimpleNamespace(config=Config({"XBLOCK": 1, "R0_BLOCK": 64, "RSPLIT": 4}))
            del calls[:]
            check(Tuner().coordinate_descent_tuning(three) is three and calls[-1][0] == "tuned",
                  "narrow_product_configs: a kernel with other block names is tuned as before")
            spilling, failing = Tuner(), Tuner()
            spilling.spills, failing.fail = 40, True
            check(tuned_as_before(spilling) and tuned_as_before(failing) and ctx.fallbacks == 2 and
                  len(ctx.chosen) == 4, "narrow_product_configs: a config that spills registers or does not "
                  "compile: Inductor's tuning instead, counted")
            check(raises_any(lambda: ctx.__enter__(), RuntimeError), "narrow_product_configs: one context is "
                  "entered once at a time")
            inner = I.narrow_product_configs({"XBLOCK": 1, "R0_BLOCK": 512, "num_warps": 4, "num_stages": 2})
            inner.__enter__()
            del calls[:]
            Tuner().coordinate_descent_tuning(launcher)
            check(calls[-1] == ("compile", {"XBLOCK": 1, "R0_BLOCK": 512}, 4, 2) and len(inner.chosen) == 1,
                  "narrow_product_configs: nested, the newest context's config (a config given) applies")
        check(Tuner.coordinate_descent_tuning is not orig, "narrow_product_configs: the outer context left first, "
              "the inner one still active")
        inner.__exit__(None, None, None)
        check(Tuner.coordinate_descent_tuning is orig and tuned_as_before(Tuner()),
              "narrow_product_configs: Inductor's tuning back when the last context leaves, in either order")
        try:
            with I.narrow_product_configs():
                raise KeyError("inside")
        except KeyError:
            pass
        check(Tuner.coordinate_descent_tuning is orig, "narrow_product_configs: Inductor's tuning back after an "
              "exception")
        # the exporter's wiring: the context given for the export's life, Inductor's autotune cache off
        for user, config, want_cache, active in ((set(), None, False, True), ({"autotune_local_cache"}, None, True, True),
                                                 (set(), False, True, False)):
            e = M._Export(None, (), None, {"narrow_mm_config": config})
            e.compile_options, e.user_compile_options = {"autotune_local_cache": True}, user
            with contextlib.ExitStack() as e.exit_stack:
                e.narrow_configs()
                during = Tuner.coordinate_descent_tuning is not orig
            check(during == active and Tuner.coordinate_descent_tuning is orig and
                  e.compile_options["autotune_local_cache"] is want_cache,
                  "export: narrow_mm_config %r, the caller's options %s: the config %s, the autotune cache %s" % (
                      config, sorted(user), "given while the export lasts" if active else "not given",
                      "left as set" if want_cache else "off"))
    for bad, what in (({"XBLOCK": 2}, "names XBLOCK"),
                      ({"XBLOCK": 3, "R0_BLOCK": 2048, "num_warps": 8, "num_stages": 1}, "power of two"),
                      ({"XBLOCK": 2, "R0_BLOCK": 2048, "num_warps": 8, "num_stages": 0}, "from 1 to 8"),
                      ({"XBLOCK": 2, "R0_BLOCK": 2048, "num_warps": 64, "num_stages": 1}, "from 1 to 32"),
                      ({"XBLOCK": 16, "R0_BLOCK": 2048, "num_warps": 8, "num_stages": 1}, "at most 16384"),
                      ({"XBLOCK": 2, "R0_BLOCK": "2048", "num_warps": 8, "num_stages": 1}, "an integer")):
        check(raises(lambda: M._Export(None, (), None, {"narrow_mm_config": bad}), "invalid_argument", what),
              "options['narrow_mm_config'] %r refused (%s)" % (bad, what))
    check(raises(lambda: M._Export(None, (), None, {"narrow_mm_config": 3}), "invalid_argument", "a dict"),
          "options['narrow_mm_config'] neither None, False nor a dict refused")
    check(M._Export(None, (), None, {"narrow_mm_config": False}).narrow_config is None and
          M._Export(None, (), None, {}).narrow_config.config == I.NARROW_PRODUCT_CONFIG,
          "options['narrow_mm_config']: False gives none, the default inductor.py's")


def program_tuning():
    """inductor.tune_in_program and record_tuners against stand-in
    kernels whose times the stand-in profiler computes from each one's
    config: which kernels are tuned, which candidate each keeps, the
    thresholds, putting back; then the exporter's option, when it tunes,
    its failures and its report."""
    from triton_bundle import inductor as I

    class Config:
        def __init__(self, kwargs, num_warps=4, num_stages=1):
            self.kwargs, self.num_warps, self.num_stages = kwargs, num_warps, num_stages

    compiles = []

    class Tuner:
        def __init__(self, name, xblock=2, rblock=2048, kind="REDUCTION", sizes=None, cost=None, fail=(),
                     warps=8, spills=None):
            self.inductor_meta = {"kernel_name": name, "spill_threshold": 16}
            self.heuristic_type = "HeuristicType." + kind
            self.size_hints = sizes or {"x": 2048, "r0_": 8192}
            kw = {"XBLOCK": xblock} if kind == "PERSISTENT_REDUCTION" else {"XBLOCK": xblock, "R0_BLOCK": rblock}
            self.launchers = [types.SimpleNamespace(config=Config(kw, warps), n_spills=0)]
            self.lock, self.fn = contextlib.nullcontext(), types.SimpleNamespace(fn="here")
            self.cost, self.fail, self.spills = cost or (lambda kw, w: 10.0), fail, spills or {}

        def _precompile_config(self, cfg):
            compiles.append((self.inductor_meta["kernel_name"], dict(cfg.kwargs), cfg.num_warps))
            if (cfg.kwargs.get("XBLOCK"), cfg.num_warps) in self.fail:
                raise RuntimeError("out of resources")
            n = self.spills.get((cfg.kwargs.get("XBLOCK"), cfg.num_warps), 0)
            return types.SimpleNamespace(make_launcher=lambda: types.SimpleNamespace(config=cfg, n_spills=n))

        def run(self, *args, **kwargs):
            return "ran"

    def fastest_at(xblock, warps, rblock=None, fast=5.0, slow=10.0):
        return lambda kw, w: fast if kw["XBLOCK"] == xblock and w == warps and \
            (rblock is None or kw["R0_BLOCK"] == rblock) else slow
    tuners = {
        # the down product: 16 rows a program take half its own config's time
        "down": Tuner("down", cost=fastest_at(16, 8, 512)),
        "best_already": Tuner("best_already", cost=lambda kw, w: 10.0 if kw["XBLOCK"] == 2 else 12.0),
        "tiny": Tuner("tiny", cost=lambda kw, w: 0.05 if kw["XBLOCK"] == 2 else 0.01),
        "two_percent": Tuner("two_percent", cost=lambda kw, w: 10.0 if kw["XBLOCK"] == 2 else 9.8),
        "small_gain": Tuner("small_gain", cost=fastest_at(1, 4, fast=3.8, slow=4.0)),  # 5%, 0.2 us
        "softmax": Tuner("softmax", 4, 16, sizes={"x": 4096, "r0_": 128}, cost=fastest_at(16, 8, 128, 2.0, 6.4),
                         fail={(8, 8)}),
        "stats": Tuner("stats", 16, kind="PERSISTENT_REDUCTION", sizes={"x": 128, "r0_": 1024}, warps=4,
                       cost=fastest_at(1, 4, fast=1.0, slow=3.0)),
        # the fastest candidate spills registers: the next fastest
        "spilly": Tuner("spilly", cost=lambda kw, w: {16: 2.0, 4: 7.0}.get(kw["XBLOCK"], 10.0) if w == 8 else 10.0,
                        spills={(16, 8): 40}),
        "pointwise": Tuner("pointwise", kind="POINTWISE", cost=lambda kw, w: 50.0),
    }
    own = {n: t.launchers[0] for n, t in tuners.items()}
    state = {"runs": 0, "profiles": 0, "slow_at": None, "fail_at": None, "empty": False}

    def fake_times(torch, run, steps):
        state["profiles"] += 1
        if state["fail_at"] == state["profiles"]:
            raise RuntimeError("a candidate failed")
        for _ in range(steps):
            run()
        if state["empty"]:
            return {"at::native::copy": 3.0}
        out = {"Memcpy HtoD (the state put back)": 500.0}
        for n, t in tuners.items():
            c = t.launchers[0].config
            slow = state["slow_at"] == state["profiles"] and t.launchers[0] is not own[n]
            out[n] = t.cost(c.kwargs, c.num_warps) * (3.0 if slow else 1.0)
        return out

    def fresh():
        for n, t in tuners.items():
            t.launchers = [own[n]]
        state["profiles"] = 0

    def run():
        state["runs"] += 1
    saved_times, saved_tune = I._kernel_times, M.tune_in_program
    I._kernel_times = fake_times
    try:
        with stand_in_heuristics(Tuner, Config):
            orig_run = Tuner.__dict__["run"]
            with I.record_tuners() as rec:
                for n in ("down", "down", "softmax"):
                    tuners[n].run()
                Tuner("softmax").run()
                Tuner("pointwise").run()
                Tuner("pointwise").run()
            check(list(rec.tuners) == ["down"] and rec.shared == {"softmax", "pointwise"} and
                  Tuner.__dict__["run"] is orig_run,
                  "record_tuners: each kernel by name once, a name two kernels share left out, run put back")
            cands = I._program_candidates(tuners["softmax"], I.PROGRAM_TUNING_CONFIGS)
            check(({"XBLOCK": 16, "R0_BLOCK": 128}, 8) in cands and all(c["R0_BLOCK"] <= 128 for c, _ in cands) and
                  len(cands) == len({(tuple(sorted(c.items())), w) for c, w in cands}),
                  "program tuning: a looped reduction's candidates clamped to its sizes, each once")
            pc = I._program_candidates(tuners["stats"], I.PROGRAM_TUNING_CONFIGS)
            check(({"XBLOCK": 1}, 4) in pc and ({"XBLOCK": 4}, 4) in pc and ({"XBLOCK": 16}, 4) not in pc and
                  ({"XBLOCK": 64}, 8) not in pc and all(set(c) == {"XBLOCK"} for c, _ in pc),
                  "program tuning: a persistent reduction's candidates: XBLOCK only, its own config left out, none "
                  "over 16,384 elements (64 rows of 1,024)")
            check(I._program_candidates(tuners["pointwise"], I.PROGRAM_TUNING_CONFIGS) == [] and
                  I._program_candidates(Tuner("d", kind="REDUCTION"), I.PROGRAM_TUNING_CONFIGS) and
                  I._program_candidates(types.SimpleNamespace(**dict(vars(Tuner("d")), deterministic_mode=True)),
                                        I.PROGRAM_TUNING_CONFIGS) == [],
                  "program tuning: a pointwise kernel and Inductor's deterministic mode have no candidates")
            got = I.tune_in_program(None, run, dict(tuners))
            profiles = state["profiles"]
            check(set(got) == {"down", "softmax", "stats", "spilly"} and
                  got["down"] == {"config": {"XBLOCK": 16, "R0_BLOCK": 512, "num_warps": 8}, "us": [10.0, 5.0]} and
                  got["softmax"]["config"] == {"XBLOCK": 16, "R0_BLOCK": 128, "num_warps": 8} and
                  got["stats"]["config"] == {"XBLOCK": 1, "num_warps": 4} and
                  got["spilly"]["config"] == {"XBLOCK": 4, "R0_BLOCK": 1024, "num_warps": 8},
                  "program tuning: each costly reduction keeps the candidate that took least in the program, one "
                  "that spills registers not a candidate (%s)" % sorted(got))
            check(tuners["down"].launchers[0].config.kwargs == {"XBLOCK": 16, "R0_BLOCK": 512} and
                  all(tuners[n].launchers[0].config.found_by_coordesc is True for n in got),
                  "program tuning: the kernels run the chosen launchers, marked as tuned (Inductor tunes them no more)")
            check(all(tuners[n].launchers[0] is own[n] for n in
                      ("best_already", "two_percent", "small_gain", "tiny", "pointwise")),
                  "program tuning: a kernel whose own config is best, one 2% faster with another, one 5% but only "
                  "0.2 us faster, one under 1% of the Inductor kernels' time, a pointwise kernel: their own configs")
            check(not any(n == "tiny" for n, _, _ in compiles) and ("softmax", {"XBLOCK": 8, "R0_BLOCK": 128}, 8)
                  in compiles and state["runs"] == 3 * profiles,
                  "program tuning: no candidate compiled for a kernel too small to tune, one that does not compile "
                  "skipped; every profile runs the program (its state put back by run itself)")
            fresh()
            check(set(I.tune_in_program(None, run, dict(tuners), keep={"down", "stats"})) == {"softmax", "spilly"} and
                  tuners["down"].launchers[0] is own["down"],
                  "program tuning: the kernels named in keep are left alone")
            fresh()
            check(list(I.tune_in_program(None, run, dict(tuners), most=1)) == ["down"],
                  "program tuning: most=1 tunes the costliest kernel that has candidates (not the pointwise one)")
            fresh()
            state["slow_at"] = profiles  # the last profile: the chosen configs, all together
            check(I.tune_in_program(None, run, dict(tuners)) == {} and
                  all(t.launchers[0] is own[n] for n, t in tuners.items()),
                  "program tuning: where the program's kernels with the chosen configs take longer than before, "
                  "every kernel goes back")
            fresh()
            state.update(slow_at=None, fail_at=3)
            check(raises_any(lambda: I.tune_in_program(None, run, dict(tuners)), RuntimeError) and
                  all(t.launchers[0] is own[n] for n, t in tuners.items()),
                  "program tuning: a run that fails mid-way puts every kernel's launcher back and raises")
            fresh()
            state.update(fail_at=None, empty=True)
            check(raises_any(lambda: I.tune_in_program(None, run, dict(tuners)), RuntimeError),
                  "program tuning: a profiler that timed none of the kernels is an error, not silence")
            state["empty"] = False
            # the exporter: the option checked, when it tunes
            for bad in ("yes", 1, None):
                check(raises(lambda: M._Export(None, (), None, {"program_tuning": bad}), "invalid_argument",
                             "'auto', True or False"), "options['program_tuning'] %r refused" % (bad,))
            check(M.EXPORT_OPTIONS["program_tuning"] == "auto", "options['program_tuning'] is 'auto' by default")
            for opt, here, narrow, dyn, before, want in (
                    ("auto", True, 19, None, True, True), ("auto", True, -1, None, True, True),
                    ("auto", True, 0, None, True, False), ("auto", True, 19, {"x": {}}, True, False),
                    ("auto", True, 19, None, False, False), ("auto", False, 19, None, True, False),
                    (True, True, 0, {"x": {}}, False, True), (True, False, 0, None, True, False),
                    (False, True, 19, None, True, False)):
                e = M._Export(None, (), None, {"program_tuning": opt, "dynamic_shapes": dyn,
                                              "before_run": (lambda: None) if before else None})
                e.compiled_here, e.narrow = here, narrow
                check(e.tuning_wanted() is want, "export: program_tuning %r, compiled here %s, %s one-row products, "
                      "%s, before_run %s: %s" % (opt, here, narrow, "dynamic" if dyn else "static",
                                                 "set" if before else "none", "tuned" if want else "not tuned"))

            def exporter(**opts):
                e = M._Export(None, (), None, dict({"sdpa": None, "no_grad": False}, **opts))
                e.torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None))
                e.call = lambda: None
                return e

            def raiser(err):
                def f():
                    raise err
                return f
            e = exporter()
            e.call = raiser(RuntimeError("profiler unavailable"))
            e.tune_program()
            check(e.program_tuned == {} and e.tuning_warnings == [
                "program tuning left out (RuntimeError: profiler unavailable)"] and
                "program_tuning_s" in e.timings, "export: a program tuning that fails leaves a warning, tunes nothing")
            e = exporter(program_name="decode")
            e.stage("compile and warm-up", "at the maximum sizes {'T': 64}", lambda: None)  # the stage that tunes
            e.call = raiser(RuntimeError("CUDA error: an illegal memory access was encountered"))
            err = [None]
            try:
                e.tune_program()
            except M.ExportStageError as x:
                err[0] = x
            check(err[0] is not None and err[0].code == "cuda" and err[0].stage == "program tuning" and
                  "program 'decode', program tuning at the maximum sizes {'T': 64}" in str(err[0]) and
                  not e.tuning_warnings,
                  "export: a device error during the program tuning is the export's, named with the stage's sizes, "
                  "not a warning")
            e = exporter()
            e.call = raiser(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
            check(raises(e.tune_program, "out_of_memory", "program tuning") and not e.tuning_warnings,
                  "export: running out of memory during the program tuning is the export's too")
            e = exporter(before_run=raiser(tb.BundleError("malformed", "the state put back failed")))
            check(raises(e.tune_program, "malformed", "put back failed"),
                  "export: a BundleError of before_run during the tuning passes through")
            seen = []
            M.tune_in_program = lambda torch, run, tuners, keep=(): seen.append(set(keep)) or {}
            for config, want in (({"XBLOCK": 1, "R0_BLOCK": 1024, "num_warps": 4, "num_stages": 1}, {"k_mm"}),
                                 (None, set())):
                e = exporter(narrow_mm_config=config)
                e.narrow_config.chosen["k_mm"] = {"XBLOCK": 1, "R0_BLOCK": 1024}
                e.tune_program()
                check(seen[-1] == want, "export: products given a narrow_mm_config %s %s" % (
                    "dict" if config else "by default", "keep it" if want else "are tuned too"))
    finally:
        I._kernel_times, M.tune_in_program = saved_times, saved_tune
    # the report: what the tuning changed, its warning first, narrow_configs only those that kept the config
    w = World()
    w.ex.program_tuned = {"k_mm": {"config": {"XBLOCK": 4, "R0_BLOCK": 1024, "num_warps": 8}, "us": [10.0, 7.0]}}
    w.ex.tuning_warnings = ["program tuning left out (X: y)"]
    w.ex.narrow_config = I.narrow_product_configs()
    w.ex.narrow_config.chosen.update(k_mm={"XBLOCK": 2, "R0_BLOCK": 2048}, k_bn={"XBLOCK": 2, "R0_BLOCK": 2048})
    r = w.build()
    check(r.program_tuning == w.ex.program_tuned and r.warnings[:1] == w.ex.tuning_warnings and
          r.narrow_configs == {"k_bn": {"XBLOCK": 2, "R0_BLOCK": 2048}} and "program_tuning" in r.as_dict(),
          "report: program_tuning, the tuning's warning, narrow_configs without the kernels the tuning changed")


def combo():
    """options["combo"] (2.16): when the exporter turns on Inductor's
    combo kernels, and what the report says."""
    for bad in ("yes", 1, None):
        check(raises(lambda: M._Export(None, (), None, {"combo": bad}), "invalid_argument", "'auto', True or False"),
              "options['combo'] %r refused" % (bad,))
    check(M.EXPORT_OPTIONS["combo"] == "auto", "options['combo'] is 'auto' by default")

    def fake(has):
        config = types.SimpleNamespace(combo_kernels=False) if has else types.SimpleNamespace()
        return types.SimpleNamespace(_inductor=types.SimpleNamespace(config=config))
    dyn = {"dynamic_shapes": {"ids": {1: ("T", 2, 64)}}}
    for opt, extra, has, narrow, want in (
            ("auto", {}, True, 113, True), ("auto", {}, True, -1, True), ("auto", {}, True, 0, None),
            ("auto", {}, True, None, None), ("auto", {}, False, 113, None), ("auto", dyn, True, 113, None),
            ("auto", {"combo_kernels": False}, True, 113, None),
            ("auto", {"compile_options": {"combo_kernels": True}}, True, 113, None),
            (True, {}, True, 0, True), (True, dyn, True, 0, True), (False, {}, True, 113, False),
            (False, {}, False, 113, None), (True, {"combo_kernels": False}, True, 0, None),
            (False, {"combo_kernels": True}, True, 113, None)):
        e = M._Export(None, (), None, dict({"combo": opt}, **extra))
        e.torch, e.narrow = fake(has), narrow
        check(e.combo_setting() is want, "export: combo %r%s, Inductor %s the option, %s one-row products: "
              "combo_kernels %s" % (opt, " %s" % sorted(extra) if extra else "", "has" if has else "lacks", narrow,
                                    {True: "on", False: "off", None: "left as Inductor's config has it"}[want]))
    e = M._Export(None, (), None, {"combo": True})
    e.torch, e.narrow = fake(False), 113
    check(raises(e.combo_setting, "unsupported", "no combo_kernels"),
          "export: combo True where Inductor lacks the option is an error, not silence")
    w = World()
    w.ex.combo = True
    r = w.build()
    check(r.combo is True and r.as_dict()["combo"] is True, "report: combo says the exporter turned combo kernels on")


def pdl():
    """options["pdl"] (2.11): when the exporter turns on Inductor's
    programmatic dependent launch, and what the report says."""
    for bad in ("yes", 1, None):
        check(raises(lambda: M._Export(None, (), None, {"pdl": bad}), "invalid_argument", "'auto', True or False"),
              "options['pdl'] %r refused" % (bad,))
    check(M.EXPORT_OPTIONS["pdl"] == "auto", "options['pdl'] is 'auto' by default")

    def fake(has, major):
        triton = types.SimpleNamespace(enable_pdl=False) if has else types.SimpleNamespace()
        return types.SimpleNamespace(_inductor=types.SimpleNamespace(config=types.SimpleNamespace(triton=triton)),
                                     cuda=types.SimpleNamespace(get_device_capability=lambda: (major, 0)))
    for opt, extra, has, major, narrow, want in (
            ("auto", {}, True, 9, 113, True), ("auto", {}, True, 9, -1, True), ("auto", {}, True, 9, 0, None),
            ("auto", {}, True, 9, None, None), ("auto", {}, True, 8, 113, None), ("auto", {}, False, 9, 113, None),
            ("auto", {"triton.enable_pdl": False}, True, 9, 113, None),
            ("auto", {"compile_options": {"triton.enable_pdl": True}}, True, 9, 113, None),
            (True, {}, True, 8, 0, True), (False, {}, True, 9, 113, False), (False, {}, False, 9, 113, None),
            (False, {"triton.enable_pdl": True}, True, 9, 113, None)):
        e = M._Export(None, (), None, dict({"pdl": opt}, **extra))
        e.torch, e.narrow = fake(has, major), narrow
        check(e.pdl_setting() is want, "export: pdl %r%s, Inductor %s the option, compute capability %d, %s one-row "
              "products: triton.enable_pdl %s" % (
                  opt, " (the caller sets triton.enable_pdl)" if extra else "", "has" if has else "lacks", major,
                  narrow, {True: "on", False: "off", None: "left as Inductor's config has it"}[want]))
    e = M._Export(None, (), None, {"pdl": True})
    e.torch, e.narrow = fake(False, 9), 113
    check(raises(e.pdl_setting, "unsupported", "no triton.enable_pdl"),
          "export: pdl True where Inductor lacks the option is an error, not silence")
    # a config whose kernel never waits, or uses global scratch, loses the flag
    def kernel(name, **files):
        return tb.Kernel("h_" + name, 0, [tb.Artifact(name + ext, data) for ext, data in files.items()])
    b = tb.Bundle()
    b.kernels = [kernel("ptx", **{".ptx": b"  griddepcontrol.wait;\n"}),
                 kernel("ttir", **{".ttir": b'tt.elementwise_inline_asm {asm_string = "griddepcontrol.wait; // $0"}'}),
                 kernel("src", **{".source": b"    tl.extra.cuda.gdc_wait()\n"}),
                 kernel("none", **{".ptx": b"ld.global.b32 st.global.b32", ".source": b"gdc_waiting = 1"}),
                 kernel("scratch", **{".ptx": b"griddepcontrol.wait;"})]
    b.records = [tb.Record("key_" + n, n, [config(n, "Oi")]) for n in ("ptx", "ttir", "src", "none", "scratch", "bare")]
    for r_ in b.records:
        r_.configs[0].flags = tb.CONFIG_PDL
    b.records[4].configs[0].global_scratch = (1024, 128, 0)
    check(M._pdl_without_wait(b) == 3 and [r_.configs[0].flags for r_ in b.records] == [tb.CONFIG_PDL] * 3 + [0] * 3,
          "export: the pdl flag kept where the kernel waits (its PTX, its IR, its source), cleared where it never "
          "waits, uses global scratch, or has no such file")
    # a kernel that lets the next start before it waits loses it too; one that waits first keeps it
    b = tb.Bundle()
    b.kernels = [kernel("after", **{".ptx": b"griddepcontrol.wait;\nld.global\ngriddepcontrol.launch_dependents;"}),
                 kernel("before", **{".ptx": b"griddepcontrol.launch_dependents;\ngriddepcontrol.wait;"}),
                 kernel("srcb", **{".source": b"gdc_launch_dependents()\nx = tl.load(p)\ngdc_wait()\n"}),
                 kernel("mixed", **{".ptx": b"griddepcontrol.wait; griddepcontrol.launch_dependents;",
                                    ".source": b"gdc_launch_dependents()\ngdc_wait()\n"})]
    b.records = [tb.Record("key_" + n, n, [config(n, "Oi")]) for n in ("after", "before", "srcb", "mixed")]
    for r_ in b.records:
        r_.configs[0].flags = tb.CONFIG_PDL
    check(M._pdl_without_wait(b) == 3 and [r_.configs[0].flags for r_ in b.records] == [tb.CONFIG_PDL, 0, 0, 0],
          "export: the pdl flag kept where the kernel lets the next start after its wait, cleared where it does "
          "so before (its PTX, its source, either of two files)")
    # an Inductor combo kernel keeps it only where every branch waits first (options["combo"])
    def combo_source(*branches):
        lines = ["def triton_red_fused_9(in_ptr0, out_ptr0, XBLOCK : tl.constexpr):", "    pid = tl.program_id(0)"]
        for i, body in enumerate(branches):
            lines.append("    %s pid < num_xblocks_%d:" % ("if" if i == 0 else "elif", i))
            lines += ["        " + x for x in body]
        lines += ["    else:", "        pass", ""]
        return "\n".join(lines).encode()
    waits = ["tl.extra.cuda.gdc_wait()", "tmp0 = tl.load(in_ptr0 + x0)", "tl.extra.cuda.gdc_launch_dependents()",
             "tl.store(out_ptr0 + x0, tmp0)"]
    b = tb.Bundle()
    b.kernels = [kernel("both", **{".ptx": b"griddepcontrol.wait;", ".source": combo_source(waits, waits)}),
                 kernel("nowait", **{".ptx": b"griddepcontrol.wait;",
                                     ".source": combo_source(waits, ["tl.store(out_ptr0 + x0, 0.0)"])}),
                 kernel("early", **{".ptx": b"griddepcontrol.wait;", ".source": combo_source(
                     waits, ["tl.extra.cuda.gdc_launch_dependents()", "tl.extra.cuda.gdc_wait()",
                             "tl.store(out_ptr0 + x0, 0.0)"])}),
                 kernel("three", **{".ptx": b"griddepcontrol.wait;", ".source": combo_source(waits, waits, waits)})]
    b.records = [tb.Record("key_" + n, n, [config(n, "Oi")]) for n in ("both", "nowait", "early", "three")]
    for r_ in b.records:
        r_.configs[0].flags = tb.CONFIG_PDL
    check(M._pdl_without_wait(b) == 2 and [r_.configs[0].flags for r_ in b.records] == [tb.CONFIG_PDL, 0, 0,
                                                                                         tb.CONFIG_PDL],
          "export: a combo kernel keeps the pdl flag where each branch waits first, loses it where one branch never "
          "waits or lets the next kernel start before its wait (the first branch waiting is not enough)")
    check(len(M._combo_branches(combo_source(waits, waits, waits))) == 3 and
          M._combo_branches(b"def k(x):\n    if pid < 3:\n        pass\n") == [],
          "export: a combo kernel's branches are found in its source; a kernel of one branch has none")
    # the exporter's own kernels get the flag where their PTX waits before any global access; no other kernel
    b = tb.Bundle()
    b.kernels = [kernel("own", **{".ptx": b"ld.param.u64\ngriddepcontrol.wait;\nld.global.nc.v4.b32\n"
                                          b"griddepcontrol.launch_dependents;"}),
                 kernel("late", **{".ptx": b"ld.global.b32\ngriddepcontrol.wait;"}),
                 kernel("asyncfirst", **{".ptx": b"cp.async.cg.shared.global [a], [b];\ngriddepcontrol.wait;"}),
                 kernel("nowait", **{".ptx": b"ld.global.b32"}),
                 kernel("other", **{".ptx": b"griddepcontrol.wait;\nld.global.b32"}),
                 kernel("atomfirst", **{".ptx": b"@%p1 atom.acq_rel.gpu.global.add.u32 %r1;\ngriddepcontrol.wait;"}),
                 kernel("sharedfirst", **{".ptx": b"ld.shared.u32 %r2;\ngriddepcontrol.wait;"})]
    b.records = [tb.Record("key_" + n, kn, [config(n, "Oi")]) for n, kn in (
        ("own", "decode_attention_kernel"), ("late", "decode_attention_kernel_1"),
        ("asyncfirst", "decode_attention_kernel_0"), ("nowait", "decode_attention_kernel"),
        ("other", "triton_poi_fused_0"), ("atomfirst", "decode_attention_kernel"),
        ("sharedfirst", "decode_attention_kernel"))]
    check(M._pdl_for_own(b) == 1 and [r_.configs[0].flags for r_ in b.records] == [tb.CONFIG_PDL] + [0] * 6 and
          M._pdl_without_wait(b) == 0 and M._pdl_for_own(b) == 0,
          "export: the decode attention's kernel given the pdl flag where its PTX waits before any memory access "
          "but a parameter's (not after a load, an async copy, an atomic or a shared load, nor where it never "
          "waits), no other kernel; flagged once")
    # the lives with pdl: through the next launch with the flag, across steps the runner may skip
    for lives, pdl_at, skip, want, what in (
            ([(0, 2), (1, 3)], {3}, set(), [(0, 3), (1, 3)], "the life ending just before a pdl launch"),
            ([(0, 2)], {4}, set(), [(0, 2)], "no pdl launch next: as recorded"),
            ([(0, 2)], {5}, {3, 4}, [(0, 5)], "skippable steps between: through the pdl launch after them"),
            ([(0, 2)], {3, 5}, {3, 4}, [(0, 5)], "a skippable pdl launch and a later one: through the later"),
            ([(0, 2)], {6}, {3, 4}, [(0, 2)], "a step that runs between: as recorded"),
            ([(4, 4)], {5}, {5, 6}, [(4, 5)], "the last step skippable: through it")):
        check(M.pdl_lives(lives, pdl_at, skip) == want, "workspace with pdl: %s (%s)" % (what, M.pdl_lives(
            lives, pdl_at, skip)))
    # the report: whether it was on, and the launches whose config has the flag
    w = World()
    w.ex.pdl = True
    w.ex.cap.bundle().kernels[1].artifacts.append(tb.Artifact("k_mm.ptx", b"griddepcontrol.wait;"))
    w.ex.cap.bundle().records[0].configs[0].flags |= tb.CONFIG_PDL
    w.ex.cap.bundle().records[1].configs[0].flags |= tb.CONFIG_PDL  # k_atomic: its IR has no wait
    r = w.build()
    check(r.pdl is True and r.pdl_launches == 1 and r.as_dict()["pdl_launches"] == 1 and
          r.bundle.records[1].configs[0].flags == 0 and
          any("programmatic dependent launch left out for 1 config:" in x for x in r.warnings),
          "report: pdl, the one launch whose config keeps the pdl flag (%s, %s), the one that never waits cleared "
          "with a warning" % (r.pdl, r.pdl_launches))
    r = World().build()
    check(r.pdl is False and r.pdl_launches == 0, "report: pdl off, no launch with the flag")
    # the workspace: a life that ends just before a launch with the flag planned one step longer
    saved, seen = M.plan_workspace, []
    M.plan_workspace = lambda bufs: seen.append(list(bufs)) or saved(bufs)
    try:
        lives = []
        for flag in (0, tb.CONFIG_PDL):
            w = World()  # steps: 0 mm, 1 memset, 2 atomic, 3 copy, 4 bn, 5 empty
            w.ex.cap.bundle().kernels[1].artifacts.append(tb.Artifact("k_mm.ptx", b"griddepcontrol.wait;"))
            w.ex.cap.bundle().kernels.append(tb.Kernel("h_k_bn", 0, [tb.Artifact("k_bn.ptx", b"griddepcontrol.wait;")]))
            for k in (0, 2):  # mm (the first step: no life ends before it) and bn (buf0's ends just before it)
                w.ex.cap.bundle().records[k].configs[0].flags |= flag
            r = w.build()
            prog = r.bundle.program
            pdl_at = {k for k, st in enumerate(prog.steps) if st.kind == M.LAUNCH and
                      r.bundle.records[st.record].configs[st.config].flags & tb.CONFIG_PDL}
            lives.append([(b.first, b.last) for b in prog.buffers])
            skip = {k for k, st in enumerate(prog.steps) if st.kind != M.LAUNCH and st.count == 0}
            longer = M.pdl_lives(lives[-1], pdl_at, skip)
            check(len(seen) == len(lives) and lives[-1] and [(f, l) for _, f, l in seen[-1]] == longer and
                  (longer != lives[-1] if flag else pdl_at == set()) and
                  (not flag or any(l + 1 not in pdl_at for _, l in lives[-1])),
                  "workspace: %s (planned %s, recorded %s, launches with the flag at %s)" % (
                      "a life that ends just before a launch with the pdl flag planned one step longer, the others "
                      "and the recorded lives as they are" if flag else "without pdl launches, planned as recorded",
                      seen[-1], lives[-1], sorted(pdl_at)))
    finally:
        M.plan_workspace = saved


def split_argmax():
    """options["split_argmax"] (2.12): the chunks an argmax's row is cut
    into, and the split's answer (its two stages done in Python here, as the
    decomposition does them in torch) against one argmax, on rows made to
    catch a wrong split."""
    from triton_bundle import inductor as I
    check(M.EXPORT_OPTIONS["split_argmax"] is True, "options['split_argmax'] is True by default")
    for n, rows, want in ((128256, 1, (64, 2004)), (50001, 4, (48, 1042)), (32768, 1, (32, 1024)),
                          (32767, 1, None), (128256, 9, None), (128256, 0, None), (151936, 8, (64, 2374))):
        check(I.split_arg_shape(n, rows) == want, "split_argmax: a row of %d in %d row(s): %s" % (n, rows, want))
    bad = [n for n in range(32768, 1 << 20, 997)
           for s_, c in [I.split_arg_shape(n, 1)] if not ((s_ - 1) * c < n <= s_ * c and s_ <= 64 and c >= 1024)]
    check(not bad, "split_argmax: every row from 32,768 to 1 Mi is cut into at most 64 chunks of 1,024 or more, the "
          "last holding one element of the row at least (%s)" % bad[:3])
    nan, inf = float("nan"), float("inf")

    def first(v, largest):  # Inductor's argmax: NaN the largest (argmin's smallest), ties to the first
        best = 0
        for i, x in enumerate(v):
            b = v[best]
            if b != b:
                break
            if x != x or (x > b if largest else x < b):
                best = i
        return best

    def split(v, largest):
        s_, c = I.split_arg_shape(len(v), 1)
        p = list(v) + [-inf if largest else inf] * (s_ * c - len(v))
        at = [first(p[k * c:(k + 1) * c], largest) for k in range(s_)]
        j = first([p[k * c + at[k]] for k in range(s_)], largest)
        return j * c + at[j]
    rows = []
    r = [float((i * 7919) % 1000) for i in range(50001)]
    r[700] = r[30000] = 5000.0
    rows.append(("a tie between chunks", r))
    rows.append(("all -inf", [-inf] * 40000))
    r = [float(i % 97) for i in range(50001)]
    r[1000] = r[40000] = nan
    rows.append(("NaN twice", r))
    r = [0.0] * 50001
    r[50000] = 1.0
    rows.append(("the largest in the padded chunk's last element", r))
    r = [-inf] * 50001
    r[50000] = -inf
    rows.append(("all -inf, padding after", r))
    r = [1.0] * 128256
    rows.append(("all equal", r))
    r = [1.0] * 50001
    r[50000], r[3000], r[20000] = -1.0, 2.0, 2.0
    rows.append(("argmin's answer the last element, argmax's a tie", r))
    for what, v in rows:
        for largest in (True, False):
            check(split(v, largest) == first(v, largest), "split_argmax: %s (%s): the split's index %d, one "
                  "argmax's %d" % (what, "argmax" if largest else "argmin", split(v, largest), first(v, largest)))


class _Node:
    """A stand-in for an FX node of Dynamo's graph (op, target, args,
    kwargs, users, meta["example_value"])."""

    def __init__(self, op, target, args=(), kwargs=None, shape=None, dtype=None):
        self.op, self.target, self.args, self.kwargs = op, target, tuple(args), dict(kwargs or {})
        self.users = {}
        self.meta = {"example_value": types.SimpleNamespace(shape=shape, dtype=dtype)} if shape is not None else {}
        for a in self.args:
            if isinstance(a, _Node):
                a.users[self] = None


def _eager_graph(t, mask=True, dropout=True, heads=32, kv_heads=8, q_len=1, extra_user=False, to_dtype=None,
                 scale=0.125, repeat=True, s=256, d=64, rope=False):
    """The nodes of transformers' eager attention as Dynamo records them
    (stand-ins; targets from t) and the final matmul; with rope, q is the
    rotary embedding of a placeholder x (by cos and sin)."""
    fn, bf16 = t["fn"], "bf16"
    mm, sm, dr, mul, add = (next(iter(fn[r])) for r in ("matmul", "softmax", "dropout", "mul", "add"))
    getitem = next(iter(fn["getitem"]))
    full = slice(None)
    q = _Node("placeholder", "q", shape=(1, heads, q_len, d), dtype=bf16)
    nodes = [q]
    if rope:
        x, q = q, None
        x.target = "x"
        cos, sin = (_Node("placeholder", n, shape=(1, q_len, d), dtype=bf16) for n in ("cos", "sin"))
        nodes += [cos, sin]
        cos, sin = (_Node("call_method", "unsqueeze", (c, 1), shape=(1, 1, q_len, d), dtype=bf16) for c in (cos, sin))
        half = (1, heads, q_len, d // 2)
        hi = _Node("call_function", getitem, (x, (Ellipsis, slice(d // 2, None, None))), shape=half, dtype=bf16)
        lo = _Node("call_function", getitem, (x, (Ellipsis, slice(None, d // 2, None))), shape=half, dtype=bf16)
        neg = _Node("call_function", next(iter(fn["neg"])), (hi,), shape=(1, heads, q_len, d // 2), dtype=bf16)
        cat = _Node("call_function", next(iter(fn["cat"])), ((neg, lo),), {"dim": -1}, shape=(1, heads, q_len, d),
                    dtype=bf16)
        cat.users, neg.users[cat], lo.users[cat] = {}, None, None  # a tuple argument: its nodes' user by hand
        p1 = _Node("call_function", mul, (x, cos), shape=(1, heads, q_len, d), dtype=bf16)
        p2 = _Node("call_function", mul, (cat, sin), shape=(1, heads, q_len, d), dtype=bf16)
        q = _Node("call_function", add, (p1, p2), shape=(1, heads, q_len, d), dtype=bf16)
        nodes += [cos, sin, hi, lo, neg, cat, p1, p2, q]  # (each unsqueeze of cos and sin, the placeholders before)

    def rep(name):
        src = _Node("placeholder", name, shape=(1, kv_heads, s, d), dtype=bf16)
        if not repeat:
            return [src], src
        n = heads // kv_heads
        g = _Node("call_function", getitem, (src, (full, full, None, full, full)), shape=(1, kv_heads, 1, s, d),
                  dtype=bf16)
        e = _Node("call_method", "expand", (g, 1, kv_heads, n, s, d), shape=(1, kv_heads, n, s, d), dtype=bf16)
        r = _Node("call_method", "reshape", (e, 1, heads, s, d), shape=(1, heads, s, d), dtype=bf16)
        return [src, g, e, r], r
    kn, k = rep("k")
    vn, v = rep("v")
    nodes += kn + vn
    kt = _Node("call_method", "transpose", (k, 2, 3), shape=(1, heads, d, s), dtype=bf16)
    sc = _Node("call_function", mm, (q, kt), shape=(1, heads, q_len, s), dtype=bf16)
    x = _Node("call_function", mul, (sc, scale), shape=(1, heads, q_len, s), dtype=bf16)
    nodes += [kt, sc, x]
    if mask:
        m = _Node("placeholder", "mask", shape=(1, 1, q_len, s), dtype=bf16)
        x = _Node("call_function", add, (x, m), shape=(1, heads, q_len, s), dtype=bf16)
        nodes += [m, x]
    p = _Node("call_function", sm, (x,), {"dim": -1, "dtype": "f32"}, shape=(1, heads, q_len, s), dtype="f32")
    p2 = _Node("call_method", "to", (p, to_dtype or bf16), shape=(1, heads, q_len, s), dtype=bf16)
    nodes += [p, p2]
    if extra_user:
        nodes.append(_Node("output", "output", (p2,)))
    if dropout:
        p2 = _Node("call_function", dr, (p2,), {"p": 0.0, "training": False}, shape=(1, heads, q_len, s), dtype=bf16)
        nodes.append(p2)
    out = _Node("call_function", mm, (p2, v), shape=(1, heads, q_len, d), dtype=bf16)
    nodes.append(out)
    return nodes, out


def decode_attention():
    """inductor.find_decode_attention on stand-ins for Dynamo's nodes:
    transformers' eager attention with one query is found (its arguments,
    the nodes left unused); anything else is not."""
    from triton_bundle import inductor as ind
    t = {"fn": {r: {object()} for r in ("matmul", "softmax", "dropout", "mul", "add", "getitem", "transpose",
                                        "reshape", "cat", "neg")},
         "method": {"matmul": {"matmul"}, "softmax": {"softmax"}, "mul": {"mul"}, "add": {"add"},
                    "transpose": {"transpose"}, "reshape": {"reshape", "view"}, "to": {"to"}, "expand": {"expand"},
                    "neg": {"neg"}, "unsqueeze": {"unsqueeze"}},
         "half": {"bf16", "f16"}, "float32": "f32"}
    nodes, out = _eager_graph(t)
    found = ind.find_decode_attention(nodes, t)
    check(len(found) == 1, "decode_attention: transformers' eager attention found once (%d)" % len(found))
    if found:
        a = found[0]
        check(a.final is out and a.q.target == "q" and a.k.target == "k" and a.v.target == "v" and
              a.mask.target == "mask" and a.scale == 0.125 and a.group == 4,
              "decode_attention: q, the unrepeated k and v, the mask, the scale and the group of 4")
        check(len(a.nodes) == 14 and a.nodes[0] is out and all(isinstance(n, _Node) for n in a.nodes),
              "decode_attention: the 14 nodes it leaves unused, the final product first (%d)" % len(a.nodes))
    for what, kw, want in (("no mask, no dropout", {"mask": False, "dropout": False}, 1),
                           ("heads not repeated", {"repeat": False, "kv_heads": 32}, 1),
                           ("512 positions", {"s": 512}, 1),
                           ("513 positions (Inductor's kernels)", {"s": 513}, 0),
                           ("a prefill (8 queries)", {"q_len": 8}, 0),
                           ("the probabilities also an output", {"extra_user": True}, 0),
                           ("softmax back to float16, not q's bfloat16", {"to_dtype": "f16"}, 0),
                           ("an integer scale", {"scale": 1}, 0)):
        nodes, out = _eager_graph(t, **kw)
        got = len(ind.find_decode_attention(nodes, t))
        check(got == want, "decode_attention: %s: %s (%d found)" % (what, "found" if want else "left as it is", got))
    nodes, out = _eager_graph(t)
    nodes[0].meta["example_value"].shape = (1, 32, 1, 48)
    check(not ind.find_decode_attention(nodes, t), "decode_attention: a head of 48 (not a power of two) left")
    nodes, out = _eager_graph(t)
    nodes[0].meta["example_value"].shape = (1, 32, 1, object())
    check(not ind.find_decode_attention(nodes, t), "decode_attention: a symbolic size left as it is")
    nodes, out = _eager_graph(t)
    nodes[0].meta["example_value"].stride = lambda: (2048, 64, 2048, 32)
    check(not ind.find_decode_attention(nodes, t), "decode_attention: a query whose last stride is not 1 left")
    nodes[0].meta["example_value"].stride = lambda: (2048, 64, 2048, 1)
    check(len(ind.find_decode_attention(nodes, t)) == 1, "decode_attention: a query whose last stride is 1 found")
    nodes, out = _eager_graph(t)
    drop = [n for n in nodes if n.kwargs.get("training") is False][0]
    drop.kwargs.update(p=0.1, training=True)
    check(not ind.find_decode_attention(nodes, t), "decode_attention: a dropout that drops left as it is")
    for what, change in (
            ("a query that requires grad (the op has no backward)",
             lambda ns: setattr(ns[0].meta["example_value"], "requires_grad", True)),
            ("a query on the CPU", lambda ns: setattr(ns[0].meta["example_value"], "device",
                                                      types.SimpleNamespace(type="cpu"))),
            ("an output of another dtype (autocast)", lambda ns: setattr(ns[-1].meta["example_value"], "dtype", "f16")),
            ("a repeat_kv whose reshape is not its expansion's", lambda ns: setattr(
                [n for n in ns if n.target == "reshape"][0].meta["example_value"], "shape", (1, 16, 512, 64))),
            ("a dropout given its input by keyword",
             lambda ns: _by_keyword([n for n in ns if "training" in n.kwargs][0])),
            ("a product with v into out=", lambda ns: ns[-1].kwargs.update(out=object())),
            ("a node with no example value", lambda ns: ns[-1].meta.clear())):
        nodes, out = _eager_graph(t)
        change(nodes)
        check(not ind.find_decode_attention(nodes, t), "decode_attention: %s left as it is" % what)
    for d, s_, want in ((128, 256, 1), (256, 128, 1), (256, 256, 0), (16, 512, 1)):
        nodes, out = _eager_graph(t, s=s_, d=d)
        got = len(ind.find_decode_attention(nodes, t))
        check(got == want, "decode_attention: heads of %d at %d positions: %s (a block of %d elements, at most %d)" % (
            d, s_, "found" if want else "left as it is", d * s_, ind.DECODE_ATTENTION_BLOCK))
    rope_checks(t)
    attention_refusals()
    quiet_analysis()


def quiet_analysis():
    """inductor._quiet_asm_analysis drops PyTorch's warning about the
    kernel's inline assembly while a graph with attentions replaced
    compiles, and nothing else, and nothing once it is done."""
    import logging
    from triton_bundle import inductor as ind
    log = ind._quiet_asm_analysis(1).log
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())
    h = Keep()
    log.addHandler(h)
    old, log.propagate = log.propagate, False
    try:
        def warn(what):
            try:
                raise RuntimeError(what)
            except RuntimeError:
                log.warning("Encountered an exception in identify_mutated_tensors, assuming every input is mutated",
                            exc_info=True)
        with ind._quiet_asm_analysis(1):
            warn("ttir analysis hit an op we do not know how to analyze: tt.elementwise_inline_asm")
            warn("ttir analysis hit an op we do not know how to analyze: tt.something_else")
            log.warning("another warning")
        with ind._quiet_asm_analysis(0):
            warn("ttir analysis hit an op we do not know how to analyze: tt.elementwise_inline_asm")
        warn("ttir analysis hit an op we do not know how to analyze: tt.elementwise_inline_asm")
    finally:
        log.removeHandler(h)
        log.propagate = old
    check(isinstance(log, logging.Logger) and ind._quiet_asm_analysis(0).log is None and
          len(seen) == 4 and seen[1] == "another warning" and not log.filters,
          "decode_attention: the analysis's warning about inline assembly dropped while a graph with attentions "
          "replaced compiles (%d of 5 warnings kept: another op's, another warning, with none replaced, after)" %
          len(seen))


def rope_checks(t):
    """The rotary embedding of q found with the attention (the op applies
    it), and left to Inductor where it is not transformers' exactly."""
    from triton_bundle import inductor as ind
    nodes, out = _eager_graph(t, rope=True)
    found = ind.find_decode_attention(nodes, t)
    check(len(found) == 1 and found[0].q.target == "x" and found[0].cos.target == "cos" and
          found[0].sin.target == "sin" and len(found[0].nodes) == 21 and found[0].nodes[14].target in t["fn"]["add"],
          "decode_attention: q's rotary embedding found with it: the query before it, cos and sin before each "
          "layer's unsqueeze, its 7 nodes left unused after the attention's 14")
    nodes, out = _eager_graph(t, rope=True)
    [n for n in nodes if n.target == "cos"][0].meta["example_value"].shape = (1, 2, 64)
    found = ind.find_decode_attention(nodes, t)
    check(len(found) == 1 and found[0].cos.target == "unsqueeze" and found[0].sin.target == "sin",
          "decode_attention: a cos whose unsqueeze is not [B, 1, D] -> [B, 1, 1, D] passed as the unsqueeze gives it")

    def swap_products(ns):
        q = [n for n in ns if n.target in t["fn"]["add"] and n.args[0].target in t["fn"]["mul"]][0]
        q.args = q.args[::-1]
        for p in q.args:
            p.args = p.args[::-1]
    for what, change, folded in (
            ("each product's operands and the sum's swapped", swap_products, True),
            ("halves cat((-lo, hi)): another rotation", lambda ns: [n for n in ns if n.target in t["fn"]["neg"]][0]
             .__setattr__("args", ([n for n in ns if n.target in t["fn"]["getitem"] and
                                    n.args[1][1].start is None][0],)), False),
            ("the embedded query used again", lambda ns: ns.append(_Node("output", "output", (
                [n for n in ns if n.target in t["fn"]["add"] and n.args[0].target in t["fn"]["mul"]][0],))), False),
            ("cos per head [1, 32, 1, 64]", lambda ns: setattr(
                [n for n in ns if n.target == "unsqueeze"][0].meta["example_value"], "shape", (1, 32, 1, 64)), False),
            ("sin in float32", lambda ns: setattr(
                [n for n in ns if n.target == "unsqueeze"][1].meta["example_value"], "dtype", "f32"), False),
            ("x with a last stride of 2", lambda ns: setattr(
                [n for n in ns if n.target == "x"][0].meta["example_value"], "stride", lambda: (2048, 64, 2048, 2)),
             False)):
        nodes, out = _eager_graph(t, rope=True)
        change(nodes)
        found = ind.find_decode_attention(nodes, t)
        check(len(found) == 1 and (found[0].cos is not None) == folded and
              (found[0].q.target == "x") == folded,
              "decode_attention: %s: the attention found, the rotary embedding %s" % (
                  what, "applied by the op" if folded else "left to Inductor"))


def _by_keyword(node):
    node.kwargs["input"] = node.args[0]
    node.args = ()


def attention_refusals():
    """attention.refusal: what the op refuses before its kernel would
    index the arguments wrongly (stand-ins for tensors: no torch here)."""
    from triton_bundle import attention as A

    def ten(shape, dtype="bf16", last=1):
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        strides[-1] = last
        return types.SimpleNamespace(shape=tuple(shape), dtype=dtype, dim=lambda: len(shape),
                                     stride=lambda i: strides[i])
    dts = ("f16", "bf16")
    q, k, m = ten((1, 32, 1, 64)), ten((1, 8, 256, 64)), ten((1, 1, 1, 256))
    check(A.refusal(q, k, k, m, 4, 512, dts) is None and A.refusal(q, k, k, None, 4, 512, dts) is None,
          "decode_attention: the op takes q [1, 32, 1, 64], k and v [1, 8, 256, 64], a group of 4, with a mask and "
          "without")
    for what, args in (("a group that does not make H", (q, k, k, m, 2)),
                       ("v not k's shape", (q, k, ten((1, 8, 255, 64)), m, 4)),
                       ("two queries", (ten((1, 32, 2, 64)), k, k, m, 4)),
                       ("a head of 48", (ten((1, 32, 1, 48)), ten((1, 8, 256, 48)), ten((1, 8, 256, 48)), m, 4)),
                       ("513 positions", (q, ten((1, 8, 513, 64)), ten((1, 8, 513, 64)), ten((1, 1, 1, 513)), 4)),
                       ("float32", (ten((1, 32, 1, 64), "f32"), ten((1, 8, 256, 64), "f32"),
                                    ten((1, 8, 256, 64), "f32"), None, 4)),
                       ("k of another dtype", (q, ten((1, 8, 256, 64), "f16"), k, m, 4)),
                       ("a key's last stride 2", (q, ten((1, 8, 256, 64), last=2), k, m, 4)),
                       ("a mask of 255 positions", (q, k, k, ten((1, 1, 1, 255)), 4)),
                       ("a mask per query (2 rows)", (q, k, k, ten((1, 1, 2, 256)), 4)),
                       ("a float16 mask", (q, k, k, ten((1, 1, 1, 256), "f16"), 4)),
                       ("no heads", (ten((1, 0, 1, 64)), ten((1, 0, 256, 64)), ten((1, 0, 256, 64)), None, 4)),
                       ("a 3-D query", (ten((32, 1, 64)), k, k, m, 4)),
                       ("256 positions of 256 (a block of 65,536)",
                        (ten((1, 32, 1, 256)), ten((1, 8, 256, 256)), ten((1, 8, 256, 256)), m, 4))):
        why = A.refusal(*(args + (512, dts, 32768)))
        check(why is not None, "decode_attention: the op refuses %s (%s)" % (what, why))
    c = ten((1, 1, 1, 64))
    check(A.refusal(q, k, k, m, 4, 512, dts, 32768, c, c) is None and
          A.refusal(q, k, k, m, 4, 512, dts, 32768, ten((1, 1, 64)), ten((1, 1, 64))) is None,
          "decode_attention: the op takes cos and sin [1, 1, 1, 64] and [1, 1, 64]")
    for what, cs in (("cos without sin", (c, None)), ("cos per head", (ten((1, 32, 1, 64)), c)),
                     ("sin of 32", (c, ten((1, 1, 1, 32)))), ("cos in float16", (ten((1, 1, 1, 64), "f16"), c)),
                     ("sin with a last stride of 2", (c, ten((1, 1, 1, 64), last=2))), ("2-D cos", (ten((1, 64)), c)),
                     ("3-D sin of 2 rows", (c, ten((1, 2, 64))))):
        why = A.refusal(q, k, k, m, 4, 512, dts, 32768, *cs)
        check(why is not None, "decode_attention: the op refuses %s (%s)" % (what, why))


def _mlp_graph(t, rows=1, order=False, inplace=False, dtype="bf16", k=2048, f=8192, consumer="linear",
               silu_users=1, mul_users=1):
    """transformers' LlamaMLP as Dynamo records it (stand-ins; targets from
    t): down(silu(gate(x)) * up(x)); the nodes and the mul."""
    fn = t["fn"]
    lin, silu, mul = (next(iter(fn[r])) for r in ("linear", "silu", "mul"))
    x = _Node("placeholder", "x", shape=(1, rows, k), dtype=dtype)
    wg, wu = (_Node("placeholder", n, shape=(f, k), dtype=dtype) for n in ("wg", "wu"))
    wd = _Node("placeholder", "wd", shape=(k, f), dtype=dtype)
    g = _Node("call_function", lin, (x, wg, None), shape=(1, rows, f), dtype=dtype)
    u = _Node("call_function", lin, (x, wu, None), shape=(1, rows, f), dtype=dtype)
    sl = _Node("call_function", silu, (g,), {"inplace": inplace}, shape=(1, rows, f), dtype=dtype)
    m = _Node("call_function", mul, (u, sl) if order else (sl, u), shape=(1, rows, f), dtype=dtype)
    m.meta["example_value"].stride = lambda: (rows * f, f, 1)
    nodes = [x, wg, wu, wd, g, u, sl, m]
    for _ in range(silu_users - 1):
        nodes.append(_Node("output", "output", (sl,)))
    for _ in range(mul_users - 1):
        nodes.append(_Node("output", "output", (m,)))
    if consumer == "linear":
        nodes.append(_Node("call_function", lin, (m, wd, None), shape=(1, rows, k), dtype=dtype))
    else:
        nodes.append(_Node("call_function", next(iter(fn["mul"])), (m, 2.0), shape=(1, rows, f), dtype=dtype))
    return nodes, m


def store_activation():
    """inductor.find_activations on stand-ins for Dynamo's nodes:
    SiLU(gate) * up as the input of a one-row product is found (either
    order); a prefill's, an in-place SiLU, an activation or SiLU used
    twice, one not feeding a product, of float32 or of a symbolic size are
    not."""
    from triton_bundle import inductor as ind
    t = {"fn": {r: {object()} for r in ("linear", "silu", "mul")}, "method": {"mul": {"mul"}},
         "half": {"bf16", "f16"}}
    for order in (False, True):
        nodes, m = _mlp_graph(t, order=order)
        got = ind.find_activations(nodes, t)
        check(got == [m], "store_activation: SiLU(gate) * up before the down product found (%s first; %d)" % (
            "up" if order else "SiLU", len(got)))
    nodes, m = _mlp_graph(t, dtype="f16")
    check(ind.find_activations(nodes, t) == [m], "store_activation: float16 found")
    for what, kw in (("a prefill's (16 rows)", {"rows": 16}), ("an in-place SiLU", {"inplace": True}),
                     ("float32", {"dtype": "f32"}), ("a SiLU used twice", {"silu_users": 2}),
                     ("an activation used twice", {"mul_users": 2}),
                     ("an activation not feeding a product", {"consumer": "mul"})):
        nodes, m = _mlp_graph(t, **kw)
        check(not ind.find_activations(nodes, t), "store_activation: %s left as it is" % what)
    nodes, m = _mlp_graph(t)
    nodes[7].meta["example_value"].shape = (1, "s0", 8192)
    check(not ind.find_activations(nodes, t), "store_activation: an activation of a symbolic size left as it is")
    nodes, m = _mlp_graph(t)
    nodes[4].meta["example_value"].shape = (1, 1, 4096)
    check(not ind.find_activations(nodes, t), "store_activation: gate and up of other shapes left as they are")
    nodes, m = _mlp_graph(t)
    m.meta["example_value"].stride = lambda: ("s1", 8192, 1)
    check(not ind.find_activations(nodes, t), "store_activation: an activation of symbolic strides left as it is")
    nodes, m = _mlp_graph(t)
    m.kwargs = {"out": None}
    check(not ind.find_activations(nodes, t), "store_activation: a mul with keyword arguments left as it is")
    nodes, m = _mlp_graph(t)
    nodes[6].args, nodes[6].kwargs = (nodes[6].args[0], True), {}
    check(not ind.find_activations(nodes, t), "store_activation: SiLU in place (a positional flag) left as it is")
    nodes, m = _mlp_graph(t)
    del nodes[7].meta["example_value"]
    check(not ind.find_activations(nodes, t), "store_activation: a node without an example value left (no error)")


def main():
    helpers()
    program_checks()
    refusals()
    options()
    merge()
    weights_check()
    narrow_configs()
    program_tuning()
    pdl()
    combo()
    split_argmax()
    decode_attention()
    store_activation()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
