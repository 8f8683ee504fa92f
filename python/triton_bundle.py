#!/usr/bin/env python3
"""triton_bundle.py - the Python companion of triton_bundle.h.

Standard library only, Python 3.9 or later, MIT No Attribution licence
(MIT-0, as triton_bundle.h). It holds:

- a reader and a writer of the bundle format (docs/FORMAT.md, 2.2): the
  same bytes as the C library for the same bundle, and the same refusals of
  damaged or hostile input;
- grid rules: Inductor's and Triton's grid expressions compiled into the
  format's small postfix language, and evaluated exactly as the C library
  evaluates them (tb_grid_compute);
- exporters, which import torch or triton only when called:
    export_triton(fns, grids)    every compiled kernel of @triton.jit
                                 functions (autotuned or not), with exact
                                 signatures, constexprs and user grids;
    TorchCapture()               every Triton kernel a torch.compile'd
                                 callable launches: one record per
                                 Inductor autotuner holding all its configs,
                                 their kwargs, num_warps, num_stages, the
                                 mutated arguments and the grid rule; and
                                 the launches in order, for replay;
- a command line: triton-bundle list FILE | export ... (--help, --version),
  also run as python -m triton_bundle or python3 python/triton_bundle.py;
- CLibrary: the C library (libtriton_bundle.so) through ctypes.

Installed with `pip install .` from the repository root (pyproject.toml).

Records the exporters write are exact: signed and unsigned types, 1-byte
bools, and the constexprs Triton baked in (as config params). Records that
`tbundle pack` derives from a bare cache carry flag bit 2 (types from the
IR) instead, and no grid rules.
"""

import argparse
import ast
import json
import os
import struct
import sys

# The version of triton_bundle.h this module goes with (its TB_VERSION_STRING;
# tests/test_package.py checks that they are equal).
__version__ = "2.1.0"

FORMAT_MAJOR = 2
FORMAT_MINOR = 2
MAGIC = b"\x89TBUND\r\n"

# Limits: docs/FORMAT.md's table (a reader may lower them).
MAX_KERNELS = 1000000
MAX_ARTIFACTS_PER_KERNEL = 4096
MAX_ARTIFACT_SIZE = 1 << 32
MAX_NAME_LENGTH = 255
MAX_STRING_LENGTH = 65536
MAX_RECORDS = 1000000
MAX_CONFIGS_PER_RECORD = 4096
MAX_PARAMS_PER_CONFIG = 256
MAX_ARGS = 512
MAX_TENSORDESCS = 16
MAX_TENSOR_RANK = 5
MAX_SECTIONS = 1024
MAX_SENTINELS = 4096
MAX_GRID_OPS = 64
GRID_STACK = 16
MAX_GRID_EXTRA = 8

CONFIG_COOPERATIVE = 1
CONFIG_PDL = 2
CONFIG_TYPES_FROM_IR = 4
SENTINEL = b"[REPLACE]"

# Grid operations (FORMAT.md, section 4).
CONST, ARG, PARAM, EXTRA = 1, 2, 3, 4
ADD, SUB, MUL, FLOORDIV, CEILDIV, MOD, MIN, MAX, NEG = 16, 17, 18, 19, 20, 21, 22, 23, 24
OP_NAMES = {CONST: "CONST", ARG: "ARG", PARAM: "PARAM", EXTRA: "EXTRA", ADD: "ADD", SUB: "SUB", MUL: "MUL",
            FLOORDIV: "FLOORDIV", CEILDIV: "CEILDIV", MOD: "MOD", MIN: "MIN", MAX: "MAX", NEG: "NEG"}

CODE_SIZES = {"O": 8, "l": 8, "K": 8, "d": 8, "T": 8, "i": 4, "I": 4, "f": 4, "h": 2, "H": 2, "e": 2, "y": 2,
              "b": 1, "B": 1, "?": 1}
INT_CODES = set("?bhilBHIK")
# Triton 3.6 signature types to argument codes (FORMAT.md's table)
TRITON_CODES = {"i1": "?", "u1": "?", "i8": "b", "i16": "h", "i32": "i", "i64": "l", "u8": "B", "u16": "H",
                "u32": "I", "u64": "K", "fp16": "e", "bf16": "y", "fp32": "f", "f32": "f", "fp64": "d"}

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


class BundleError(Exception):
    """A refused input or call. .code is the C library's tb_result name
    without its prefix ("truncated", "malformed", "limit", ...)."""

    def __init__(self, code, message, offset=-1):
        Exception.__init__(self, "%s: %s%s" % (code, message, " [offset %d]" % offset if offset >= 0 else ""))
        self.code = code
        self.offset = offset


# ---------------------------------------------------------------- XXH3-64
_M = (1 << 64) - 1
_P1, _P2, _P3 = 11400714785074694791, 14029467366897019727, 1609587929392839161
_P4, _P5 = 9650029242287828579, 2870177450012600261
_PR32_1, _PR32_2, _PR32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
_MX1, _MX2 = 0x165667919E3779F9, 0x9FB21C651E98DF25
_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671fcb79e64eccc0e578825ad07dccff7221"
    "b8084674f743248ee03590e6813a264c3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364eac5ac8334d3ebc3c581a0fffa1363eb"
    "170ddd51b7f0da49d316552629d4689e2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
_S64 = [int.from_bytes(_SECRET[i:i + 8], "little") for i in range(185)]
_S32 = [int.from_bytes(_SECRET[i:i + 4], "little") for i in range(189)]


def _fold(a, b):
    p = a * b
    return (p ^ (p >> 64)) & _M


def _aval64(h):
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    return h ^ (h >> 32)


def _aval3(h):
    h ^= h >> 37
    h = (h * _MX1) & _M
    return h ^ (h >> 32)


def _rd64(p, o):
    return int.from_bytes(p[o:o + 8], "little")


def _mix16(p, o, so):
    return _fold(_rd64(p, o) ^ _S64[so], _rd64(p, o + 8) ^ _S64[so + 8])


def _xxh3_short(p):
    n = len(p)
    if n == 0:
        return _aval64(_S64[56] ^ _S64[64])
    if n <= 3:
        c = (p[0] << 16) | (p[n >> 1] << 24) | p[n - 1] | (n << 8)
        return _aval64(c ^ (_S32[0] ^ _S32[4]))
    if n <= 8:
        in64 = int.from_bytes(p[n - 4:n], "little") + (int.from_bytes(p[0:4], "little") << 32)
        h = in64 ^ (_S64[8] ^ _S64[16])
        h ^= ((h << 49) | (h >> 15)) & _M ^ ((h << 24) | (h >> 40)) & _M
        h = (h * _MX2) & _M
        h ^= (h >> 35) + n
        h = (h * _MX2) & _M
        return h ^ (h >> 28)
    if n <= 16:
        lo = _rd64(p, 0) ^ (_S64[24] ^ _S64[32])
        hi = _rd64(p, n - 8) ^ (_S64[40] ^ _S64[48])
        swapped = int.from_bytes(lo.to_bytes(8, "little"), "big")
        return _aval3((n + swapped + hi + _fold(lo, hi)) & _M)
    acc = (n * _P1) & _M
    if n <= 128:
        if n > 32:
            if n > 64:
                if n > 96:
                    acc += _mix16(p, 48, 96) + _mix16(p, n - 64, 112)
                acc += _mix16(p, 32, 64) + _mix16(p, n - 48, 80)
            acc += _mix16(p, 16, 32) + _mix16(p, n - 32, 48)
        acc += _mix16(p, 0, 0) + _mix16(p, n - 16, 16)
        return _aval3(acc & _M)
    for i in range(8):
        acc += _mix16(p, 16 * i, 16 * i)
    acc = _aval3(acc & _M)
    for i in range(8, n // 16):
        acc += _mix16(p, 16 * i, 16 * (i - 8) + 3)
    acc += _mix16(p, n - 16, 136 - 17)
    return _aval3(acc & _M)


_STRIPE = struct.Struct("<8Q")


def _accumulate(acc, p, off, so):
    d = _STRIPE.unpack_from(p, off)
    for i in range(8):
        di = d[i]
        dk = di ^ _S64[so + 8 * i]
        acc[i ^ 1] = (acc[i ^ 1] + di) & _M
        acc[i] = (acc[i] + (dk & 0xFFFFFFFF) * (dk >> 32)) & _M


def _scramble(acc):
    for i in range(8):
        a = acc[i]
        a ^= a >> 47
        a ^= _S64[128 + 8 * i]
        acc[i] = (a * _PR32_1) & _M


def xxh3_64(data):
    """XXH3-64 (seed 0, the default secret): xxHash's XXH3_64bits."""
    p = bytes(data)
    n = len(p)
    if n <= 240:
        return _xxh3_short(p)
    acc = [_PR32_3, _P1, _P2, _P3, _P4, _PR32_2, _P5, _PR32_1]
    blocks = (n - 1) // 1024
    for b in range(blocks):
        for s in range(16):
            _accumulate(acc, p, b * 1024 + 64 * s, 8 * s)
        _scramble(acc)
    stripes = ((n - 1) - 1024 * blocks) // 64
    for s in range(stripes):
        _accumulate(acc, p, blocks * 1024 + 64 * s, 8 * s)
    _accumulate(acc, p, n - 64, 192 - 64 - 7)
    r = (n * _P1) & _M
    for i in range(4):
        r += _fold(acc[2 * i] ^ _S64[11 + 16 * i], acc[2 * i + 1] ^ _S64[11 + 16 * i + 8])
    return _aval3(r & _M)


def bundle_checksum(data):
    """Format 2's checksum: XXH3-64 of the little-endian XXH3-64 values of
    each 1 MiB block (the last may be shorter; empty data is one block)."""
    n = len(data)
    view = memoryview(data)
    values = b"".join(struct.pack("<Q", xxh3_64(view[i:i + (1 << 20)])) for i in range(0, max(n, 1), 1 << 20))
    return xxh3_64(values)


# ------------------------------------------------------------ data model
class Artifact:
    def __init__(self, name, data):
        self.name, self.data = name, bytes(data)

    def __eq__(self, o):
        return isinstance(o, Artifact) and (self.name, self.data) == (o.name, o.data)


class Kernel:
    """One Triton cache directory: its name (the hash), device, files."""

    def __init__(self, hash, device=0, artifacts=None):
        self.hash, self.device, self.artifacts = hash, device, list(artifacts or [])

    def name(self):
        """NAME of NAME.cubin, else of __grp__NAME.json (tb_kernel_name)."""
        for pre, suf in (("", ".cubin"), ("__grp__", ".json")):
            for a in self.artifacts:
                if a.name.startswith(pre) and a.name.endswith(suf) and len(a.name) > len(pre) + len(suf):
                    return a.name[len(pre):len(a.name) - len(suf)]
        return ""

    def __eq__(self, o):
        return isinstance(o, Kernel) and (self.hash, self.device, self.artifacts) == (o.hash, o.device, o.artifacts)


class TensorDesc:
    FIELDS = ("tma", "rank", "swizzle", "elem_size", "elem_type", "fp4_padded", "block")

    def __init__(self, tma=0, rank=1, swizzle=0, elem_size=0, elem_type=0, fp4_padded=0, block=None):
        self.tma, self.rank, self.swizzle, self.elem_size = tma, rank, swizzle, elem_size
        self.elem_type, self.fp4_padded, self.block = elem_type, fp4_padded, list(block or [])

    def __eq__(self, o):
        return all(getattr(self, f) == getattr(o, f) for f in self.FIELDS)


class GridRule:
    """Three postfix programs (x, y, z), each a list of (op, index, value)."""

    def __init__(self, x, y, z):
        self.dims = [list(x), list(y), list(z)]

    def __eq__(self, o):
        return isinstance(o, GridRule) and self.dims == o.dims

    def text(self, arg_names=None, params=None):
        """The rule as infix text, for people."""
        out = []
        for prog in self.dims:
            st = []
            for op, index, value in prog:
                if op == CONST:
                    st.append(str(value))
                elif op == ARG:
                    st.append(arg_names[index] if arg_names and index < len(arg_names) else "arg%d" % index)
                elif op == PARAM:
                    st.append(params[index][0] if params and index < len(params) else "param%d" % index)
                elif op == EXTRA:
                    st.append("grid_args[%d]" % index)
                elif op == NEG:
                    st.append("-(%s)" % st.pop())
                else:
                    b, a = st.pop(), st.pop()
                    sym = {ADD: "+", SUB: "-", MUL: "*", FLOORDIV: "//", MOD: "%"}.get(op)
                    st.append("(%s %s %s)" % (a, sym, b) if sym else "%s(%s, %s)" % (
                        {CEILDIV: "cdiv", MIN: "min", MAX: "max"}.get(op, "op%d" % op), a, b))
            out.append(st[-1] if st else "?")
        return "(%s)" % ", ".join(out)


class CallInfo:
    def __init__(self, arg_names=None, mutated=None, reset=None, key=None):
        self.arg_names = list(arg_names or [])
        self.mutated, self.reset, self.key = list(mutated or []), list(reset or []), list(key or [])

    def __eq__(self, o):
        return isinstance(o, CallInfo) and (self.arg_names, self.mutated, self.reset, self.key) == (
            o.arg_names, o.mutated, o.reset, o.key)


class Config:
    """One compiled config (tb_launch_config)."""

    def __init__(self, kernel_hash, function_name, binary_name, arg_types, arg_divisibility="", num_warps=4,
                 num_ctas=1, shared_mem=0, flags=0, cluster_dims=(0, 0, 0), global_scratch=(0, 1, 0),
                 profile_scratch=(0, 1, 0), params=None, tensordescs=None, grid=None):
        self.kernel_hash, self.function_name, self.binary_name = kernel_hash, function_name, binary_name
        self.arg_types, self.arg_divisibility = arg_types, arg_divisibility
        self.num_warps, self.num_ctas, self.shared_mem, self.flags = num_warps, num_ctas, shared_mem, flags
        self.cluster_dims = tuple(cluster_dims)
        self.global_scratch, self.profile_scratch = tuple(global_scratch), tuple(profile_scratch)
        self.params = list(params or [])            # [(name, int64)]
        self.tensordescs = list(tensordescs or [])  # [TensorDesc], one per 'T'
        self.grid = grid                             # GridRule or None

    FIELDS = ("kernel_hash", "function_name", "binary_name", "arg_types", "arg_divisibility", "num_warps", "num_ctas",
              "shared_mem", "flags", "cluster_dims", "global_scratch", "profile_scratch", "params", "tensordescs",
              "grid")

    def __eq__(self, o):
        return all(getattr(self, f) == getattr(o, f) for f in self.FIELDS)

    def param(self, name, default=None):
        for n, v in self.params:
            if n == name:
                return v
        return default


class Record:
    """A static launch record (tb_launch_record): a key, a name, configs."""

    def __init__(self, cache_key, kernel_name, configs, call=None):
        self.cache_key, self.kernel_name, self.configs, self.call = cache_key, kernel_name, list(configs), call

    def __eq__(self, o):
        return isinstance(o, Record) and (self.cache_key, self.kernel_name, self.configs, self.call) == (
            o.cache_key, o.kernel_name, o.configs, o.call)


class Bundle:
    def __init__(self, kernels=None, records=None):
        self.kernels, self.records = list(kernels or []), list(records or [])
        self.version = (FORMAT_MAJOR, FORMAT_MINOR)

    def __eq__(self, o):
        return isinstance(o, Bundle) and (self.kernels, self.records) == (o.kernels, o.records)

    def kernel(self, hash):
        for k in self.kernels:
            if k.hash == hash:
                return k
        return None

    def record(self, key_or_name):
        for r in self.records:
            if r.cache_key == key_or_name:
                return r
        for r in self.records:
            if r.kernel_name == key_or_name:
                return r
        return None


# ----------------------------------------------------------- validation
def _enc(s):
    return s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)


def valid_name(s):
    b = _enc(s)
    return 0 < len(b) <= MAX_NAME_LENGTH and b not in (b".", b"..") and not any(c in b for c in b"\0/\\")


def _check_string(s, limit, what):
    b = _enc(s)
    if not b:
        raise BundleError("bad_name", "%s is empty" % what)
    if len(b) > limit:
        raise BundleError("limit", "%s is %d bytes long, limit %d" % (what, len(b), limit))
    if b"\0" in b:
        raise BundleError("malformed", "%s holds a zero byte" % what)


def _check_config(c):
    for v, what in ((c.kernel_hash, "config kernel_hash"), (c.binary_name, "config binary_name")):
        if len(_enc(v)) > MAX_NAME_LENGTH:
            raise BundleError("limit", "%s is %d bytes long, limit %d" % (what, len(_enc(v)), MAX_NAME_LENGTH))
        if not valid_name(v):
            raise BundleError("bad_name", "%s %r is not a safe file name" % (what, v))
    _check_string(c.function_name, MAX_STRING_LENGTH, "config function_name")
    if len(c.arg_types) > MAX_ARGS:
        raise BundleError("limit", "%d arguments, over TB_MAX_ARGS" % len(c.arg_types))
    for i, ch in enumerate(c.arg_types):
        if ch not in CODE_SIZES:
            raise BundleError("unsupported_type", "argument %d has unknown type code %r" % (i, ch))
    if c.arg_divisibility:
        if len(c.arg_divisibility) != len(c.arg_types):
            raise BundleError("malformed", "arg_divisibility has %d entries for %d arguments" % (
                len(c.arg_divisibility), len(c.arg_types)))
        if any(ch not in "01" for ch in c.arg_divisibility):
            raise BundleError("malformed", "arg_divisibility holds other than '0'/'1'")
    if not 1 <= c.num_warps <= 32:
        raise BundleError("malformed", "num_warps %d is not in 1..32" % c.num_warps)
    if not 1 <= c.num_ctas <= 16:
        raise BundleError("malformed", "num_ctas %d is not in 1..16" % c.num_ctas)
    if len(c.params) > MAX_PARAMS_PER_CONFIG:
        raise BundleError("limit", "%d config params" % len(c.params))
    for n, _ in c.params:
        _check_string(n, MAX_NAME_LENGTH, "a config param's name")
    if len(c.tensordescs) > MAX_TENSORDESCS:
        raise BundleError("limit", "%d tensor descriptors" % len(c.tensordescs))
    if c.global_scratch[2] > 1 or c.profile_scratch[2] > 1:
        raise BundleError("malformed", "a scratch_present value other than 0 or 1")
    if c.flags & ~(CONFIG_COOPERATIVE | CONFIG_PDL | CONFIG_TYPES_FROM_IR):
        raise BundleError("unsupported_version", "config flags 0x%x hold a bit this version does not know" % c.flags)


def _check_descs(c):
    n = c.arg_types.count("T")
    if n != len(c.tensordescs):
        raise BundleError("malformed", "%d tensor descriptor arguments and %d descriptions" % (n, len(c.tensordescs)))
    for i, m in enumerate(c.tensordescs):
        if m.tma > 1 or not 1 <= m.rank <= MAX_TENSOR_RANK or m.fp4_padded > 1:
            raise BundleError("malformed", "tensor descriptor %d: rank or flag out of range" % i)
        if m.tma:
            if m.elem_size not in (1, 2, 4, 8) or m.swizzle > 3 or m.elem_type > 15:
                raise BundleError("malformed", "tensor descriptor %d: a value TMA does not take" % i)
            if any(not 1 <= m.block[d] <= 256 for d in range(m.rank)):
                raise BundleError("malformed", "tensor descriptor %d: a block dimension not in 1..256" % i)


def check_grid(g, c):
    """FORMAT.md [R-grid-program]: a rule that runs."""
    for d, prog in enumerate(g.dims):
        if not prog or len(prog) > MAX_GRID_OPS:
            raise BundleError("limit" if len(prog) > MAX_GRID_OPS else "malformed",
                              "grid rule dimension %d has %d operations" % (d, len(prog)))
        depth = 0
        for i, (op, index, value) in enumerate(prog):
            operand = CONST <= op <= EXTRA
            if not operand and not ADD <= op <= NEG:
                raise BundleError("unsupported_version", "grid rule operation %d is unknown" % op)
            if ((op != CONST and value) or ((not operand or op == CONST) and index) or
                    (op == ARG and (index >= len(c.arg_types) or c.arg_types[index] not in INT_CODES)) or
                    (op == PARAM and index >= len(c.params)) or (op == EXTRA and index >= MAX_GRID_EXTRA)):
                raise BundleError("malformed", "grid rule dimension %d, operation %d: a bad operand" % (d, i))
            if operand:
                depth += 1
            elif depth < (1 if op == NEG else 2):
                raise BundleError("malformed", "grid rule dimension %d, operation %d: too few values" % (d, i))
            elif op != NEG:
                depth -= 1
            if depth > GRID_STACK:
                raise BundleError("limit", "grid rule dimension %d needs more than %d stack entries" % (d, GRID_STACK))
        if depth != 1:
            raise BundleError("malformed", "grid rule dimension %d leaves %d values" % (d, depth))


def _check_call(ci, rec):
    n = len(rec.configs[0].arg_types)
    if any(len(c.arg_types) != n for c in rec.configs):
        raise BundleError("malformed", "a record with call info has configs of different argument counts")
    if ci.arg_names and len(ci.arg_names) != n:
        raise BundleError("malformed", "%d argument names for %d arguments" % (len(ci.arg_names), n))
    for name in ci.arg_names:
        _check_string(name, MAX_NAME_LENGTH, "an argument name")
    for lst in (ci.mutated, ci.reset, ci.key):
        if len(lst) > MAX_ARGS:
            raise BundleError("limit", "an argument index list is too long")
        if any(not 0 <= i < n for i in lst):
            raise BundleError("malformed", "an argument index out of range")


def check_record(r):
    _check_string(r.cache_key, MAX_STRING_LENGTH, "record cache_key")
    _check_string(r.kernel_name, MAX_STRING_LENGTH, "record kernel_name")
    if not r.configs:
        raise BundleError("invalid_argument", "record has no configs")
    if len(r.configs) > MAX_CONFIGS_PER_RECORD:
        raise BundleError("limit", "%d configs" % len(r.configs))
    for c in r.configs:
        _check_config(c)
        _check_descs(c)
        if c.grid is not None:
            check_grid(c.grid, c)
    if r.call is not None:
        _check_call(r.call, r)


# ------------------------------------------------------------- grid rules
def _floordiv(a, b):
    if b == 0 or (a == I64_MIN and b == -1):
        raise BundleError("arg_range", "division by zero or overflow")
    return a // b


def _grid_arg(code, v):
    """What the kernel reads from argument v of this code, as an int64."""
    bits = {"?": 1, "b": 8, "B": 8, "h": 16, "H": 16, "i": 32, "I": 32, "l": 64, "K": 64}[code]
    if code == "?":
        return 1 if v else 0
    u = v & ((1 << bits) - 1)
    if code in "bhil" and u >> (bits - 1):
        u -= 1 << bits
    if u > I64_MAX:
        raise BundleError("arg_range", "an argument over 2^63 in a grid rule")
    return u


def eval_grid(config, args, grid_args=()):
    """The grid (x, y, z) config's rule gives for these launch arguments
    (integers; pointers anything) and grid_args, exactly as the C library's
    tb_grid_compute; BundleError("arg_range") where it refuses,
    BundleError("not_found") without a rule."""
    g = config.grid
    if g is None:
        raise BundleError("not_found", "the config has no grid rule")
    if len(args) != len(config.arg_types):
        raise BundleError("arg_mismatch", "%d arguments given, the kernel takes %d" % (len(args), len(config.arg_types)))
    out = []
    for d, prog in enumerate(g.dims):
        st = []
        for op, index, value in prog:
            if op == CONST:
                st.append(value)
            elif op == ARG:
                st.append(_grid_arg(config.arg_types[index], int(args[index])))
            elif op == PARAM:
                st.append(config.params[index][1])
            elif op == EXTRA:
                if index >= len(grid_args):
                    raise BundleError("arg_range", "the rule reads grid_args[%d], and %d were given" % (index, len(grid_args)))
                st.append(int(grid_args[index]))
            elif op == NEG:
                st.append(-st.pop())
            else:
                b, a = st.pop(), st.pop()
                if op == ADD:
                    v = a + b
                elif op == SUB:
                    v = a - b
                elif op == MUL:
                    v = a * b
                elif op == FLOORDIV:
                    v = _floordiv(a, b)
                elif op == MOD:
                    _floordiv(a, b)
                    v = a % b
                elif op == CEILDIV:  # exact on Python's integers; the range check below catches 2^63
                    if b == 0:
                        raise BundleError("arg_range", "division by zero")
                    v = -((-a) // b)
                elif op == MIN:
                    v = min(a, b)
                else:
                    v = max(a, b)
                st.append(v)
            if not I64_MIN <= st[-1] <= I64_MAX:
                raise BundleError("arg_range", "grid %s: the rule overflows" % "xyz"[d])
        most = (1 << 31) - 1 if d == 0 else 65535
        if not 0 <= st[0] <= most:
            raise BundleError("arg_range", "grid %s is %d, outside 0..%d" % ("xyz"[d], st[0], most))
        out.append(st[0])
    return tuple(out)


class GridCompiler:
    """Compiles Python grid expressions (Inductor's python-mode strings,
    Triton grid lambdas, or strings written by hand) into grid rules.

    names: how a free name resolves: a callable name -> ("arg", index) |
    ("param", index) | ("extra", index) | ("const", value) | None. Supports
    + - * // % unary -, integer literals, max/min (any arity), cdiv /
    triton.cdiv / ceildiv, meta['NAME'] and temporaries assigned before
    (prefix lines "t = expr")."""

    BINOPS = {ast.Add: ADD, ast.Sub: SUB, ast.Mult: MUL, ast.FloorDiv: FLOORDIV, ast.Mod: MOD}

    def __init__(self, names):
        self.names = names
        self.temps = {}

    def assign(self, line):
        tree = ast.parse(line.strip().rstrip(";"))
        stmt = tree.body[0]
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            raise ValueError("not an assignment: %r" % line)
        self.temps[stmt.targets[0].id] = self._ops(stmt.value)

    def compile(self, expr):
        if isinstance(expr, int):
            return [(CONST, 0, expr)]
        node = ast.parse(str(expr).strip(), mode="eval").body if not isinstance(expr, ast.AST) else expr
        return self._ops(node)

    def _name(self, name):
        if name in self.temps:
            return list(self.temps[name])
        r = self.names(name)
        if r is None:
            raise ValueError("the grid names %r, which is not an argument, a constexpr or a grid value" % name)
        kind, v = r
        return [{"arg": (ARG, v, 0), "param": (PARAM, v, 0), "extra": (EXTRA, v, 0), "const": (CONST, 0, v)}[kind]]

    def _ops(self, n):
        if isinstance(n, ast.Constant) and isinstance(n.value, int):  # bool is an int
            return [(CONST, 0, int(n.value))]
        if isinstance(n, ast.Name):
            return self._name(n.id)
        if isinstance(n, ast.Subscript):  # meta['BLOCK']
            key = n.slice.value if isinstance(n.slice, ast.Constant) else getattr(getattr(n.slice, "value", None), "value", None)
            if not isinstance(key, str):
                raise ValueError("unsupported subscript in a grid")
            return self._name(key)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return self._ops(n.operand) + [(NEG, 0, 0)]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.UAdd):
            return self._ops(n.operand)
        if isinstance(n, ast.BinOp) and type(n.op) in self.BINOPS:
            return self._ops(n.left) + self._ops(n.right) + [(self.BINOPS[type(n.op)], 0, 0)]
        if isinstance(n, ast.Call) and not n.keywords:
            f = n.func
            fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if fname in ("max", "min") and n.args:
                out = self._ops(n.args[0])
                for a in n.args[1:]:
                    out += self._ops(a) + [(MAX if fname == "max" else MIN, 0, 0)]
                return out
            if fname in ("cdiv", "ceildiv") and len(n.args) == 2:
                return self._ops(n.args[0]) + self._ops(n.args[1]) + [(CEILDIV, 0, 0)]
            if fname == "int" and len(n.args) == 1:
                return self._ops(n.args[0])
        raise ValueError("unsupported grid expression: %s" % ast.dump(n))


def grid_rule(exprs, names, prefix=()):
    """A GridRule from up to three expressions (missing ones are 1)."""
    gc = GridCompiler(names)
    for line in prefix:
        gc.assign(line)
    exprs = list(exprs) + [1] * (3 - len(exprs))
    return GridRule(*[_fold_ops(gc.compile(e)) for e in exprs[:3]])


def _fold_ops(ops):
    """Constant-folds where it cannot change a result (no division by
    zero, no overflow): keeps programs short and readable."""
    out = []
    for op in ops:
        out.append(op)
        if op[0] == NEG and len(out) >= 2 and out[-2][0] == CONST and out[-2][2] != I64_MIN:
            v = -out[-2][2]
            del out[-2:]
            out.append((CONST, 0, v))
        elif op[0] in (ADD, SUB, MUL, MIN, MAX) and len(out) >= 3 and out[-2][0] == CONST and out[-3][0] == CONST:
            a, b = out[-3][2], out[-2][2]
            v = {ADD: a + b, SUB: a - b, MUL: a * b, MIN: min(a, b), MAX: max(a, b)}[op[0]]
            if I64_MIN <= v <= I64_MAX:
                del out[-3:]
                out.append((CONST, 0, v))
    return out


# ---------------------------------------------------------------- writer
def _pad(n, a):
    return (a - n % a) % a


class _Out:
    def __init__(self):
        self.b = bytearray()

    def u32(self, v):
        self.b += struct.pack("<I", v)

    def u64(self, v):
        self.b += struct.pack("<Q", v & _M)

    def align(self, a):
        self.b += b"\0" * _pad(len(self.b), a)

    def string(self, s):
        e = _enc(s)
        self.u32(len(e))
        self.b += e + b"\0"
        self.align(8)


def _check_unique(bundle):
    seen = set()
    for k in bundle.kernels:
        if k.hash in seen:
            raise BundleError("malformed", "two kernels of hash %r" % k.hash)
        seen.add(k.hash)
    seen = set()
    for r in bundle.records:
        if r.cache_key in seen:
            raise BundleError("malformed", "two records of cache key %r" % r.cache_key)
        seen.add(r.cache_key)


def write(bundle):
    """The bundle's bytes (format 2.2), as tb_bundle_write_memory writes them."""
    _check_unique(bundle)
    for k in bundle.kernels:
        for n in [k.hash] + [a.name for a in k.artifacts]:
            if len(_enc(n)) > MAX_NAME_LENGTH:
                raise BundleError("limit", "name %r is over %d bytes" % (n[:40], MAX_NAME_LENGTH))
        if not valid_name(k.hash):
            raise BundleError("bad_name", "kernel hash %r is not a safe file name" % k.hash)
        names = set()
        for a in k.artifacts:
            if not valid_name(a.name) or a.name in names:
                raise BundleError("bad_name", "artifact %r of %s" % (a.name, k.hash))
            names.add(a.name)
    for r in bundle.records:
        check_record(r)
    o = _Out()
    o.b += b"\0" * 32
    # section 1
    s1 = len(o.b)
    o.b += b"\0" * 16
    o.u32(len(bundle.kernels))
    o.u32(sum(len(k.artifacts) for k in bundle.kernels))
    for k in bundle.kernels:
        o.string(k.hash)
        o.u32(k.device & 0xFFFFFFFF)
        o.u32(len(k.artifacts))
        for a in k.artifacts:
            o.string(a.name)
            o.u64(len(a.data))
            o.align(16)
            o.b += a.data
            o.align(8)
    struct.pack_into("<IIQ", o.b, s1, 1, 1, len(o.b) - s1 - 16)
    # section 2
    s2 = len(o.b)
    o.b += b"\0" * 16
    configs = [c for r in bundle.records for c in r.configs]
    o.u32(len(bundle.records))
    o.u32(len(configs))
    o.u32(sum(len(c.params) for c in configs))
    o.u32(0)
    for r in bundle.records:
        o.string(r.cache_key)
        o.string(r.kernel_name)
        o.u32(len(r.configs))
        o.u32(0)
        for c in r.configs:
            for s in (c.kernel_hash, c.function_name, c.binary_name, c.arg_types, c.arg_divisibility):
                o.string(s)
            for v in (c.num_warps, c.num_ctas, c.shared_mem, c.flags) + tuple(c.cluster_dims) + (len(c.params),):
                o.u32(v)
            for sz, al, pr in (c.global_scratch, c.profile_scratch):
                o.u64(sz)
                o.u32(al)
                o.u32(pr)
            for n, v in c.params:
                o.string(n)
                o.u64(v)
    struct.pack_into("<IIQ", o.b, s2, 2, 1, len(o.b) - s2 - 16)
    sections = 2
    # section 3
    descs = [(g, i, m) for g, c in enumerate(configs)
             for i, m in zip([j for j, ch in enumerate(c.arg_types) if ch == "T"], c.tensordescs)]
    if descs:
        s3 = len(o.b)
        o.b += b"\0" * 16
        o.u32(len(descs))
        o.u32(0)
        for g, i, m in descs:
            for v in (g, i, m.tma, m.rank, m.swizzle, m.elem_size, m.elem_type, m.fp4_padded):
                o.u32(v)
            for q in range(MAX_TENSOR_RANK):
                o.u32(m.block[q] if q < m.rank else 0)
            o.b += b"\0" * 12
        struct.pack_into("<IIQ", o.b, s3, 3, 1, len(o.b) - s3 - 16)
        sections += 1
    # section 4
    entries = [(i, r) for i, r in enumerate(bundle.records) if r.call is not None or any(c.grid for c in r.configs)]
    if entries:
        s4 = len(o.b)
        o.b += b"\0" * 16
        o.u32(len(entries))
        o.u32(0)
        for i, r in entries:
            ci = r.call
            grids = any(c.grid for c in r.configs)
            for v in (i, len(ci.arg_names) if ci else 0, len(ci.mutated) if ci else 0, len(ci.reset) if ci else 0,
                      len(ci.key) if ci else 0, 1 if ci else 0, 1 if grids else 0, 0):
                o.u32(v)
            if ci:
                for n in ci.arg_names:
                    o.string(n)
                for v in ci.mutated + ci.reset + ci.key:
                    o.u32(v)
                o.align(8)
            if grids:
                for c in r.configs:
                    g = c.grid
                    for v in ([len(p) for p in g.dims] + [1]) if g else (0, 0, 0, 0):
                        o.u32(v)
                    if g:
                        for prog in g.dims:
                            for op, index, value in prog:
                                o.u32(op)
                                o.u32(index)
                                o.u64(value)
        struct.pack_into("<IIQ", o.b, s4, 4, 0, len(o.b) - s4 - 16)
        sections += 1
    total = len(o.b) + 8
    struct.pack_into("<8sHHIQII", o.b, 0, MAGIC, FORMAT_MAJOR, FORMAT_MINOR, 0, total, sections, 0)
    o.u64(bundle_checksum(o.b))
    return bytes(o.b)


def write_file(bundle, path):
    """Written beside path and renamed onto it: readers see the old file or
    the new one."""
    data = write(bundle)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# ---------------------------------------------------------------- reader
class _Cur:
    def __init__(self, data):
        self.d, self.pos, self.end = data, 0, len(data)

    def need(self, n, what):
        if n > self.end - self.pos:
            raise BundleError("truncated", "%s needs %d bytes, %d remain in the section" % (
                what, n, self.end - self.pos), self.pos)

    def u32(self, what):
        self.need(4, what)
        v = struct.unpack_from("<I", self.d, self.pos)[0]
        self.pos += 4
        return v

    def u64(self, what):
        self.need(8, what)
        v = struct.unpack_from("<Q", self.d, self.pos)[0]
        self.pos += 8
        return v

    def zeros(self, a, what):
        n = _pad(self.pos, a)
        self.need(n, what)
        if any(self.d[self.pos:self.pos + n]):
            raise BundleError("malformed", "padding after %s is not zero" % what, self.pos)
        self.pos += n

    def string(self, limit, what):
        at = self.pos
        n = self.u32(what)
        if n > limit:
            raise BundleError("limit", "%s is %d bytes long, limit %d" % (what, n, limit), at)
        self.need(n + 1, what)
        s = bytes(self.d[self.pos:self.pos + n + 1])
        if s[n] != 0 or 0 in s[:n]:
            raise BundleError("malformed", "%s is not NUL-terminated or holds a NUL" % what, self.pos)
        self.pos += n + 1
        self.zeros(8, what)
        try:
            return s[:n].decode()
        except UnicodeDecodeError:
            return s[:n].decode("utf-8", "surrogateescape")

    def name(self, what):
        at = self.pos
        s = self.string(MAX_NAME_LENGTH, what)
        if not valid_name(s):
            raise BundleError("bad_name", "%s %r is not a safe file name" % (what, s), at)
        return s

    def count(self, limit, min_item, what):
        at = self.pos
        v = self.u32(what)
        if v > limit:
            raise BundleError("limit", "%s %d is over the limit %d" % (what, v, limit), at)
        if v * min_item > self.end - self.pos:
            raise BundleError("truncated", "%s %d cannot fit in the %d bytes that remain" % (
                what, v, self.end - self.pos), at)
        return v


def _rd_kernels(b, c):
    nk = c.count(MAX_KERNELS, 16, "kernel count")
    na = c.count(0xFFFFFFFF, 16, "artifact total")
    used = 0
    for _ in range(nk):
        h = c.name("kernel hash")
        dev = c.u32("kernel device")
        cnt = c.count(MAX_ARTIFACTS_PER_KERNEL, 16, "artifact count")
        if cnt > na - used:
            raise BundleError("malformed", "kernels hold more artifacts than the section's total %d" % na, c.pos - 4)
        k = Kernel(h, dev - (1 << 32) if dev >> 31 else dev)
        names = set()
        for _ in range(cnt):
            n = c.name("artifact name")
            if n in names:
                raise BundleError("malformed", "the kernel holds two files of this name", c.pos)
            names.add(n)
            at = c.pos
            size = c.u64("artifact size")
            if size > MAX_ARTIFACT_SIZE:
                raise BundleError("limit", "artifact of %d bytes, over TB_MAX_ARTIFACT_SIZE" % size, at)
            c.zeros(16, "artifact size")
            if size > c.end - c.pos:
                raise BundleError("truncated", "artifact of %d bytes, %d remain" % (size, c.end - c.pos), at)
            k.artifacts.append(Artifact(n, c.d[c.pos:c.pos + size]))
            c.pos += size
            c.zeros(8, "artifact data")
        used += cnt
        b.kernels.append(k)
    if used != na:
        raise BundleError("malformed", "artifact total %d, but kernels hold %d" % (na, used))


def _rd_records(b, c):
    nr = c.count(MAX_RECORDS, 24, "record count")
    nc = c.count(0xFFFFFFFF, 104, "config total")
    np_ = c.count(0xFFFFFFFF, 16, "param total")
    if c.u32("reserved"):
        raise BundleError("malformed", "a reserved field is not zero", c.pos - 4)
    cu = pu = 0
    for _ in range(nr):
        key = c.string(MAX_STRING_LENGTH, "record cache key")
        name = c.string(MAX_STRING_LENGTH, "record kernel name")
        at = c.pos
        ncf = c.count(MAX_CONFIGS_PER_RECORD, 104, "config count")
        if c.u32("reserved"):
            raise BundleError("malformed", "a reserved field is not zero", c.pos - 4)
        if not key or not name:
            raise BundleError("bad_name", "record has an empty key or name", at)
        if ncf == 0 or ncf > nc - cu:
            raise BundleError("malformed", "record has no configs, or more configs than the total", at)
        cfgs = []
        for _ in range(ncf):
            at = c.pos
            kh = c.string(MAX_NAME_LENGTH, "config kernel hash")
            fn = c.string(MAX_STRING_LENGTH, "config function name")
            bn = c.string(MAX_NAME_LENGTH, "config binary name")
            ty = c.string(MAX_ARGS, "config arg types")
            dv = c.string(MAX_ARGS, "config arg divisibility")
            nw, ncta, sh, fl = (c.u32(w) for w in ("num_warps", "num_ctas", "shared", "flags"))
            cl = tuple(c.u32("cluster") for _ in range(3))
            npar = c.count(MAX_PARAMS_PER_CONFIG, 16, "param count")
            gs = (c.u64("scratch size"), c.u32("scratch align"), c.u32("scratch present"))
            ps = (c.u64("scratch size"), c.u32("scratch align"), c.u32("scratch present"))
            if npar > np_ - pu:
                raise BundleError("malformed", "configs hold more params than the total %d" % np_, at)
            params = []
            for _ in range(npar):
                pn = c.string(MAX_NAME_LENGTH, "param name")
                pv = c.u64("param value")
                params.append((pn, pv - (1 << 64) if pv >> 63 else pv))
            pu += npar
            cf = Config(kh, fn, bn, ty, dv, nw, ncta, sh, fl, cl, gs, ps, params)
            try:
                _check_config(cf)
            except BundleError as e:
                raise BundleError(e.code, str(e).split(": ", 1)[1], at)
            cfgs.append(cf)
        cu += ncf
        b.records.append(Record(key, name, cfgs))
    if cu != nc or pu != np_:
        raise BundleError("malformed", "config or param totals do not match the records")


def _rd_descs(b, c):
    n = c.count(0xFFFFFFFF, 64, "tensor descriptor count")
    if c.u32("reserved"):
        raise BundleError("malformed", "a reserved field is not zero", c.pos - 4)
    slots = [(g, i, cf) for g, cf in enumerate(cf for r in b.records for cf in r.configs)
             for i, ch in enumerate(cf.arg_types) if ch == "T"]
    for e in range(n):
        at = c.pos
        v = [c.u32("tensor descriptor") for _ in range(8)]
        block = [c.u32("block") for _ in range(MAX_TENSOR_RANK)]
        m = TensorDesc(v[2], v[3], v[4], v[5], v[6], v[7], block[:v[3]] if v[3] <= MAX_TENSOR_RANK else block)
        if any(block[q] for q in range(min(v[3], MAX_TENSOR_RANK), MAX_TENSOR_RANK)):
            raise BundleError("malformed", "tensor descriptor entry %d: block entries past its rank are not zero" % e, at)
        for _ in range(3):
            if c.u32("reserved"):
                raise BundleError("malformed", "a reserved field is not zero", c.pos - 4)
        if e >= len(slots) or (v[0], v[1]) != slots[e][:2]:
            raise BundleError("malformed", "tensor descriptor entry %d names config %d, argument %d, where the next "
                              "'T' argument is elsewhere" % (e, v[0], v[1]), at)
        cf = slots[e][2]
        if len(cf.tensordescs) >= MAX_TENSORDESCS:
            raise BundleError("limit", "more than TB_MAX_TENSORDESCS descriptors", at)
        cf.tensordescs.append(m)


def _rd_calls(b, c):
    n = c.count(MAX_RECORDS, 32, "call info count")
    if c.u32("reserved"):
        raise BundleError("malformed", "a reserved field is not zero", c.pos - 4)
    prev = -1
    for e in range(n):
        at = c.pos
        v = [c.u32("call info entry") for _ in range(8)]
        if (v[0] >= len(b.records) or v[0] <= prev or v[5] > 1 or v[6] > 1 or v[7] or (not v[5] and not v[6]) or
                (not v[5] and any(v[1:5]))):
            raise BundleError("malformed", "call info entry %d: record out of order or range, or flags or reserved "
                              "fields wrong" % e, at)
        if any(x > MAX_ARGS for x in v[1:5]):
            raise BundleError("limit", "call info entry %d: a count over TB_MAX_ARGS" % e, at)
        prev = v[0]
        rec = b.records[v[0]]
        if v[5]:
            if v[1] * 8 > c.end - c.pos:
                raise BundleError("truncated", "%d argument names cannot fit in the bytes that remain" % v[1], at)
            names = [c.string(MAX_NAME_LENGTH, "argument name") for _ in range(v[1])]
            lists = [[c.u32("index") for _ in range(k)] for k in v[2:5]]
            c.zeros(8, "index lists")
            ci = CallInfo(names, *lists)
            try:
                _check_call(ci, rec)
            except BundleError as err:
                raise BundleError(err.code, str(err).split(": ", 1)[1], at)
            rec.call = ci
        if v[6]:
            for j, cf in enumerate(rec.configs):
                gat = c.pos
                h = [c.u32("grid rule head") for _ in range(4)]
                if h[3] > 1 or (not h[3] and any(h[:3])):
                    raise BundleError("malformed", "config %d: a grid rule head that is neither absent nor present" % j, gat)
                if not h[3]:
                    continue
                for d in range(3):
                    if h[d] == 0 or h[d] > MAX_GRID_OPS:
                        raise BundleError("limit" if h[d] else "malformed", "config %d: grid rule dimension %d has %d "
                                          "operations" % (j, d, h[d]), gat)
                if sum(h[:3]) * 16 > c.end - c.pos:
                    raise BundleError("truncated", "config %d: grid operations cannot fit in the bytes that remain" % j, gat)
                dims = []
                for d in range(3):
                    prog = []
                    for _ in range(h[d]):
                        op, index, value = struct.unpack_from("<IIq", c.d, c.pos)
                        c.pos += 16
                        prog.append((op, index, value))
                    dims.append(prog)
                g = GridRule(*dims)
                try:
                    check_grid(g, cf)
                except BundleError as err:
                    raise BundleError(err.code, str(err).split(": ", 1)[1], gat)
                cf.grid = g


def read(data, verify_checksum=True):
    """A Bundle from bytes, refusing damaged or hostile input with
    BundleError exactly where the C reader refuses it."""
    data = bytes(data)
    size = len(data)
    if data[:min(size, 8)] != MAGIC[:min(size, 8)]:
        raise BundleError("bad_magic", "the input does not start with the bundle magic", 0)
    if size < 40:
        raise BundleError("truncated", "%d bytes, smaller than a header and trailer" % size, size)
    maj, minor = struct.unpack_from("<HH", data, 8)
    if not 1 <= maj <= FORMAT_MAJOR:
        raise BundleError("unsupported_version", "format version %d.%d, this reader reads 1.x to %d.x" % (
            maj, minor, FORMAT_MAJOR), 8)
    stated = struct.unpack_from("<Q", data, 16)[0]
    if stated > size:
        raise BundleError("truncated", "the header says %d bytes, the input has %d" % (stated, size), size)
    if stated < size:
        raise BundleError("malformed", "the header says %d bytes, the input has %d (trailing bytes)" % (stated, size), 16)
    if verify_checksum:
        want = struct.unpack_from("<Q", data, size - 8)[0]
        got = xxh3_64(data[:size - 8]) if maj == 1 else bundle_checksum(data[:size - 8])
        if want != got:
            raise BundleError("checksum", "stored checksum %016x, computed %016x" % (want, got), size - 8)
    nsec = struct.unpack_from("<I", data, 24)[0]
    if nsec > MAX_SECTIONS:
        raise BundleError("limit", "%d sections, over TB_MAX_SECTIONS" % nsec, 24)
    b = Bundle()
    b.version = (maj, minor)
    c = _Cur(data)
    c.pos = 32
    seen = set()
    readers = {1: _rd_kernels, 2: _rd_records, 3: _rd_descs, 4: _rd_calls}
    for i in range(nsec):
        at = c.pos
        c.end = size - 8
        typ, flags, length = c.u32("section type"), c.u32("section flags"), c.u64("section length")
        if length > c.end - c.pos:
            raise BundleError("truncated", "section %d of %d bytes, %d remain" % (i, length, c.end - c.pos), at)
        body_end = c.pos + length
        c.end = body_end
        if typ in readers:
            if typ in seen:
                raise BundleError("malformed", "section type %d appears twice" % typ, at)
            if typ in (3, 4) and 2 not in seen:
                raise BundleError("malformed", "section %d comes before section 2 (launch records)" % typ, at)
            seen.add(typ)
            readers[typ](b, c)
            if c.pos != body_end:
                raise BundleError("malformed", "section %d ends %d bytes before its stated length" % (
                    typ, body_end - c.pos), c.pos)
        elif flags & 1:
            raise BundleError("unsupported_version", "required section type %d is unknown to this reader" % typ, at)
        else:
            c.pos = body_end
        c.end = size - 8
        c.zeros(8, "section")
    if c.pos != size - 8:
        raise BundleError("malformed", "%d unexplained bytes after the last section" % (size - 8 - c.pos), c.pos)
    for r in b.records:
        for cf in r.configs:
            _check_descs(cf)
    seen = set()
    for k in b.kernels:
        if k.hash in seen:
            raise BundleError("malformed", "two kernels of hash %r" % k.hash)
        seen.add(k.hash)
    keys = set()
    kept = []
    for r in b.records:
        if r.cache_key in keys:
            if (maj, minor) >= (2, 1):
                raise BundleError("malformed", "two records of cache key %r" % r.cache_key)
            continue  # 2.0 and 1.0: the first of a key is kept
        keys.add(r.cache_key)
        kept.append(r)
    b.records = kept
    return b


def read_file(path):
    with open(path, "rb") as f:
        return read(f.read())


# ------------------------------------------------- collect (Triton caches)
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


def _metadata_config(kernel, name, arg_types, divisibility, params, flags=0):
    """A Config from NAME.json of a collected kernel (FORMAT.md's
    derivation rules) and the exact types and constexprs of the caller."""
    a = {x.name: x for x in kernel.artifacts}
    md = json.loads(a[name + ".json"].data.decode())
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
    return Config(kernel.hash, md["name"], name + ".cubin", "".join(ch for ch, _ in arg_types), divisibility,
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


# --------------------------------------------------------- Triton export
def _compiled_kernels(fn):
    """Every CompiledKernel of a JITFunction (or of the Autotuner /
    Heuristics around one), with the JITFunction."""
    while not hasattr(fn, "device_caches") and hasattr(fn, "fn"):
        fn = fn.fn
    out = []
    for _dev, cache in list(fn.device_caches.items()):
        for _key, ck in list(cache[0].items()):
            if hasattr(ck, "result"):
                ck = ck.result()
            out.append(ck)
    return fn, out


def _kernel_dir(ck):
    group = getattr(ck, "metadata_group", None) or {}
    for p in group.values():
        return os.path.dirname(p)
    raise BundleError("not_found", "the compiled kernel %s has no cache directory" % ck.name)


def _grid_names(arg_names, params, extra_names=()):
    pidx = {n: i for i, (n, _) in enumerate(params)}
    aidx = {n: i for i, n in enumerate(arg_names)}
    eidx = {n: i for i, n in enumerate(extra_names)}

    def resolve(name):
        if name in aidx:
            return ("arg", aidx[name])
        if name in pidx:
            return ("param", pidx[name])
        if name in eidx:
            return ("extra", eidx[name])
        return None
    return resolve


def _lambda_grid(grid):
    """The expressions of a grid lambda `lambda meta: (e1, e2)`, from its
    source; None when it cannot be read."""
    import inspect
    try:
        src = inspect.getsource(grid).strip()
    except (OSError, TypeError):
        return None
    start = src.find("lambda")
    if start < 0:
        return None
    src = src[start:]
    for end in range(len(src), 0, -1):  # the lambda may end before the line does
        try:
            node = ast.parse(src[:end], mode="eval").body
        except SyntaxError:
            continue
        if isinstance(node, ast.Lambda):
            body = node.body
            return list(body.elts) if isinstance(body, (ast.Tuple, ast.List)) else [body]
    return None


def export_triton(fns, grids=None, bundle=None):
    """Adds every kernel the given @triton.jit functions compiled (after
    they were launched) to bundle (a new one when None) and returns it.

    One record per function and specialization (the non-constexpr
    signature and its tt.divisibility), holding every compiled config: the
    autotune configs, or the constexpr values it was launched with. grids
    maps a function's name to its grid: a lambda meta: (...) as passed to
    the launch (its source is read), or a tuple of expression strings over
    the kernel's parameter names (`"cdiv(n, BLOCK)"`); the configs then
    carry the rule and launch with TB_LAUNCH_GRID_AUTO."""
    if not isinstance(fns, (list, tuple)):
        fns = [fns]
    grids = grids or {}
    b = bundle if bundle is not None else Bundle()
    for f in fns:
        jit, cks = _compiled_kernels(f)
        groups = {}
        for ck in cks:
            src = ck.src
            sig = src.signature
            names = list(sig.keys())
            consts = {k[0] if isinstance(k, tuple) else k: v for k, v in src.constants.items()}
            attrs = {k[0] if isinstance(k, tuple) else k: v for k, v in getattr(src, "attrs", {}).items()}
            types, div, arg_names = [], "", []
            for i, n in enumerate(names):
                code = _code(sig[n]) if i not in consts else None
                if code is None:
                    continue
                types.append(code)
                arg_names.append(n)
                div += "1" if any(a[0] == "tt.divisibility" and a[1] == 16 for a in attrs.get(i, [])) else "0"
            params = _int_params([(names[i], v) for i, v in sorted(consts.items())])
            md = ck.metadata
            params += [("num_warps", md.num_warps), ("num_stages", getattr(md, "num_stages", 0))]
            cdir = _kernel_dir(ck)
            h = os.path.basename(cdir)
            if b.kernel(h) is None:
                b.kernels.append(collect_kernel(os.path.dirname(cdir), h))
            cfg = _metadata_config(b.kernel(h), md.name, types, div, params)
            spec = (cfg.arg_types, div, tuple(arg_names))
            groups.setdefault(spec, []).append(cfg)
        gspec = grids.get(jit.__name__)
        for n, ((types, div, arg_names), cfgs) in enumerate(sorted(groups.items())):
            for cfg in cfgs:
                if gspec is not None:
                    exprs = _lambda_grid(gspec) if callable(gspec) else list(gspec)
                    if exprs is None:
                        raise BundleError("invalid_argument", "the grid of %s cannot be read: pass it as strings"
                                          % jit.__name__)
                    cfg.grid = grid_rule(exprs, _grid_names(arg_names, cfg.params))
            key = "triton:%s:%s" % (jit.__name__, cfgs[0].kernel_hash)
            b.records.append(Record(key, jit.__name__, cfgs, CallInfo(list(arg_names))))
    return b


# ---------------------------------------------------------- torch export
class TorchCapture:
    """Records every Triton kernel launch of torch.compile'd code while
    active (a context manager), then exports the kernels:

        with TorchCapture() as cap:
            out = compiled(x)           # run it once, after any warm-up
        bundle = cap.bundle()           # one record per Inductor autotuner
        write_file(bundle, "model.tbundle")

    Each record holds all of the autotuner's configs (its compile results,
    also those coordinate descent added), each with its kwargs, num_warps
    and num_stages as params and Inductor's grid as a rule; the record's
    call info names the arguments and marks the mutated and reset-to-zero
    ones. cap.launches lists, in order, (record key, config index, args,
    grid_args, grid) of every launch, for replaying the sequence. With
    keep_args, each launch also keeps its arguments (tensors as they were
    passed, not copied)."""

    def __init__(self, keep_args=False):
        self.keep_args = keep_args
        self.launches = []
        self._tuners = {}
        self._used = {}  # id(tuner) -> the launchers it ran
        self._names = {}  # id(launcher) -> its parameters' names
        self._orig = None

    def __enter__(self):
        import torch._inductor.runtime.triton_heuristics as th
        self._th = th
        self._orig = th.CachingAutotuner.run
        cap = self

        def run(tuner, *args, stream, benchmark_run=False, **kwargs):
            r = cap._orig(tuner, *args, stream=stream, benchmark_run=benchmark_run, **kwargs)
            if not benchmark_run:
                cap._record(tuner, args)
            return r
        th.CachingAutotuner.run = run
        return self

    def __exit__(self, *exc):
        self._th.CachingAutotuner.run = self._orig
        return False

    def _record(self, tuner, args):
        import inspect
        launcher = tuner.launchers[0]
        used = self._used.setdefault(id(tuner), [])
        if all(u is not launcher for u in used):
            used.append(launcher)
        key = self._tuner_key(tuner)
        results = tuner.compile_results
        index = next((i for i, cr in enumerate(results) if cr.config is launcher.config), None)
        if index is None:  # matched by kwargs and launch options
            want = _config_dict(launcher.config)
            index = next((i for i, cr in enumerate(results) if _config_dict(cr.config) == want), 0)
        try:
            _, grid = tuner._interpret_args_grid(args, launcher.config)
        except Exception:  # noqa: BLE001 - the grid is informational
            grid = None
        names = self._names.get(id(launcher))
        if names is None:  # once per launcher, not per launch
            names = self._names[id(launcher)] = [n for n in inspect.signature(launcher).parameters if n != "stream"]
        by_name = dict(zip(names, args))
        extra = [by_name.get(n) for n in tuner.inductor_meta.get("extra_launcher_args", [])]
        self.launches.append({"key": key, "config": index, "cache_hash": getattr(launcher, "cache_hash", None),
                              "grid_type": tuner.inductor_meta.get("grid_type"),
                              "args": by_name if self.keep_args else None,
                              "grid_args": [int(v) for v in extra if v is not None],
                              "grid": tuple(int(g) for g in grid) if grid else None})

    def _tuner_key(self, tuner):
        k = id(tuner)
        if k not in self._tuners:
            name = tuner.inductor_meta.get("kernel_name") or tuner.fn.__name__
            self._tuners[k] = ("inductor:%s:%s" % (name, getattr(tuner, "kernel_hash", "") or "%x" % k), tuner)
        return self._tuners[k][0]

    def bundle(self, bundle=None):
        b = bundle if bundle is not None else Bundle()
        for key, tuner in self._tuners.values():
            b.records.append(_autotuner_record(b, key, tuner, self._used.get(id(tuner), [])))
        # the config each launch used: the one whose cubin its launcher ran
        for launch in self.launches:
            rec = b.record(launch["key"])
            hit = [i for i, c in enumerate(rec.configs) if c.kernel_hash == launch["cache_hash"]]
            if hit:
                launch["config"] = hit[0]
        return b


def _config_dict(cfg):
    return (dict(cfg.kwargs), cfg.num_warps, cfg.num_stages)


def _compile_result_kernel(cr, device):
    """(CompiledKernel-like with .src, metadata dict, cache dir) of an
    Inductor compile result."""
    k = cr.kernel
    if hasattr(k, "src") and hasattr(k, "metadata_group"):  # a Triton CompiledKernel
        return k.src.signature, {kk[0] if isinstance(kk, tuple) else kk: v for kk, v in k.src.constants.items()}, \
            _kernel_dir(k), k.metadata.name
    # StaticallyLaunchedCudaKernel: the cubin sits in a Triton cache
    # directory, which Inductor's compile workers may have chosen apart from
    # this process: look where each of them would put it
    from torch._inductor.runtime.runtime_utils import cache_dir, triton_cache_dir, triton_hash_to_path_key
    sub = triton_hash_to_path_key(k.hash)
    bases = [triton_cache_dir(device), os.path.join(cache_dir(), "triton", str(device)),
             os.environ.get("TRITON_CACHE_DIR", ""), os.path.join(os.path.expanduser("~"), ".triton", "cache")]
    try:
        from triton import knobs
        bases.append(knobs.cache.dir)
    except Exception:  # noqa: BLE001 - older Triton
        pass
    import glob  # fresh-cache runs (force_disable_caches) compile into <cache dir>/tmp*/triton
    bases += sorted(glob.glob(os.path.join(cache_dir(), "*", "triton")), key=os.path.getmtime, reverse=True)
    for base in bases:
        if base and os.path.isfile(os.path.join(base, sub, k.name + ".cubin")):
            return None, {i: None for i in k.full_constexprs}, os.path.join(base, sub), k.name
    raise BundleError("not_found", "the cubin of %s (%s) is in none of %s" % (k.name, sub, [b for b in bases if b]))


class _LauncherResult:
    """A config that a launcher ran but compile_results does not list (one
    coordinate descent tuning found): its kernel and config, from the
    launcher Inductor generated."""

    def __init__(self, launcher, tuner):
        g = launcher.__globals__
        self.kernel = g["runner"].__self__ if "runner" in g and hasattr(g["runner"], "__self__") else g["bin"]
        self.config = launcher.config
        self.compile_meta = {"constants": dict(tuner.triton_meta.get("constants", {}) or {})}


def _autotuner_record(b, key, tuner, used=()):
    from torch._inductor.runtime.triton_heuristics import GridExpr
    meta = tuner.triton_meta
    sig = meta["signature"]
    names = list(sig.keys())
    inductor = tuner.inductor_meta
    extra_names = list(inductor.get("extra_launcher_args", []))
    mutated = set(getattr(tuner, "mutated_arg_names", []) or [])
    reset = set(getattr(tuner, "reset_to_zero_arg_names", []) or [])
    attrs = {}
    for cfgattrs in (meta.get("configs") or [])[:1]:
        items = cfgattrs.items() if isinstance(cfgattrs, dict) else []
        attrs = {k[0] if isinstance(k, tuple) else k: v for k, v in items}
    configs, arg_names = [], None
    results = list(tuner.compile_results)
    known = {getattr(getattr(cr, "kernel", None), "hash", None) for cr in results}
    for launcher in used:
        extra = _LauncherResult(launcher, tuner)
        if getattr(extra.kernel, "hash", None) not in known:
            results.append(extra)
            known.add(extra.kernel.hash)
    for cr in results:
        sig_exact, consts, cdir, fname = _compile_result_kernel(cr, meta.get("device", 0))
        sig_exact = sig_exact or sig
        h = os.path.basename(cdir)
        if b.kernel(h) is None:
            b.kernels.append(collect_kernel(os.path.dirname(cdir), h))
        kwargs = dict(cr.config.kwargs)
        types, div, anames, baked = [], "", [], {}
        # constexprs Inductor declared (a static r0_numel, an xnumel of 1...)
        for kk, v in (getattr(cr, "compile_meta", None) or {}).get("constants", {}).items():
            kname = names[kk[0] if isinstance(kk, tuple) else kk] if not isinstance(kk, str) else kk
            if isinstance(v, (int, bool)) and kname not in kwargs:
                baked[kname] = int(v)
        for i, n in enumerate(names):
            if sig[n] == "constexpr" or n in kwargs:
                continue
            if i in consts:  # Triton made it a constexpr (an int equal to 1): not a parameter
                baked[n] = consts[i] if consts[i] is not None else 1
                continue
            code = _code(sig_exact.get(n, sig[n]) if isinstance(sig_exact, dict) else sig[n])
            types.append(code)
            anames.append(n)
            div += "1" if any(a[0] == "tt.divisibility" and a[1] == 16 for a in attrs.get(i, [])) else "0"
        params = _int_params(sorted(kwargs.items())) + [("num_warps", cr.config.num_warps),
                                                        ("num_stages", cr.config.num_stages)]
        cfg = _metadata_config(b.kernel(h), fname, types, div, params)
        expr = GridExpr.from_meta(inductor, cr.config, mode="python")
        resolve = _grid_names(anames, cfg.params, extra_names)

        def names_with_baked(name, resolve=resolve, baked=baked):
            r = resolve(name)
            if r is None and name in baked:
                return ("const", int(baked[name]))
            return r
        cfg.grid = grid_rule([expr.x_grid, expr.y_grid, expr.z_grid], names_with_baked, expr.prefix)
        if arg_names is None:
            arg_names = anames
        elif anames != arg_names:
            raise BundleError("malformed", "the configs of %s take different arguments" % key)
        configs.append(cfg)
    ci = CallInfo(arg_names, [i for i, n in enumerate(arg_names) if n in mutated],
                  [i for i, n in enumerate(arg_names) if n in reset])
    name = inductor.get("kernel_name") or tuner.fn.__name__
    return Record(key, name, configs, ci)



# ------------------------------------------------ the C library, by ctypes
RESULTS = ["ok", "invalid_argument", "out_of_memory", "io", "truncated", "bad_magic", "unsupported_version", "checksum",
           "malformed", "limit", "bad_name", "not_found", "sentinel", "unsupported_type", "parse", "no_driver",
           "no_device", "cuda", "arg_mismatch", "arg_range", "misaligned", "shared_memory", "scratch"]
LAUNCH_CHECKED, LAUNCH_GRID_AUTO = 1, 2
CONFIG_AUTOTUNE = 0xFFFFFFFF


class CLibrary:
    """triton_bundle.h built as a shared object (`make lib` builds
    build/libtriton_bundle.so, `make install` puts it in PREFIX/lib), through
    ctypes: read and write bundles, compute grids, and launch kernels by
    name from Python, with no torch or triton at run time.

    CLibrary(path=None) finds the shared object in this order:
      1. path, when given (a file name; used as it is, never searched);
      2. the environment variable TRITON_BUNDLE_LIB, when set and not empty
         (likewise a file name);
      3. the system loader: dlopen("libtriton_bundle.so"), which searches
         LD_LIBRARY_PATH, the ld.so cache and the default directories
         (after `make install` into /usr/local, run ldconfig once; for
         another prefix, set LD_LIBRARY_PATH or TRITON_BUNDLE_LIB).
    The first of these that is given is the only one tried: a path or
    TRITON_BUNDLE_LIB that does not load raises OSError rather than falling
    back to another library."""

    LIB_NAME = "libtriton_bundle.so"
    LIB_ENV = "TRITON_BUNDLE_LIB"

    @classmethod
    def locate(cls, path=None):
        """(what to dlopen, where it came from: "path", "TRITON_BUNDLE_LIB"
        or "system loader") by the order above."""
        if path:
            return os.fspath(path), "path"
        env = os.environ.get(cls.LIB_ENV)
        if env:
            return env, cls.LIB_ENV
        return cls.LIB_NAME, "system loader"

    def __init__(self, path=None):
        import ctypes as ct
        self.ct = ct
        self.path, self.found_by = self.locate(path)

        class Error(ct.Structure):
            _fields_ = [("code", ct.c_int), ("sys_errno", ct.c_int), ("cuda_result", ct.c_int),
                        ("offset", ct.c_longlong), ("kernel", ct.c_char * 128), ("file", ct.c_char * 256),
                        ("message", ct.c_char * 640)]

        class Arg(ct.Union):
            _fields_ = [("i", ct.c_int64), ("u", ct.c_uint64), ("f", ct.c_double), ("p", ct.c_void_p)]

        class Scratch(ct.Structure):
            _fields_ = [("size", ct.c_uint64), ("align", ct.c_uint32), ("present", ct.c_uint32)]

        class Config(ct.Structure):
            _fields_ = [("kernel_hash", ct.c_char_p), ("function_name", ct.c_char_p), ("binary_name", ct.c_char_p),
                        ("arg_types", ct.c_char_p), ("arg_divisibility", ct.c_char_p), ("num_warps", ct.c_uint32),
                        ("num_ctas", ct.c_uint32), ("shared_mem", ct.c_uint32), ("flags", ct.c_uint32),
                        ("cluster_dims", ct.c_uint32 * 3), ("global_scratch", Scratch), ("profile_scratch", Scratch),
                        ("param_count", ct.c_uint32), ("params", ct.c_void_p), ("tensordesc_count", ct.c_uint32),
                        ("tensordescs", ct.c_void_p), ("grid", ct.c_void_p)]

        class Record(ct.Structure):
            _fields_ = [("cache_key", ct.c_char_p), ("kernel_name", ct.c_char_p), ("config_count", ct.c_uint32),
                        ("configs", ct.POINTER(Config)), ("call", ct.c_void_p)]

        class Params(ct.Structure):
            _fields_ = [("grid", ct.c_uint32 * 3), ("stream", ct.c_void_p), ("args", ct.POINTER(Arg)),
                        ("arg_count", ct.c_uint32), ("flags", ct.c_uint), ("global_scratch", ct.c_void_p),
                        ("profile_scratch", ct.c_void_p), ("grid_args", ct.POINTER(ct.c_int64)),
                        ("grid_arg_count", ct.c_uint32), ("arg_bytes", ct.POINTER(ct.c_size_t))]

        self.Error, self.Arg, self.Config, self.Record, self.Params = Error, Arg, Config, Record, Params
        try:
            L = self.L = ct.CDLL(self.path)
        except OSError as e:
            hint = {"path": "",
                    self.LIB_ENV: " (from %s)" % self.LIB_ENV,
                    "system loader": " (neither a path nor %s was given; build it with `make lib` or install it "
                                     "with `make install`, and run ldconfig or set LD_LIBRARY_PATH or %s)"
                                     % (self.LIB_ENV, self.LIB_ENV)}[self.found_by]
            raise OSError("cannot load %s%s: %s" % (self.path, hint, e)) from e
        vp, sz, u32 = ct.c_void_p, ct.c_size_t, ct.c_uint32
        L.tb_bundle_read_memory.argtypes = [ct.c_char_p, sz, vp, ct.c_uint, ct.POINTER(vp), ct.POINTER(Error)]
        L.tb_bundle_read_file.argtypes = [ct.c_char_p, vp, ct.c_uint, ct.POINTER(vp), ct.POINTER(Error)]
        L.tb_bundle_write_memory.argtypes = [vp, vp, sz, ct.POINTER(sz), ct.POINTER(Error)]
        L.tb_bundle_free.argtypes = [vp]
        L.tb_bundle_launch_record.argtypes = [vp, u32]
        L.tb_bundle_launch_record.restype = ct.POINTER(Record)
        L.tb_grid_compute.argtypes = [ct.POINTER(Config), ct.POINTER(Arg), u32, ct.POINTER(ct.c_int64), u32,
                                      u32 * 3, ct.POINTER(Error)]
        L.tb_xxh3_64.argtypes = [ct.c_char_p, sz]
        L.tb_xxh3_64.restype = ct.c_uint64
        if hasattr(L, "tb_kernel_table_choice"):
            L.tb_kernel_table_choice.argtypes = [vp, ct.c_char_p, ct.POINTER(Arg), u32, ct.POINTER(u32),
                                                 ct.POINTER(ct.c_double), ct.POINTER(Error)]
        if hasattr(L, "tb_kernel_table_create"):
            L.tb_kernel_table_create.argtypes = [vp, vp, vp, ct.c_uint, ct.POINTER(vp), ct.POINTER(Error)]
            L.tb_kernel_table_launch.argtypes = [vp, ct.c_char_p, u32, ct.POINTER(Params), ct.POINTER(Error)]
            L.tb_kernel_table_find.argtypes = [vp, ct.c_char_p, u32, ct.POINTER(Arg), u32, ct.POINTER(u32),
                                               ct.POINTER(Error)]
            L.tb_kernel_table_free.argtypes = [vp]

    def _fail(self, r, e):
        raise BundleError(RESULTS[r], e.message.decode(errors="replace"))

    def read(self, data, copy=True):
        """A bundle handle (free it with .free), or BundleError."""
        b, e = self.ct.c_void_p(), self.Error()
        r = self.L.tb_bundle_read_memory(data, len(data), None, 1 if copy else 0, self.ct.byref(b), self.ct.byref(e))
        if r:
            self._fail(r, e)
        return b

    def read_file(self, path):
        b, e = self.ct.c_void_p(), self.Error()
        r = self.L.tb_bundle_read_file(os.fsencode(path), None, 0, self.ct.byref(b), self.ct.byref(e))
        if r:
            self._fail(r, e)
        return b

    def write(self, b):
        n, e = self.ct.c_size_t(), self.Error()
        r = self.L.tb_bundle_write_memory(b, None, 0, self.ct.byref(n), self.ct.byref(e))
        buf = self.ct.create_string_buffer(max(1, n.value))
        r = r or self.L.tb_bundle_write_memory(b, buf, n.value, None, self.ct.byref(e))
        if r:
            self._fail(r, e)
        return buf.raw[:n.value]

    def free(self, b):
        self.L.tb_bundle_free(b)

    def _args(self, args):
        a = (self.Arg * max(1, len(args)))()
        for i, v in enumerate(args):
            if isinstance(v, float):
                a[i].f = v
            else:
                a[i].u = int(v) & _M
        return a

    def grid(self, b, record, config, args, grid_args=()):
        """tb_grid_compute on record's config: (x, y, z), or BundleError."""
        rec = self.L.tb_bundle_launch_record(b, record)
        x = (self.ct.c_int64 * max(1, len(grid_args)))(*[int(v) for v in grid_args])
        g, e = (self.ct.c_uint32 * 3)(), self.Error()
        r = self.L.tb_grid_compute(self.ct.byref(rec.contents.configs[config]), self._args(args), len(args), x,
                                   len(grid_args), g, self.ct.byref(e))
        if r:
            self._fail(r, e)
        return tuple(g)

    def table(self, b, lazy=True):
        t, e = self.ct.c_void_p(), self.Error()
        r = self.L.tb_kernel_table_create(b, None, None, 1 if lazy else 0, self.ct.byref(t), self.ct.byref(e))
        if r:
            self._fail(r, e)
        return t

    def find(self, t, key_or_name, config, args):
        rec, e = self.ct.c_uint32(), self.Error()
        r = self.L.tb_kernel_table_find(t, key_or_name.encode(), config, self._args(args), len(args), self.ct.byref(rec),
                                        self.ct.byref(e))
        if r:
            self._fail(r, e)
        return rec.value

    def launch(self, t, key_or_name, config, args, grid=None, grid_args=(), stream=0, scratch=(None, None), flags=0,
               arg_bytes=None):
        """tb_kernel_table_launch; grid None: TB_LAUNCH_GRID_AUTO; config
        CONFIG_AUTOTUNE: the tuned choice (arg_bytes: the sizes of the
        pointer arguments the trials copy). args: ints (pointers as ints)
        and floats, one per code."""
        p, e = self.Params(), self.Error()
        a = self._args(args)
        x = (self.ct.c_int64 * max(1, len(grid_args)))(*[int(v) for v in grid_args])
        if grid is None:
            flags |= LAUNCH_GRID_AUTO
        else:
            p.grid[0], p.grid[1], p.grid[2] = grid
        p.stream, p.args, p.arg_count, p.flags = stream, a, len(args), flags
        p.global_scratch, p.profile_scratch = scratch
        p.grid_args, p.grid_arg_count = x, len(grid_args)
        if arg_bytes is not None:
            nb = (self.ct.c_size_t * max(1, len(arg_bytes)))(*[int(v) for v in arg_bytes])
            p.arg_bytes = self.ct.cast(nb, self.ct.POINTER(self.ct.c_size_t))
        r = self.L.tb_kernel_table_launch(t, key_or_name.encode(), config, self.ct.byref(p), self.ct.byref(e))
        if r:
            self._fail(r, e)

    def choice(self, t, key_or_name, args):
        """(config, median ms) of the autotune choice for these arguments."""
        cfg, ms, e = self.ct.c_uint32(), self.ct.c_double(), self.Error()
        r = self.L.tb_kernel_table_choice(t, key_or_name.encode(), self._args(args), len(args), self.ct.byref(cfg),
                                          self.ct.byref(ms), self.ct.byref(e))
        if r:
            self._fail(r, e)
        return cfg.value, ms.value

    def free_table(self, t):
        self.L.tb_kernel_table_free(t)

# ------------------------------------------------------------ command line
def _list(path, out=sys.stdout):
    b = read_file(path)
    out.write("%s: format %d.%d, %d kernels, %d records\n" % (path, b.version[0], b.version[1], len(b.kernels),
                                                              len(b.records)))
    for k in b.kernels:
        out.write("kernel %s %s (%d files)\n" % (k.hash, k.name(), len(k.artifacts)))
    for r in b.records:
        out.write("record %s: %s, %d config(s)\n" % (r.cache_key, r.kernel_name, len(r.configs)))
        if r.call and r.call.arg_names:
            out.write("  args %s%s\n" % (", ".join(r.call.arg_names), "; mutated " + ", ".join(
                r.call.arg_names[i] for i in r.call.mutated) if r.call.mutated else ""))
        for i, c in enumerate(r.configs):
            out.write("  [%d] %s \"%s\" warps %d%s%s\n" % (
                i, c.function_name, c.arg_types, c.num_warps,
                " " + " ".join("%s=%d" % p for p in c.params) if c.params else "",
                " grid " + c.grid.text(r.call.arg_names if r.call else None, c.params) if c.grid else ""))


def _export_cli(ns):
    """export: runs a Python file that defines export() and returns a
    Bundle, or a list of @triton.jit functions (launched already)."""
    import runpy
    scope = runpy.run_path(ns.script, run_name="__triton_bundle_export__")
    fn = scope.get(ns.function)
    if fn is None:
        raise SystemExit("%s defines no %s()" % (ns.script, ns.function))
    b = fn()
    if not (hasattr(b, "kernels") and hasattr(b, "records")):
        b = export_triton(b)
    write_file(b, ns.output)
    sys.stdout.write("%s: %d kernels, %d records\n" % (ns.output, len(b.kernels), len(b.records)))


PROG = "triton-bundle"


def main(argv=None):
    """The command line (the triton-bundle command, python -m triton_bundle):
    returns the exit status, 0 on success, 1 on failure, 2 on a usage error."""
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version="%(prog)s " + __version__)
    sub = p.add_subparsers(dest="cmd")
    pl = sub.add_parser("list", help="list a bundle's kernels, records, configs and grid rules")
    pl.add_argument("file")
    pe = sub.add_parser("export", help="run SCRIPT's FUNCTION() (torch.compile or Triton launches that return a "
                        "Bundle via TorchCapture/export_triton, or @triton.jit functions) and write the bundle")
    pe.add_argument("script")
    pe.add_argument("-o", "--output", required=True)
    pe.add_argument("-f", "--function", default="export")
    ns = p.parse_args(argv)
    try:
        if ns.cmd == "list":
            _list(ns.file)
        elif ns.cmd == "export":
            _export_cli(ns)
        else:
            p.print_help()
            return 2
    except BundleError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return 1
    except OSError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return 1
    return 0


if __name__ == "__main__":
    # a script that export runs and that imports triton_bundle gets this
    # module, so that its Bundle is ours
    sys.modules.setdefault("triton_bundle", sys.modules[__name__])
    sys.exit(main())
