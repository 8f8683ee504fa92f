"""Collecting Triton cache directories, as the header's >>fs and >>derive
sections: a kernel from its cache directory (with FORMAT.md's sentinel rule),
and a config derived from its metadata JSON and the caller's exact types."""

import json
import os

from .format import Artifact, Config, Kernel, TensorDesc, _enc, valid_name
from .spec import (CONFIG_COOPERATIVE, CONFIG_PDL, I64_MAX, I64_MIN, MAX_SENTINELS, SENTINEL,  # noqa: F401
                   TRITON_CODES, BundleError)


def collect_kernel(cache_dir, hash, recorded_cache_dir=None, device=0):
    """A kernel from <cache_dir>/<hash>/: every regular file (no links),
    names sorted bytewise, and in each .json file every occurrence of
    <recorded cache dir>/<hash> replaced by [REPLACE] (FORMAT.md's
    sentinel rule)."""
    path = os.path.join(cache_dir, hash)
    rec = (recorded_cache_dir or os.path.abspath(cache_dir)).rstrip("/")
    needle = _enc("%s/%s" % (rec, hash))
    k = Kernel(hash, device)
    for name in sorted(os.listdir(path), key=lambda s: s.encode()):
        full = os.path.join(path, name)
        if os.path.islink(full) or not os.path.isfile(full) or not valid_name(name):
            continue
        with open(full, "rb") as f:
            data = f.read()
        if name.endswith(".json"):
            if SENTINEL in data:
                raise BundleError("sentinel", "%s already holds %s" % (full, SENTINEL.decode()))
            if data.count(needle) > MAX_SENTINELS:
                raise BundleError("limit", "%s names the cache more than %d times" % (full, MAX_SENTINELS))
            data = data.replace(needle, SENTINEL)
        k.artifacts.append(Artifact(name, data))
    return k


def file_stem(names, function):
    """The stem of a kernel's files (STEM.json, STEM.cubin) among names for
    its function: the function's name, or, where Triton cut a long name
    short for the file system, the longest stem of a .json that the
    function's name starts with."""
    if function + ".json" in names:
        return function
    stems = [n[:-5] for n in names if n.endswith(".json") and not n.startswith("__grp__") and function.startswith(n[:-5])]
    return max(stems, key=len) if stems else function


def _metadata_config(kernel, name, arg_types, divisibility, params, flags=0):
    """A Config from NAME.json of a collected kernel (FORMAT.md's
    derivation rules) and the exact types and constexprs of the caller."""
    a = {x.name: x for x in kernel.artifacts}
    stem = file_stem(a, name)
    md = json.loads(a[stem + ".json"].data.decode())
    fl = flags | (CONFIG_COOPERATIVE if md.get("launch_cooperative_grid") else 0) | (
        CONFIG_PDL if md.get("launch_pdl") else 0)
    cl = md.get("cluster_dims") or (0, 0, 0)
    metas = md.get("tensordesc_meta") or []
    descs = []
    for ch, rank in arg_types:
        if ch != "T":
            continue
        if metas:
            m = metas[len(descs)]
            blk = list(m.get("block_size", []))
            descs.append(TensorDesc(1, len(blk), m.get("swizzle", 0), m.get("elem_size", 0), m.get("elem_type", 0),
                                    1 if m.get("fp4_padded") else 0, blk))
        else:
            descs.append(TensorDesc(0, rank))
    def scratch(k):
        return (int(md.get(k + "_size", 0) or 0), int(md.get(k + "_align", 1) or 1), 1 if k + "_size" in md else 0)
    return Config(kernel.hash, md["name"], stem + ".cubin", "".join(ch for ch, _ in arg_types), divisibility,
                  int(md["num_warps"]), int(md.get("num_ctas", 1)), int(md.get("shared", 0)), fl,
                  tuple(cl) if len(cl) == 3 and int(md.get("num_ctas", 1)) > 1 else (0, 0, 0),
                  scratch("global_scratch"), scratch("profile_scratch"), params, descs)


def _code(ty):
    """(code, rank) of a Triton signature type; None for a constexpr."""
    if ty == "constexpr":
        return None
    if ty.startswith("*"):
        return ("O", 0)
    if ty.startswith("tensordesc"):
        inner = ty[ty.index("[") + 1:ty.index("]")] if "[" in ty else ""
        return ("T", len([x for x in inner.split(",") if x.strip()]))
    if ty in TRITON_CODES:
        return (TRITON_CODES[ty], 0)
    raise BundleError("unsupported_type", "Triton type %r cannot be passed (fp8 scalars, nvTmaDesc, tuples)" % ty)


def _int_params(names_values):
    out = []
    for n, v in names_values:
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, int) and I64_MIN <= v <= I64_MAX:
            out.append((n, v))
    return out
