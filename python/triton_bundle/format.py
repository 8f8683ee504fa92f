"""The bundle format (docs/FORMAT.md, 2.3), as the header's >>model and
>>format sections: the format's constants and limits, the argument codes,
BundleError, XXH3-64 and the checksum, the data model (Bundle, Kernel,
Artifact, Record, Config, TensorDesc, CallInfo, GridRule), validation, and
the writer and the reader: the same bytes as the C library for the same
bundle, and the same refusals of damaged or hostile input."""

import collections
import os
import struct

FORMAT_MAJOR = 2
FORMAT_MINOR = 3
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
MAX_PROGRAM_TENSORS = 65536
MAX_PROGRAM_CONSTANTS = 1000000
MAX_PROGRAM_BUFFERS = 1000000
MAX_PROGRAM_STEPS = 1000000
MAX_TENSOR_DIMS = 8

CONFIG_COOPERATIVE = 1
CONFIG_PDL = 2
CONFIG_TYPES_FROM_IR = 4

# Grid operations (FORMAT.md, section 4).
CONST, ARG, PARAM, EXTRA = 1, 2, 3, 4
ADD, SUB, MUL, FLOORDIV, CEILDIV, MOD, MIN, MAX, NEG = 16, 17, 18, 19, 20, 21, 22, 23, 24
OP_NAMES = {CONST: "CONST", ARG: "ARG", PARAM: "PARAM", EXTRA: "EXTRA", ADD: "ADD", SUB: "SUB", MUL: "MUL",
            FLOORDIV: "FLOORDIV", CEILDIV: "CEILDIV", MOD: "MOD", MIN: "MIN", MAX: "MAX", NEG: "NEG"}

# The argument codes: one row each, the header's TB__ARG_CODES row for row
# (tests/test_codes.py checks it): the code, the bytes it occupies as a
# kernel parameter, its kind, Triton's signature name (and another it also
# writes), and the MLIR type of the tt.func line ("" where the IR cannot say:
# it has no unsigned types). 'O' and 'T' are matched by prefix ("*fp32",
# "tensordesc<...>"). The maps below are derived from it.
KIND_PTR, KIND_BOOL, KIND_SINT, KIND_UINT, KIND_FLOAT, KIND_DESC = 1, 2, 3, 4, 5, 6
ArgCode = collections.namedtuple("ArgCode", "code bytes kind triton triton2 mlir")
ARG_CODES = (
    ArgCode("O", 8, KIND_PTR, "*", "", "!tt.ptr<"),
    ArgCode("?", 1, KIND_BOOL, "i1", "u1", "i1"),
    ArgCode("b", 1, KIND_SINT, "i8", "", "i8"),
    ArgCode("h", 2, KIND_SINT, "i16", "", "i16"),
    ArgCode("i", 4, KIND_SINT, "i32", "", "i32"),
    ArgCode("l", 8, KIND_SINT, "i64", "", "i64"),
    ArgCode("B", 1, KIND_UINT, "u8", "", ""),
    ArgCode("H", 2, KIND_UINT, "u16", "", ""),
    ArgCode("I", 4, KIND_UINT, "u32", "", ""),
    ArgCode("K", 8, KIND_UINT, "u64", "", ""),
    ArgCode("e", 2, KIND_FLOAT, "fp16", "", "f16"),
    ArgCode("y", 2, KIND_FLOAT, "bf16", "", "bf16"),
    ArgCode("f", 4, KIND_FLOAT, "fp32", "f32", "f32"),
    ArgCode("d", 8, KIND_FLOAT, "fp64", "", "f64"),
    ArgCode("T", 8, KIND_DESC, "tensordesc<", "", "!tt.tensordesc<"),
)
# bytes by code (tb_arg_code_size)
CODE_SIZES = {r.code: r.bytes for r in ARG_CODES}
# the codes a grid rule may read: bools and integers
INT_CODES = {r.code for r in ARG_CODES if r.kind in (KIND_BOOL, KIND_SINT, KIND_UINT)}
# Triton 3.6 signature types of scalars to argument codes (FORMAT.md's table)
TRITON_CODES = {name: r.code for r in ARG_CODES if r.kind not in (KIND_PTR, KIND_DESC)
                for name in (r.triton, r.triton2) if name}

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

# The program (FORMAT.md, section 5): dtypes, one row each, the header's
# TB__DTYPES row for row (tests/test_codes.py checks it): the number, the
# name (PyTorch's), the bytes of one element, and the .npy descr that
# tbundle run reads and writes (bf16 and fp8 as their bit patterns).
DType = collections.namedtuple("DType", "number name bytes npy")
DTYPES = (
    DType(1, "float32", 4, "<f4"),
    DType(2, "float16", 2, "<f2"),
    DType(3, "bfloat16", 2, "<u2"),
    DType(4, "float64", 8, "<f8"),
    DType(5, "int8", 1, "|i1"),
    DType(6, "int16", 2, "<i2"),
    DType(7, "int32", 4, "<i4"),
    DType(8, "int64", 8, "<i8"),
    DType(9, "uint8", 1, "|u1"),
    DType(10, "bool", 1, "|b1"),
    DType(11, "float8_e4m3fn", 1, "|u1"),
    DType(12, "float8_e5m2", 1, "|u1"),
    DType(13, "uint16", 2, "<u2"),
    DType(14, "uint32", 4, "<u4"),
    DType(15, "uint64", 8, "<u8"),
    DType(16, "float8_e4m3fnuz", 1, "|u1"),
    DType(17, "float8_e5m2fnuz", 1, "|u1"),
)
DTYPE_BY_NAME = {d.name: d for d in DTYPES}
DTYPE_BY_NUMBER = {d.number: d for d in DTYPES}
# operand spaces and step kinds
LITERAL, INPUT, OUTPUT, CONSTANT, BUFFER = 0, 1, 2, 3, 4
LAUNCH, MEMSET, COPY = 1, 2, 3
CONSTANT_STATE = 1


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


class TensorSpec:
    """A program's input or output: name, dtype (a DTYPES name), sizes and
    strides (elements), and the alignment its data pointer needs."""

    def __init__(self, name, dtype, shape, strides, align=16):
        self.name, self.dtype, self.shape, self.strides = name, dtype, list(shape), list(strides)
        self.align = align

    def extent(self):
        """Bytes from the first element to the end of the last."""
        if any(n == 0 for n in self.shape):
            return 0
        return (1 + sum((n - 1) * st for n, st in zip(self.shape, self.strides))) * DTYPE_BY_NAME[self.dtype].bytes

    def __eq__(self, o):
        return isinstance(o, TensorSpec) and (self.name, self.dtype, self.shape, self.strides, self.align) == (
            o.name, o.dtype, o.shape, o.strides, o.align)


class Constant:
    """A weight or buffer: its bytes, stored once; state: the model
    updates it in place (running statistics), and it persists across runs."""

    def __init__(self, name, dtype, data, state=False):
        self.name, self.dtype, self.data, self.state = name, dtype, data, bool(state)

    def __eq__(self, o):
        return isinstance(o, Constant) and (self.name, self.dtype, self.state) == (o.name, o.dtype, o.state) and \
            bytes(self.data) == bytes(o.data)


class Buffer:
    """An intermediate in the workspace: bytes [offset, offset + size),
    used by steps first..last (inclusive)."""

    def __init__(self, offset, size, first, last):
        self.offset, self.size, self.first, self.last = offset, size, first, last

    def __eq__(self, o):
        return isinstance(o, Buffer) and (self.offset, self.size, self.first, self.last) == (
            o.offset, o.size, o.first, o.last)


class Step:
    """LAUNCH (record index, config, grid, one operand per argument code),
    MEMSET (width, value, count elements; operand: destination) or COPY
    (count bytes; operands: destination, source). An operand is (space,
    index, value): (LITERAL, 0, the tb_arg bits as an unsigned 64-bit
    int) or (INPUT/OUTPUT/CONSTANT/BUFFER, which, byte offset)."""

    def __init__(self, kind, operands, record=0, config=0, grid=(0, 0, 0), width=0, value=0, count=0):
        self.kind, self.operands = kind, [tuple(o) for o in operands]
        self.record, self.config, self.grid = record, config, tuple(grid)
        self.width, self.value, self.count = width, value, count

    FIELDS = ("kind", "operands", "record", "config", "grid", "width", "value", "count")

    def __eq__(self, o):
        return isinstance(o, Step) and all(getattr(self, f) == getattr(o, f) for f in self.FIELDS)


class Program:
    """A whole compiled model (FORMAT.md, section 5)."""

    def __init__(self, inputs=None, outputs=None, constants=None, buffers=None, workspace_size=0, steps=None):
        self.inputs, self.outputs = list(inputs or []), list(outputs or [])
        self.constants, self.buffers = list(constants or []), list(buffers or [])
        self.workspace_size, self.steps = workspace_size, list(steps or [])

    FIELDS = ("inputs", "outputs", "constants", "buffers", "workspace_size", "steps")

    def __eq__(self, o):
        return isinstance(o, Program) and all(getattr(self, f) == getattr(o, f) for f in self.FIELDS)


class Bundle:
    def __init__(self, kernels=None, records=None, program=None):
        self.kernels, self.records = list(kernels or []), list(records or [])
        self.program = program  # a Program, or None
        self.version = (FORMAT_MAJOR, FORMAT_MINOR)

    def __eq__(self, o):
        return isinstance(o, Bundle) and (self.kernels, self.records, self.program) == (
            o.kernels, o.records, o.program)

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


def _str_size(s):
    """The bytes _Out.string writes for s (at an 8-aligned position)."""
    n = 4 + len(_enc(s)) + 1
    return n + _pad(n, 8)


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


def _check_writable(bundle):
    """What the writer refuses, in the order the C writer checks it."""
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


# The sections' payloads: for each, what it writes (and its size, for the
# rows that have one) and, under "reader" below, what it reads.
def _wr_kernels(bundle, o):
    """Section 1: every kernel and its files (artifact data 16-aligned)."""
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


def _records_size(bundle):
    n = 16
    for r in bundle.records:
        n += _str_size(r.cache_key) + _str_size(r.kernel_name) + 8
        for c in r.configs:
            n += sum(_str_size(s) for s in (c.kernel_hash, c.function_name, c.binary_name, c.arg_types,
                                             c.arg_divisibility)) + 32 + 32
            n += sum(_str_size(name) + 8 for name, _ in c.params)
    return n


def _wr_records(bundle, o):
    """Section 2: the launch records, their configs and params."""
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


def _desc_entries(bundle):
    """(config number over all records, argument index, TensorDesc) of every 'T' argument."""
    configs = [c for r in bundle.records for c in r.configs]
    return [(g, i, m) for g, c in enumerate(configs)
            for i, m in zip([j for j, ch in enumerate(c.arg_types) if ch == "T"], c.tensordescs)]


def _descs_size(bundle):
    n = len(_desc_entries(bundle))
    return 8 + 64 * n if n else 0


def _wr_descs(bundle, o):
    """Section 3 (2.1): how each tensor descriptor argument is passed."""
    descs = _desc_entries(bundle)
    o.u32(len(descs))
    o.u32(0)
    for g, i, m in descs:
        for v in (g, i, m.tma, m.rank, m.swizzle, m.elem_size, m.elem_type, m.fp4_padded):
            o.u32(v)
        for q in range(MAX_TENSOR_RANK):
            o.u32(m.block[q] if q < m.rank else 0)
        o.b += b"\0" * 12


def _call_entries(bundle):
    """(record index, Record) of the records with call info or a grid rule."""
    return [(i, r) for i, r in enumerate(bundle.records) if r.call is not None or any(c.grid for c in r.configs)]


def _calls_size(bundle):
    entries = _call_entries(bundle)
    if not entries:
        return 0
    n = 8
    for _, r in entries:
        ci = r.call
        n += 32
        if ci:
            n += sum(_str_size(name) for name in ci.arg_names)
            lists = 4 * (len(ci.mutated) + len(ci.reset) + len(ci.key))
            n += lists + _pad(lists, 8)
        if any(c.grid for c in r.configs):
            n += sum(16 + (16 * sum(len(p) for p in c.grid.dims) if c.grid else 0) for c in r.configs)
    return n


def _wr_calls(bundle, o):
    """Section 4 (2.2): call info and grid rules, for the records that have them."""
    entries = _call_entries(bundle)
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


# --------------------------------------------------------------- sections
SEC_KERNELS, SEC_RECORDS, SEC_TENSORDESCS, SEC_CALLS = 1, 2, 3, 4
SECTION_REQUIRED = 1  # a section flag: a reader that does not know the type refuses the file
HEADER_SIZE, SECTION_HEADER_SIZE, TRAILER_SIZE = 32, 16, 8

Section = collections.namedtuple("Section", "type name flags after always size write read")
Section.__doc__ = """One section of the format (the header's tb__sections[] row).
type, flags: its header's fields (flags: SECTION_REQUIRED or 0, a section
older readers skip); after: the types that must come before it; always:
written even when empty; size(bundle): its payload's length, 0 when it is
not written, or None (section 1's length is known once written);
write(bundle, out): its payload; read(bundle, cursor): reads the payload."""

# The sections, one row each, in the order writers write them: adding a
# section is a row and its functions. The writer frames each row it writes
# (type, flags, payload length, payload, zeros to 8); the reader dispatches
# on the type, refuses a section before those in `after` and a second one of
# a type, and skips a type no row has unless it is required.
SECTIONS = (
    Section(SEC_KERNELS, "kernels", SECTION_REQUIRED, (), True, None, _wr_kernels, _rd_kernels),
    Section(SEC_RECORDS, "launch records", SECTION_REQUIRED, (), True, _records_size, _wr_records, _rd_records),
    # 2.1: only files with a tensor descriptor hold it, and older readers refuse those by name
    Section(SEC_TENSORDESCS, "tensor descriptors", SECTION_REQUIRED, (SEC_RECORDS,), False, _descs_size, _wr_descs,
            _rd_descs),
    # 2.2: optional; readers before it skip it and launch with the grids they are given
    Section(SEC_CALLS, "call info", 0, (SEC_RECORDS,), False, _calls_size, _wr_calls, _rd_calls),
)
_SECTION_ROW = {row.type: row for row in SECTIONS}


def _write_sections(bundle, o):
    """Every section, in row order, each framed and padded to 8: section 1
    first, then each row whose payload is not empty or that is always
    written. Returns how many were written."""
    count = 0
    for row in SECTIONS:
        size = row.size(bundle) if row.size is not None else None
        if size == 0 and not row.always:
            continue
        at = len(o.b)
        o.u32(row.type)
        o.u32(row.flags)
        o.u64(size or 0)
        row.write(bundle, o)
        length = len(o.b) - at - SECTION_HEADER_SIZE
        if size is None:
            struct.pack_into("<Q", o.b, at + 8, length)
        elif length != size:
            raise AssertionError("section %d: %d bytes written, %d sized" % (row.type, length, size))
        o.align(8)
        count += 1
    return count


def write(bundle):
    """The bundle's bytes (format 2.2), as tb_bundle_write_memory writes them."""
    _check_writable(bundle)
    o = _Out()
    o.b += b"\0" * HEADER_SIZE
    sections = _write_sections(bundle, o)
    total = len(o.b) + TRAILER_SIZE
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

def read(data, verify_checksum=True):
    """A Bundle from bytes, refusing damaged or hostile input with
    BundleError exactly where the C reader refuses it."""
    data = bytes(data)
    size = len(data)
    if data[:min(size, 8)] != MAGIC[:min(size, 8)]:
        raise BundleError("bad_magic", "the input does not start with the bundle magic", 0)
    if size < HEADER_SIZE + TRAILER_SIZE:
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
    for i in range(nsec):
        at = c.pos
        c.end = size - 8
        typ, flags, length = c.u32("section type"), c.u32("section flags"), c.u64("section length")
        if length > c.end - c.pos:
            raise BundleError("truncated", "section %d of %d bytes, %d remain" % (i, length, c.end - c.pos), at)
        body_end = c.pos + length
        c.end = body_end
        row = _SECTION_ROW.get(typ)
        if row is not None:
            if typ in seen:
                raise BundleError("malformed", "section type %d appears twice" % typ, at)
            for before in row.after:
                if before not in seen:
                    raise BundleError("malformed", "section %d comes before section %d (%s)" % (
                        typ, before, _SECTION_ROW[before].name), at)
            seen.add(typ)
            row.read(b, c)
            if c.pos != body_end:
                raise BundleError("malformed", "section %d ends %d bytes before its stated length" % (
                    typ, body_end - c.pos), c.pos)
        elif flags & SECTION_REQUIRED:
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
