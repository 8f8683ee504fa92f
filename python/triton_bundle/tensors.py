"""What an export reads of torch's tensors and modules, torch passed in
(none of it imports torch at import time): dtypes by the format's names,
storages and their bytes to and from the host, one element's bytes as
fill_ converts a value, the tensors of a pytree and of a model's outputs,
the module behind a compiled callable, its constants and tensor
attributes, names for tensors held elsewhere, the allocator's live blocks
and Dynamo's frame count."""

import struct

from .spec import DTYPE_BY_NAME, BundleError

def _dtype_name(torch, dt, what):
    name = str(dt).replace("torch.", "")
    if name not in DTYPE_BY_NAME:
        raise BundleError("unsupported_type", "%s: dtype %s has no number in the format (FORMAT.md's dtype table)"
                          % (what, name))
    return name


def _storage_of(t):
    st = t.untyped_storage()
    return st.data_ptr(), st.nbytes()


def _storage_to_host(torch, t):
    """A CPU uint8 copy of the whole storage of device tensor t (the copy is
    synchronous: a device-to-host memcpy)."""
    st = t.untyped_storage()
    n = st.nbytes()
    if n == 0:
        return torch.empty(0, dtype=torch.uint8)
    flat = torch.empty(0, dtype=torch.uint8, device=t.device).set_(st, 0, (n,))
    return flat.cpu()


def _host_bytes(host):
    """The bytes of a CPU uint8 tensor, without a copy where numpy is
    there (a view that keeps the tensor alive): a model's weights are then
    in host memory once, not twice."""
    n = host.numel()
    if not n:
        return b""
    try:
        return memoryview(host.numpy()).cast("B")
    except Exception:  # noqa: BLE001 - no numpy
        import ctypes
        return ctypes.string_at(host.data_ptr(), n)


def _storage_from_host(torch, t, host):
    """Writes host (a CPU uint8 tensor of the storage's size) back into the
    storage of t."""
    st = t.untyped_storage()
    n = st.nbytes()
    if n:
        torch.empty(0, dtype=torch.uint8, device=t.device).set_(st, 0, (n,)).copy_(host)


_INT_FORMATS = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
                "uint64": 8}
_FLOAT_FORMATS = {"float16": "<e", "float32": "<f", "float64": "<d"}


def element_bytes(dtype_name, value):
    """The little-endian bytes of one element of dtype `dtype_name` holding
    `value`, for the dtypes whose conversion is exact in the standard
    library (integers and bools in range; float16, 32 and 64, rounded to
    nearest even as fill_ rounds); None for the others (bfloat16, float8),
    which torch converts."""
    if dtype_name in _INT_FORMATS:
        n = _INT_FORMATS[dtype_name]
        if isinstance(value, float):
            if not value.is_integer():
                return None
            value = int(value)
        v = int(value)
        if dtype_name == "bool":
            v = 1 if v else 0
        signed = dtype_name.startswith("int")
        if not (-(1 << (8 * n - 1)) if signed else 0) <= v < (1 << (8 * n - (1 if signed else 0))):
            return None
        return (v & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
    if dtype_name in _FLOAT_FORMATS:
        try:
            return struct.pack(_FLOAT_FORMATS[dtype_name], float(value))
        except (OverflowError, struct.error):
            return None
    return None


def _element_bytes(torch, value, dtype):
    """The bytes of one element of `dtype` holding `value`, converted as
    fill_ converts it: in the standard library where that is exact, else by
    torch.full on the CPU."""
    if torch.is_tensor(value):
        value = value.item()
    b = element_bytes(str(dtype).replace("torch.", ""), value)
    if b is not None:
        return b
    t = torch.full((1,), value, dtype=dtype)
    return bytes(t.view(torch.uint8).tolist())


def _tensors_in(torch, obj, out):
    """The tensors of a (nested) list, tuple or dict, appended to out."""
    if torch.is_tensor(obj):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors_in(torch, x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors_in(torch, x, out)
    return out


_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def output_tensors(out):
    """The tensors a model returned, in order: the leaves of the returned
    pytree (torch.utils._pytree; transformers registers its ModelOutput
    classes as nodes, whose leaves are the fields that are not None); a
    leaf that is a ModelOutput pytree does not know is flattened through
    to_tuple(), a mapping through its values. Plain leaves (None, numbers,
    strings) are left out; any other object is refused, since its tensors
    would be lost (a transformers Cache: pass use_cache=False)."""
    import torch
    from collections.abc import Mapping
    from torch.utils import _pytree as pytree
    result = []
    leaves, _ = pytree.tree_flatten(out)
    for leaf in leaves:
        if torch.is_tensor(leaf):
            result.append(leaf)
        elif isinstance(leaf, _PLAIN) or isinstance(leaf, (torch.dtype, torch.device, torch.Size)):
            continue
        elif callable(getattr(leaf, "to_tuple", None)):
            result += output_tensors(leaf.to_tuple())
        elif isinstance(leaf, Mapping):
            result += output_tensors(list(leaf.values()))
        else:
            raise BundleError("unsupported_type", "the model returns a %s.%s, which is neither a tensor nor a pytree "
                              "of tensors: its tensors would not be outputs (for a transformers model, pass "
                              "use_cache=False, or return the tensors)" % (type(leaf).__module__,
                                                                           type(leaf).__name__))
    return result


def _call_args(torch, example_inputs):
    """(args, kwargs) of the call: a tuple or list is the positional
    arguments, a dict the keyword ones, anything else the one argument."""
    if isinstance(example_inputs, dict):
        return (), dict(example_inputs)
    if isinstance(example_inputs, (list, tuple)):
        return tuple(example_inputs), {}
    return (example_inputs,), {}


def _is_compiled(torch, model):
    from torch._dynamo.eval_frame import OptimizedModule
    if isinstance(model, OptimizedModule):
        return True
    if getattr(model, "_torchdynamo_orig_callable", None) is not None:  # torch.compile(fn)
        return True
    # nn.Module.compile() compiles in place
    return isinstance(model, torch.nn.Module) and getattr(model, "_compiled_call_impl", None) is not None


def _module_of(torch, model):
    """The nn.Module whose parameters and buffers are the model's constants."""
    from torch._dynamo.eval_frame import OptimizedModule
    if isinstance(model, OptimizedModule):
        return model._orig_mod
    if isinstance(model, torch.nn.Module):
        return model
    orig = getattr(model, "_torchdynamo_orig_callable", None)
    if isinstance(orig, torch.nn.Module):
        return orig
    owner = getattr(orig, "__self__", None) or getattr(model, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None


def _module_constants(torch, module):
    """[(name, tensor)] of the module's parameters and buffers on the GPU,
    one per storage (tied weights once), each named by its first FQN."""
    if module is None:
        return []
    seen, out = set(), []
    named = list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))
    for name, t in named:
        if t is None or not torch.is_tensor(t) or t.device.type != "cuda":
            continue
        sptr, _ = _storage_of(t)
        if sptr in seen or sptr == 0:
            continue
        seen.add(sptr)
        out.append((name, t))
    return out


def _tensor_attributes(torch, module):
    """{storage data_ptr: FQN} of tensors held as plain attributes of the
    module's submodules (not parameters or buffers): the names of such
    tensors when a kernel reads them."""
    names = {}
    if module is None:
        return names
    for mname, m in module.named_modules():
        params, bufs = getattr(m, "_parameters", {}), getattr(m, "_buffers", {})
        for k, v in list(vars(m).items()):
            if torch.is_tensor(v) and k not in params and k not in bufs and v.device.type == "cuda":
                sptr, _ = _storage_of(v)
                names.setdefault(sptr, "%s.%s" % (mname, k) if mname else k)
    return names


def _attributes(obj):
    """An object's attributes: its __dict__'s and its classes' __slots__."""
    out = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
    for cls in type(obj).__mro__:
        slots = getattr(cls, "__slots__", ())
        for k in (slots,) if isinstance(slots, str) else slots:
            if k not in out and hasattr(obj, k):
                out[k] = getattr(obj, k)
    return out


def named_tensors(torch, names):
    """{storage data_ptr: name} of the tensors in names ({prefix: a tensor,
    or an object holding tensors}): a tensor is named by its prefix; an
    object's tensors by their path, through lists, tuples, dicts and
    attributes ("kv.layers.0.keys" for a transformers StaticCache's first
    layer's keys), a few levels deep. The first name of a storage wins."""
    out = {}

    def walk(obj, path, depth):
        if torch.is_tensor(obj):
            if obj.device.type == "cuda":
                out.setdefault(_storage_of(obj)[0], path)
            return
        if depth > 4 or obj is None or isinstance(obj, _PLAIN):
            return
        if isinstance(obj, (list, tuple)):
            for i, x in enumerate(obj):
                walk(x, "%s.%d" % (path, i), depth + 1)
        elif isinstance(obj, dict):
            for k, x in obj.items():
                walk(x, "%s.%s" % (path, k), depth + 1)
        elif not isinstance(obj, torch.nn.Module):
            for k, x in _attributes(obj).items():
                if not k.startswith("_"):
                    walk(x, "%s.%s" % (path, k), depth + 1)
    for prefix, obj in (names or {}).items():
        walk(obj, prefix, 0)
    return out


def unique_names(names):
    """The names, each that repeats an earlier one given a suffix (#2, #3):
    a bundle of several programs matches constants by name."""
    seen, out = set(), []
    for n in names:
        m, k = n, 2
        while m in seen:
            m, k = "%s#%d" % (n, k), k + 1
        seen.add(m)
        out.append(m)
    return out


def strip_ir(bundle):
    """Each kernel of bundle keeps only what a runner loads: its .cubin and
    its .json files (the metadata, Triton's group file). The IR and the
    sources (.ttir, .ttgir, .llir, .ptx, .source) go: most of a small
    kernel's bytes."""
    for k in bundle.kernels:
        k.artifacts = [a for a in k.artifacts if a.name.endswith((".cubin", ".json"))]


def _live_blocks(torch, device):
    """The addresses of the caching allocator's allocated blocks on device
    (torch.cuda.memory_snapshot(): segments, each with its blocks in address
    order)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    live = set()
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device", index) != index:
            continue
        addr = seg.get("address", 0)
        for blk in seg.get("blocks", ()):
            a = blk.get("address", addr)
            if str(blk.get("state", "")).startswith("active"):
                live.add(a)
            addr = a + blk.get("size", 0)
    return live


def _dynamo_frames():
    """Dynamo's count of frames it was asked to convert (a cache miss:
    a compilation, a recompilation or an eager fallback)."""
    try:
        from torch._dynamo.utils import counters
        return sum(counters["frames"].values())
    except Exception:  # noqa: BLE001 - only a consistency check
        return None
