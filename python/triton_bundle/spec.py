"""The header's numbers, in one place: every constant and table of the
Python companion that mirrors a #define, an enum or an X-macro table of
triton_bundle.h, under the header's section tags (>>core, >>format, >>args,
>>grid, >>program, >>weights, >>launch, >>runner). The other modules
import them from here (the numbers C writes as literals, not #defines,
such as program.MAX_ALIGN, stay with their code). tests/test_spec.py
checks each one against the header by its C name (tests/test_codes.py the
argument codes and the dtypes, row for row), so a number changed on one
side and not the other fails a test. BundleError is here too, with the
results its codes name.

It imports nothing of the package: every module may import it."""

import collections

# ------------------------------------------------------------------ >>core
# The results (the header's enum tb_result and tb__result_strings, row for
# row): the number, the name without its tb_err_ prefix (BundleError.code)
# and tb_result_string's text.
Result = collections.namedtuple("Result", "code name text")
RESULT_CODES = (
    Result(0, "ok", "ok"),
    Result(1, "invalid_argument", "invalid argument"),
    Result(2, "out_of_memory", "out of memory"),
    Result(3, "io", "I/O error"),
    Result(4, "truncated", "input truncated"),
    Result(5, "bad_magic", "not a triton bundle (bad magic)"),
    Result(6, "unsupported_version", "unsupported format version"),
    Result(7, "checksum", "checksum mismatch"),
    Result(8, "malformed", "malformed input"),
    Result(9, "limit", "sanity limit exceeded"),
    Result(10, "bad_name", "invalid name"),
    Result(11, "not_found", "not found"),
    Result(12, "sentinel", "sentinel already present"),
    Result(13, "unsupported_type", "unsupported argument type"),
    Result(14, "parse", "parse error"),
    Result(15, "no_driver", "CUDA driver not available"),
    Result(16, "no_device", "no CUDA device"),
    Result(17, "cuda", "CUDA driver call failed"),
    Result(18, "arg_mismatch", "mismatch (arguments or tensors that do not fit what they are given to)"),
    Result(19, "arg_range", "argument out of range"),
    Result(20, "misaligned", "argument violates kernel assumption"),
    Result(21, "shared_memory", "shared memory request too large"),
    Result(22, "scratch", "scratch buffer required"),
    Result(23, "shape", "input size outside the program's range"),
)
# the names by number (a tb_result is an index into it)
RESULTS = [r.name for r in RESULT_CODES]


class BundleError(Exception):
    """A refused input or call. .code is the C library's tb_result name
    without its prefix ("truncated", "malformed", "limit", ...)."""

    def __init__(self, code, message, offset=-1):
        Exception.__init__(self, "%s: %s%s" % (code, message, " [offset %d]" % offset if offset >= 0 else ""))
        self.code = code
        self.message = message
        self.offset = offset


# The ranges of C's integer types (stdint.h's INT64_MIN ...), and CUDA's
# launch limits on a grid (x below 2^31, y and z below 2^16).
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
U32_MAX, U64_MAX = (1 << 32) - 1, (1 << 64) - 1
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
GRID_X_MAX, GRID_YZ_MAX = (1 << 31) - 1, 65535

# ---------------------------------------------------------------- >>format
FORMAT_MAJOR = 2
FORMAT_MINOR = 6
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
MAX_JSON_DEPTH = 64  # JSON nesting, in a cache's metadata and a weights file's header
MAX_PROGRAM_TENSORS = 65536
MAX_PROGRAM_CONSTANTS = 1000000
MAX_PROGRAM_BUFFERS = 1000000
MAX_PROGRAM_STEPS = 1000000
MAX_PROGRAMS = 1024
MAX_PROGRAM_SYMBOLS = 16  # (2.6)
MAX_EXPR_OPS = 256
MAX_PROGRAM_EXPRS = 4000000
SYMBOL_MAX = (1 << 31) - 1
MAX_PROPERTIES = 4096
MAX_TENSOR_DIMS = 8

# Config flags (tb_launch_config.flags).
CONFIG_COOPERATIVE = 1
CONFIG_PDL = 2
CONFIG_TYPES_FROM_IR = 4

# The sections (the header's TB__SEC_*; format.SECTIONS holds their rows).
SEC_KERNELS, SEC_RECORDS, SEC_TENSORDESCS, SEC_CALLS, SEC_PROGRAM, SEC_PROGRAMS = 1, 2, 3, 4, 5, 6
SECTION_REQUIRED = 1  # a section flag: a reader that does not know the type refuses the file
# Fixed sizes of the layout (FORMAT.md): the file's header, a section's
# header, the trailer; a tensor descriptor's entry (section 3); a call info
# entry, a grid rule's head and one operation (section 4); section 5's
# head, section 6's head and a section 6 program's counts and workspace
# after its name; the least a program's tensor and constant take, a buffer,
# a step and an operand; the alignment of a constant's bytes in the file.
HEADER_SIZE, SECTION_HEADER_SIZE, TRAILER_SIZE = 32, 16, 8
DESC_ENTRY = 64
CALL_ENTRY, GRID_HEAD, GRID_OP = 32, 16, 16
PROGRAM_HEADER = 40
PROGRAMS_HEADER, PROGRAM6_HEADER = 16, 32  # section 6's head; a program's counts and workspace after its name
PROGRAM_TENSOR_MIN, PROGRAM_CONSTANT_MIN, PROGRAM_BUFFER, PROGRAM_STEP, PROGRAM_OPERAND = 24, 32, 24, 48, 16
CONSTANT_ALIGN = 64
DEFAULT_PROGRAM = "forward"  # the name of a program section 5 holds

# -------------------------------------------------------------------- >>fs
SENTINEL = b"[REPLACE]"  # what collect writes in place of the cache directory in a kernel's files

# ------------------------------------------------------------------ >>args
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

# ------------------------------------------------------------------ >>grid
# Grid operations (FORMAT.md, section 4): the language of grid rules and
# (2.6) program expressions.
CONST, ARG, PARAM, EXTRA = 1, 2, 3, 4
SYM = 5  # (2.6) a program's symbol: program expressions only, never a grid rule
ADD, SUB, MUL, FLOORDIV, CEILDIV, MOD, MIN, MAX, NEG = 16, 17, 18, 19, 20, 21, 22, 23, 24
MAX_GRID_OPS = 64
GRID_STACK = 16
MAX_GRID_EXTRA = 8
# The operations, one row each, the header's TB__GRID_OPS row for row
# (tests/test_spec.py checks it): the code, the name, the text the grid
# language writes it with (the header's tb_grid_parse and grid.py's
# GridCompiler read it: an infix operator, a function name, or "-" for NEG,
# which is unary; "" for an operand) and its arity (the values it pops; 0
# for an operand, which pushes one). grid.py's checkers take each
# operator's arity from here, and its ops_text each operator's text.
GridOp = collections.namedtuple("GridOp", "code name text arity")
GRID_OPS = (
    GridOp(CONST, "CONST", "", 0),
    GridOp(ARG, "ARG", "", 0),
    GridOp(PARAM, "PARAM", "", 0),
    GridOp(EXTRA, "EXTRA", "", 0),
    GridOp(SYM, "SYM", "", 0),
    GridOp(ADD, "ADD", "+", 2),
    GridOp(SUB, "SUB", "-", 2),
    GridOp(MUL, "MUL", "*", 2),
    GridOp(FLOORDIV, "FLOORDIV", "//", 2),
    GridOp(CEILDIV, "CEILDIV", "cdiv", 2),
    GridOp(MOD, "MOD", "%", 2),
    GridOp(MIN, "MIN", "min", 2),
    GridOp(MAX, "MAX", "max", 2),
    GridOp(NEG, "NEG", "-", 1),
)
GRID_OP_BY_CODE = {r.code: r for r in GRID_OPS}
# the operations of a grid rule by name (SYM is a program expression's only)
OP_NAMES = {r.code: r.name for r in GRID_OPS if r.code != SYM}
# the operands, and the operators with their arity
OPERANDS = frozenset(r.code for r in GRID_OPS if r.arity == 0)
OP_ARITY = {r.code: r.arity for r in GRID_OPS if r.arity}

# --------------------------------------------------------------- >>program
# The program (FORMAT.md, section 5): dtypes, one row each, the header's
# TB__DTYPES row for row (tests/test_codes.py checks it): the number, the
# name (PyTorch's), the bytes of one element, and the .npy descr that
# tbundle run reads and writes (bf16 and fp8 as their bit patterns), and the
# safetensors dtype ("" for none).
DType = collections.namedtuple("DType", "number name bytes npy safetensors")
DTYPES = (
    DType(1, "float32", 4, "<f4", "F32"),
    DType(2, "float16", 2, "<f2", "F16"),
    DType(3, "bfloat16", 2, "<u2", "BF16"),
    DType(4, "float64", 8, "<f8", "F64"),
    DType(5, "int8", 1, "|i1", "I8"),
    DType(6, "int16", 2, "<i2", "I16"),
    DType(7, "int32", 4, "<i4", "I32"),
    DType(8, "int64", 8, "<i8", "I64"),
    DType(9, "uint8", 1, "|u1", "U8"),
    DType(10, "bool", 1, "|b1", "BOOL"),
    DType(11, "float8_e4m3fn", 1, "|u1", "F8_E4M3"),
    DType(12, "float8_e5m2", 1, "|u1", "F8_E5M2"),
    DType(13, "uint16", 2, "<u2", "U16"),
    DType(14, "uint32", 4, "<u4", "U32"),
    DType(15, "uint64", 8, "<u8", "U64"),
    DType(16, "float8_e4m3fnuz", 1, "|u1", ""),
    DType(17, "float8_e5m2fnuz", 1, "|u1", ""),
)
DTYPE_BY_NAME = {d.name: d for d in DTYPES}
DTYPE_BY_NUMBER = {d.number: d for d in DTYPES}
# operand spaces (the header's TB_SPACE_*; its tb__space_names, in capitals)
LITERAL, INPUT, OUTPUT, CONSTANT, BUFFER = 0, 1, 2, 3, 4
SPACE_NAMES = {LITERAL: "LITERAL", INPUT: "INPUT", OUTPUT: "OUTPUT", CONSTANT: "CONSTANT", BUFFER: "BUFFER"}
# Step kinds: one row each, the header's TB__STEP_KINDS row for row
# (tests/test_spec.py checks it): the code, the name, the operands it takes
# (-1: one per argument code of its record's config) and what it writes.
LAUNCH, MEMSET, COPY = 1, 2, 3
StepKind = collections.namedtuple("StepKind", "code name operands writes")
STEP_KINDS = (
    StepKind(LAUNCH, "launch", -1, "the kernel's pointer arguments"),
    StepKind(MEMSET, "memset", 1, "operand 0"),
    StepKind(COPY, "copy", 2, "operand 0"),
)
STEP_NAMES = {r.code: r.name for r in STEP_KINDS}
STEP_OPERANDS = {r.code: r.operands for r in STEP_KINDS}
# constant flags
CONSTANT_STATE = 1
CONSTANT_SHARED = 2  # (2.4, with state) shared by the programs that use it
CONSTANT_EXTERNAL = 4  # (2.5, never with state) its bytes are a tensor of a weights file (safetensors)
# (2.6) what an expression gives: (field, index, sub); FIELD_NAMES are the
# header's tb__field_names
FIELD_INPUT_SIZE, FIELD_INPUT_STRIDE, FIELD_OUTPUT_SIZE, FIELD_OUTPUT_STRIDE = 1, 2, 3, 4
FIELD_BUFFER_SIZE, FIELD_GRID, FIELD_COUNT, FIELD_OPERAND = 5, 6, 7, 8
FIELD_NAMES = {1: "input size", 2: "input stride", 3: "output size", 4: "output stride", 5: "buffer size", 6: "grid",
               7: "count", 8: "operand"}

# --------------------------------------------------------------- >>weights
MAX_WEIGHTS_HEADER = 100000000  # bytes of a safetensors file's JSON header: safetensors' own limit

# ---------------------------------------------------------------- >>launch
LAUNCH_CHECKED, LAUNCH_GRID_AUTO = 1, 2
CONFIG_AUTOTUNE = 0xFFFFFFFF

# ---------------------------------------------------------------- >>runner
MODEL_GRAPH, MODEL_STATIC_IO = 1, 2
