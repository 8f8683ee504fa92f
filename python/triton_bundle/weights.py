"""Weights files: safetensors, read and written with the standard library.

A safetensors file is an 8-byte little-endian header length N, N bytes of
JSON ({name: {"dtype": "F32", "shape": [...], "data_offsets": [begin,
end]}, "__metadata__": {str: str}}), then the tensors' bytes, offsets
counted from the end of the header. A bundle's external constants (format
2.5) are tensors of such a file, by name; the C library reads the same
header with the same checks (tb_weights_open).

    header = read_header("model.safetensors")      # {name: Tensor}
    crcs = write_file("w.safetensors", [("fc.weight", "float32", [4, 8], data)])
"""

import collections
import json
import os
import struct
import tempfile
import zlib

from .spec import DTYPES, MAX_JSON_DEPTH, MAX_STRING_LENGTH, MAX_TENSOR_DIMS, MAX_WEIGHTS_HEADER, BundleError

BY_ST = {d.safetensors: d for d in DTYPES if d.safetensors}
ST_OF = {d.name: d.safetensors for d in DTYPES if d.safetensors}
MAX_HEADER = MAX_WEIGHTS_HEADER  # safetensors' own limit, and the C library's TB_MAX_WEIGHTS_HEADER

Tensor = collections.namedtuple("Tensor", "name dtype shape offset size")  # offset: from the file's start


def _bad(path, what, code="malformed"):
    raise BundleError(code, "safetensors %s: %s" % (path, what))


def parse_header(raw, file_size, path="(memory)"):
    """The tensors of a file whose first bytes are raw (at least the
    header) and whose size is file_size: {name: Tensor}, checked as the C
    library checks them (the bytes covered exactly, no overlap, hole or
    tail)."""
    if file_size < 8 or len(raw) < 8:
        _bad(path, "%d bytes, fewer than the header's length" % file_size, "truncated")
    n = struct.unpack_from("<Q", raw, 0)[0]
    if n > MAX_HEADER:
        _bad(path, "not a safetensors file: its first 8 bytes give a header of %d bytes, over %d" % (n, MAX_HEADER),
             "limit")
    if n > file_size - 8 or len(raw) < 8 + n:
        _bad(path, "not a safetensors file, or one cut short: its first 8 bytes give a header of %d bytes in a "
             "%d-byte file" % (n, file_size), "truncated")
    def no_constant(c):
        raise ValueError("%s is not JSON" % c)
    try:
        # pairs kept as lists: duplicate keys are the checks' to judge, as the C reader does
        obj = json.loads(bytes(raw[8:8 + n]).decode("utf-8"), object_pairs_hook=_Obj, parse_constant=no_constant)
        _walk(obj, 0)
    except (ValueError, UnicodeError, RecursionError) as e:
        _bad(path, "the header is not JSON (%s)" % e, "parse")
    if not isinstance(obj, _Obj):
        _bad(path, "the header is not a JSON object")
    start, out, meta = 8 + n, {}, 0
    for name, e in obj:
        if name == "__metadata__":
            meta += 1
            if meta > 1:
                _bad(path, "__metadata__ twice")
            continue
        if len(name.encode("utf-8")) > MAX_STRING_LENGTH:  # keys decoded (json.loads), as safetensors' reader does
            _bad(path, "a tensor name of over TB_MAX_STRING_LENGTH (%d) bytes" % MAX_STRING_LENGTH, "limit")
        if not name:
            _bad(path, "a tensor with an empty name", "bad_name")
        if name in out:
            _bad(path, "two tensors named %r" % name)
        if not isinstance(e, _Obj):
            _bad(path, "tensor %r is not an object" % name)
        keys = [k for k, _ in e if k in ("dtype", "shape", "data_offsets")]
        if len(set(keys)) != len(keys):
            _bad(path, "tensor %r: a key twice in its entry" % name)
        e = dict(e)
        if not all(k in e for k in ("dtype", "shape", "data_offsets")):
            _bad(path, "tensor %r lacks its dtype, shape or data_offsets" % name)
        if not isinstance(e["dtype"], str) or e["dtype"] not in BY_ST:
            _bad(path, "tensor %r: dtype %r is not one of %s" % (name, e["dtype"], " ".join(BY_ST)), "unsupported_type")
        shape, offs = e["shape"], e["data_offsets"]
        if not isinstance(shape, list) or len(shape) > MAX_TENSOR_DIMS or \
                not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 63 for d in shape):
            _bad(path, "tensor %r: shape %r" % (name, shape), "limit" if isinstance(shape, list) and
                 len(shape) > MAX_TENSOR_DIMS else "malformed")
        if not isinstance(offs, list) or len(offs) != 2 or \
                not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 63 for d in offs):
            _bad(path, "tensor %r: data_offsets %r" % (name, offs))
        size = BY_ST[e["dtype"]].bytes
        for d in shape:
            size *= d
        if offs[1] < offs[0] or offs[1] - offs[0] != size:
            _bad(path, "tensor %r: data_offsets %r do not span its %d bytes" % (name, offs, size))
        if offs[1] > file_size - start:
            _bad(path, "tensor %r: data_offsets past the end of the file" % name, "truncated")
        out[name] = Tensor(name, BY_ST[e["dtype"]].name, list(shape), start + offs[0], size)
    at = start
    for t in sorted(out.values(), key=lambda t: (t.offset, t.size)):
        if t.offset != at:
            _bad(path, "tensor %r starts at data byte %d where the one before ends at %d (%s)" % (
                t.name, t.offset - start, at - start, "they overlap" if t.offset < at else "a hole"))
        at += t.size
    if at != file_size:
        _bad(path, "the tensors end at byte %d of a %d-byte file" % (at, file_size))
    return out


class _Obj(list):
    """A JSON object as its (key, value) pairs, in order, duplicates kept."""


def _walk(v, depth):
    """What JSON allows and the C reader refuses: nesting past
    MAX_JSON_DEPTH, a zero character or a lone surrogate in a string."""
    if depth > MAX_JSON_DEPTH:
        raise ValueError("nested too deeply")
    if isinstance(v, str):
        if "\0" in v:
            raise ValueError("\\u0000 in a string")
        v.encode("utf-8")  # a lone surrogate: UnicodeEncodeError
    elif isinstance(v, _Obj):
        for k, x in v:
            _walk(k, depth + 1)
            _walk(x, depth + 1)
    elif isinstance(v, list):
        for x in v:
            _walk(x, depth + 1)


def read_header(path):
    """{name: Tensor} of the safetensors file at path (its header only)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) == 8:
            n = struct.unpack("<Q", head)[0]
            if n <= MAX_HEADER:
                head += f.read(n)
    return parse_header(head, size, path)


def crc32_of(path, tensor, piece=16 << 20):
    """zlib.crc32 of a tensor's bytes in the file at path."""
    crc = 0
    with open(path, "rb") as f:
        f.seek(tensor.offset)
        left = tensor.size
        while left:
            b = f.read(min(piece, left))
            if not b:
                raise BundleError("io", "safetensors %s: tensor %r is cut short" % (path, tensor.name))
            crc = zlib.crc32(b, crc)
            left -= len(b)
    return crc


def write_file(path, tensors, metadata=None):
    """Writes a safetensors file: tensors are (name, dtype name, shape,
    bytes-like), written in that order one after another, streaming (no
    copy of them is made), into a temporary file renamed over path at the
    end. Returns {name: CRC-32 of its bytes}."""
    header, at, views = {}, 0, []
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, dtype, shape, data in tensors:
        if name in header or name == "__metadata__" or not name:
            raise BundleError("invalid_argument", "safetensors: tensor name %r empty, reserved or twice" % name)
        if dtype not in ST_OF:
            raise BundleError("unsupported_type", "safetensors has no dtype for %s (tensor %r)" % (dtype, name))
        v = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" or data.ndim != 1 \
            else data
        n = next(d for d in DTYPES if d.name == dtype).bytes
        for d in shape:
            n *= d
        if v.nbytes != n:
            raise BundleError("invalid_argument", "tensor %r: %d bytes for shape %r of %s" % (name, v.nbytes, shape,
                                                                                             dtype))
        header[name] = {"dtype": ST_OF[dtype], "shape": [int(d) for d in shape], "data_offsets": [at, at + n]}
        views.append((name, v))
        at += n
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")  # names as UTF-8
    text += b" " * ((8 - len(text) % 8) % 8)  # the data 8-aligned, as safetensors writes it
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".safetensors", dir=d)
    crcs = {}
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for name, v in views:
                crcs[name] = zlib.crc32(v)
                f.write(v)
            f.flush()
            os.fsync(f.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # as open() would have made it (mkstemp makes 0600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return crcs


def match_names(constants, aliases, header):
    """Maps constants to tensors of an existing file by name: for each
    constant name, its aliases (every name of its storage: a tied weight
    has two) are tried as they are, then by a unique suffix match with a
    module prefix ("transformer.h.0.attn.c_attn.weight" and
    "h.0.attn.c_attn.weight"). Returns {constant name: tensor name}; names
    with no match, or two, are left out."""
    by_suffix = collections.defaultdict(list)
    for tn in header:
        parts = tn.split(".")
        for i in range(len(parts)):
            by_suffix[".".join(parts[i:])].append(tn)
    out = {}
    for cname in constants:
        found = None
        for a in [cname] + [x for x in aliases.get(cname, ()) if x != cname]:
            if a in header:
                found = a
                break
        if found is None:
            for a in [cname] + list(aliases.get(cname, ())):
                parts = a.split(".")
                cands = set()
                for i in range(len(parts)):  # the file's name is a's tail, or a is the file's
                    cands.update(t for t in by_suffix.get(".".join(parts[i:]), ()) if a.endswith("." + t) or t == a)
                cands.update(by_suffix.get(a, ()))
                if len(cands) == 1:
                    found = cands.pop()
                    break
        if found is not None:
            out[cname] = found
    return out
