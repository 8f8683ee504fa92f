"""The bundle format (docs/FORMAT.md, 2.6), as the header's >>model and
>>format sections: the data model of sections 1 to 4 (Bundle, Kernel,
Artifact, Record, Config, TensorDesc, CallInfo) and its checks, the
sections' table, and the writer and the reader of every section: the
same bytes as the C library for the same bundle, and the same refusals of
damaged or hostile input. What it builds on is its neighbours', imported
here too, so that `from triton_bundle.format import X` finds every name
it ever held: the numbers, the argument codes and BundleError (spec.py),
the grid language (grid.py), the program's model and checks (program.py),
XXH3-64 and the checksum (xxh3.py), the checks' shared pieces
(checks.py)."""

import collections
import os
import struct

from .spec import (  # noqa: F401 - the format's numbers, here too for `from triton_bundle.format import X`
    ADD, ARG, ARG_CODES, BUFFER, CALL_ENTRY, CEILDIV, CODE_SIZES, CONFIG_COOPERATIVE, CONFIG_PDL,
    CONFIG_TYPES_FROM_IR, CONST, CONSTANT, CONSTANT_ALIGN, CONSTANT_EXTERNAL, CONSTANT_SHARED, CONSTANT_STATE, COPY,
    DEFAULT_PROGRAM, DESC_ENTRY, DTYPES, DTYPE_BY_NAME, DTYPE_BY_NUMBER, EXTRA, FIELD_BUFFER_SIZE, FIELD_COUNT,
    FIELD_GRID, FIELD_INPUT_SIZE, FIELD_INPUT_STRIDE, FIELD_NAMES, FIELD_OPERAND, FIELD_OUTPUT_SIZE,
    FIELD_OUTPUT_STRIDE, FLOORDIV, FORMAT_MAJOR, FORMAT_MINOR, GRID_HEAD, GRID_OP, GRID_STACK, GRID_X_MAX,
    GRID_YZ_MAX, HEADER_SIZE, I32_MAX, I32_MIN, I64_MAX, I64_MIN, INPUT, INT_CODES, KIND_BOOL, KIND_DESC,
    KIND_FLOAT, KIND_PTR, KIND_SINT, KIND_UINT, LAUNCH, LITERAL, MAGIC, MAX, MAX_ARGS, MAX_ARTIFACTS_PER_KERNEL,
    MAX_ARTIFACT_SIZE, MAX_CONFIGS_PER_RECORD, MAX_EXPR_OPS, MAX_GRID_EXTRA, MAX_GRID_OPS, MAX_KERNELS,
    MAX_NAME_LENGTH, MAX_PARAMS_PER_CONFIG, MAX_PROGRAMS, MAX_PROGRAM_BUFFERS, MAX_PROGRAM_CONSTANTS,
    MAX_PROGRAM_EXPRS, MAX_PROGRAM_STEPS, MAX_PROGRAM_SYMBOLS, MAX_PROGRAM_TENSORS, MAX_PROPERTIES, MAX_RECORDS,
    MAX_SECTIONS, MAX_SENTINELS, MAX_STRING_LENGTH, MAX_TENSORDESCS, MAX_TENSOR_DIMS, MAX_TENSOR_RANK, MEMSET, MIN,
    MOD, MUL, NEG, OP_NAMES, OUTPUT, PARAM, PROGRAM6_HEADER, PROGRAMS_HEADER, PROGRAM_BUFFER, PROGRAM_CONSTANT_MIN,
    PROGRAM_HEADER, PROGRAM_OPERAND, PROGRAM_STEP, PROGRAM_TENSOR_MIN, SECTION_HEADER_SIZE, SECTION_REQUIRED,
    SEC_CALLS, SEC_KERNELS, SEC_PROGRAM, SEC_PROGRAMS, SEC_RECORDS, SEC_TENSORDESCS, SPACE_NAMES, STEP_NAMES,
    STEP_OPERANDS, SUB, SYM, SYMBOL_MAX, TRAILER_SIZE, TRITON_CODES, U32_MAX, U64_MAX, ArgCode, BundleError, DType)
from .grid import GridRule, check_expr_ops, check_grid, eval_expr, eval_grid  # noqa: F401 - grid.py's, here too
from .checks import _byte_view, _check_string, _enc, valid_name  # noqa: F401 - valid_name: here too
from .program import (  # noqa: F401 - the program's, here too for `from triton_bundle.format import X`
    MAX_ALIGN, MEMSET_WIDTHS, Buffer, Constant, Expr, External, Program, Step, Symbol, TensorSpec, _ProgramView,
    _check_buffer, _check_constant, _check_plan, _check_sharing, _check_step, _check_symbol, _check_tensor_dims,
    _check_tensor_head, arg_marks_written, arg_may_write, check_dynamic, check_program, expr_slot, in_section5,
    literal_fits, rule_grid, specialize)
from .xxh3 import bundle_checksum, xxh3_64  # noqa: F401


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
    def __init__(self, kernels=None, records=None, program=None, programs=None, properties=None):
        self.kernels, self.records = list(kernels or []), list(records or [])
        self.programs = list(programs) if programs is not None else ([] if program is None else [program])
        # (2.4) key/value strings for the programs' callers: {"generate.max_seq": "256"}
        self.properties = dict(properties or {})
        self.version = (FORMAT_MAJOR, FORMAT_MINOR)

    @property
    def program(self):
        """The first program, or None; setting it replaces every program."""
        return self.programs[0] if self.programs else None

    @program.setter
    def program(self, p):
        self.programs = [] if p is None else [p]

    def find_program(self, name):
        for p in self.programs:
            if p.name == name:
                return p
        return None

    def add_program(self, p):
        """Adds program p, as tb_bundle_add_program: its constants join the
        table the programs share, by name (a name the table has must have
        the same dtype, flags and bytes, and a state constant may be in two
        programs only when both mark it shared; a new name adds a
        constant), and its CONSTANT operands are renumbered to the table.
        Returns the program as stored (a new Program when it was
        renumbered); BundleError("invalid_argument") for a name another
        program has, or a constant that does not match."""
        if any(q.name == p.name for q in self.programs):
            raise BundleError("invalid_argument", "the bundle has a program named %r already" % (p.name,))
        if len(self.programs) >= MAX_PROGRAMS:
            raise BundleError("limit", "the bundle holds %d programs" % MAX_PROGRAMS)
        if not self.programs:
            self.programs = [p]
            return p
        table = list(self.programs[0].constants)
        index = {}
        for i, k in enumerate(table):
            if k.name in index:
                raise BundleError("invalid_argument", "the bundle's program repeats constant name %r, so no other "
                                  "program can be matched to it by name" % k.name)
            index[k.name] = i
        own = set()
        for k in p.constants:  # matched by name: each once
            if k.name in own:
                raise BundleError("invalid_argument", "two constants named %r, both named so in one program: a "
                                  "bundle of several programs matches constants by name" % k.name)
            own.add(k.name)
        old, remap = len(table), []
        for i, k in enumerate(p.constants):
            t = index.get(k.name)
            if t is not None and t < old:
                x = table[t]
                if (x.dtype, x.state) != (k.dtype, k.state) or \
                        _byte_view(x.data, "constant").nbytes != _byte_view(k.data, "constant").nbytes:
                    raise BundleError("invalid_argument", "constant %d %r: the bundle's constant of that name is "
                                      "%s, %d bytes, flags %d; this one %s, %d bytes, flags %d" % (
                                          i, k.name, x.dtype, len(bytes(x.data)), x.flags(), k.dtype,
                                          len(bytes(k.data)), k.flags()))
                if x.shared != k.shared or (k.state and not k.shared):
                    raise BundleError("invalid_argument", "state constant %d %r is in another program already: mark "
                                      "it shared in both to share it, or name them apart" % (i, k.name))
                if bytes(x.data) != bytes(k.data):
                    raise BundleError("invalid_argument", "constant %d %r: the bundle's constant of that name holds "
                                      "other bytes" % (i, k.name))
                remap.append(t)
            else:
                index[k.name] = len(table)
                remap.append(len(table))
                table.append(k)
        steps = [Step(st.kind, [(sp, remap[ix], v) if sp == CONSTANT and ix < len(remap) else (sp, ix, v)
                                for sp, ix, v in st.operands], st.record, st.config, st.grid, st.width, st.value,
                      st.count) for st in p.steps]
        q = Program(p.inputs, p.outputs, table, p.buffers, p.workspace_size, steps, p.name, p.symbols, p.exprs)
        programs, before = self.programs + [q], self.programs[0].constants
        for r in programs:
            r.constants = table
        try:
            _check_sharing(programs, self.properties)
        except BundleError:
            for r in self.programs:
                r.constants = before
            raise
        self.programs = programs
        return q

    def __eq__(self, o):
        return isinstance(o, Bundle) and (self.kernels, self.records, self.programs, self.properties) == (
            o.kernels, o.records, o.programs, o.properties)

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
    """The file being written, as pieces: bytearrays of what the writer
    formats and, between them, the large payloads (artifacts, constants)
    as they were given, so that they are not copied before they are
    written. b is the bytearray being appended to; tell() the absolute
    offset of its end."""

    BIG = 1 << 16  # payloads from this size on are kept as pieces of their own

    def __init__(self):
        self.b = bytearray()
        self.parts = []  # finished pieces before b
        self.base = 0    # their total length

    def tell(self):
        return self.base + len(self.b)

    def u32(self, v):
        self.b += struct.pack("<I", v)

    def u64(self, v):
        self.b += struct.pack("<Q", v & U64_MAX)

    def align(self, a):
        self.b += b"\0" * _pad(self.tell(), a)

    def data(self, d):
        """Payload bytes (bytes-like, a flat memoryview of bytes for anything
        but bytes and bytearray)."""
        n = len(d)
        if n < self.BIG:
            self.b += d
        else:
            self.parts += [self.b, d]
            self.base += len(self.b) + n
            self.b = bytearray()

    def patch(self, pos, fmt, *values):
        """struct.pack_into at absolute offset pos, in the bytearray piece
        that holds it (never a payload)."""
        for part in self.parts + [self.b]:
            if pos < len(part):
                struct.pack_into(fmt, part, pos, *values)
                return
            pos -= len(part)
        raise AssertionError("patch past the end")

    def pieces(self):
        return [q for q in self.parts + [self.b] if len(q)]

    def string(self, s):
        e = _enc(s)
        self.u32(len(e))
        self.b += e + b"\0"
        self.align(8)


def _str_size(s):
    """The bytes _Out.string writes for s (at an 8-aligned position)."""
    n = 4 + len(_enc(s)) + 1
    return n + _pad(n, 8)


def _check_unique_kernels(kernels):
    seen = set()
    for k in kernels:
        if k.hash in seen:
            raise BundleError("malformed", "two kernels of hash %r" % k.hash)
        seen.add(k.hash)


def _check_unique(bundle):
    _check_unique_kernels(bundle.kernels)
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
    check_program(bundle)


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
            o.data(a.data)
            o.align(8)


def _records_size(bundle, at=0):
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


def _descs_size(bundle, at=0):
    n = len(_desc_entries(bundle))
    return 8 + DESC_ENTRY * n if n else 0


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


def _calls_size(bundle, at=0):
    entries = _call_entries(bundle)
    if not entries:
        return 0
    n = 8
    for _, r in entries:
        ci = r.call
        n += CALL_ENTRY
        if ci:
            n += sum(_str_size(name) for name in ci.arg_names)
            lists = 4 * (len(ci.mutated) + len(ci.reset) + len(ci.key))
            n += lists + _pad(lists, 8)
        if any(c.grid for c in r.configs):
            n += sum(GRID_HEAD + (GRID_OP * sum(len(p) for p in c.grid.dims) if c.grid else 0) for c in r.configs)
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




def _table(bundle):
    """The constants' table the programs share."""
    return bundle.programs[0].constants if bundle.programs else []


def _program_body_size(p):
    """A program's tensors, buffers and steps in the file."""
    n = sum(_str_size(t.name) + 16 + 16 * len(t.shape) for t in p.inputs + p.outputs)
    n += PROGRAM_BUFFER * len(p.buffers)
    n += sum(PROGRAM_STEP + PROGRAM_OPERAND * len(st.operands) for st in p.steps)
    if p.symbols:  # (2.6) the counts, the symbols, the expressions
        n += 8 + sum(_str_size(y.name) + 24 for y in p.symbols) + sum(16 + 16 * len(x.ops) for x in p.exprs)
    return n


def _program_tables_size(bundle, section5):
    """Section 5's or 6's bytes before the constants' data."""
    n = sum(_str_size(k.name) + 24 + (_str_size(k.external.tensor) + 8 + 8 * len(k.external.shape)
                                       if k.external is not None else 0) for k in _table(bundle))
    if section5:
        return n + PROGRAM_HEADER + _program_body_size(bundle.programs[0])
    n += sum(_str_size(k) + _str_size(v) for k, v in bundle.properties.items())
    return n + PROGRAMS_HEADER + sum(_str_size(p.name) + PROGRAM6_HEADER + _program_body_size(p)
                                     for p in bundle.programs)


def _program_layout(bundle, at, section5):
    """(the constants' data as flat byte views, their absolute offsets, the
    payload's end) for a payload that starts at absolute offset at: each
    constant at the next multiple of 64 after the tables or the constant
    before it, and the payload ending with the last constant (the
    section's framing pads it to 8, as every section's)."""
    pos = at + _program_tables_size(bundle, section5)
    views, offsets = [], []
    for i, k in enumerate(_table(bundle)):
        if k.external is not None:  # no bytes here
            views.append(None)
            offsets.append(0)
            continue
        v = _byte_view(k.data, "constant %d" % i)
        pos += _pad(pos, CONSTANT_ALIGN)
        views.append(v)
        offsets.append(pos)
        pos += v.nbytes
    return views, offsets, pos


def _program_size(bundle, at=0):
    if not bundle.programs or not in_section5(bundle.programs, bundle.properties):
        return 0
    return _program_layout(bundle, at, True)[2] - at


def _programs_size(bundle, at=0):
    if not (bundle.programs or bundle.properties) or in_section5(bundle.programs, bundle.properties):
        return 0
    return _program_layout(bundle, at, False)[2] - at


def _wr_tensor(o, t):
    o.string(t.name)
    for v in (DTYPE_BY_NAME[t.dtype].number, len(t.shape), t.align, 0):
        o.u32(v)
    for v in list(t.shape) + list(t.strides):
        o.u64(v)


def _wr_constant_table(o, table, views, offsets):
    for k, v, off in zip(table, views, offsets):
        o.string(k.name)
        o.u32(DTYPE_BY_NAME[k.dtype].number)
        o.u32(k.flags())
        o.u64(k.nbytes() if v is None else v.nbytes)
        o.u64(off)
        if k.external is not None:  # 2.5: the tensor it is
            o.string(k.external.tensor)
            o.u32(len(k.external.shape))
            o.u32(k.external.crc32)
            for d in k.external.shape:
                o.u64(d)


def _wr_program_rest(o, p):
    """A program's buffers and steps."""
    for b in p.buffers:
        o.u64(b.offset)
        o.u64(b.size)
        o.u32(b.first)
        o.u32(b.last)
    for st in p.steps:
        for v in (st.kind, len(st.operands), st.record, st.config) + tuple(st.grid) + (st.width, st.value, 0):
            o.u32(v)
        o.u64(st.count)
        for space, index, value in st.operands:
            o.u32(space)
            o.u32(index)
            o.u64(value)


def _wr_constant_bytes(o, views, offsets, end, what):
    for v, off in zip(views, offsets):
        if v is None:  # external
            continue
        o.align(CONSTANT_ALIGN)
        if o.tell() != off:
            raise AssertionError("constant at %d, laid out at %d" % (o.tell(), off))
        o.data(v)
    if o.tell() != end:
        raise AssertionError("%s ends at %d, laid out to end at %d" % (what, o.tell(), end))


def _wr_program(bundle, o):
    """Section 5 (2.3): the program, its tables, then its constants' bytes."""
    p = bundle.programs[0]
    views, offsets, end = _program_layout(bundle, o.tell(), True)
    for v in (len(p.inputs), len(p.outputs), len(p.constants), len(p.buffers), len(p.steps),
              sum(len(st.operands) for st in p.steps), 0, 0):
        o.u32(v)
    o.u64(p.workspace_size)
    for t in p.inputs + p.outputs:
        _wr_tensor(o, t)
    _wr_constant_table(o, p.constants, views, offsets)
    _wr_program_rest(o, p)
    _wr_constant_bytes(o, views, offsets, end, "section 5")


def _wr_programs(bundle, o):
    """Section 6 (2.4): the constants' table, the programs, then the
    constants' bytes."""
    table = _table(bundle)
    views, offsets, end = _program_layout(bundle, o.tell(), False)
    for v in (len(bundle.programs), len(table), len(bundle.properties), 0):
        o.u32(v)
    for k, v in bundle.properties.items():
        o.string(k)
        o.string(v)
    _wr_constant_table(o, table, views, offsets)
    for p in bundle.programs:
        o.string(p.name)
        for v in (len(p.inputs), len(p.outputs), len(p.buffers), len(p.steps),
                  sum(len(st.operands) for st in p.steps), 1 if p.symbols else 0):
            o.u32(v)
        o.u64(p.workspace_size)
        if p.symbols:  # (2.6) flag bit 0
            o.u32(len(p.symbols))
            o.u32(len(p.exprs))
            for y in p.symbols:
                o.string(y.name)
                for v in (y.min, y.max, y.divisor):
                    o.u64(v)
        for t in p.inputs + p.outputs:
            _wr_tensor(o, t)
        _wr_program_rest(o, p)
        for x in p.exprs:
            for v in (x.field, x.index, x.sub, len(x.ops)):
                o.u32(v)
            for op, index, value in x.ops:
                o.u32(op)
                o.u32(index)
                o.u64(value & U64_MAX)
    _wr_constant_bytes(o, views, offsets, end, "section 6")


# ---------------------------------------------------------------- reader
class _Cur:
    def __init__(self, data):
        self.d, self.pos, self.end = data, 0, len(data)
        self.version = (FORMAT_MAJOR, FORMAT_MINOR)  # the file's, once its header is read

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
    n = c.count(0xFFFFFFFF, DESC_ENTRY, "tensor descriptor count")
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
    n = c.count(MAX_RECORDS, CALL_ENTRY, "call info count")
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
                if sum(h[:3]) * GRID_OP > c.end - c.pos:
                    raise BundleError("truncated", "config %d: grid operations cannot fit in the bytes that remain" % j, gat)
                dims = []
                for d in range(3):
                    prog = []
                    for _ in range(h[d]):
                        op, index, value = struct.unpack_from("<IIq", c.d, c.pos)
                        c.pos += GRID_OP
                        prog.append((op, index, value))
                    dims.append(prog)
                g = GridRule(*dims)
                try:
                    check_grid(g, cf)
                except BundleError as err:
                    raise BundleError(err.code, str(err).split(": ", 1)[1], gat)
                cf.grid = g


def _located(at, check, *args):
    """check(*args), its BundleError located at byte at."""
    try:
        check(*args)
    except BundleError as e:
        raise BundleError(e.code, str(e).split(": ", 1)[1], at)


def _rd_programs_since(b, c, minor, what):
    """No writer before 2.3 wrote a program (2.4: several); and 2.0's
    duplicate records are dropped after the sections, which would move the
    records the steps name."""
    if b.programs or getattr(b, "sections6", False):
        raise BundleError("malformed", "a file with both sections 5 and 6", c.pos)
    if b.version < (2, minor):
        raise BundleError("malformed", "%s in a file of format %d.%d: they came with 2.%d"
                          % ((what,) + tuple(b.version) + (minor,)), c.pos)


def _rd_tensors(c, p, ni, no):
    """The inputs and outputs: each one's fixed fields checked as read,
    then its sizes and strides; then the names' uniqueness, the inputs',
    then the outputs'."""
    for i in range(ni + no):
        group, tensors = ("input", p.inputs) if i < ni else ("output", p.outputs)
        what = "%s %d" % (group, i if i < ni else i - ni)
        at = c.pos
        name = c.string(MAX_NAME_LENGTH, "%s name" % what)
        dtype = c.u32("dtype")
        rank, align, reserved = c.u32("rank"), c.u32("align"), c.u32("reserved")
        t = TensorSpec(name, DTYPE_BY_NUMBER[dtype].name if dtype in DTYPE_BY_NUMBER else dtype, [], [], align)
        _located(at, _check_tensor_head, t, what, reserved, rank)
        dims = [c.u64("size or stride") for _ in range(2 * rank)]
        dims = [v - (1 << 64) if v >> 63 else v for v in dims]
        t.shape, t.strides = dims[:rank], dims[rank:]
        _located(at, _check_tensor_dims, t, what)
        tensors.append(t)
    for group, tensors in (("input", p.inputs), ("output", p.outputs)):
        names = set()
        for i, t in enumerate(tensors):
            if t.name in names:
                raise BundleError("malformed", "%s %d: a second %s named %r" % (group, i, group, t.name), c.pos)
            names.add(t.name)


def _rd_external(c, k, what, size, off, at):
    """An external constant's entry after its fixed fields (2.5)."""
    if c.version < (2, 5):
        raise BundleError("malformed", "%s: an external constant in a file of format %d.%d (they came with 2.5)"
                          % ((what,) + tuple(c.version)), at)
    tensor = c.string(MAX_STRING_LENGTH, "%s's tensor name" % what)
    rank, crc = c.u32("rank"), c.u32("crc32")
    if off or not tensor or rank > MAX_TENSOR_DIMS:
        raise BundleError("malformed", "%s: an external one with offset %d (not 0), an empty tensor name or rank %d "
                          "(over %d)" % (what, off, rank, MAX_TENSOR_DIMS), at)
    shape = [c.u64("shape") for _ in range(rank)]
    n = DTYPE_BY_NAME[k.dtype].bytes
    for d in shape:
        n = n * d if d <= I64_MAX and n <= U64_MAX else U64_MAX + 1
    if n != size:
        raise BundleError("malformed", "%s: an external one of %d bytes whose shape holds %d" % (what, size, n), at)
    return External(tensor, shape, crc)


def _rd_constant_table(c, nk, flags_ok):
    """The constants' table: each entry as it is read (its offset a
    multiple of 64, after the constant before, within the section); the
    constants, with views of their bytes, and their offsets."""
    view = memoryview(c.d)
    prev = 0  # the end of the constant before
    table, offsets = [], []
    for i in range(nk):
        what = "constant %d" % i
        at = c.pos
        name = c.string(MAX_STRING_LENGTH, "%s name" % what)
        dtype, flags, size, off = c.u32("dtype"), c.u32("constant flags"), c.u64("size"), c.u64("offset")
        k = Constant(name, DTYPE_BY_NUMBER[dtype].name if dtype in DTYPE_BY_NUMBER else dtype, b"",
                     flags & CONSTANT_STATE, flags & CONSTANT_SHARED)
        _located(at, _check_constant, k, what, flags, flags_ok)
        if flags & CONSTANT_EXTERNAL:
            k.external = _rd_external(c, k, what, size, off, at)
            offsets.append(0)
            table.append(k)
            continue
        if off % CONSTANT_ALIGN or off < prev:
            raise BundleError("malformed", "%s at %d: not a multiple of 64, or before the end of the constant "
                              "before (%d)" % (what, off, prev), at)
        # bytes past the section: truncated, as a length past the bytes that remain
        if size > c.end or off > c.end - size:
            raise BundleError("truncated", "%s: %d bytes at %d run past the section's end (%d)" % (
                what, size, off, c.end), at)
        prev = off + size
        k.data = view[off:prev]
        offsets.append(off)
        table.append(k)
    return table, offsets


def _rd_program_rest(b, c, p, nb, ns, nop):
    """A program's buffers and plan, its steps (each checked as it is
    read) and its operand total."""
    for i in range(nb):
        at = c.pos
        buf = Buffer(c.u64("buffer offset"), c.u64("buffer size"), c.u32("first step"), c.u32("last step"))
        _located(at, _check_buffer, buf, "buffer %d" % i, p.workspace_size, ns)
        p.buffers.append(buf)
    _located(c.pos, _check_plan, p.buffers)
    pv = _ProgramView(b.records, p, [k.nbytes() for k in p.constants])
    used = 0
    for s in range(ns):
        at = c.pos
        kind = c.u32("step kind")
        n = c.count(MAX_ARGS, PROGRAM_OPERAND, "step %d operand count" % s)
        record, config, gx, gy, gz, width, value, reserved = (c.u32("step") for _ in range(8))
        count = c.u64("step count")
        if n > nop - used:
            raise BundleError("malformed", "steps hold more operands than the total %d" % nop, at)
        used += n
        ops = []
        for _ in range(n):
            ops.append((c.u32("operand space"), c.u32("operand index"), c.u64("operand value")))
        st = Step(kind, ops, record, config, (gx, gy, gz), width, value, count)
        _located(at, _check_step, pv, st, s, reserved)
        p.steps.append(st)
    if used != nop:
        raise BundleError("malformed", "operand total %d, but the steps hold %d" % (nop, used), c.pos)


def _rd_constant_bytes(c, table, offsets):
    """The constants' bytes: after the tables, in order, zeros between and
    after them."""
    for i, off in enumerate(offsets):
        if table[i].external is not None:  # in a weights file
            continue
        if off < c.pos:
            raise BundleError("malformed", "constant %d at %d, before the end of the tables (%d)" % (i, off, c.pos),
                              off)
        if c.d.count(0, c.pos, off) != off - c.pos:
            raise BundleError("malformed", "bytes before constant %d are not zero" % i, c.pos)
        c.pos = off + len(table[i].data)
    if c.d.count(0, c.pos, c.end) != c.end - c.pos:
        raise BundleError("malformed", "bytes after the program's constants are not zero", c.pos)
    c.pos = c.end


def _rd_program(b, c):
    """Section 5 (2.3). In file order: the counts as they are read (each
    against its limit and the bytes that remain over its smallest item), the
    header's flags and reserved field; each tensor once its fixed fields are
    read, then its sizes; the names' uniqueness; each constant and buffer
    once it is read (a constant's offset against the section's end and the
    constant before it); the plan once the buffers are read; each step once
    it is read, operands included (the tables they name come before); the
    operand total; then the constants against the end of the steps and the
    zero bytes around them."""
    _rd_programs_since(b, c, 3, "a program (section 5)")
    ni = c.count(MAX_PROGRAM_TENSORS, PROGRAM_TENSOR_MIN, "program input count")
    no = c.count(MAX_PROGRAM_TENSORS, PROGRAM_TENSOR_MIN, "program output count")
    nk = c.count(MAX_PROGRAM_CONSTANTS, PROGRAM_CONSTANT_MIN, "program constant count")
    nb = c.count(MAX_PROGRAM_BUFFERS, PROGRAM_BUFFER, "program buffer count")
    ns = c.count(MAX_PROGRAM_STEPS, PROGRAM_STEP, "program step count")
    nop = c.count(U32_MAX, PROGRAM_OPERAND, "program operand total")
    if c.u32("program flags"):
        raise BundleError("malformed", "the program's flags are not zero", c.pos - 4)
    if c.u32("reserved"):
        raise BundleError("malformed", "a reserved field is not zero", c.pos - 4)
    p = Program(workspace_size=c.u64("workspace size"))
    _rd_tensors(c, p, ni, no)
    table, offsets = _rd_constant_table(c, nk, CONSTANT_STATE)
    p.constants = table
    _rd_program_rest(b, c, p, nb, ns, nop)
    _rd_constant_bytes(c, table, offsets)
    b.programs = [p]


def _rd_symbols(c, p, pat):
    """(2.6) a program's symbols, before its tensors; the expression count."""
    n = c.count(MAX_PROGRAM_SYMBOLS, 32, "symbol count")
    nx = c.count(MAX_PROGRAM_EXPRS, 32, "expression count")
    if not n:
        raise BundleError("malformed", "program %r: flag bit 0 and no symbol" % (p.name,), pat)
    seen = set()
    for i in range(n):
        at = c.pos
        name = c.string(MAX_NAME_LENGTH, "symbol name")
        v = [c.u64("symbol") for _ in range(3)]
        y = Symbol(name, *[x - (1 << 64) if x >> 63 else x for x in v])
        _located(at, _check_symbol, y, i, seen)
        seen.add(name)
        p.symbols.append(y)
    return nx


def _rd_exprs(b, c, p, n):
    """(2.6) a program's expressions, after its steps; then the whole."""
    for i in range(n):
        field, index, sub, nops = (c.u32("expression") for _ in range(4))
        if not nops or nops > MAX_EXPR_OPS:
            raise BundleError("limit" if nops else "malformed", "program expression %d has %d operations (1..%d)" % (
                i, nops, MAX_EXPR_OPS), c.pos)
        c.need(16 * nops, "expression operations")
        ops = []
        for _ in range(nops):
            op, ix, v = c.u32("expression"), c.u32("expression"), c.u64("expression")
            ops.append((op, ix, v - (1 << 64) if v >> 63 else v))
        p.exprs.append(Expr(field, index, sub, ops))
    _located(c.pos, check_dynamic, b.records, p)


def _rd_programs(b, c):
    """Section 6 (2.4): the counts, the head's flags and reserved field, the
    constants' table, then each program: its name (unique), its counts,
    flags and workspace, its tensors, buffers and steps, as section 5's;
    then the sharing rules, then the constants' bytes."""
    at = c.pos
    _rd_programs_since(b, c, 4, "programs (section 6)")
    np_ = c.count(MAX_PROGRAMS, 8 + PROGRAM6_HEADER, "program count")
    nk = c.count(MAX_PROGRAM_CONSTANTS, PROGRAM_CONSTANT_MIN, "program constant count")
    nprop = c.count(MAX_PROPERTIES, 16, "property count")
    if c.u32("reserved"):
        raise BundleError("malformed", "section 6's reserved field is not zero", c.pos - 4)
    props = {}
    for i in range(nprop):
        kat = c.pos
        key = c.string(MAX_NAME_LENGTH, "property key")
        value = c.string(MAX_STRING_LENGTH, "property value")
        if not key:
            raise BundleError("bad_name", "property %d has an empty key" % i, kat)
        if key in props:
            raise BundleError("malformed", "two properties named %r" % key, kat)
        props[key] = value
    b.properties = props
    if not np_ and not nk:  # properties alone
        if c.d.count(0, c.pos, c.end) != c.end - c.pos:
            raise BundleError("malformed", "the bytes after the properties are not zero", c.pos)
        c.pos = c.end
        b.programs = []
        b.sections6 = True
        return
    if not np_:
        raise BundleError("malformed", "section 6 with constants and no program", at)
    c.version = b.version
    table, offsets = _rd_constant_table(c, nk, CONSTANT_STATE | CONSTANT_SHARED | CONSTANT_EXTERNAL)
    programs = []
    for j in range(np_):
        pat = c.pos
        name = c.string(MAX_NAME_LENGTH, "program %d name" % j)
        if not name:
            raise BundleError("bad_name", "program %d has an empty name" % j, pat)
        if any(q.name == name for q in programs):
            raise BundleError("malformed", "two programs named %r" % (name,), pat)
        ni = c.count(MAX_PROGRAM_TENSORS, PROGRAM_TENSOR_MIN, "program input count")
        no = c.count(MAX_PROGRAM_TENSORS, PROGRAM_TENSOR_MIN, "program output count")
        nb = c.count(MAX_PROGRAM_BUFFERS, PROGRAM_BUFFER, "program buffer count")
        ns = c.count(MAX_PROGRAM_STEPS, PROGRAM_STEP, "program step count")
        nop = c.count(U32_MAX, PROGRAM_OPERAND, "program operand total")
        flags = c.u32("program flags")
        if flags & ~1 or (flags and b.version < (2, 6)):
            raise BundleError("malformed", "program %r: flags %d (bit 0, symbols, came with 2.6; no other)" % (
                name, flags), c.pos - 4)
        p = Program(workspace_size=c.u64("workspace size"), name=name, constants=[])
        p.constants = table
        nx = _rd_symbols(c, p, pat) if flags else 0
        _rd_tensors(c, p, ni, no)
        _rd_program_rest(b, c, p, nb, ns, nop)
        if flags:
            _rd_exprs(b, c, p, nx)
        programs.append(p)
    _located(c.pos, _check_sharing, programs, props)
    _rd_constant_bytes(c, table, offsets)
    b.programs = programs


# --------------------------------------------------------------- sections

Section = collections.namedtuple("Section", "type name flags after always size write read")
Section.__doc__ = """One section of the format (the header's tb__sections[] row).
type, flags: its header's fields (flags: SECTION_REQUIRED or 0, a section
older readers skip); after: the types that must come before it; always:
written even when empty; size(bundle, at): its payload's length when the
payload starts at absolute offset at (section 5 aligns its constants'
bytes in the file), 0 when it is not written, or None (section 1's length
is known once written);
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
    # 2.3: optional; a bundle whose one program is "forward" and shares nothing holds it; older readers skip it
    Section(SEC_PROGRAM, "program", 0, (SEC_RECORDS,), False, _program_size, _wr_program, _rd_program),
    # 2.4: optional and last; several programs sharing one table of constants (a reader without it sees none)
    Section(SEC_PROGRAMS, "programs", 0, (SEC_RECORDS,), False, _programs_size, _wr_programs, _rd_programs),
)
_SECTION_ROW = {row.type: row for row in SECTIONS}


def _write_sections(bundle, o):
    """Every section, in row order, each framed and padded to 8: section 1
    first, then each row whose payload is not empty or that is always
    written. Returns how many were written."""
    count = 0
    for row in SECTIONS:
        at = o.tell()
        size = row.size(bundle, at + SECTION_HEADER_SIZE) if row.size is not None else None
        if size == 0 and not row.always:
            continue
        o.u32(row.type)
        o.u32(row.flags)
        o.u64(size or 0)
        row.write(bundle, o)
        length = o.tell() - at - SECTION_HEADER_SIZE
        if size is None:
            o.patch(at + 8, "<Q", length)
        elif length != size:
            raise AssertionError("section %d: %d bytes written, %d sized" % (row.type, length, size))
        o.align(8)
        count += 1
    return count


def _checksum_pieces(pieces):
    """bundle_checksum of the pieces' concatenation, without making it:
    each 1 MiB block is hashed from a view where one piece holds it whole,
    else gathered from the pieces it spans."""
    block = 1 << 20
    values, partial = [], bytearray()
    for q in pieces:
        mv = memoryview(q)
        i, n = 0, len(mv)
        while i < n:
            if not partial and n - i >= block:
                values.append(xxh3_64(mv[i:i + block]))
                i += block
                continue
            take = min(block - len(partial), n - i)
            partial += mv[i:i + take]
            i += take
            if len(partial) == block:
                values.append(xxh3_64(partial))
                partial = bytearray()
    if partial or not values:
        values.append(xxh3_64(partial))
    return xxh3_64(b"".join(struct.pack("<Q", v) for v in values))


def _write_pieces(bundle):
    """The bundle's bytes as pieces (see _Out): checked, framed, the header
    filled in and the trailer's checksum appended."""
    _check_writable(bundle)
    o = _Out()
    o.b += b"\0" * HEADER_SIZE
    sections = _write_sections(bundle, o)
    total = o.tell() + TRAILER_SIZE
    o.patch(0, "<8sHHIQII", MAGIC, FORMAT_MAJOR, FORMAT_MINOR, 0, total, sections, 0)
    o.u64(_checksum_pieces(o.pieces()))
    return o.pieces()


def write(bundle):
    """The bundle's bytes (format 2.4), as tb_bundle_write_memory writes them."""
    return b"".join(_write_pieces(bundle))


def write_file(bundle, path):
    """Written beside path and renamed onto it: readers see the old file or
    the new one. Large artifacts and constants go to the file from where
    they are, never joined into one buffer."""
    pieces = _write_pieces(bundle)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            for q in pieces:
                f.write(q)
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
    _check_unique_kernels(b.kernels)
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
