"""triton_bundle - the Python companion of triton_bundle.h.

Standard library only, Python 3.9 or later, MIT No Attribution licence
(MIT-0, as triton_bundle.h). It holds:

- a reader and a writer of the bundle format (docs/FORMAT.md, 2.6): the
  same bytes as the C library for the same bundle, and the same refusals of
  damaged or hostile input; a bundle may hold a program (section 5: a whole
  compiled model's inputs, outputs, constants, workspace plan and steps);
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
    export_model(model, inputs, path)
                                 a whole torch.compile'd forward as a
                                 program (section 5): every launch, memset
                                 and copy in order, the inputs, outputs,
                                 constants and the workspace plan, checked
                                 against the profiler's record of the run;
- a command line: triton-bundle list FILE | export ... (--help, --version),
  also run as python -m triton_bundle or python3 python/triton_bundle;
- CLibrary: the C library (libtriton_bundle.so) through ctypes.

Installed with `pip install .` from the repository root (pyproject.toml).
The package's modules mirror the header's sections; this one re-exports
the public API listed here (import triton_bundle as tb; tb.read,
tb.write, tb.CLibrary...), no private name (a test or a tool that needs
one, or a module's other names, imports it from its module):
    spec      every number and table that mirrors the header: the limits,
              the flags, the section ids, the argument codes, the dtypes,
              the grid operations, the step kinds, the results and
              BundleError (tests/test_spec.py checks them by name)
    grid      the grid language: GridRule, its checkers and text,
              evaluation and the compiler (>>grid)
    xxh3      XXH3-64 and the format's block checksum (>>format)
    checks    what every section's checks share: names, strings,
              integers of a width, byte views
    program   the program (sections 5 and 6): its data model, its checks
              and specialize (>>program)
    format    the data model of sections 1 to 4, its checks, the
              sections' table, the writer and the reader (>>model,
              >>format); it holds its neighbours' names too
    collect   Triton cache directories and metadata configs (>>fs,
              >>derive)
    export    export_triton and TorchCapture
    steps     what turns a run into steps, without torch: literals,
              memset patterns, the workspace plan, the GPU events matched
    tensors   what an export reads of torch's tensors and modules
    capture   the capture run's recorder and its aten hooks
    inductor  Inductor's options for an export (TRITON_ONLY), the
              backend with the exporter's decompositions
              (exporter_backend: convolutions as products, an argmax
              in two stages, a decode's eager attention found in
              Dynamo's graph; conv_as_mm_backend), and the one-row
              products' config
              (NARROW_PRODUCT_CONFIG, narrow_product_configs)
    attention (2.13) the decode attention's Triton kernel and its
              torch.library op (imports triton; imported when a graph
              has such an attention)
    model     export_model and export_programs (a whole model as
              programs) and their reports; it runs steps, tensors,
              capture and inductor
    dynamic   (2.6) the shapes that vary: export_model's dynamic_shapes
              (imported when used)
    weights   safetensors weights files (>>weights)
    native    CLibrary, the C library through ctypes
    cli       the command line (main; __main__ runs it)

Records the exporters write are exact: signed and unsigned types, 1-byte
bools, and the constexprs Triton baked in (as config params). Records that
`tbundle pack` derives from a bare cache carry flag bit 2 (types from the
IR) instead, and no grid rules.
"""

# The version of triton_bundle.h this package goes with (its
# TB_VERSION_STRING; tests/test_package.py checks that they are equal).
# Defined before the modules are imported: the command line prints it.
__version__ = "2.16.0"

from .spec import (  # noqa: E402
    # limits and the format's numbers
    FORMAT_MAJOR, FORMAT_MINOR, MAGIC, MAX_ARGS, MAX_ARTIFACTS_PER_KERNEL, MAX_ARTIFACT_SIZE, MAX_CONFIGS_PER_RECORD,
    MAX_GRID_EXTRA, MAX_GRID_OPS, MAX_KERNELS, MAX_NAME_LENGTH, MAX_PARAMS_PER_CONFIG, MAX_RECORDS, MAX_SECTIONS,
    MAX_SENTINELS, MAX_STRING_LENGTH, MAX_TENSORDESCS, MAX_TENSOR_RANK, GRID_STACK, I64_MAX, I64_MIN,
    CONFIG_COOPERATIVE, CONFIG_PDL, CONFIG_TYPES_FROM_IR, SENTINEL,
    # grid operations
    CONST, ARG, PARAM, EXTRA, ADD, SUB, MUL, FLOORDIV, CEILDIV, MOD, MIN, MAX, NEG, OP_NAMES, GRID_OPS, GridOp,
    # argument codes
    ARG_CODES, ArgCode, KIND_PTR, KIND_BOOL, KIND_SINT, KIND_UINT, KIND_FLOAT, KIND_DESC, CODE_SIZES, INT_CODES,
    TRITON_CODES,
    # sections
    SEC_KERNELS, SEC_RECORDS, SEC_TENSORDESCS, SEC_CALLS, SEC_PROGRAM, SEC_PROGRAMS, SECTION_REQUIRED,
    # the program (section 5)
    DTYPES, DType, DTYPE_BY_NAME, DTYPE_BY_NUMBER, LITERAL, INPUT, OUTPUT, CONSTANT, BUFFER, LAUNCH, MEMSET, COPY,
    STEP_KINDS, StepKind, CONSTANT_STATE, CONSTANT_SHARED, CONSTANT_EXTERNAL, MAX_PROGRAM_TENSORS,
    MAX_PROGRAM_CONSTANTS, MAX_PROGRAM_BUFFERS, MAX_PROGRAM_STEPS, MAX_TENSOR_DIMS,
    # shapes that vary (2.6)
    SYM, MAX_PROGRAM_SYMBOLS, MAX_EXPR_OPS, MAX_PROGRAM_EXPRS, FIELD_INPUT_SIZE, FIELD_INPUT_STRIDE, FIELD_OUTPUT_SIZE,
    FIELD_OUTPUT_STRIDE, FIELD_BUFFER_SIZE, FIELD_GRID, FIELD_COUNT, FIELD_OPERAND, FIELD_NAMES,
    # the C library's flags and results
    CONFIG_AUTOTUNE, LAUNCH_CHECKED, LAUNCH_GRID_AUTO, RESULTS, RESULT_CODES, BundleError)
from .xxh3 import bundle_checksum, xxh3_64  # noqa: E402
from .checks import valid_name  # noqa: E402
from .format import (  # noqa: E402
    # the data model, validation, the writer and the reader
    SECTIONS, Section, Artifact, Bundle, CallInfo, Config, Kernel, Record, TensorDesc, check_record, read, read_file,
    write, write_file)
from .program import (  # noqa: E402
    # the program (sections 5 and 6)
    External, TensorSpec, Constant, Buffer, Step, Program, check_program, literal_fits, Symbol, Expr,
    check_dynamic, specialize)
from .grid import GridCompiler, GridRule, check_grid, eval_expr, eval_grid, grid_rule  # noqa: E402
from .collect import collect_kernel  # noqa: E402
from .export import TorchCapture, export_triton  # noqa: E402
from .inductor import TRITON_ONLY, conv_as_mm_backend, exporter_backend  # noqa: E402
from .steps import literal_bits, memset_pattern, is_dense, plan_workspace, match_gpu_events, gpu_event_hint  # noqa
from .tensors import named_tensors, unique_names, output_tensors, element_bytes  # noqa: E402
from .model import (  # noqa: E402
    EXPORT_OPTIONS, ExportReport, ExportStageError, ProgramsReport, export_model, export_programs, check_written,
    merged_tensors)
from . import weights  # noqa: E402
from .native import CLibrary, c_structs  # noqa: E402
from .cli import PROG, main  # noqa: E402
