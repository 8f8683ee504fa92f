"""The program (FORMAT.md, sections 5 and 6; the header's >>program
section): its data model (TensorSpec, Constant, External, Buffer, Step,
Symbol, Expr, Program) and its checks, the ones the writer and the reader
both run so that they refuse the same programs with the same codes
(check_program, the per-item checks, (2.6) check_dynamic), and
specialize. format.py reads and writes it."""

import collections

from .checks import _bad, _byte_view, _check_string, _enc, _is_int
from .grid import check_expr_ops, eval_expr, eval_grid
from .spec import (ARG_CODES, BUFFER, CONFIG_TYPES_FROM_IR, CONSTANT, CONSTANT_EXTERNAL, CONSTANT_SHARED,
                   CONSTANT_STATE, COPY, DEFAULT_PROGRAM, DTYPE_BY_NAME, EXTRA, FIELD_BUFFER_SIZE, FIELD_COUNT,
                   FIELD_GRID, FIELD_INPUT_SIZE, FIELD_INPUT_STRIDE, FIELD_NAMES, FIELD_OPERAND, FIELD_OUTPUT_SIZE,
                   FIELD_OUTPUT_STRIDE, GRID_X_MAX, GRID_YZ_MAX, I32_MAX, I32_MIN, I64_MAX, INPUT, INT_CODES,
                   KIND_FLOAT, LAUNCH, LITERAL, MAX_ARGS, MAX_NAME_LENGTH, MAX_PROGRAMS, MAX_PROGRAM_BUFFERS,
                   MAX_PROGRAM_CONSTANTS, MAX_PROGRAM_EXPRS, MAX_PROGRAM_STEPS, MAX_PROGRAM_SYMBOLS,
                   MAX_PROGRAM_TENSORS, MAX_PROPERTIES, MAX_STRING_LENGTH, MAX_TENSOR_DIMS, MEMSET, OUTPUT,
                   SPACE_NAMES, STEP_NAMES, STEP_OPERANDS, SYM, SYMBOL_MAX, U32_MAX, U64_MAX, BundleError)


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
    updates it in place (running statistics), and it persists across runs;
    shared (2.4, with state): the programs that use it share it (a KV
    cache), which two programs may do only when it says so."""

    def __init__(self, name, dtype, data, state=False, shared=False, external=None):
        self.name, self.dtype, self.data, self.state = name, dtype, data, bool(state)
        self.shared = bool(shared)
        self.external = external  # (2.5) an External: the tensor of the weights file; data is then b""

    def flags(self):
        return (CONSTANT_STATE if self.state else 0) | (CONSTANT_SHARED if self.shared else 0) | \
            (CONSTANT_EXTERNAL if self.external is not None else 0)

    def nbytes(self):
        """Its size: the bytes it holds, or an external one's tensor's."""
        if self.external is not None:
            return self.external.nbytes(self.dtype)
        return _byte_view(self.data, "constant %s" % (self.name,)).nbytes

    def __eq__(self, o):
        return isinstance(o, Constant) and (self.name, self.dtype, self.state, self.shared, self.external) == (
            o.name, o.dtype, o.state, o.shared, o.external) and bytes(self.data) == bytes(o.data)


class External(collections.namedtuple("External", "tensor shape crc32")):
    """Where an external constant's bytes are (2.5): the tensor of that
    name in a safetensors file, its shape (with the constant's dtype), and
    the CRC-32 (zlib.crc32) of the bytes it held at export."""

    def nbytes(self, dtype):
        n = DTYPE_BY_NAME[dtype].bytes if dtype in DTYPE_BY_NAME else 0
        for d in self.shape:
            n *= d
        return n


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


class Symbol:
    """(2.6) A size that varies: its name, range (inclusive) and divisor."""

    def __init__(self, name, min, max, divisor=1):  # noqa: A002 - the format's names
        self.name, self.min, self.max, self.divisor = name, min, max, divisor

    def __eq__(self, o):
        return isinstance(o, Symbol) and (self.name, self.min, self.max, self.divisor) == (o.name, o.min, o.max, o.divisor)

    def __repr__(self):
        return "Symbol(%r, %d, %d, %d)" % (self.name, self.min, self.max, self.divisor)


class Expr:
    """(2.6) The expression of one field of a program (FIELD_*, the
    input/output/buffer/step, the dimension/axis/operand): ops in the grid
    language over CONST, SYM and the operators."""

    def __init__(self, field, index, sub, ops):
        self.field, self.index, self.sub, self.ops = field, index, sub, [tuple(o) for o in ops]

    def key(self):
        return (self.field, self.index, self.sub)

    def __eq__(self, o):
        return isinstance(o, Expr) and self.key() == o.key() and self.ops == o.ops

    def __repr__(self):
        return "Expr(%d, %d, %d, %r)" % (self.field, self.index, self.sub, self.ops)


class Program:
    """One compiled function of a model (FORMAT.md, sections 5 and 6): its
    name, inputs, outputs, constants, workspace plan and steps. In a
    bundle of several, every program's constants is the one table they
    share (Bundle.add_program makes it). (2.6) symbols and exprs: the
    sizes that vary and the expressions of the fields that follow them;
    the fields hold the program at every symbol's maximum."""

    def __init__(self, inputs=None, outputs=None, constants=None, buffers=None, workspace_size=0, steps=None,
                 name=DEFAULT_PROGRAM, symbols=None, exprs=None):
        self.inputs, self.outputs = list(inputs or []), list(outputs or [])
        self.constants, self.buffers = list(constants or []), list(buffers or [])
        self.workspace_size, self.steps = workspace_size, list(steps or [])
        self.name = name
        self.symbols, self.exprs = list(symbols or []), list(exprs or [])

    FIELDS = ("name", "inputs", "outputs", "constants", "buffers", "workspace_size", "steps", "symbols", "exprs")

    def __eq__(self, o):
        return isinstance(o, Program) and all(getattr(self, f) == getattr(o, f) for f in self.FIELDS)


# ------------------------------------------------ validation: the program
# FORMAT.md section 5 [R-program-totals] ... [R-program-steps]. The writer
# runs check_program; the reader runs the same per-item checks on each item
# once it has read it (counts and string lengths are checked as they are
# read, by _Cur.count and _Cur.string, as in sections 1 to 4), so that both
# refuse the same programs with the same codes. Every rule of section 5
# that the Errors table does not name otherwise is tb_err_malformed.
#
# Where FORMAT.md leaves a choice open, this side chose (and the C reader
# must choose alike to give the same codes):
# - Order (FORMAT.md's "order of the checks", which the C reader follows):
#   each count and string length is checked as it is read (against its
#   limit, then the bytes that remain after it over its smallest item), each
#   on its own (input_count and output_count apart, as section 2's three
#   counts); a tensor's fixed fields (name, dtype, rank against
#   TB_MAX_TENSOR_DIMS, align, reserved) once they are read, then its sizes
#   as they are read; the tensors' names' uniqueness after the last output;
#   every other item's fields once the item is read, in field order (as
#   section 2 checks a config after reading it whole). operand_total has no
#   limit but the bytes (16 each), as config_total; a step's running total
#   is checked once its fields are read (more than the total: malformed),
#   before its operands' bytes, and the total after the steps (fewer); a
#   step's reserved field is checked last.
# - The program's flags, not zero, and a constant's flag bits other than
#   bit 0 (section 6: bits 0 and 1, bit 1 only with bit 0) are malformed
#   (not unsupported_version: only config flags are).
# - A constant past the section's end (offset + size) is malformed, as an
#   offset or size out of range, not truncated; it is checked with its
#   table entry (with the offset's multiple of 64 and the order after the
#   constant before), and "no lower than the end of the steps" after the
#   steps. The reader takes any zero bytes between and after the constants;
#   the writer puts each at the next multiple of 64 and pads the payload
#   (inside its length) to a multiple of 8.
# - "Fits the code": literal_fits (the C library's checked-launch ranges;
#   floats any 64 bits). A 'T' code is malformed (not unsupported_type: the
#   code is in the table). Divisibility: a pointer's operand value (its
#   offset within the object, not a buffer's offset in the workspace) is a
#   multiple of 16; "an integer" is every code but 'O', 'T' and the floats,
#   bools included (as TB_LAUNCH_CHECKED).
# - A copy whose source and destination are one object and whose byte
#   ranges overlap is malformed (FORMAT.md: "which do not overlap"; the only
#   overlap a reader can see). A buffer of 0 bytes overlaps nothing.
# - Extents are exact (no 64-bit overflow is refused: none is stated); a
#   memset or copy of count 0 is taken; an input and an output may share a
#   name, and a section 5 program's constants' names need not be unique
#   (section 6's must).
MAX_ALIGN = 4096
MEMSET_WIDTHS = (1, 2, 4)
_FLOAT_CODES = {r.code for r in ARG_CODES if r.kind == KIND_FLOAT}


def literal_fits(code, bits, sign_unknown=False):
    """Whether a LITERAL operand (the tb_arg's 64 bits, as an unsigned int)
    fits argument code `code` ([R-program-operands] "whose value fits the
    code"). FORMAT.md does not define "fits"; this is the C library's
    checked-launch range (tb__in_range) for integers and bools: an N-bit
    integer takes its signed or its unsigned reading except i16, i32 (whose
    signed range Triton enforces; with sign_unknown, config flag bit 2, the
    signed or the unsigned range of the width), i64 and u64 any 64 bits, a
    bool 0 or 1. Floats take any 64-bit pattern (the bits of a double;
    tb__in_range would refuse a finite double outside the float's range)."""
    v = bits - (1 << 64) if bits >> 63 else bits
    if code == "?":
        return bits <= 1
    if code in "bB":
        return -128 <= v <= 255
    if code == "h":
        return -32768 <= v <= (65535 if sign_unknown else 32767)
    if code == "H":
        return -32768 <= v <= 65535
    if code == "i":
        return I32_MIN <= v <= (U32_MAX if sign_unknown else I32_MAX)
    if code == "I":
        return I32_MIN <= v <= U32_MAX
    return True


def _check_dtype(dtype, what):
    if not isinstance(dtype, str) or dtype not in DTYPE_BY_NAME:
        raise BundleError("unsupported_type", "%s: dtype %r is not one of the format's" % (what, dtype))


def _check_tensor_head(t, what, reserved=0, rank=None):
    """An input's or output's fixed fields in file order: its name, dtype,
    rank, align and reserved field (the name's uniqueness is the
    caller's)."""
    _check_string(t.name, MAX_NAME_LENGTH, "%s name" % what)
    _check_dtype(t.dtype, what)
    rank = len(t.shape) if rank is None else rank
    if rank > MAX_TENSOR_DIMS:
        raise BundleError("limit", "%s: rank %d, over TB_MAX_TENSOR_DIMS" % (what, rank))
    if not _is_int(t.align, 1, MAX_ALIGN) or t.align & (t.align - 1):
        _bad(what, "align %r is not a power of two in 1..%d" % (t.align, MAX_ALIGN))
    if reserved:
        _bad(what, "a reserved field is not zero")


def _check_tensor(t, what, reserved=0):
    """An input or output, its fields in file order, then its sizes and
    strides."""
    if len(t.strides) != len(t.shape) and len(t.shape) <= MAX_TENSOR_DIMS:
        _check_string(t.name, MAX_NAME_LENGTH, "%s name" % what)
        _bad(what, "%d sizes and %d strides" % (len(t.shape), len(t.strides)))
    _check_tensor_head(t, what, reserved)
    _check_tensor_dims(t, what)


def _check_tensor_dims(t, what):
    for n in list(t.shape) + list(t.strides):
        if not _is_int(n, 0, I64_MAX):
            _bad(what, "a size or stride %r is not in 0..2^63-1" % (n,))
    if t.extent() >= U64_MAX:
        _bad(what, "its extent does not fit in 64 bits (2^64 - 1 or more bytes)")


def _check_constant(k, what, flags=None, flags_ok=CONSTANT_STATE | CONSTANT_SHARED | CONSTANT_EXTERNAL):
    """A constant's name, dtype and (as read) flags, in file order."""
    _check_string(k.name, MAX_STRING_LENGTH, "%s name" % what)
    _check_dtype(k.dtype, what)
    flags = k.flags() if flags is None else flags
    if flags & ~flags_ok or (flags & CONSTANT_SHARED and not flags & CONSTANT_STATE) or \
            (flags & CONSTANT_EXTERNAL and flags & CONSTANT_STATE):
        # FORMAT.md: "other bits refused", without a code: malformed, the
        # Errors table's "anything else" (only config flags are
        # unsupported_version)
        _bad(what, "flags 0x%x: a bit other than 0 (state), 1 (shared, section 6, with state) and 2 (external, "
                   "section 6, never with state)" % flags)


def _check_external(k, what):
    """An external constant's tensor: a name, a shape of up to 8 sizes,
    a CRC-32 (the writer's side; the reader checks the same as it reads)."""
    e = k.external
    if not isinstance(e, External):
        raise BundleError("invalid_argument", "%s: external is not an External" % what)
    _check_string(e.tensor, MAX_STRING_LENGTH, "%s's tensor name" % what)
    if len(e.shape) > MAX_TENSOR_DIMS:
        raise BundleError("limit", "%s: its tensor's rank %d is over %d" % (what, len(e.shape), MAX_TENSOR_DIMS))
    if not all(_is_int(d, 0, I64_MAX) for d in e.shape) or not _is_int(e.crc32, 0, U32_MAX):
        _bad(what, "its tensor's shape %r or CRC-32 %r" % (list(e.shape), e.crc32))


def _check_buffer(buf, what, workspace_size, step_count):
    if not _is_int(buf.offset) or not _is_int(buf.size) or buf.offset + buf.size > workspace_size:
        _bad(what, "bytes %r + %r are not within the workspace's %d" % (buf.offset, buf.size, workspace_size))
    if not _is_int(buf.first, 0, U32_MAX) or not _is_int(buf.last, 0, U32_MAX) or \
            not buf.first <= buf.last < step_count:
        _bad(what, "lifetime %r..%r is not within the %d steps" % (buf.first, buf.last, step_count))


def _check_plan(buffers):
    """[R-program-plan]: no two buffers that are live at one step share a
    byte. Buffers sorted by offset, scanned forward; the active ones (those
    whose bytes reach the current offset) overlap one another in memory, so
    their lifetimes are disjoint, kept sorted by first step: a new buffer
    is checked against its two neighbours there. O(n log n) plus the list's
    moves, where all pairs would be O(n^2) (memory reuse puts many buffers
    at one offset)."""
    import bisect
    import heapq
    order = sorted((i for i, b in enumerate(buffers) if b.size), key=lambda i: (buffers[i].offset, i))
    ends, live = [], []  # heap of (end, first, last, i); sorted [(first, last, i)]
    for i in order:
        b = buffers[i]
        while ends and ends[0][0] <= b.offset:
            _, first, last, j = heapq.heappop(ends)
            del live[bisect.bisect_left(live, (first, last, j))]
        k = bisect.bisect_left(live, (b.first,))
        for q in (k - 1, k):
            if 0 <= q < len(live) and live[q][0] <= b.last and b.first <= live[q][1]:
                j = live[q][2]
                _bad("buffer %d" % i, "bytes %d..%d, steps %d..%d, overlap buffer %d (bytes %d..%d, steps %d..%d)" % (
                    b.offset, b.offset + b.size, b.first, b.last, j, buffers[j].offset,
                    buffers[j].offset + buffers[j].size, buffers[j].first, buffers[j].last))
        bisect.insort(live, (b.first, b.last, i))
        heapq.heappush(ends, (b.offset + b.size, b.first, b.last, i))


class _ProgramView:
    """What the steps' checks look up: each space's objects' extents (or
    sizes), the inputs' and outputs' aligns, the constants' state, the
    buffers, the records."""

    def __init__(self, records, p, constant_sizes):
        self.records, self.buffers = records, p.buffers
        self.extent = {INPUT: [t.extent() for t in p.inputs], OUTPUT: [t.extent() for t in p.outputs],
                       CONSTANT: list(constant_sizes), BUFFER: [b.size for b in p.buffers]}
        self.align = {INPUT: [t.align for t in p.inputs], OUTPUT: [t.align for t in p.outputs]}
        self.state = [k.state for k in p.constants]
        self.dynamic = bool(getattr(p, "symbols", None))


def _check_operand(pv, s, j, op):
    """One operand of step s: its space, index and value; its object's
    extent (None for a LITERAL)."""
    what = "step %d, operand %d" % (s, j)
    if len(op) != 3:
        raise BundleError("invalid_argument", "%s: %r is not (space, index, value)" % (what, op))
    space, index, value = op
    if not _is_int(space, 0, U32_MAX) or not _is_int(index, 0, U32_MAX) or not _is_int(value):
        _bad(what, "a field %r is not an integer of its width" % (op,))
    if space == LITERAL:
        if index:
            _bad(what, "a LITERAL's index %d is not 0" % index)
        return None
    if space not in pv.extent:
        _bad(what, "space %d is not one of 0..4" % space)
    objs = pv.extent[space]
    if index >= len(objs):
        _bad(what, "%s %d, of %d" % (SPACE_NAMES[space], index, len(objs)))
    if value > objs[index]:
        _bad(what, "offset %d past %s %d's %d bytes" % (value, SPACE_NAMES[space], index, objs[index]))
    if space == BUFFER and not pv.buffers[index].first <= s <= pv.buffers[index].last:
        _bad(what, "buffer %d is used outside its lifetime %d..%d" % (index, pv.buffers[index].first,
                                                                       pv.buffers[index].last))
    return objs[index]


def _aligned(pv, op, a):
    """Is the operand's address surely a multiple of a? Inputs and outputs
    are aligned to their align, constants to 64 and the workspace to 256, so a
    buffer's offset in the workspace counts too."""
    space, index, value = op
    if space in pv.align and pv.align[space][index] < a:
        return False
    base = pv.buffers[index].offset if space == BUFFER else 0
    return (base + value) % a == 0


def _check_step(pv, st, s, reserved=0):
    """Step s, its fields in file order, then its operands in order."""
    what = "step %d" % s
    kind, ops = st.kind, st.operands
    if kind not in STEP_NAMES:
        _bad(what, "kind %r is not 1 (launch), 2 (memset) or 3 (copy)" % (kind,))
    if len(ops) > MAX_ARGS:
        raise BundleError("limit", "%s: %d operands, over TB_MAX_ARGS" % (what, len(ops)))
    if len(st.grid) != 3:
        raise BundleError("invalid_argument", "%s: grid %r is not (x, y, z)" % (what, st.grid))
    cf = None
    if kind == LAUNCH:
        if not _is_int(st.record, 0, U32_MAX) or st.record >= len(pv.records):
            _bad(what, "record %r, of %d" % (st.record, len(pv.records)))
        rec = pv.records[st.record]
        if not _is_int(st.config, 0, U32_MAX) or st.config >= len(rec.configs):
            _bad(what, "config %r, of %d in record %d" % (st.config, len(rec.configs), st.record))
        cf = rec.configs[st.config]
        gx, gy, gz = st.grid
        lo = 0 if pv.dynamic else 1  # (2.6) a grid of 0 blocks in a program with symbols: a launch skipped
        if not (_is_int(gx, lo, GRID_X_MAX) and _is_int(gy, lo, GRID_YZ_MAX) and _is_int(gz, lo, GRID_YZ_MAX)):
            _bad(what, "grid %r outside 1..2^31-1, 1..65535, 1..65535" % (st.grid,))
        if st.width != 0 or st.value != 0:
            _bad(what, "a launch's width or value is not 0")
    else:
        if st.record != 0 or st.config != 0 or any(g != 0 for g in st.grid):
            _bad(what, "a %s's record, config or grid is not 0" % STEP_NAMES[kind])
        if kind == MEMSET:
            if st.width not in MEMSET_WIDTHS:
                _bad(what, "memset width %r is not 1, 2 or 4" % (st.width,))
            if not _is_int(st.value, 0, (1 << (8 * st.width)) - 1):
                _bad(what, "memset value %r does not fit %d bytes" % (st.value, st.width))
        elif st.width != 0 or st.value != 0:
            _bad(what, "a copy's width or value is not 0")
    if not _is_int(st.count) or (kind == LAUNCH and st.count):
        _bad(what, "count %r (a launch's is 0)" % (st.count,))
    want = len(cf.arg_types) if STEP_OPERANDS[kind] < 0 else STEP_OPERANDS[kind]
    if len(ops) != want:
        _bad(what, "%d operands where the %s takes %d" % (len(ops), STEP_NAMES[kind], want))
    if kind == LAUNCH:
        div = cf.arg_divisibility
        for j, (code, op) in enumerate(zip(cf.arg_types, ops)):
            _check_operand(pv, s, j, op)
            space, value = op[0], op[2]
            aligned = bool(div) and div[j] == "1"
            ow = "%s, operand %d (code '%s')" % (what, j, code)
            if code == "T":
                raise BundleError("unsupported_type", "%s: a tensor descriptor argument cannot be a program's operand"
                                  % ow)
            if code == "O":
                if space == LITERAL:
                    _bad(ow, "a pointer argument takes INPUT, OUTPUT, CONSTANT or BUFFER")
                if aligned and not _aligned(pv, op, 16):
                    _bad(ow, "the cubin assumes 16-byte alignment: offset %d, or the tensor's align under 16" % value)
                if space == CONSTANT and not pv.state[op[1]] and arg_marks_written(rec, j):
                    _bad(ow, "the kernel writes this argument, and constant %d is not state (read only)" % op[1])
            else:
                if space != LITERAL:
                    _bad(ow, "a scalar argument takes a LITERAL")
                if not literal_fits(code, value, bool(cf.flags & CONFIG_TYPES_FROM_IR)):
                    _bad(ow, "literal 0x%x does not fit the code" % value)
                if aligned and code not in _FLOAT_CODES and value & 15:
                    _bad(ow, "the cubin assumes the value divisible by 16: 0x%x" % value)
        _check_launch_grid(cf, st, what)
        if reserved:
            _bad(what, "a reserved field is not zero")
        return
    touched = st.count * (st.width if kind == MEMSET else 1)
    for j, op in enumerate(ops):
        size = _check_operand(pv, s, j, op)
        if size is None:
            _bad("%s, operand %d" % (what, j), "a %s takes pointers" % STEP_NAMES[kind])
        if op[2] + touched > size:
            _bad("%s, operand %d" % (what, j), "bytes %d + %d past the object's %d" % (op[2], touched, size))
    if kind == MEMSET and not _aligned(pv, ops[0], st.width):
        _bad(what, "a memset of width %d needs a destination aligned to it" % st.width)
    if ops[0][0] == CONSTANT and not pv.state[ops[0][1]]:
        _bad(what, "writes constant %d, which is not state" % ops[0][1])
    if kind == COPY and touched and ops[0][:2] == ops[1][:2] and abs(ops[0][2] - ops[1][2]) < touched:
        # FORMAT.md: "from the source to the destination, which do not
        # overlap"; checkable only within one object
        _bad(what, "copies %d bytes between overlapping ranges of one object" % touched)
    if reserved:
        _bad(what, "a reserved field is not zero")


def arg_marks_written(rec, j):
    """Whether record rec says its kernel writes argument j: its call info
    lists j as mutated, or names it out_ptr... or in_out_ptr... (Inductor's
    names for what a kernel stores to). tb__arg_marks_written."""
    ci = rec.call
    if ci is None:
        return False
    if j in ci.mutated:
        return True
    return j < len(ci.arg_names) and ci.arg_names[j].startswith(("out_ptr", "in_out_ptr"))


def arg_may_write(rec, j):
    """Whether record rec's kernel may write argument j as far as anyone
    knows: the record says so, or says nothing of what it writes (no call
    info, or no argument marked). tb__arg_may_write."""
    if rec.call is None or arg_marks_written(rec, j):
        return True
    return not any(arg_marks_written(rec, i) for i in range(len(rec.configs[0].arg_types)))


def _check_launch_grid(cf, st, what):
    """[R-program-grid]: a launch's grid in blocks, its clusters counted (a
    launcher multiplies it by them), within CUDA's launch; and what the
    config's grid rule gives for the step's operands, where the rule reads
    nothing but them and constants."""
    cl = [1, 1, 1]
    if cf.num_ctas > 1:
        cl = list(cf.cluster_dims) if all(cf.cluster_dims) else [cf.num_ctas, 1, 1]
    for g, c, most in zip(st.grid, cl, (GRID_X_MAX, GRID_YZ_MAX, GRID_YZ_MAX)):
        if g * c > most:
            _bad(what, "grid %r in clusters of %r blocks is more blocks than a CUDA launch takes" % (
                tuple(st.grid), tuple(cl)))
    try:
        got = rule_grid(cf, st)
    except BundleError as e:
        _bad(what, "its config's grid rule gives no grid for the step's operands (%s)" % e)
    if got is not None and got != tuple(st.grid):
        _bad(what, "grid %r, where its config's grid rule gives %r for the step's operands" % (tuple(st.grid), got))


def rule_grid(cf, st):
    """The grid config cf's rule gives for launch step st's operands, or
    None where it has no rule or its rule reads grid arguments (a step
    carries none); BundleError where the rule refuses them."""
    if cf.grid is None or any(op == EXTRA for prog in cf.grid.dims for op, _, _ in prog):
        return None
    return tuple(eval_grid(cf, [v if sp == LITERAL else 0 for sp, _, v in st.operands]))


def check_program(bundle):
    """FORMAT.md sections 5 and 6: each of bundle.programs against the
    bundle's records, in file order, as the reader checks it, and what the
    programs share (nothing when there is none)."""
    for p in bundle.programs:
        if not isinstance(p, Program):
            raise BundleError("invalid_argument", "a program is a %s, not a Program" % type(p).__name__)
    if len(bundle.programs) > MAX_PROGRAMS:
        raise BundleError("limit", "%d programs, over the limit %d" % (len(bundle.programs), MAX_PROGRAMS))
    for p in bundle.programs:
        try:
            _check_one_program(bundle, p)
        except BundleError as e:  # name the program, as the C reader does
            if 'program "' in e.message or not isinstance(p.name, str):
                raise
            raise BundleError(e.code, '%s [program "%s"]' % (e.message, p.name[:60]), e.offset) from None
    if bundle.programs:
        _check_sharing(bundle.programs, bundle.properties)
    _check_properties(bundle.properties)


def _check_properties(props):
    if len(props) > MAX_PROPERTIES:
        raise BundleError("limit", "%d properties, over %d" % (len(props), MAX_PROPERTIES))
    for k, v in props.items():
        _check_string(k, MAX_NAME_LENGTH, "property key")
        if not isinstance(v, str) or "\0" in v or len(_enc(v)) > MAX_STRING_LENGTH:
            raise BundleError("limit" if isinstance(v, str) and "\0" not in v else "invalid_argument",
                              "property %r: its value %r is not a string of at most %d bytes" % (
                                  k, v if not isinstance(v, str) else v[:40], MAX_STRING_LENGTH))


def in_section5(programs, properties=()):
    """Whether a writer writes these programs as section 5 (2.3): one,
    named "forward", sharing nothing, in a bundle with no properties; else
    as section 6 (2.4)."""
    return len(programs) == 1 and programs[0].name == DEFAULT_PROGRAM and not properties and \
        not any(k.shared or k.external is not None for k in programs[0].constants) and not programs[0].symbols


def _check_sharing(programs, properties=()):
    """Section 6's rules across programs [R-program-sharing]: one table of
    constants (every program's), the programs' names unique (and each 1 to
    255 bytes), the constants' names unique (a section 5 program's may
    repeat), a shared constant state, and a state constant that two
    programs use marked shared."""
    table = programs[0].constants
    for p in programs[1:]:
        if p.constants is not table and p.constants != table:
            raise BundleError("invalid_argument", "programs %r and %r do not share one table of constants: add "
                              "programs with Bundle.add_program" % (programs[0].name, p.name))
    names = set()
    for p in programs:
        if p.name in names:
            _bad("program %r" % (p.name,), "a second program of that name")
        names.add(p.name)
    if not in_section5(programs, properties):
        seen = set()
        for i, k in enumerate(table):
            if k.name in seen:
                _bad("constant %d" % i, "a second constant named %r (section 6 names each once)" % (k.name,))
            seen.add(k.name)
    for i, k in enumerate(table):
        if k.shared and not k.state:
            _bad("constant %d" % i, "shared but not state")
    user = {}
    for p in programs:
        for st in p.steps:
            for sp, ix, _ in st.operands:
                if sp != CONSTANT or ix >= len(table) or not table[ix].state:
                    continue
                first = user.setdefault(ix, p.name)
                if first != p.name and not table[ix].shared:
                    _bad("constant %d" % ix, "state constant %r is used by programs %r and %r but not marked "
                         "shared" % (table[ix].name, first, p.name))


def _check_one_program(bundle, p):
    if not isinstance(p.name, str) or not 0 < len(_enc(p.name)) <= MAX_NAME_LENGTH or "\0" in p.name:
        raise BundleError("bad_name" if p.name == "" else "limit" if isinstance(p.name, str) and "\0" not in p.name
                          else "invalid_argument", "program name %r: 1 to %d bytes, no zero byte" % (
                              p.name, MAX_NAME_LENGTH))
    for n, limit, what in ((len(p.inputs), MAX_PROGRAM_TENSORS, "inputs"),
                           (len(p.outputs), MAX_PROGRAM_TENSORS, "outputs"),
                           (len(p.constants), MAX_PROGRAM_CONSTANTS, "constants"),
                           (len(p.buffers), MAX_PROGRAM_BUFFERS, "buffers"),
                           (len(p.steps), MAX_PROGRAM_STEPS, "steps")):
        if n > limit:
            raise BundleError("limit", "the program has %d %s, over the limit %d" % (n, what, limit))
    if not _is_int(p.workspace_size):
        _bad("the program", "workspace_size %r is not a u64" % (p.workspace_size,))
    for group, tensors in (("input", p.inputs), ("output", p.outputs)):
        for i, t in enumerate(tensors):
            _check_tensor(t, "%s %d" % (group, i))
    for group, tensors in (("input", p.inputs), ("output", p.outputs)):  # after all of them, as the reader
        names = set()
        for i, t in enumerate(tensors):
            if t.name in names:
                _bad("%s %d" % (group, i), "a second %s named %r" % (group, t.name))
            names.add(t.name)
    sizes = []
    for i, k in enumerate(p.constants):
        _check_constant(k, "constant %d" % i)
        if k.external is not None:
            _check_external(k, "constant %d" % i)
        sizes.append(k.nbytes())
    for i, b in enumerate(p.buffers):
        _check_buffer(b, "buffer %d" % i, p.workspace_size, len(p.steps))
    _check_plan(p.buffers)
    if len(p.symbols) > MAX_PROGRAM_SYMBOLS:
        raise BundleError("limit", "program: %d symbols" % len(p.symbols))
    pv = _ProgramView(bundle.records, p, sizes)
    for s, st in enumerate(p.steps):
        _check_step(pv, st, s)
    if p.symbols or p.exprs:
        check_dynamic(bundle.records, p)


def _check_symbol(y, i, seen):
    if not isinstance(y.name, str) or not 0 < len(_enc(y.name)) <= MAX_NAME_LENGTH or "\0" in y.name:
        raise BundleError("bad_name" if y.name == "" else "limit", "program symbol %d: a name of 1 to %d bytes" % (
            i, MAX_NAME_LENGTH))
    if y.name in seen:
        _bad("program symbol %d" % i, "a second symbol named %r" % (y.name,))
    if not (_is_int(y.min, 0, SYMBOL_MAX) and _is_int(y.max, 0, SYMBOL_MAX) and _is_int(y.divisor, 1, I64_MAX)) or \
            y.min > y.max or y.min % y.divisor or y.max % y.divisor:
        _bad("program symbol %d (%s)" % (i, y.name), "range %r..%r, divisor %r (0 <= min <= max < 2^31, a divisor "
             "of both, at least 1)" % (y.min, y.max, y.divisor))


def expr_slot(records, p, x):
    """The value program p holds in the field expression x gives, or None
    where (field, index, sub) names nothing that may vary."""
    f, i, j = x.field, x.index, x.sub
    if f in (FIELD_INPUT_SIZE, FIELD_INPUT_STRIDE, FIELD_OUTPUT_SIZE, FIELD_OUTPUT_STRIDE):
        ts = p.inputs if f in (FIELD_INPUT_SIZE, FIELD_INPUT_STRIDE) else p.outputs
        if i >= len(ts) or j >= len(ts[i].shape):
            return None
        return ts[i].shape[j] if f in (FIELD_INPUT_SIZE, FIELD_OUTPUT_SIZE) else ts[i].strides[j]
    if f == FIELD_BUFFER_SIZE:
        return p.buffers[i].size if i < len(p.buffers) and not j and p.buffers[i].size <= I64_MAX else None
    if f in (FIELD_GRID, FIELD_COUNT, FIELD_OPERAND) and i < len(p.steps):
        st = p.steps[i]
        if f == FIELD_GRID:
            return st.grid[j] if st.kind == LAUNCH and j <= 2 else None
        if f == FIELD_COUNT:
            return st.count if st.kind != LAUNCH and not j and st.count <= I64_MAX else None
        if j >= len(st.operands):
            return None
        sp, _, v = st.operands[j]
        if sp == LITERAL:
            if st.kind != LAUNCH or st.record >= len(records) or st.config >= len(records[st.record].configs):
                return None
            code = records[st.record].configs[st.config].arg_types[j]
            if code not in INT_CODES or code == "?":
                return None
        return v - (1 << 64) if v >> 63 else v
    return None


def check_dynamic(records, p):
    """(2.6) FORMAT.md [R-symbols]: the symbols in their ranges, each bound
    by an input size; the expressions sorted, each naming a field that may
    vary and giving at every maximum the value the program holds."""
    if len(p.symbols) > MAX_PROGRAM_SYMBOLS:
        raise BundleError("limit", "program: %d symbols (at most %d)" % (len(p.symbols), MAX_PROGRAM_SYMBOLS))
    if getattr(p, "values", None) is not None:  # specialize's: its expressions evaluated into its fields
        if p.exprs:
            raise BundleError("invalid_argument", "a specialized program with expressions")
        return
    if p.exprs and not p.symbols:
        _bad("the program", "%d expressions and no symbol" % len(p.exprs))
    seen = set()
    for i, y in enumerate(p.symbols):
        _check_symbol(y, i, seen)
        seen.add(y.name)
    if len(p.exprs) > MAX_PROGRAM_EXPRS:
        raise BundleError("limit", "program: %d expressions" % len(p.exprs))
    at_max = [y.max for y in p.symbols]
    bound = set()
    for i, x in enumerate(p.exprs):
        if i and not p.exprs[i - 1].key() < x.key():
            _bad("program expression %d %r" % (i, x.key()), "not after the one before it (sorted; each once)")
        now = expr_slot(records, p, x)
        if now is None:
            _bad("program expression %d" % i, "field %r index %d sub %d names nothing an expression may give"
                 % (FIELD_NAMES.get(x.field, x.field), x.index, x.sub))
        check_expr_ops(x.ops, len(p.symbols), i)
        try:
            v = eval_expr(x.ops, at_max, checked=True)
        except BundleError:
            v = None
        if v != now:
            _bad("program expression %d (%s %d/%d)" % (i, FIELD_NAMES[x.field], x.index, x.sub),
                 "gives %r at every symbol's maximum, where the program holds %d" % (v, now))
        if x.field == FIELD_INPUT_SIZE and len(x.ops) == 1 and x.ops[0][0] == SYM:
            bound.add(x.ops[0][1])
    for i, y in enumerate(p.symbols):
        if i not in bound:
            _bad("program symbol %d (%s)" % (i, y.name), "is no input's size: a run could not bind it")


def specialize(records, p, values):
    """(2.6) Program p at these symbol values (a list, one per symbol):
    every expression evaluated into its field, then checked as the C
    library's tb_program_specialize checks it; the copy has no symbols."""
    import copy
    check_dynamic(records, p)
    if len(values) != len(p.symbols):
        raise BundleError("invalid_argument", "%d values for %d symbols" % (len(values), len(p.symbols)))
    for y, v in zip(p.symbols, values):
        if not (y.min <= v <= y.max) or v % y.divisor:
            raise BundleError("shape", "symbol %r is %d: it takes %d..%d (multiples of %d)" % (
                y.name, v, y.min, y.max, y.divisor))
    q = Program(copy.deepcopy(p.inputs), copy.deepcopy(p.outputs), p.constants, copy.deepcopy(p.buffers),
                p.workspace_size, [Step(st.kind, st.operands, st.record, st.config, st.grid, st.width, st.value,
                                        st.count) for st in p.steps], p.name)
    for x in p.exprs:
        v = eval_expr(x.ops, values, checked=True)
        f, i, j = x.field, x.index, x.sub
        if f in (FIELD_INPUT_SIZE, FIELD_OUTPUT_SIZE):
            (q.inputs if f == FIELD_INPUT_SIZE else q.outputs)[i].shape[j] = v
        elif f in (FIELD_INPUT_STRIDE, FIELD_OUTPUT_STRIDE):
            (q.inputs if f == FIELD_INPUT_STRIDE else q.outputs)[i].strides[j] = v
        elif f == FIELD_BUFFER_SIZE:
            if not 0 <= v <= p.buffers[i].size:
                _bad("program %r" % p.name, "buffer %d needs %d bytes at these sizes, and the plan holds %d" % (
                    i, v, p.buffers[i].size))
            q.buffers[i].size = v
        elif f == FIELD_GRID:
            if not 0 <= v <= GRID_X_MAX:
                raise BundleError("arg_range", "program %r step %d: grid %s of %d" % (p.name, i, "xyz"[j], v))
            g = list(q.steps[i].grid)
            g[j] = v
            q.steps[i].grid = tuple(g)
        elif f == FIELD_COUNT:
            if v < 0:
                raise BundleError("arg_range", "program %r step %d: count %d" % (p.name, i, v))
            q.steps[i].count = v
        else:
            ops = list(q.steps[i].operands)
            sp, ix, _ = ops[j]
            ops[j] = (sp, ix, v & U64_MAX)
            q.steps[i].operands = ops
    q.symbols, q.values = p.symbols, list(values)  # (a grid of 0 stays allowed, as in C)

    class _Records:
        pass
    holder = _Records()
    holder.records = records
    _check_one_program(holder, q)
    return q
