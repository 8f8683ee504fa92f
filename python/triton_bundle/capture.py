"""The capture run of an export: _Recorder, what the run did besides the
Triton launches (memsets, copies, the constants found at their first use,
the aten operations outside Triton), and the hooks that report each aten
operation to it (a TorchDispatchMode, or Tensor methods patched), and the
profiler's GPU operations in order. model.py's _Export runs them."""

import collections
import contextlib

from .spec import BundleError
from .steps import is_dense, memset_pattern
from .tensors import _element_bytes, _storage_of, _storage_to_host, _tensors_in

# aten operations that run no GPU work (views, metadata, allocation): they
# are not reported as operations outside Triton
_NO_GPU_WORK = {
    "empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "view", "_unsafe_view", "as_strided",
    "alias", "detach", "t", "permute", "transpose", "expand", "squeeze", "unsqueeze", "select", "slice", "split",
    "split_with_sizes", "unbind", "_reshape_alias", "reshape", "set_", "resize_", "lift_fresh", "sym_size",
    "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size", "record_stream", "_to_copy_noop",
    "unflatten", "flatten", "narrow", "diagonal", "real", "imag", "view_as", "expand_as", "movedim", "unfold",
    "_reinterpret_tensor", "_nested_view_from_buffer", "contiguous", "size", "stride", "dim", "numel"}


class _Recorder:
    """What the capture run did: its memsets and copies (each with the
    number of launches before it), the constants found at their first use,
    the aten operations outside Triton, and a reference to every tensor an
    operation touched (so that no address is reused within the run)."""

    def __init__(self, torch, known, pre_blocks):
        self.torch = torch
        self.known = known            # storage data_ptrs of inputs and module constants
        self.pre_blocks = pre_blocks  # allocator blocks allocated before the run
        self.cap = None
        self.events = []              # (position, kind, payload)
        self.external = collections.OrderedDict()  # data_ptr -> {tensor, host, dtype}
        self.aten_ops = collections.OrderedDict()  # op name -> count
        self.problems = []
        self.keep = []
        self.quiet = False            # set while the recorder itself runs torch operations
        self.sites = None             # (dynamic shapes) a dynamic.Sites: each operation's wrapper line
        self._launcher_names = {}

    def position(self):
        return len(self.cap.launches) if self.cap is not None else 0

    def hold(self, obj):
        self.keep += _tensors_in(self.torch, obj, [])

    def touch(self, t):
        """A device tensor an operation is about to use: when its storage
        existed before the run and is neither an input nor a module constant
        (a tensor attribute, an Inductor constant), its bytes are read now,
        before anything writes them."""
        if t.device.type != "cuda":
            return
        sptr, n = _storage_of(t)
        if sptr == 0 or sptr in self.known or sptr in self.external or sptr not in self.pre_blocks:
            return
        self.quiet = True
        try:
            host = _storage_to_host(self.torch, t)
        finally:
            self.quiet = False
        self.external[sptr] = {"tensor": t, "host": host, "touched": True}
        if n:
            self.events.append((self.position(), "snapshot", sptr))

    def before_launch(self, tuner, args):
        if self.sites is not None:
            self.sites.launch[self.position()] = self.sites.site(self._names_of(tuner))
        for a in args:
            if self.torch.is_tensor(a):
                self.keep.append(a)
                self.touch(a)

    def _names_of(self, tuner):
        """The launcher's parameters (the wrapper passes them positionally)
        and the names of its grid values."""
        import inspect
        launcher = tuner.launchers[0]
        k = id(launcher)
        if k not in self._launcher_names:
            self._launcher_names[k] = [n for n in inspect.signature(launcher).parameters if n != "stream"]
        return {"names": self._launcher_names[k], "extra": list(tuner.inductor_meta.get("extra_launcher_args", []))}

    def on_op(self, name, base, args, kwargs):
        """An aten operation (before it runs): name "aten.zero_.default",
        base "zero_"."""
        torch = self.torch
        self.hold((args, kwargs))
        if base in ("zero_", "fill_"):
            value = 0 if base == "zero_" else (args[1] if len(args) > 1 else kwargs.get("value"))
            self._memset(name, args[0], value)
        elif base == "copy_":
            self._copy(name, args[0], args[1] if len(args) > 1 else kwargs.get("src"))
        elif base not in _NO_GPU_WORK:
            self.aten_ops[name] = self.aten_ops.get(name, 0) + 1
            for t in _tensors_in(torch, (args, kwargs), []):
                self.touch(t)

    def _memset(self, name, dst, value):
        torch = self.torch
        if not torch.is_tensor(dst) or dst.device.type != "cuda":
            self.aten_ops[name] = self.aten_ops.get(name, 0) + 1
            return
        self.touch(dst)
        n = dst.numel()
        if n == 0:
            return
        if not is_dense(dst.shape, dst.stride()):
            self.problems.append("%s of a tensor of shape %s and strides %s, which is not dense: no memset sets it"
                                 % (name, list(dst.shape), list(dst.stride())))
            return
        if torch.is_tensor(value) and value.device.type != "cpu":
            self.problems.append("%s with a value held on the device: its value is not known when exporting" % name)
            return
        self.quiet = True
        try:
            element = _element_bytes(torch, value, dst.dtype)
        except Exception as e:  # noqa: BLE001 - reported with the others after the run
            self.problems.append("%s of %r into %s: %s: %s" % (name, value, dst.dtype, type(e).__name__, e))
            return
        finally:
            self.quiet = False
        try:
            width, pattern, repeat = memset_pattern(element)
        except BundleError as e:
            self.problems.append("%s (%s): %s" % (name, dst.dtype, e))
            return
        self.events.append((self.position(), "memset", {
            "dst": dst, "width": width, "value": pattern, "count": n * repeat, "name": name,
            "site": self.sites.site() if self.sites is not None else None}))

    def _copy(self, name, dst, src):
        torch = self.torch
        if not (torch.is_tensor(dst) and torch.is_tensor(src)) or dst.device.type != "cuda" or \
                src.device != dst.device:
            self.problems.append("%s from %s to %s: only copies within one GPU become steps" % (
                name, getattr(src, "device", src), getattr(dst, "device", dst)))
            return
        self.touch(src)
        self.touch(dst)
        if dst is src or dst.numel() == 0:
            return  # aten copies nothing
        if src.dtype != dst.dtype or tuple(src.shape) != tuple(dst.shape) or src.stride() != dst.stride() or \
                not is_dense(dst.shape, dst.stride()):
            self.problems.append("%s from %s %s strides %s to %s %s strides %s: not a plain byte copy (a cast, a "
                                 "broadcast or a strided copy)" % (name, src.dtype, list(src.shape),
                                                                   list(src.stride()), dst.dtype, list(dst.shape),
                                                                   list(dst.stride())))
            return
        count = dst.numel() * dst.element_size()
        if _storage_of(src)[0] == _storage_of(dst)[0] and abs(src.data_ptr() - dst.data_ptr()) < count:
            self.problems.append("%s between overlapping bytes of one tensor" % name)
            return
        self.events.append((self.position(), "copy", {"dst": dst, "src": src, "count": count, "name": name,
                                                      "site": self.sites.site() if self.sites is not None else None}))


def _dispatch_mode(torch, rec):
    """A TorchDispatchMode that hands every aten operation to rec. It
    declares ignore_compile_internals(): Dynamo then masks the Python
    dispatch keys it adds when checking guards (torch/csrc/dynamo/guards.h,
    get_is_in_mode_without_ignore_compile_internals), so the compiled code
    runs rather than an eager fallback, and the operations of the compiled
    code's runtime still reach it."""
    from torch.utils._python_dispatch import TorchDispatchMode
    if not hasattr(TorchDispatchMode, "ignore_compile_internals"):
        raise BundleError("unsupported", "this PyTorch's TorchDispatchMode has no ignore_compile_internals, so a mode "
                          "makes Dynamo run the model eagerly: pass options={'intercept': 'methods'}")

    class _OpLog(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls):
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if not rec.quiet:
                name = str(func)
                packet = getattr(func, "overloadpacket", None)
                base = getattr(packet, "__name__", name.split(".")[1] if name.count(".") >= 2 else name)
                rec.on_op(name, base, args, kwargs)
            out = func(*args, **kwargs)
            if not rec.quiet:
                rec.hold(out)
            return out

    return _OpLog()


@contextlib.contextmanager
def _method_hooks(torch, rec):
    """Tensor.zero_, fill_ and copy_ reported to rec: the calls Inductor's
    Python wrapper emits for them (codegen/wrapper.py: make_zero_buffer
    writes `buf.zero_()`, codegen_device_copy `dst.copy_(src, non_blocking)`).
    Other aten operations are not seen this way; the profiler still sees
    the GPU work they do."""
    T = torch.Tensor
    own = {n: T.__dict__.get(n) for n in ("zero_", "fill_", "copy_")}

    def hook(n, f):
        def method(self, *args, **kwargs):
            if not rec.quiet:
                rec.on_op("aten.%s" % n, n, (self,) + args, kwargs)
            return f(self, *args, **kwargs)
        return method
    for n in own:
        setattr(T, n, hook(n, getattr(T, n)))
    try:
        yield
    finally:
        for n, f in own.items():
            if f is None:
                delattr(T, n)
            else:
                setattr(T, n, f)


def _gpu_events(prof):
    """The names of the GPU operations (kernels, memsets, memcpys) the
    profiler saw, in the order they ran; user annotations left out."""
    evs = []
    for e in prof.events():
        if str(getattr(e, "device_type", "")).split(".")[-1] != "CUDA":
            continue
        if getattr(e, "is_user_annotation", False):
            continue
        evs.append((e.time_range.start, e.name))
    evs.sort(key=lambda x: x[0])
    return [n for _, n in evs]
