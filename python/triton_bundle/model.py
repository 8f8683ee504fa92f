"""export_model: a whole torch.compile'd model's forward as a bundle's
program (FORMAT.md, section 5), for a runner that launches it with no
Python. Standard library at import time; torch is imported only inside
the functions that need it.

    report = export_model(model, (x,), "model.tbundle")
    print(report.workspace_size, report.pytorch_peak, report.steps)

How a forward becomes a program
-------------------------------
1. The model is compiled with Inductor's Triton-only options (TRITON_ONLY:
   max-autotune, Triton templates for matrix products and convolutions, no
   CUDA graphs; a decode step's with programmatic dependent launch,
   options["pdl"], and combo kernels, options["combo"]) unless it is
   already compiled, and run `warmup` times
   (compilation, autotuning, coordinate descent), then (options
   ["program_tuning"], a decode step's by default) about 28 times more
   while its costly reductions are tuned in the program, and once more,
   uncaptured, for PyTorch's peak memory.
2. One more run is captured, every GPU operation of it in order:
   - each Triton launch, by TorchCapture (export.py), which wraps
     CachingAutotuner.run: Inductor's generated wrapper calls
     `<kernel>.run(*args, stream=stream0)` for every Triton kernel, and run
     calls its one launcher, whether that is Triton's own launcher or the
     static CUDA launcher (StaticallyLaunchedCudaKernel);
   - every aten operation the wrapper (or AOTAutograd's runtime around it)
     calls, by a TorchDispatchMode that is on only during that run:
     `buf.zero_()` (workspaces Inductor zeroes) and fill_ become MEMSET
     steps, a contiguous device-to-device `dst.copy_(src)` a COPY step.
     The mode declares ignore_compile_internals(), so Dynamo's guards mask
     the Python dispatch keys it adds and the compiled code runs, as it does
     without the mode (a mode without it makes Dynamo fall back to eager).
     options["intercept"] = "methods" patches Tensor.zero_/fill_/copy_
     instead (the calls the wrapper emits), for a PyTorch where the mode
     misbehaves.
   Every tensor an operation touched is kept referenced until the end, so
   the caching allocator cannot hand an address out twice within the run:
   each distinct storage (its data_ptr, its nbytes) is then one object.
3. The run is also profiled (torch.profiler, CUDA activity): every kernel,
   memset and memcpy the GPU ran must be one of the captured steps, in
   order. Anything else is refused, naming the kernel, the aten operations
   that ran outside Triton and, where one exists, the Inductor option that
   makes it a Triton kernel. Nothing is dropped silently.
4. Each pointer argument becomes (space, index, byte offset): INPUT (the
   tensors of the flattened example inputs), CONSTANT (the module's
   parameters and buffers, one per storage, named by their first FQN; and
   tensors that existed before the run but are neither, such as a tensor
   attribute or an Inductor constant, whose bytes are read at their first
   use), OUTPUT (an output whose storage is exactly that tensor) or BUFFER
   (an intermediate). Other outputs get a COPY step at the end. Scalars
   are LITERALs holding tb_arg's bits.
5. Constants that a step writes, or whose bytes changed, are state; their
   bytes are those from before the capture run, and they are restored
   afterwards, so that the live model is where the bundle starts.
6. The workspace: each buffer lives from the first step that uses it to
   the last; a lifetime-aware search places them (several orders, each
   first fit and best fit, 256-aligned, no byte shared with a buffer live at the
   same time).

7. With options["dynamic_shapes"] (torch.export's Dim per dimension) the
   program's sizes vary: compiled with those dimensions dynamic and run
   first at every maximum (tuned and planned there), captured at the
   maximum, every minimum and two sizes inside, its expressions read from
   Inductor's wrapper code and checked against every capture (dynamic.py
   says how).

The export's parts live beside this module, which runs them (_Export)
and holds every name they export too: steps.py the pure helpers
(literal_bits, memset_pattern, is_dense, plan_workspace, match_gpu_events,
gpu_event_hint), which need no torch and tests/test_model.py checks;
tensors.py what an export reads of torch's tensors and modules;
capture.py the capture run's recorder and hooks; inductor.py TRITON_ONLY
and exporter_backend (the exporter's decompositions)."""

import collections
import contextlib
import copy
import gc
import re
import time

from . import format as _format
from .capture import _Recorder, _dispatch_mode, _gpu_events, _method_hooks
from .export import TorchCapture
from .format import Bundle, Record, read, write_file
from .inductor import TRITON_ONLY, exporter_backend, narrow_product_configs, record_tuners, tune_in_program
from .program import Buffer, Constant, External, Program, Step, TensorSpec, check_dynamic, rule_grid
from .spec import (ARG_CODES, BUFFER, CONFIG_PDL, CONSTANT, COPY, DTYPE_BY_NAME, INPUT, KIND_BOOL,  # noqa: F401
                   KIND_DESC, KIND_FLOAT, KIND_PTR, KIND_SINT, LAUNCH, LITERAL, MAX_NAME_LENGTH, MEMSET, OUTPUT,
                   BundleError)
from .steps import (WORKSPACE_ALIGN, extent, gpu_event_hint, is_dense, literal_bits,  # noqa: F401 - model's too
                    match_gpu_events, memset_pattern, pdl_lives, plan_workspace)
# (what _Export.build calls by these names, tests/test_model.py replaces here)
from .tensors import (_PLAIN, _attributes, _call_args, _dtype_name, _dynamo_frames, _host_bytes,  # noqa: F401
                      _is_compiled, _live_blocks, _module_constants, _module_of, _storage_from_host, _storage_of,
                      _storage_to_host, _tensor_attributes, _tensors_in, element_bytes, named_tensors,
                      output_tensors, strip_ir, unique_names)

# export_model's own options (everything else in options is an Inductor
# compile option, added to TRITON_ONLY or overriding it)
EXPORT_OPTIONS = {
    "compile_options": None,    # a dict of Inductor options, as the loose ones
    "compile_kwargs": None,     # torch.compile's other arguments; default {"dynamic": False}
    "warmup": 2,                # runs before the capture (compilation, autotuning)
    "no_grad": True,            # run under torch.no_grad()
    "input_names": None,        # names of the inputs ("input0"...)
    "output_names": None,       # names of the outputs ("output0"...)
    "module": None,             # the nn.Module whose parameters and buffers are the constants
    "intercept": "dispatch",    # "dispatch" (a TorchDispatchMode) or "methods" (Tensor.zero_/fill_/copy_)
    "verify_gpu_events": True,  # compare the profiler's GPU operations with the steps
    "ignore_gpu_events": (),    # substrings of GPU event names to leave out of that comparison
    "check_state_bytes": True,  # also call constants whose bytes changed state
    "write": True,              # write the file (False: build the bundle only)
    "names": None,              # {prefix: a tensor, or an object holding tensors (a transformers StaticCache)}:
                                # names for constants that are neither parameters nor buffers ("kv.layers.0.keys")
    "program_name": "forward",  # the program's name in the bundle
    "keep_ir": True,            # False: each kernel keeps only what a runner loads (its .cubin and .json
                                # files), not Triton's IR and sources; a bundle a fraction of the size
    "before_run": None,         # called before each uncaptured run of the model (the narrow_mm probe, each warm-up
                                # run, the program tuning's runs, the peak-memory run): export_programs puts the
                                # state back there, so that no run starts where the one before left it (a
                                # transformers StaticCache's layers count the positions written: repeated prefills
                                # at the maximum pass its end)
    "before_capture": None,     # called after the warm-up runs, right before the captured one (export_programs
                                # puts the state back there, so that every program starts from the same bytes)
    "weights": None,            # a path: the constants that are not state go to this safetensors file (written,
                                # streaming), the bundle refers to each by name, dtype, shape and CRC-32 (2.5)
    "weights_from": None,       # a path: an existing safetensors file (the checkpoint the model was loaded from):
                                # constants whose bytes it holds under a matching name refer to it, the rest stay
    "weight_names": None,       # {constant name: tensor name} for weights_from, where names do not match
    "dynamic_shapes": None,     # (2.6) torch.export's convention: {argument name or position: {dimension: Dim}}
                                # (or a list per dimension, Dim or None); Dim: torch.export.Dim(name, min=, max=)
                                # or (name, min, max), min >= 2. One program for every size in the ranges
    "sdpa": "math",             # "math": compile and run under sdpa_kernel(MATH), so that scaled_dot_product_attention
                                # becomes Triton kernels, not an extern flash/efficient kernel; None: as it is
    "narrow_mm": "auto",        # matrix products of one row (M = 1: a decode step's) as reductions that Inductor's
                                # coordinate descent tunes (its coordinate_descent_tuning decomposes them), which read
                                # the weights near the memory's bandwidth where Triton's mm template reads a quarter
                                # of it: "auto" where an eager run of the model (before compiling) makes such a
                                # product, True always, False never. Coordinate descent then tunes the program's
                                # kernels (a longer compile), the products as narrow_mm_config says
    "narrow_mm_config": None,   # (2.9) the config of those products' kernels, not tuned by coordinate descent
                                # (program_tuning may change it in the program, unless a dict): None inductor.py's
                                # NARROW_PRODUCT_CONFIG (measured faster than coordinate descent's choices, which
                                # vary from one compile to the next), a dict (XBLOCK, R0_BLOCK, num_warps,
                                # num_stages) another, False: coordinate descent tunes them too (2.8's way). Not
                                # applied where narrow_mm is off or found none, to a model compiled already, or
                                # where the caller sets coordinate_descent_tuning
    "program_tuning": "auto",   # (2.10) the program's costly reductions tuned in the program itself
                                # (inductor.tune_in_program: each candidate config timed where the kernel runs, by the
                                # profiler; about 28 more runs of the model, each after before_run), after Inductor's
                                # own tuning, which benchmarks each kernel alone: "auto" where narrow_mm made one-row
                                # products reductions (found by its probe, or narrow_mm=True), the shapes are static
                                # and before_run puts the state back (export_programs sets it); True for every
                                # program compiled here (with dynamic_shapes, tuned at the maximum sizes);
                                # False never. It may change the products' narrow_mm_config, except one given as a
                                # dict. Inductor reuses a kernel of the same source in another program: a program
                                # exported earlier in the same process may then run the config chosen later
    "pdl": "auto",              # (2.11) Inductor's programmatic dependent launch (its triton.enable_pdl): the device
                                # may start a kernel (Inductor's templates excepted) while the one before it ends,
                                # and the kernel waits for that one (gdc_wait) before it reads what it wrote or
                                # writes what it read or wrote, else after its first read; the bundle's configs say
                                # so (flag "pdl"; cleared for a kernel that never waits, lets the next start before
                                # its wait, or uses global scratch; given to the decode attention's kernel, which
                                # waits first: _pdl_for_own), the C launcher launches them so, and the
                                # workspace plan keeps a buffer's bytes through such a launch right after its last
                                # use (steps.pdl_lives). "auto" where narrow_mm made one-row products reductions
                                # (found by its probe, or narrow_mm=True: every program), on a device of compute
                                # capability 9 or more, with a PyTorch that has the option, else (also where the
                                # caller sets coordinate_descent_tuning: no probe) Inductor's config as it is; True
                                # for every program compiled here (an error where PyTorch lacks it; Inductor itself
                                # leaves it out below compute capability 9); False off, whatever Inductor's config
                                # says. Not applied to a model compiled already or where the caller names
                                # triton.enable_pdl
    "conv_as_mm": True,         # decompose 2-D convolutions into a gather and a matrix product (Triton's templates),
                                # which run at cuDNN's speed where Inductor's convolution template does not
    "split_argmax": True,       # (2.12) an argmax or argmin over a row of 32,768 elements or more, in 8 rows at most
                                # (a decode's greedy token over the vocabulary), of a float16 to float64 tensor of
                                # static shape, as two reductions: each chunk's maximum and index over many
                                # programs, then the chunks'; the same index (ties to the first, NaN the largest, an
                                # argmin's smallest). Inductor runs it in one program a row. Programs compiled here
    "decode_attention": True,   # (2.13) eager attention with one query per head (a decode step's, as transformers
                                # writes it: matmul, scale, mask, softmax in float32, matmul), of float16 or
                                # bfloat16, static shape and at most 512 positions (inductor.find_decode_attention
                                # says every condition), as one Triton kernel of the exporter's (attention.py) where
                                # Inductor makes four: the same roundings as eager, sums in another order; (2.14)
                                # with the rotary embedding of the query where transformers' is found with it, and
                                # the "pdl" flag where the program is compiled with options["pdl"]. Programs
                                # compiled here
    "store_activation": True,   # (2.15) SiLU(a) * b used only as the input of a product of one row (a decode
                                # step's down product, transformers' MLP), float16 or bfloat16, static shape,
                                # compiled without grad (inductor.find_activations says every condition), stored
                                # once (in the 1B step by the kernel of the gate and up products), where Inductor
                                # computed it again in each program of the down product (inductor.activation_pass):
                                # rounded to its dtype as eager rounds it. Programs compiled here
    "combo": "auto",            # (2.16) Inductor's combo kernels (its combo_kernels): kernels that do not depend on
                                # each other launched as one (in a decode step, the query's product with the key's
                                # and value's, each with the norm before it and the cache write after it), one
                                # config for them all (narrow_mm_config's, where their products are one-row
                                # reductions). Inductor then names the kernels it compiles so, combined or not,
                                # triton_red_fused_N: narrow_mm_config goes to every such looped reduction of
                                # 1,024 elements or more, and a name that two graphs of one program share (a graph
                                # break) keeps that kernel out of program_tuning. "auto" where narrow_mm made
                                # one-row products reductions (found by its probe, or narrow_mm=True: every
                                # program) and the shapes are static, else Inductor's config as it is; True for
                                # every program compiled here; False off, whatever Inductor's config says. Not
                                # applied where the caller names combo_kernels; with a PyTorch that lacks the
                                # option, an error where True
}

# ------------------------------------------------------------ the report
class ExportReport:
    """What export_model did. Attributes: path, steps (by kind), launches,
    skipped_launches (grids of zero blocks: no work), records, kernels,
    inputs and outputs (TensorSpecs), constants, constant_bytes,
    state_constants and external_constants (names), output_copies (outputs
    a COPY step writes), workspace_size, buffers, pytorch_peak (bytes
    torch.cuda.max_memory_allocated grew by in one uncaptured forward,
    outputs included), outputs_with_atomics (outputs a kernel with atomics
    may have written: compare those with a tolerance), gpu_events (the
    profiler's count, or None when not verified), aten_ops (the aten
    operations the run called besides fill_/zero_/copy_, with counts),
    narrow_products (the one-row products the narrow_mm probe counted),
    narrow_configs (2.9: each kernel given narrow_mm_config and keeping it,
    by name, with its block sizes), program_tuning (2.10: each kernel the
    program tuning changed, by name: its config and its microseconds a run
    before and after), pdl (2.11: whether options["pdl"] turned on
    Inductor's programmatic dependent launch), pdl_launches (the launches
    whose config has the "pdl" flag), combo (2.16: whether
    options["combo"] turned on Inductor's combo kernels), decode_attentions (2.13: the
    attentions options["decode_attention"] replaced), stored_activations
    (2.15: the activations options["store_activation"] stored), timings
    (seconds), warnings, compiled (the compiled callable, to compare
    against), bundle (the Bundle), captured_outputs (the output
    tensors of the captured run: what the program computes from the
    bundle's state). With dynamic_shapes (2.6): symbols ((name, min, max)
    each), captured_sizes (the sizes captured and checked, the maximum
    last: the program's own, whose workspace_size and pytorch_peak these
    are) and expressions (their count)."""

    NOT_JSON = ("compiled", "bundle", "captured_outputs", "constant_storages", "constant_tensors")

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def as_dict(self):
        """The report as plain data (json.dumps takes it)."""
        out = {}
        for k, v in self.__dict__.items():
            if k in self.NOT_JSON:
                continue
            if k in ("inputs", "outputs"):
                v = [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "strides": list(t.strides),
                      "align": t.align} for t in v]
            out[k] = v
        return out

    def __repr__(self):
        return "ExportReport(%s: %d steps %s, workspace %d bytes, PyTorch peak %s)" % (
            self.path, sum(self.steps.values()), self.steps, self.workspace_size, self.pytorch_peak)


class ExportStageError(BundleError):
    """The compiled model itself failed during an export: .program, .stage
    ("compile and warm-up", "program tuning", "the peak-memory run",
    "capture"), .sizes, and
    .original, the error PyTorch raised (also the exception's __cause__).
    Code "cuda" where the error is the device's (a device-side assert, an
    illegal address: the CUDA context is then lost for this process),
    "out_of_memory" for PyTorch's, else "unsupported"."""

    def __init__(self, program, stage, sizes, original):
        text = str(original).strip().splitlines()
        first = text[0] if text else type(original).__name__
        low = str(original).lower()
        # out of memory is no lost context; a device-side assert or an
        # illegal address is (every later CUDA call of the process fails)
        oom = type(original).__name__ == "OutOfMemoryError" or "out of memory" in low
        lost = not oom and (type(original).__name__ in ("AcceleratorError", "CudaError") or
                            "device-side assert" in low or "illegal" in low)
        BundleError.__init__(self, "out_of_memory" if oom else "cuda" if lost else "unsupported",
                             "program %r, %s %s: the compiled model failed: %s: %s%s" % (
                                 program, stage, sizes, type(original).__name__, first[:500],
                                 " (a device-side error: this process's CUDA context is lost)" if lost else ""))
        self.program, self.stage, self.sizes, self.original = program, stage, sizes, original


# ------------------------------------------------------------ the export
def _options(options):
    opts = dict(EXPORT_OPTIONS)
    compile_options = dict(TRITON_ONLY)
    for k, v in (options or {}).items():
        if k in EXPORT_OPTIONS:
            opts[k] = v
        else:  # an Inductor option (torch.compile checks the name)
            compile_options[k] = v
    compile_options.update(opts["compile_options"] or {})
    compile_kwargs = {"dynamic": False}
    compile_kwargs.update(opts["compile_kwargs"] or {})
    if opts["intercept"] not in ("dispatch", "methods"):
        raise BundleError("invalid_argument", "options['intercept'] is 'dispatch' or 'methods', not %r"
                          % (opts["intercept"],))
    if compile_options.get("cpp_wrapper"):
        raise BundleError("unsupported", "cpp_wrapper: the C++ wrapper launches kernels without CachingAutotuner.run")
    return opts, compile_options, compile_kwargs


def _names(given, n, stem, what):
    names = list(given) if given is not None else ["%s%d" % (stem, i) for i in range(n)]
    if len(names) != n:
        raise BundleError("invalid_argument", "%d %s names for %d %ss" % (len(names), what, n, what))
    for nm in names:
        if not isinstance(nm, str) or not nm or "\0" in nm or len(nm.encode()) > MAX_NAME_LENGTH:
            raise BundleError("invalid_argument", "%s name %r: 1 to %d bytes, no zero byte" % (what, nm,
                                                                                               MAX_NAME_LENGTH))
    if len(set(names)) != len(names):
        raise BundleError("invalid_argument", "two %ss share a name: %s" % (what, names))
    return names


def _spec(torch, t, name, what):
    if t.device.type != "cuda":
        raise BundleError("unsupported", "%s %s is on %s, not a CUDA device" % (what, name, t.device))
    return TensorSpec(name, _dtype_name(torch, t.dtype, "%s %s" % (what, name)), list(t.shape), list(t.stride()),
                      16 if t.data_ptr() % 16 == 0 else 1)


def _kernel_texts(bundle, cfg, exts):
    """{extension: bytes} of the files of the config's kernel with those
    extensions, by its stem (the name of its .cubin)."""
    k = bundle.kernel(cfg.kernel_hash)
    stem = cfg.binary_name[:-len(".cubin")] if cfg.binary_name.endswith(".cubin") else cfg.binary_name
    return {ext: bytes(a.data) for a in (k.artifacts if k else ()) for ext in exts if a.name == stem + ext}


def _atomic_configs(bundle, tuners):
    """{(record index, config index)} of configs whose kernel uses atomics:
    Inductor's atomic_add_found, or an atomic operation in the kernel's
    Triton IR (or source)."""
    out = set()
    for ri, rec in enumerate(bundle.records):
        tuner = tuners.get(rec.cache_key)
        flagged = bool(tuner is not None and (getattr(tuner, "inductor_meta", None) or {}).get("atomic_add_found"))
        for ci, cfg in enumerate(rec.configs):
            text = _kernel_texts(bundle, cfg, (".ttir", ".source"))
            if flagged or re.search(rb"tt\.atomic_(rmw|cas)", text.get(".ttir", b"")) or \
                    re.search(rb"\batomic_(add|max|min|and|or|xor|xchg|cas)\b", text.get(".source", b"")):
                out.add((ri, ci))
    return out


def _pdl_for_own(bundle):
    """Gives the pdl flag to each config of the exporter's own kernels
    (attention.PDL_KERNELS) whose PTX waits for the kernel before it
    (griddepcontrol.wait) before any global memory access: Inductor
    launches a Triton op's kernel without programmatic dependent launch
    (it gives such a kernel no launch_pdl) though ours waits first, as
    Inductor's kernels do, where the program is compiled with it.
    _pdl_without_wait then checks it as it checks Inductor's. Returns how
    many configs it flagged."""
    from .attention import PDL_KERNELS
    flagged = 0
    for rec in bundle.records:
        if re.sub(r"_\d+$", "", rec.kernel_name) not in PDL_KERNELS:
            continue
        for cfg in rec.configs:
            ptx = _kernel_texts(bundle, cfg, (".ptx",)).get(".ptx", b"")
            wait = re.search(rb"griddepcontrol\.wait", ptx)
            # any load, store, atomic or copy but a parameter's (a shared or local one counts too)
            access = re.search(rb"\b(ld|st|atom|red|cp\.async)\.(?!param\b)", ptx)
            if wait is not None and (access is None or wait.start() < access.start()) and \
                    not cfg.flags & CONFIG_PDL:
                cfg.flags |= CONFIG_PDL
                flagged += 1
    return flagged


# the line that starts a branch of an Inductor combo kernel's source: "if
# pid < num_xblocks_0:", "elif pid % 2 == 1:"
_COMBO_BRANCH = re.compile(rb"^[ \t]*(?:if|elif)[ \t]+pid\b[^\n]*:[ \t]*$", re.M)


def _combo_branches(source):
    """The branches of an Inductor combo kernel's source, each from its
    `if pid ...:` or `elif pid ...:` line to the next; [] for a kernel
    of one branch."""
    starts = [m.start() for m in _COMBO_BRANCH.finditer(source)]
    if len(starts) < 2:
        return []
    return [source[a:b] for a, b in zip(starts, starts[1:] + [len(source)])]


def _pdl_without_wait(bundle):
    """Clears the pdl flag of every config whose kernel never waits for the
    kernel before it (no griddepcontrol.wait in its PTX or Triton IR, no
    gdc_wait in its source: a kernel with no reads, writing only buffers
    the kernel before it did not touch, gets none from Inductor), that lets
    the next kernel start before it waits (griddepcontrol.launch_dependents
    first in its PTX or IR, gdc_launch_dependents before gdc_wait in its
    source; Inductor writes it after the wait, other kernels may not), or
    that uses Triton's global scratch (one area that every launch shares,
    which the workspace plan does not separate). An Inductor combo kernel
    (options["combo"]: one branch of its source per kernel it combines,
    each chosen by the program's index) keeps it only where every branch
    waits, and waits first: one branch of a kernel that reads nothing
    would otherwise write while the kernel before it runs. Such a kernel
    could run beside the one before it, and a kernel after it beside both;
    launched without the flag, it waits for the kernel before it to end.
    Returns how many configs it cleared."""
    def order(text, wait, launch):
        """Whether text waits (wait found) and lets the next kernel start
        no earlier (launch absent, or after the first wait)."""
        w, n = re.search(wait, text), re.search(launch, text)
        return w is not None, w is not None and (n is None or n.start() > w.start())
    source_wait, source_launch = rb"\bgdc_wait\s*\(", rb"\bgdc_launch_dependents\s*\("
    cleared = 0
    for rec in bundle.records:
        for cfg in rec.configs:
            if not cfg.flags & CONFIG_PDL:
                continue
            text = _kernel_texts(bundle, cfg, (".ptx", ".ttir", ".source"))
            source = text.get(".source", b"")
            found = [order(text.get(ext, b""), rb"griddepcontrol\.wait", rb"griddepcontrol\.launch_dependents")
                     for ext in (".ptx", ".ttir")]
            found.append(order(source, source_wait, source_launch))
            waits = any(w for w, _ in found) and all(ok for w, ok in found if w) and \
                all(all(order(b, source_wait, source_launch)) for b in _combo_branches(source))
            if not waits or cfg.global_scratch[0] > 0:
                cfg.flags &= ~CONFIG_PDL
                cleared += 1
    return cleared


def _written_args(rec):
    """Indices of a record's arguments its kernel writes: the mutated ones
    and Inductor's out_ptr/in_out_ptr; every argument when the names say
    nothing (a user kernel)."""
    names = rec.call.arg_names if rec.call is not None else []
    mutated = set(rec.call.mutated) if rec.call is not None else set()
    out = {j for j, n in enumerate(names) if n.startswith(("out_ptr", "in_out_ptr"))} | mutated
    return out if out else None


class _Built:
    """What a build kept (_Export.build): the raw steps as captured, each
    buffer's storage pointer, the storages by pointer, the output tensors,
    the program and its bundle, the constants' tensors, and the weights
    file's note (None without one)."""

    __slots__ = ("raw", "buffer_ptrs", "storages", "outs", "program", "bundle", "tensors", "weights")

    def __init__(self, raw, buffer_ptrs, storages, outs, program, bundle, tensors, weights):
        self.raw, self.buffer_ptrs, self.storages, self.outs = raw, buffer_ptrs, storages, outs
        self.program, self.bundle, self.tensors, self.weights = program, bundle, tensors, weights


class _Export:
    def __init__(self, model, example_inputs, path, options):
        self.model, self.example_inputs, self.path = model, example_inputs, path
        self.opts, self.compile_options, self.compile_kwargs = _options(options)
        # the Inductor options the caller named (narrow_mm leaves theirs alone)
        self.user_compile_options = {k for k in (options or {}) if k not in EXPORT_OPTIONS} | \
            set(self.opts["compile_options"] or {})
        self.narrow = None
        self.timings = {}
        self.program_tuned, self.tuning_warnings = {}, []
        for key in ("program_tuning", "pdl", "combo"):
            mode = self.opts[key]
            if not (mode is True or mode is False or (isinstance(mode, str) and mode == "auto")):
                raise BundleError("invalid_argument", "options[%r] is 'auto', True or False, not %r" % (key, mode))
        self.pdl = self.combo = False
        config = self.opts["narrow_mm_config"]
        self.narrow_config = None
        if config is not False:
            try:
                if config is not None and not isinstance(config, dict):
                    raise ValueError("None, False or a dict, not %r" % (config,))
                self.narrow_config = narrow_product_configs(config)
            except ValueError as e:
                raise BundleError("invalid_argument", "options['narrow_mm_config']: %s" % e)

    def grad(self):
        """The context of every call of the model: no_grad, and the math
        attention (options["sdpa"])."""
        stack = contextlib.ExitStack()
        if self.opts["no_grad"]:
            stack.enter_context(self.torch.no_grad())
        if self.opts["sdpa"] == "math":
            from torch.nn.attention import SDPBackend, sdpa_kernel
            stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
        elif self.opts["sdpa"] is not None:
            raise BundleError("invalid_argument", "options['sdpa'] is 'math' or None, not %r" % (self.opts["sdpa"],))
        return stack

    def call(self):
        return self.compiled(*self.args, **self.kwargs)

    def run(self):
        import torch
        self.torch = torch
        if "program" not in {s.name for s in getattr(_format, "SECTIONS", ())}:
            if self.opts["write"]:
                raise BundleError("unsupported", "this triton_bundle's format module writes no program (section 5)")
        self.args, self.kwargs = _call_args(torch, self.example_inputs)
        self.inputs = _tensors_in(torch, (list(self.args), self.kwargs), [])
        if not self.inputs:
            raise BundleError("invalid_argument", "the example inputs hold no tensor")
        dev = self.inputs[0].device
        if dev.type != "cuda":
            raise BundleError("unsupported", "input 0 is on %s: export_model runs the model on a CUDA device" % dev)
        self.device = dev
        # (the narrow products' config, from compile() to the end: a capture
        # at other sizes may compile and tune more kernels)
        with torch.cuda.device(dev), contextlib.ExitStack() as self.exit_stack:
            if self.opts["dynamic_shapes"] is not None:
                return self.run_dynamic()
            sizes = "at the example inputs' sizes"
            self.stage("compile and warm-up", sizes, self.compile)
            self.stage("the peak-memory run", sizes, self.measure_peak)
            self.stage("capture", sizes, self.capture)
            return self.build()

    def stage(self, what, sizes, fn, *args):
        """fn(*args), a stage of the export that runs the compiled model: an
        error of the model itself (an exception, a device-side assert that
        a synchronize reports) becomes an ExportStageError that names the
        program, the stage and the sizes, the original kept as its cause."""
        self.stage_sizes = sizes  # (for an error the stage raises itself: the program tuning's)
        try:
            return fn(*args)
        except BundleError:
            raise
        except Exception as e:  # noqa: BLE001 - any error of PyTorch's compiled code
            raise ExportStageError(self.opts["program_name"], what, sizes, e) from e

    # shapes that vary (2.6): dynamic.py says how
    def _replace_inputs(self, new):
        """The call's arguments with each input tensor replaced by new's."""
        torch = self.torch
        swap = {id(a): b for a, b in zip(self.inputs, new)}

        def walk(x):
            if torch.is_tensor(x):
                return swap.get(id(x), x)
            if isinstance(x, (list, tuple)):
                return type(x)(walk(y) for y in x)
            if isinstance(x, dict):
                return {k: walk(v) for k, v in x.items()}
            return x
        self.args, self.kwargs = tuple(walk(list(self.args))), walk(self.kwargs)
        self.inputs = list(new)

    def run_dynamic(self):
        import inspect
        from . import dynamic as _dyn
        torch = self.torch
        if _is_compiled(torch, self.model):
            raise BundleError("invalid_argument", "dynamic_shapes: pass the model uncompiled: export_model compiles it "
                              "with the dimensions marked dynamic and tunes at their maximum")
        fn = self.model.forward if isinstance(self.model, torch.nn.Module) else self.model
        try:
            params = [n for n in inspect.signature(fn).parameters]
        except (TypeError, ValueError):
            params = []
        symbols, dims = _dyn.parse_spec(self.opts["dynamic_shapes"], self.args, self.kwargs, self.inputs, params)
        for i in dims:
            if not self.inputs[i].is_contiguous():
                raise BundleError("unsupported", "dynamic_shapes: input %d is not contiguous" % i)
        sizes = _dyn.capture_sizes(symbols)
        originals = list(self.inputs)

        def at(values):
            self._replace_inputs([_dyn.at_sizes(torch, t, dims[i], values) if i in dims else t
                                  for i, t in enumerate(originals)])
        at(sizes[0])  # compiled, tuned and planned at every maximum
        for i, ds in dims.items():
            for d, k in ds.items():
                torch._dynamo.mark_dynamic(self.inputs[i], d, min=symbols[k].min, max=symbols[k].max)
        import torch.fx.experimental._config as fx_config
        hook = _dyn.AllocHook()
        # duck sizing would make two dimensions of equal hints one symbol
        with fx_config.patch(use_duck_shape=False):
            try:
                at_max = "at the maximum sizes %s" % dict(zip([y.name for y in symbols], sizes[0]))
                self.stage("compile and warm-up", at_max, self.compile)
                self.stage("the peak-memory run", at_max, self.measure_peak)
                with self.grad():
                    found = _dyn.find_wrappers(torch, self.call)
                if not found:
                    raise BundleError("unsupported", "dynamic_shapes: no Inductor wrapper launched a kernel")
                for g in found.values():
                    hook.install(g)
                captures = []
                for values in sizes[1:] + sizes[:1]:  # the maximum last: its program is the bundle's
                    at(values)
                    self.sites = _dyn.Sites()
                    hook.sites = self.sites
                    self.sites.active = True
                    try:
                        self.stage("capture", "at sizes %s" % dict(zip([y.name for y in symbols], values)),
                                   self.capture)
                    finally:
                        self.sites.active = False
                    report = self.build(final=values is sizes[0])
                    captures.append((values, self.built, self.sites, report))
            finally:
                hook.remove()
                self.sites = None
        return self.finish_dynamic(symbols, dims, captures)

    def finish_dynamic(self, symbols, dims, captures):
        from . import dynamic as _dyn
        t0 = time.perf_counter()
        code = {}

        def wrapper(filename):
            if filename not in code:
                code[filename] = _dyn.WrapperCode(filename)
            return code[filename]
        seen = []
        for values, built, sites, _ in captures:
            syms = {}
            for site in list(sites.launch.values()) + [r.get("site") for r in built.raw]:
                if site:
                    syms.update(site["syms"])
            seen.append((values, syms))
        symmap = _dyn.match_symbols(symbols, seen)
        values, built, sites, report = captures[-1]
        program, bundle = built.program, built.bundle
        cap = _dyn.BuildState(built.raw, built.buffer_ptrs, built.storages, built.outs, sites.allocs,
                              {v: k for k, v in sites.allocs.items()},
                              sorted({s["file"] for s in sites.launch.values() if s}), values)
        exprs = _dyn.Derive(cap, program, bundle, symbols, dims, symmap, wrapper).run()
        program.symbols, program.exprs = list(symbols), exprs
        check_dynamic(bundle.records, program)
        _dyn.check_monotone(symbols, exprs, program.buffers)
        for vals, b, _, _ in captures:
            keys = [r.cache_key for r in b.bundle.records]
            if keys[:len(bundle.records)] != [r.cache_key for r in bundle.records][:len(keys)]:
                raise BundleError("unsupported", "dynamic shapes: the capture at %s launched other kernels" % vals)
            _dyn.compare(bundle.records, program, b.program, vals, symbols)
        self.timings["dynamic_s"] = time.perf_counter() - t0
        if self.opts["write"]:
            self.write(bundle)
        report.symbols = [(y.name, y.min, y.max) for y in symbols]
        report.captured_sizes = [dict(zip([y.name for y in symbols], v)) for v, _, _, _ in captures]
        report.expressions = len(exprs)
        report.timings = dict(self.timings)
        return report

    # 1. compile, warm up, PyTorch's peak
    def compile(self):
        torch = self.torch
        t0 = time.perf_counter()
        self.compiled_here = not _is_compiled(torch, self.model)
        if self.compiled_here and "coordinate_descent_tuning" not in self.user_compile_options:
            self.narrow = self.narrow_products()
            if self.narrow:
                self.compile_options["coordinate_descent_tuning"] = True
                self.narrow_configs()
        pdl = self.pdl_setting() if self.compiled_here else None
        if pdl is not None:
            self.compile_options["triton.enable_pdl"] = self.pdl = pdl
        combo = self.combo_setting() if self.compiled_here else None
        if combo is not None:
            self.compile_options["combo_kernels"] = self.combo = combo
        decomps = {k: bool(self.opts[o]) for k, o in (("conv", "conv_as_mm"), ("argmax", "split_argmax"),
                                                         ("attention", "decode_attention"),
                                                         ("activation", "store_activation"))}
        if self.compiled_here and any(decomps.values()):
            backend = self.backend = exporter_backend(torch, self.compile_options, **decomps)
            self.compiled = torch.compile(self.model, backend=backend, **self.compile_kwargs)
        elif self.compiled_here:
            self.compiled = torch.compile(self.model, options=self.compile_options, **self.compile_kwargs)
        else:
            self.compiled = self.model
        self.module = self.opts["module"] if self.opts["module"] is not None else _module_of(torch, self.model)
        with self.grad():
            for _ in range(max(1, int(self.opts["warmup"]))):
                self.fresh()
                out = self.call()
                del out
        torch.cuda.synchronize()
        self.timings["compile_and_warmup_s"] = time.perf_counter() - t0
        if self.tuning_wanted():
            self.tune_program()

    def pdl_setting(self):
        """Inductor's triton.enable_pdl for this program as options["pdl"]
        sets it (_switch; "auto": one-row products, compute capability 9
        or more)."""
        return self._switch("pdl", "triton.enable_pdl", " (programmatic dependent launch)",
                            lambda: self.narrow and self.torch.cuda.get_device_capability()[0] >= 9)

    def combo_setting(self):
        """Inductor's combo_kernels for this program as options["combo"]
        sets it (_switch; "auto": one-row products, static shapes)."""
        return self._switch("combo", "combo_kernels", "", lambda: self.narrow and self.opts["dynamic_shapes"] is None)

    def _switch(self, option, key, about, auto):
        """An Inductor option that options[option] sets for this program
        (compiled here): True, False (off even where Inductor's config or
        its environment variable turned it on), or None (left as Inductor's
        config has it: the caller named the option, Inductor lacks it, or
        "auto" where auto() is false). True where Inductor lacks it is an
        error."""
        mode = self.opts[option]
        if key in self.user_compile_options:
            return None
        *path, last = key.split(".")
        config = self.torch._inductor.config
        for part in path:
            config = getattr(config, part, None)
        if not hasattr(config, last):
            if mode is True:
                raise BundleError("unsupported", "options[%r] is True: this PyTorch's Inductor has no %s%s" % (
                    option, key, about))
            return None
        if mode is True or mode is False:
            return mode
        return True if auto() else None

    def tuning_wanted(self):
        """Whether options["program_tuning"] tunes this program."""
        tuning = self.opts["program_tuning"]
        if not self.compiled_here or tuning is False:
            return False
        return tuning is True or bool(self.narrow and self.opts["dynamic_shapes"] is None and
                                      self.opts["before_run"] is not None)

    def tune_program(self):
        """options["program_tuning"]: the costly reductions tuned in the
        program (inductor.tune_in_program), each run from the state
        options["before_run"] puts back; products given a narrow_mm_config
        dict keep it. An error of the device or out of memory is the
        export's (ExportStageError, stage "program tuning"); any other
        leaves Inductor's choices and says so in the report's warnings."""
        torch = self.torch
        t0 = time.perf_counter()
        keep = set(self.narrow_config.chosen) if self.narrow_config is not None and \
            isinstance(self.opts["narrow_mm_config"], dict) else set()

        def run():
            self.fresh()
            out = self.call()
            del out
        try:
            with self.grad():
                with record_tuners() as rec:
                    run()
                torch.cuda.synchronize()
                self.program_tuned = tune_in_program(torch, run, rec.tuners, keep=keep)
        except BundleError:
            raise
        except Exception as e:  # noqa: BLE001 - the profiler missing, a candidate failing: Inductor's choices stay
            err = ExportStageError(self.opts["program_name"], "program tuning",
                                   getattr(self, "stage_sizes", "at the example inputs' sizes"), e)
            if err.code != "unsupported":  # the device's error (the context is lost) or out of memory
                raise err from e
            self.tuning_warnings.append("program tuning left out (%s: %s)" % (type(e).__name__, e))
        self.timings["program_tuning_s"] = time.perf_counter() - t0

    def narrow_configs(self):
        """The narrow products' config (options["narrow_mm_config"]), given
        while the export lasts. Inductor's autotune cache stays off then: a
        config that coordinate descent chose for the same kernel in an
        earlier compile would come back from it untouched."""
        if self.narrow_config is None:
            return
        self.exit_stack.enter_context(self.narrow_config)
        if "autotune_local_cache" not in self.user_compile_options:
            self.compile_options["autotune_local_cache"] = False

    def fresh(self):
        """options["before_run"], before an uncaptured run of the model."""
        if self.opts["before_run"] is not None:
            self.opts["before_run"]()

    def narrow_products(self):
        """The matrix products of one row (mm, addmm: M = 1) that an eager
        run of the model makes, for options["narrow_mm"] "auto" (True: -1,
        False: 0). The run is one more warm-up run: it may change state, as
        those do; export_programs puts state back before each capture."""
        mode = self.opts["narrow_mm"]
        if mode is True or mode is False:
            return -1 if mode else 0
        if mode != "auto":
            raise BundleError("invalid_argument", "options['narrow_mm'] is 'auto', True or False, not %r" % (mode,))
        torch = self.torch
        from torch.utils._python_dispatch import TorchDispatchMode
        aten = torch.ops.aten
        first = {aten.mm.default: 0, aten.addmm.default: 1}
        count = [0]

        class Rows(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                k = first.get(func)
                if k is not None and torch.is_tensor(args[k]) and args[k].dim() == 2 and args[k].shape[0] == 1:
                    count[0] += 1
                return func(*args, **(kwargs or {}))
        t0 = time.perf_counter()
        self.fresh()
        with self.grad(), Rows():
            out = self.model(*self.args, **self.kwargs)
            del out
        torch.cuda.synchronize()
        self.timings["narrow_probe_s"] = time.perf_counter() - t0
        return count[0]

    def measure_peak(self):
        torch = self.torch
        self.fresh()  # (before the peak's baseline: the state put back is not the run's)
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        frames = _dynamo_frames()
        with self.grad():
            out = self.call()
        torch.cuda.synchronize()
        self.pytorch_peak = int(torch.cuda.max_memory_allocated() - before)
        self.peak_run_frames = None if frames is None else _dynamo_frames() - frames
        del out

    # 2. the capture run
    def capture(self):
        torch = self.torch
        if self.opts["before_capture"] is not None:
            self.opts["before_capture"]()
        # the inputs and the module's constants, by storage
        self.input_of = {}
        for i, t in enumerate(self.inputs):
            if t.device != self.device:
                raise BundleError("unsupported", "input %d is on %s, input 0 on %s" % (i, t.device, self.device))
            sptr, _ = _storage_of(t)
            if sptr in self.input_of and sptr != 0:
                raise BundleError("unsupported", "inputs %d and %d share their storage: pass separate tensors"
                                  % (self.input_of[sptr], i))
            self.input_of[sptr] = i
        self.consts = _module_constants(torch, self.module)
        self.const_of = {}
        for j, (name, t) in enumerate(self.consts):
            sptr, _ = _storage_of(t)
            if sptr in self.input_of:
                raise BundleError("unsupported", "input %d shares its storage with the module's %s"
                                  % (self.input_of[sptr], name))
            self.const_of[sptr] = j
        self.attr_names = _tensor_attributes(torch, self.module)
        self.attr_names.update(named_tensors(torch, self.opts["names"]))
        # every constant's bytes before the run (state ones are restored from them)
        t0 = time.perf_counter()
        self.before = {sptr: _storage_to_host(torch, self.consts[j][1]) for sptr, j in self.const_of.items()}
        self.timings["read_constants_s"] = time.perf_counter() - t0
        gc.collect()
        torch.cuda.synchronize()
        self.warnings = []
        try:
            pre_blocks = _live_blocks(torch, self.device)
        except Exception as e:  # noqa: BLE001 - another allocator backend
            pre_blocks = set()
            self.warnings.append("torch.cuda.memory_snapshot() failed (%s: %s): tensors that existed before the run "
                                 "but are neither inputs nor the module's parameters or buffers are not recognized "
                                 "as constants" % (type(e).__name__, e))
        rec = self.rec = _Recorder(torch, set(self.input_of) | set(self.const_of), pre_blocks)
        rec.sites = getattr(self, "sites", None)
        verify = bool(self.opts["verify_gpu_events"])
        frames = _dynamo_frames()
        t0 = time.perf_counter()
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.grad())
            prof = None
            if verify:
                from torch.profiler import ProfilerActivity, profile
                prof = stack.enter_context(profile(activities=[ProfilerActivity.CUDA]))
            cap = stack.enter_context(TorchCapture(keep_args=True, before_launch=rec.before_launch))
            rec.cap = cap
            if self.opts["intercept"] == "dispatch":
                stack.enter_context(_dispatch_mode(torch, rec))
            else:
                stack.enter_context(_method_hooks(torch, rec))
            out = self.call()
            rec.hold(out)
            torch.cuda.synchronize()
        self.timings["capture_s"] = time.perf_counter() - t0
        self.cap, self.out = cap, out
        if not cap.launches and rec.aten_ops:
            raise BundleError("unsupported", "the captured run launched no Triton kernel but called %s: the compiled "
                              "code did not run (an eager fallback); try options={'intercept': 'methods'}"
                              % ", ".join(rec.aten_ops))
        # a recompilation under the capture (a guard that failed) shows in
        # Dynamo's frame count; an eager fallback for a dispatch mode does not
        # (torch 2.11 skips the frame before counting it), the checks above
        # and the profiler's catch it
        if frames is not None and self.peak_run_frames is not None and \
                _dynamo_frames() - frames > self.peak_run_frames:
            raise BundleError("unsupported", "the captured run made Dynamo convert %d frames where the run before "
                              "it made %d: it recompiled or fell back to eager under the capture (try "
                              "options={'intercept': 'methods'})" % (_dynamo_frames() - frames, self.peak_run_frames))
        if rec.problems:
            raise BundleError("unsupported", "operations no step can express: " + "; ".join(rec.problems))
        self.gpu_events = _gpu_events(prof) if prof is not None else None

    # 3. the program
    def build(self, final=True):
        """The program of the captured run. final False (a dynamic export's
        capture at other sizes): nothing written, no weights file."""
        torch, rec, cap = self.torch, self.rec, self.cap
        t0 = time.perf_counter()
        bundle = cap.bundle()
        if getattr(self, "pdl", False):
            _pdl_for_own(bundle)
        cleared = _pdl_without_wait(bundle)
        if cleared:
            self.warnings.append("programmatic dependent launch left out for %d config%s: the kernel never waits "
                                 "for the one before it, lets the next start before it waits, or uses Triton's "
                                 "global scratch" % (
                                     cleared, "" if cleared == 1 else "s"))
        rindex = {r.cache_key: i for i, r in enumerate(bundle.records)}
        tuners = {key: tuner for key, tuner in cap._tuners.values()}
        storages = {}  # data_ptr -> a tensor of that storage (the first seen)

        def ptr(t, what):
            if not torch.is_tensor(t) or t.device != self.device:
                raise BundleError("unsupported", "%s: %r is not a tensor on %s" % (what, type(t).__name__,
                                                                                  self.device))
            sptr, _ = _storage_of(t)
            storages.setdefault(sptr, t)
            return ("ptr", sptr, t.data_ptr())

        # the steps in the order they ran: each memset, copy or snapshot knows
        # how many launches came before it
        raw, expected, skipped = [], [], 0
        launches = cap.launches
        li = 0

        def add_launch(i):
            nonlocal skipped
            launch = launches[i]
            ri = rindex[launch["key"]]
            r = bundle.records[ri]
            ci = launch["config"]
            cfg = r.configs[ci]
            what = "launch %d (%s)" % (i, cfg.function_name)
            if "T" in cfg.arg_types:
                raise BundleError("unsupported", "%s takes a tensor descriptor (its arguments %r): a program passes "
                                  "none" % (what, cfg.arg_types))
            grid = launch["grid"]
            if grid is None:
                raise BundleError("unsupported", "%s: its grid could not be computed" % what)
            if any(g == 0 for g in grid):
                skipped += 1  # Triton launches nothing
                return
            names = r.call.arg_names if r.call is not None else []
            if len(names) != len(cfg.arg_types):
                raise BundleError("malformed", "%s: %d argument names for %d codes" % (what, len(names),
                                                                                       len(cfg.arg_types)))
            ops = []
            for j, (n, code) in enumerate(zip(names, cfg.arg_types)):
                if n not in launch["args"]:
                    raise BundleError("malformed", "%s: argument %s was not passed" % (what, n))
                v = launch["args"][n]
                if code == "O":
                    ops.append(ptr(v, "%s, argument %s" % (what, n)))
                else:
                    ops.append(("lit", literal_bits(code, v, "%s, argument %s" % (what, n))))
            raw.append({"kind": LAUNCH, "record": ri, "config": ci, "grid": tuple(int(g) for g in grid),
                        "ops": ops, "name": cfg.function_name,
                        "site": rec.sites.launch.get(i) if rec.sites is not None else None,
                        "tensors": [launch["args"][n] for n in names]})
            expected.append(("launch", cfg.function_name))

        for pos, kind, payload in rec.events:
            while li < pos:
                add_launch(li)
                li += 1
            if kind == "snapshot":
                expected.append(("snapshot", ""))
            elif kind == "memset":
                raw.append({"kind": MEMSET, "ops": [ptr(payload["dst"], payload["name"])], "width": payload["width"],
                            "value": payload["value"], "count": payload["count"], "name": payload["name"],
                            "site": payload.get("site"), "tensors": [payload["dst"]]})
                expected.append(("memset", ""))
            else:
                raw.append({"kind": COPY, "ops": [ptr(payload["dst"], payload["name"]),
                                                  ptr(payload["src"], payload["name"])],
                            "count": payload["count"], "name": payload["name"], "site": payload.get("site"),
                            "tensors": [payload["dst"], payload["src"]]})
                expected.append(("copy", ""))
        while li < len(launches):
            add_launch(li)
            li += 1
        self.verify_events(expected)

        # the outputs: a storage that is exactly one output is that output;
        # any other output is copied at the end from where it lies
        outs = output_tensors(self.out)
        out_names = _names(self.opts["output_names"], len(outs), "output", "output")
        in_names = _names(self.opts["input_names"], len(self.inputs), "input", "input")
        inputs = [_spec(torch, t, in_names[i], "input") for i, t in enumerate(self.inputs)]
        outputs = [_spec(torch, t, out_names[k], "output") for k, t in enumerate(outs)]
        by_storage = collections.defaultdict(list)
        for k, t in enumerate(outs):
            by_storage[_storage_of(t)[0]].append(k)
            storages.setdefault(_storage_of(t)[0], t)

        def pre_existing(sptr):
            return sptr in self.input_of or sptr in self.const_of or sptr in rec.external or \
                sptr in rec.pre_blocks

        direct, copies = {}, []
        for k, t in enumerate(outs):
            sptr, nbytes = _storage_of(t)
            ext = outputs[k].extent()
            dense = is_dense(t.shape, t.stride())
            if not pre_existing(sptr) and t.storage_offset() == 0 and ext == nbytes and dense and \
                    len(by_storage[sptr]) == 1:
                direct[sptr] = k
                continue
            if not dense:
                raise BundleError("unsupported", "output %d (%s) is a view of shape %s and strides %s, which is not "
                                  "dense: it cannot be copied out as bytes" % (k, out_names[k], list(t.shape),
                                                                               list(t.stride())))
            if ext:
                copies.append((k, ("ptr", sptr, t.data_ptr()), ext))
        for k, src, ext in copies:
            raw.append({"kind": COPY, "ops": [("out", k), src], "count": ext, "name": "output %d" % k, "output": k,
                        "tensors": [outs[k], outs[k]]})
        # pre-existing storages that only outputs use: their bytes now (no step touched them)
        for sptr, t in list(storages.items()):
            if sptr in rec.pre_blocks and sptr not in rec.external and sptr not in self.input_of and \
                    sptr not in self.const_of:
                rec.external[sptr] = {"tensor": t, "host": _storage_to_host(torch, t), "touched": False}

        # storages to spaces: inputs, constants (the module's, then those found
        # during the run), direct outputs, and buffers (in order of first use)
        used = []
        for st in raw:
            for op in st["ops"]:
                if op[0] == "ptr" and op[1] not in used:
                    used.append(op[1])
        used_set = set(used)
        const_list = [(self.consts[j][0], self.consts[j][1], sptr, self.before[sptr])
                      for sptr, j in sorted(self.const_of.items(), key=lambda x: x[1]) if sptr in used_set]
        for n, (sptr, e) in enumerate(rec.external.items()):
            if sptr in used_set:
                name = self.attr_names.get(sptr, "external%d" % n)
                const_list.append((name, e["tensor"], sptr, e["host"]))
        const_index = {c[2]: j for j, c in enumerate(const_list)}
        buffer_ptrs = [s for s in used if s not in self.input_of and s not in const_index and s not in direct]
        buffer_index = {s: i for i, s in enumerate(buffer_ptrs)}

        def resolve(op, touched, what):
            if op[0] == "lit":
                return (LITERAL, 0, op[1])
            if op[0] == "out":
                return (OUTPUT, op[1], 0)
            _, sptr, addr = op
            nbytes = _storage_of(storages[sptr])[1]
            if sptr in self.input_of:
                i = self.input_of[sptr]
                space, index, off, size = INPUT, i, addr - self.inputs[i].data_ptr(), inputs[i].extent()
            elif sptr in const_index:
                space, index, off, size = CONSTANT, const_index[sptr], addr - sptr, nbytes
            elif sptr in direct:
                space, index, off, size = OUTPUT, direct[sptr], addr - sptr, nbytes
            else:
                space, index, off, size = BUFFER, buffer_index[sptr], addr - sptr, nbytes
            if not 0 <= off <= size or off + touched > size:
                raise BundleError("unsupported", "%s points at byte %d of a %d-byte %s (%s %d)%s" % (
                    what, off, size, "input's extent" if space == INPUT else "storage",
                    ("INPUT", "OUTPUT", "CONSTANT", "BUFFER")[space - 1], index,
                    ": an input is passed as the tensor itself, its storage beyond it is not"
                    if space == INPUT else ""))
            return (space, index, off)

        steps, first, last = [], {}, {}
        for s, st in enumerate(raw):
            touched = st["count"] * st.get("width", 1) if st["kind"] != LAUNCH else 0
            ops = [resolve(op, touched, "step %d (%s), operand %d" % (s, st["name"], j))
                   for j, op in enumerate(st["ops"])]
            for sp, idx, _ in ops:
                if sp == BUFFER:
                    first.setdefault(idx, s)
                    last[idx] = s
            if st["kind"] == LAUNCH:
                steps.append(Step(LAUNCH, ops, record=st["record"], config=st["config"], grid=st["grid"]))
            elif st["kind"] == MEMSET:
                steps.append(Step(MEMSET, ops, width=st["width"], value=st["value"], count=st["count"]))
            else:
                steps.append(Step(COPY, ops, count=st["count"]))

        # state: constants a step writes, or whose bytes changed
        written = {ri: _written_args(r) for ri, r in enumerate(bundle.records)}
        state = set()
        for st in steps:
            if st.kind in (MEMSET, COPY) and st.operands[0][0] == CONSTANT:
                state.add(st.operands[0][1])
            elif st.kind == LAUNCH:
                w = written[st.record]
                for j, op in enumerate(st.operands):
                    if op[0] == CONSTANT and w is not None and j in w:
                        state.add(op[1])
        if self.opts["check_state_bytes"]:
            for j, (name, t, sptr, host) in enumerate(const_list):
                if j not in state and not torch.equal(_storage_to_host(torch, t), host):
                    state.add(j)
        # the live model back where the bundle starts
        for j in sorted(state):
            name, t, sptr, host = const_list[j]
            _storage_from_host(torch, t, host)
        torch.cuda.synchronize()
        names = unique_names([c[0] for c in const_list])
        constants = [Constant(names[j], _dtype_name(torch, t.dtype, "constant %s" % name), _host_bytes(host),
                              state=j in state) for j, (name, t, sptr, host) in enumerate(const_list)]
        weights_note = self.external_weights(constants, const_list, bundle) if final else None

        # the workspace
        sizes = [_storage_of(storages[s])[1] for s in buffer_ptrs]
        # With programmatic dependent launch a kernel may start while the
        # one before it ends, and Inductor makes it wait (gdc_wait) only
        # before it reads what that kernel wrote or writes what it read or
        # wrote, by Inductor's buffer names, and otherwise after its first
        # read: bytes this plan gives a buffer whose life starts at step s
        # and another whose life ends at s - 1 would be written while the
        # step before may still read them (or write a store no step reads).
        # So a life that ends just before a launch with the flag lasts
        # through that launch (pdl_lives; the recorded lives stay), also
        # across steps the runner may skip: a memset or copy of nothing
        # (with shapes that vary, any memset or copy, whose count may be an
        # expression). A launch is not: the capture leaves out one of zero
        # blocks, and a symbol's range starts at 2, where Inductor's grids
        # are not empty. No other two steps overlap: a kernel with the flag
        # lets the next one start only after its own wait (Inductor's
        # launch_dependents follows it), which the one before it has then
        # finished, and one that never waits, or lets the next start before
        # it waits, loses the flag (_pdl_without_wait).
        pdl_at = {k for k, st in enumerate(steps)
                  if st.kind == LAUNCH and bundle.records[st.record].configs[st.config].flags & CONFIG_PDL}
        skippable = {k for k, st in enumerate(steps)
                     if st.kind != LAUNCH and (st.count == 0 or self.opts["dynamic_shapes"])}
        lives = pdl_lives([(first[i], last[i]) for i in range(len(buffer_ptrs))], pdl_at, skippable)
        offsets, ws = plan_workspace([(sizes[i],) + lives[i] for i in range(len(buffer_ptrs))])
        buffers = [Buffer(offsets[i], sizes[i], first[i], last[i]) for i in range(len(buffer_ptrs))]

        program = Program(inputs, outputs, constants, buffers, ws, steps, name=self.opts["program_name"])
        bundle.program = program
        self.built = _Built(raw, buffer_ptrs, storages, outs, program, bundle, [c[1] for c in const_list], weights_note)
        self.warnings += drop_wrong_rules(bundle)
        atomic = _atomic_configs(bundle, tuners)  # (reads the kernels' IR: before it may be left out)
        if not self.opts["keep_ir"]:
            strip_ir(bundle)
        self.timings["build_s"] = time.perf_counter() - t0
        if self.opts["write"] and final and not self.opts["dynamic_shapes"]:
            self.write(bundle)

        tainted = self.taint(steps, atomic, written, constants)
        kinds = collections.Counter({LAUNCH: 0, MEMSET: 0, COPY: 0})
        kinds.update(st.kind for st in steps)
        return ExportReport(
            path=self.path if self.opts["write"] else None,
            steps={"launch": kinds[LAUNCH], "memset": kinds[MEMSET], "copy": kinds[COPY]},
            launches=kinds[LAUNCH], skipped_launches=skipped, records=len(bundle.records),
            kernels=len(bundle.kernels), inputs=inputs, outputs=outputs, constants=len(constants),
            constant_bytes=sum(c.nbytes() for c in constants),
            state_constants=[c.name for c in constants if c.state],
            external_constants=[c[0] for c in const_list if c[2] in rec.external],
            unused_module_constants=len(self.consts) - sum(1 for c in const_list if c[2] in self.const_of),
            output_copies=[out_names[k] for k, _, _ in copies],
            workspace_size=ws, buffers=len(buffers), pytorch_peak=self.pytorch_peak,
            outputs_with_atomics=[out_names[k] for k in range(len(outs)) if (OUTPUT, k) in tainted],
            atomic_launches=sum(1 for st in steps if st.kind == LAUNCH and (st.record, st.config) in atomic),
            gpu_events=None if self.gpu_events is None else len(self.gpu_events),
            aten_ops=dict(rec.aten_ops), compiled_here=self.compiled_here,
            compile_options=dict(self.compile_options) if self.compiled_here else None,
            narrow_products=getattr(self, "narrow", None),
            narrow_configs={k: v for k, v in getattr(getattr(self, "narrow_config", None), "chosen", {}).items()
                            if k not in getattr(self, "program_tuned", {})},
            program_tuning=dict(getattr(self, "program_tuned", {})),
            pdl=bool(getattr(self, "pdl", False)), combo=bool(getattr(self, "combo", False)),
            pdl_launches=sum(1 for st in steps if st.kind == LAUNCH and
                             bundle.records[st.record].configs[st.config].flags & CONFIG_PDL),
            decode_attentions=sum(getattr(getattr(self, "backend", None), "attentions", ())),
            stored_activations=sum(getattr(getattr(self, "backend", None), "activations", ())),
            warnings=list(getattr(self, "tuning_warnings", [])) + list(self.warnings),
            timings=dict(self.timings), compiled=self.compiled, bundle=bundle,
            captured_outputs=outs, constant_storages=[c[2] for c in const_list],
            constant_tensors=[c[1] for c in const_list], name=self.opts["program_name"],
            weights=weights_note)

    def write(self, bundle):
        """Writes the bundle, then reads it back and checks every constant
        against the module's tensor (check_written); a bundle that fails
        the check is removed."""
        t0 = time.perf_counter()
        write_file(bundle, self.path)
        self.timings["write_s"] = time.perf_counter() - t0
        note = self.built.weights
        write_checked(self.torch, bundle, self.path, self.built.tensors, note["file"] if note else None,
                      "program %r" % self.opts["program_name"], self.timings)

    def external_weights(self, constants, const_list, bundle):
        """options weights / weights_from: the constants that are not state
        become tensors of a safetensors file (2.5); see externalize."""
        note = externalize(self.torch, constants, [c[1] for c in const_list], self.opts, getattr(self, "module", None), self.warnings)
        if note is not None:
            import os
            bundle.properties["weights.file"] = os.path.basename(note["file"])
        return note

    def verify_events(self, expected):
        """Every GPU operation of the run is a step: the profiler's events
        against the steps', in order."""
        if self.gpu_events is None:
            return
        ignore = tuple(self.opts["ignore_gpu_events"] or ())
        observed = [e for e in self.gpu_events if not any(s in e for s in ignore)]
        if expected and not observed:
            raise BundleError("unsupported", "the profiler saw no GPU operation in a run of %d steps (no CUPTI?): "
                              "export with options={'verify_gpu_events': False} to skip the check" % len(expected))
        foreign, missing = match_gpu_events(expected, observed)
        if not foreign and not missing:
            return
        lines = []
        for _, name in foreign[:12]:
            lines.append("  %s: %s" % (name if len(name) < 160 else name[:157] + "...", gpu_event_hint(name)))
        if len(foreign) > 12:
            lines.append("  ... %d more" % (len(foreign) - 12))
        if missing:
            lines.append("  %d captured steps the profiler did not see, from step %d (%s)" % (
                len(missing), missing[0], "%s %s" % expected[missing[0]]))
        ops = ", ".join("%s x%d" % kv for kv in self.rec.aten_ops.items())
        raise BundleError("unsupported", "GPU work that is not a Triton launch, memset or copy step:\n%s%s" % (
            "\n".join(lines), "\n  aten operations the run called outside Triton: " + ops if ops else ""))

    @staticmethod
    def taint(steps, atomic, written, constants):
        """{(space, index)} of objects whose bytes may depend on a kernel with
        atomics: what such a launch writes, and what any step that reads a
        tainted object writes (a launch whose argument names do not say what
        it writes: each of its pointers but read-only constants)."""
        tainted = set()
        for st in steps:
            ptrs = [(j, (op[0], op[1])) for j, op in enumerate(st.operands) if op[0] != LITERAL]
            if st.kind == LAUNCH:
                w = written[st.record]
                outs = [o for j, o in ptrs if (j in w if w is not None else
                                               o[0] != CONSTANT or constants[o[1]].state)]
                if (st.record, st.config) in atomic or any(o in tainted for _, o in ptrs):
                    tainted.update(outs)
            elif st.kind == COPY and ptrs[1][1] in tainted:
                tainted.add(ptrs[0][1])
        return tainted


WEIGHT_OPTIONS = ("weights", "weights_from", "weight_names")


def _weight_shape(t, nbytes):
    """The shape a constant of nbytes has in a weights file: its tensor's,
    or its storage's elements where the storage is larger (a view)."""
    return list(t.shape) if t.numel() * t.element_size() == nbytes else [nbytes // max(1, t.element_size())]


def externalize(torch, constants, tensors, opts, module, warnings):
    """options weights / weights_from over a table of constants (one
    program's, or the merged table of several), each with its module
    tensor: the constants that are not state become tensors of a safetensors
    file (2.5), referred to by name, shape and CRC-32, their bytes gone from
    the bundle. Returns None (neither option) or what was done: {"file",
    "external": count, "bytes", "in_bundle": [names], "write_s"}; the
    caller sets the bundle's property weights.file."""
    w, wf = opts.get("weights"), opts.get("weights_from")
    if w is None and wf is None:
        return None
    if w is not None and wf is not None:
        raise BundleError("invalid_argument", "options weights and weights_from: give one")
    if len(tensors) != len(constants):
        raise BundleError("invalid_argument", "externalize: %d tensors for %d constants" % (len(tensors),
                                                                                           len(constants)))
    import zlib
    from . import weights as _weights
    t0 = time.perf_counter()
    shapes = {c.name: _weight_shape(t, c.nbytes()) for c, t in zip(constants, tensors)}
    # not state (a reset reloads it from the bundle), not empty, and of a dtype safetensors has (not the fnuz float8s)
    movable = [c for c in constants if not c.state and c.external is None and c.nbytes() and
               DTYPE_BY_NAME[c.dtype].safetensors]
    left = []
    if w is not None:
        crcs = _weights.write_file(w, [(c.name, c.dtype, shapes[c.name], c.data) for c in movable],
                                   {"format": "pt", "writer": "triton_bundle"})
        for c in movable:
            c.external = External(c.name, shapes[c.name], crcs[c.name])
            c.data = b""
        path = w
    else:
        header = _weights.read_header(wf)
        aliases = collections.defaultdict(list)
        by_ptr = {_storage_of(t)[0]: c.name for c, t in zip(constants, tensors)}
        if module is not None:
            for n, t in list(module.named_parameters(remove_duplicate=False)) + \
                    list(module.named_buffers(remove_duplicate=False)):
                if t is not None and torch.is_tensor(t) and t.device.type == "cuda":
                    cn = by_ptr.get(_storage_of(t)[0])
                    if cn is not None:
                        aliases[cn].append(n)
        names = _weights.match_names([c.name for c in movable], aliases, header)
        names.update(opts.get("weight_names") or {})
        for c in movable:
            tn = names.get(c.name)
            ft = header.get(tn) if tn is not None else None
            if ft is None or ft.dtype != c.dtype or ft.size != c.nbytes():
                left.append(c.name)
                continue
            crc = zlib.crc32(c.data)
            if _weights.crc32_of(wf, ft) != crc:
                warnings.append("weights_from: constant %s and tensor %s of %s hold other bytes: kept in the "
                                "bundle" % (c.name, tn, wf))
                left.append(c.name)
                continue
            c.external = External(tn, ft.shape, crc)
            c.data = b""
        path = wf
    ext = [c for c in constants if c.external is not None]
    return {"file": path, "external": len(ext), "bytes": sum(c.nbytes() for c in ext), "in_bundle": left,
            "write_s": time.perf_counter() - t0}


def write_checked(torch, bundle, path, tensors, weights_file, what, timings):
    """check_written on a bundle just written at path; on a refusal the
    file is removed (no bundle that runs on wrong bytes is left) and the
    error names what was exported."""
    import os
    t0 = time.perf_counter()
    try:
        check_written(path, [_bytes_and_crc(torch, t) for t in tensors], weights_file, what)
    except BundleError:
        try:
            os.remove(path)
        except OSError:
            pass
        raise
    timings["check_s"] = time.perf_counter() - t0


def _bytes_and_crc(torch, t):
    """(byte count, CRC-32) of the whole storage of device tensor t."""
    import zlib
    host = _storage_to_host(torch, t)
    return host.numel(), zlib.crc32(_host_bytes(host))


def check_written(path, expected, weights_file=None, what="the export"):
    """Reads the bundle written at path back and checks every constant of
    its programs against its module tensor (expected: per constant, in
    table order, the (byte count, CRC-32) of the tensor's storage, the
    module as the bundle starts): the same byte count, and the same bytes
    in the bundle or, for an external constant, in the weights file, which
    must hold its tensor. A bundle that would run on
    wrong or missing bytes is refused here, before the export reports
    success (a weights option once left the weights of several programs with
    neither bytes nor a tensor of the file). Returns the count checked."""
    import os
    import zlib
    from . import weights as _weights
    # (no second pass of the pure-Python XXH3 over a bundle the writer has
    # just summed: the structure and every constant are what is checked)
    with open(path, "rb") as f:
        b = read(f.read(), verify_checksum=False)
    progs = b.programs
    if not progs:
        return 0
    table = progs[0].constants
    if len(table) != len(expected):
        raise BundleError("malformed", "%s wrote %s with %d constants where the model has %d" % (
            what, path, len(table), len(expected)))
    header, wpath = None, None
    if any(c.external is not None for c in table):
        wname = b.properties.get("weights.file") if b.properties else None
        wpath = weights_file or (os.path.join(os.path.dirname(os.path.abspath(path)), wname) if wname else None)
        if wpath is None:
            raise BundleError("malformed", "%s wrote %s with external constants and no weights.file property" % (
                what, path))
        header = _weights.read_header(wpath)
    for c, (want_n, want) in zip(table, expected):
        if c.external is not None:
            ft = header.get(c.external.tensor)
            if ft is None or ft.dtype != c.dtype or ft.size != want_n:
                raise BundleError("malformed", "%s wrote constant %s as tensor %r of %s, which %s" % (
                    what, c.name, c.external.tensor, wpath, "it lacks" if ft is None else
                    "is %s of %d bytes where the model's is %d" % (ft.dtype, ft.size, want_n)))
            got = _weights.crc32_of(wpath, ft)
            if got != want or c.external.crc32 != want:
                raise BundleError("malformed", "%s wrote constant %s (tensor %r of %s) with other bytes than the "
                                  "model's" % (what, c.name, c.external.tensor, wpath))
        else:
            n = len(c.data) if isinstance(c.data, (bytes, bytearray)) else memoryview(c.data).nbytes
            if n != want_n:
                raise BundleError("malformed", "%s wrote constant %s with %d bytes where the model's tensor has "
                                  "%d%s" % (what, c.name, n, want_n, ", and no weights-file tensor" if not n else ""))
            if zlib.crc32(c.data) != want:
                raise BundleError("malformed", "%s wrote constant %s with other bytes than the model's" % (
                    what, c.name))
    return len(table)


def export_model(model, example_inputs, path, options=None):
    """Captures one forward of a torch.compile'd model as a program
    (FORMAT.md, section 5) and writes the bundle to path; returns an
    ExportReport. See the module's doc for how.

    model: an nn.Module or a function (compiled here with TRITON_ONLY, or
    already compiled: an OptimizedModule, a torch.compile'd function, a
    module after .compile()). example_inputs: the call's positional
    arguments (a tuple or list), its keyword arguments (a dict) or its one
    argument; the tensors among them, flattened in order, are the inputs.
    options: export_model's own (EXPORT_OPTIONS) and any Inductor option
    (added to TRITON_ONLY, or overriding it).

    The model runs `warmup` times, once for PyTorch's peak memory and once
    captured; the module's state (BatchNorm's running statistics...) is
    afterwards what it was before the captured run, which is the state the
    bundle holds. Raises BundleError for what a program cannot hold."""
    return _Export(model, example_inputs, path, options).run()


# ------------------------------------------------ several programs at once
# The cache layouts export_programs takes: a module's own buffers written
# in place at a position the program reads from the device (the gpt-fast
# layout, index_put_ or index_copy_), and transformers' StaticCache, whose
# tensors are allocated once and written in place. A cache that grows
# (DynamicCache, and the layouts built on it) allocates new tensors each
# call: no fixed program can hold it.
SUPPORTED_CACHES = ("StaticCache",)


def _caches_of(torch, what, obj):
    """The transformers caches in obj (a program's example inputs, or the
    tensors options["names"] names), what saying where for the message; one
    that is not a StaticCache is refused by name."""
    seen = []

    def walk(x, depth):
        if depth > 3 or x is None or torch.is_tensor(x) or isinstance(x, _PLAIN):
            return
        if any(c.__name__ == "Cache" and "transformers" in c.__module__ for c in type(x).__mro__):
            seen.append(x)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y, depth + 1)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y, depth + 1)
    walk(obj, 0)
    for cache in seen:
        cls_name = type(cache).__name__
        if cls_name not in SUPPORTED_CACHES:
            raise BundleError("unsupported", "%s holds a transformers %s, which grows: a program holds "
                              "fixed tensors. Use a StaticCache (transformers.StaticCache(config=..., "
                              "max_batch_size=..., max_cache_len=...), passed as past_key_values with "
                              "cache_position), or a cache of the module's own buffers written in place "
                              "(index_copy_ at a position tensor)" % (what, cls_name))
    return seen


class ProgramsReport:
    """What export_programs did: path, programs ({name: ExportReport}),
    constants and constant_bytes (the bundle's table, each stored once),
    shared_state (the names of the state constants several programs use),
    kernels, records, bundle, warnings (grid rules dropped: drop_wrong_rules),
    timings."""

    NOT_JSON = ("bundle",)

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def as_dict(self):
        out = {k: v for k, v in self.__dict__.items() if k not in self.NOT_JSON}
        out["programs"] = {k: v.as_dict() for k, v in self.programs.items()}
        return out

    def __repr__(self):
        return "ProgramsReport(%s: %s, %d constants (%d bytes), shared state %s)" % (
            self.path, ", ".join("%s %d steps" % (k, sum(v.steps.values())) for k, v in self.programs.items()),
            self.constants, self.constant_bytes, self.shared_state)


def drop_wrong_rules(bundle):
    """Takes the grid rule from each config whose rule disagrees with a
    launch step's grid (the grid Inductor computed and launched, which the
    step keeps), so that a rule a bundle holds is right wherever a program
    launches it ([R-program-grid]); returns a warning per rule dropped.
    Inductor's rule reads a size it baked in, for instance, where one
    kernel runs at two sizes."""
    out = []
    for p in bundle.programs:
        for s, st in enumerate(p.steps):
            if st.kind != LAUNCH:
                continue
            cf = bundle.records[st.record].configs[st.config]
            try:
                got = rule_grid(cf, st)
            except BundleError as e:
                got = str(e)
            if got is not None and got != tuple(st.grid):
                cf.grid = None
                out.append("kernel %s config %d: its grid rule gives %s where program %r step %d launched %r: "
                           "the rule was dropped (the steps keep their grids)" % (
                               cf.function_name, st.config, got, p.name, s, tuple(st.grid)))
    return out


def merge_programs(reports, properties=None):
    """One bundle of several captured programs: reports is {name: an
    ExportReport of export_model(..., write=False)}, in order, each with
    its bundle (kernels, records, one program) and constant_storages (each
    constant's storage). Kernels are joined by hash, records by cache key
    (the steps' record indexes renumbered), constants by storage (the
    steps' constant indexes renumbered): one constant per storage, named
    by its first name (names made unique), state where any program writes
    it, and shared where it is state and two programs use it. Returns
    (bundle, [the shared constants' names]). A record two programs share
    holds the configs of both (each once), the steps' config indexes
    renumbered to it. Pure: tests/test_model.py
    checks it with stand-in reports."""
    kernels, records, rindex, rnames = [], [], {}, collections.defaultdict(set)
    seen_kernels = set()
    table, by_storage, users = [], {}, collections.defaultdict(set)
    merged = []
    for name, rep in reports.items():
        b = rep.bundle
        for k in b.kernels:
            if k.hash not in seen_kernels:
                seen_kernels.add(k.hash)
                kernels.append(k)
        rmap, cfmap = [], []
        for r in b.records:
            g = rindex.get(r.cache_key)
            if g is None:  # copies: configs may be added to it, and rules dropped from them, later
                g = rindex[r.cache_key] = len(records)
                records.append(Record(r.cache_key, r.kernel_name, [copy.copy(c) for c in r.configs], r.call))
            m = records[g]
            if m.call != r.call:
                raise BundleError("unsupported", "kernel %s (%s): program %r calls it with other arguments than %s" % (
                    r.kernel_name, r.cache_key, name, sorted(rnames[g])))
            # one kernel, autotuned in each program: its configs may differ
            # (in order, in number, in the grid rule), so a step's config
            # index is renumbered to the joined record's, a new config added
            cm = []
            for c in r.configs:
                k = next((i for i, d in enumerate(m.configs) if d == c), None)
                if k is None:
                    m.configs.append(copy.copy(c))
                    k = len(m.configs) - 1
                cm.append(k)
            rnames[g].add(name)
            rmap.append(g)
            cfmap.append(cm)
        cmap = []
        for j, k in enumerate(b.program.constants):
            sptr = rep.constant_storages[j]
            g = by_storage.get(sptr)
            if g is None:
                g = by_storage[sptr] = len(table)
                table.append(Constant(k.name, k.dtype, k.data, state=k.state, external=k.external))
            else:
                t = table[g]
                if t.dtype != k.dtype or len(t.data) != len(k.data):
                    raise BundleError("unsupported", "programs %s and %r see one storage (%s) as %s of %d bytes and "
                                      "%s of %d bytes" % (sorted(users[g]), name, t.name, t.dtype, len(t.data),
                                                          k.dtype, len(k.data)))
                if k.state and t.data != k.data:
                    raise BundleError("unsupported", "state %s starts with other bytes in program %r than in %s: "
                                      "the state was not put back between the captures" % (t.name, name,
                                                                                          sorted(users[g])))
                t.state = t.state or k.state
            users[g].add(name)
            cmap.append(g)
        p = b.program
        steps = []
        for st in p.steps:
            ops = [(CONSTANT, cmap[ix], v) if sp == CONSTANT else (sp, ix, v) for sp, ix, v in st.operands]
            launch = st.kind == LAUNCH
            steps.append(Step(st.kind, ops, record=rmap[st.record] if launch else 0,
                              config=cfmap[st.record][st.config] if launch else st.config,
                              grid=st.grid, width=st.width, value=st.value, count=st.count))
        merged.append(Program(p.inputs, p.outputs, table, p.buffers, p.workspace_size, steps, name=name,
                              symbols=p.symbols, exprs=p.exprs))
    for p in merged:  # (Program copies the list it is given)
        p.constants = table
    names = unique_names([k.name for k in table])
    for k, n in zip(table, names):
        k.name = n
    shared = []
    for g, k in enumerate(table):
        if k.state and len(users[g]) > 1:
            k.shared = True
            shared.append(k.name)
    return Bundle(kernels, records, programs=merged, properties=properties), shared


def export_programs(programs, path, options=None, module=None, properties=None):
    """Captures several functions over one module as programs of one bundle
    (FORMAT.md, section 6), as export_model captures one: for example a
    prefill at a few prompt lengths and a decode step over one KV cache.

        export_programs({"prefill_64": (prefill, (ids64,)), "decode": (decode, (ids1, pos))},
                        "model.tbundle", module=model)

    programs: {name: (callable, example_inputs)} in the bundle's order
    (each callable compiled here with TRITON_ONLY, or already compiled, and
    called with its example inputs as export_model calls a model); a third
    item, a dict, gives that program options of its own (input_names...). module:
    the nn.Module whose parameters and buffers are the constants (default:
    each callable's own, as export_model finds it). options: export_model's,
    for every program (options["names"] names tensors that are neither
    parameters nor buffers, such as a StaticCache's: {"kv": cache}).

    Each program is captured in turn, the module's state (its buffers and
    the named tensors) put back before each capture and after the last, so
    that every program starts from the state the bundle holds: the state
    as it was before the call (compiling and warm-up runs change it). Constants are matched by storage across programs: a
    weight is one constant, stored and uploaded once; a constant that a
    program writes is state, and state that two programs use (the KV
    cache) is marked shared, so that the runner keeps one buffer for both.
    A transformers cache that grows (DynamicCache) is refused by name.
    properties: the bundle's key/value strings ({"generate.max_seq": "256"}:
    what examples/generate.c needs besides the programs). Returns a
    ProgramsReport; raises BundleError for what a program cannot hold."""
    import torch
    items = list(programs.items()) if isinstance(programs, dict) else list(programs)
    if not items:
        raise BundleError("invalid_argument", "export_programs needs at least one program")
    opts = dict(options or {})
    if module is not None:
        opts["module"] = module
    opts["write"] = False
    # the weights file is the bundle's, not a program's: the programs are
    # captured with their bytes, and the merged table goes to one file
    wopts = {k: opts.pop(k, None) for k in WEIGHT_OPTIONS}
    names = dict(opts.get("names") or {})
    caches = []
    items = [(name, tuple(spec) + ({},) * (3 - len(spec))) for name, spec in items]
    _caches_of(torch, 'options["names"]', list(names.values()))
    for name, (fn, example_inputs, own) in items:
        bad = [k for k in WEIGHT_OPTIONS if (own or {}).get(k) is not None]
        if bad:
            raise BundleError("invalid_argument", "program %r: option %s is the whole bundle's (export_programs' "
                              "options), not one program's" % (name, bad[0]))
        for c in _caches_of(torch, "program %r's example inputs" % name, example_inputs):
            if all(c is not x for x in caches):
                caches.append(c)
    for i, c in enumerate(caches):
        names.setdefault("kv_cache" if i == 0 else "kv_cache%d" % i, c)
    opts["names"] = names
    # the state every program starts from: the module's buffers and the
    # named tensors (the caches) as they are before the export, put back
    # before each capture (compiling and warming up ran the functions) and
    # after the last
    reference = {}

    def state_tensors():
        mod = module
        out = []
        if mod is not None:
            out += [t for _, t in mod.named_buffers() if t is not None and t.device.type == "cuda"]
        ids = set()
        for t in out:
            ids.add(id(t))
        found = []

        def walk(obj, depth):
            if torch.is_tensor(obj):
                if obj.device.type == "cuda" and id(obj) not in ids:
                    ids.add(id(obj))
                    found.append(obj)
            elif depth <= 4 and isinstance(obj, (list, tuple)):
                for x in obj:
                    walk(x, depth + 1)
            elif depth <= 4 and isinstance(obj, dict):
                for x in obj.values():
                    walk(x, depth + 1)
            elif depth <= 4 and obj is not None and not isinstance(obj, (torch.nn.Module,) + _PLAIN):
                for k, x in _attributes(obj).items():
                    if not k.startswith("_"):
                        walk(x, depth + 1)
        for obj in names.values():
            walk(obj, 0)
        return out + found

    def put_back():
        # a tensor first seen here (a cache that makes its tensors on the
        # first call) starts as it is now; the others as before the export.
        # Each copy keeps its tensor: its storage stays alive, so no other
        # tensor can take its address, and the bytes go back where they
        # came from (a buffer the module replaced meanwhile is a new one)
        torch.cuda.synchronize()
        for t in state_tensors():
            sptr = _storage_of(t)[0]
            if sptr not in reference:
                reference[sptr] = (t, _storage_to_host(torch, t))
        for t, host in reference.values():
            _storage_from_host(torch, t, host)
        torch.cuda.synchronize()
    # before any compile or warm-up run: a counter the state holds (a
    # cache's length) must not start where the warm-up runs left it
    put_back()
    opts["before_capture"] = put_back
    opts["before_run"] = put_back  # every run from the same state (a StaticCache's length, too)
    t0 = time.perf_counter()
    reports = collections.OrderedDict()
    seen = {}  # storage -> the host bytes of a weight, shared by the programs
    try:
        for name, (fn, example_inputs, own) in items:
            _names([name], 1, "program", "program")
            if name in reports:
                raise BundleError("invalid_argument", "two programs named %r" % name)
            o = dict(opts)
            o.update(own or {})
            o["program_name"] = name
            rep = reports[name] = _Export(fn, example_inputs, None, o).run()
            # one host copy of a weight, whatever the programs that use it
            # (each capture read its own: an 8B model's 16 GB per program)
            for c, sptr in zip(rep.bundle.program.constants, rep.constant_storages):
                if not c.state:
                    c.data = seen.setdefault(sptr, c.data)
    except BaseException as e:
        # the module left as the bundle starts where the device still
        # works; a failure of its own (the context lost to a device-side
        # assert) never replaces the error that stopped the export
        try:
            put_back()
        except Exception as pe:  # noqa: BLE001
            if hasattr(e, "add_note"):
                e.add_note("(the module's state could not be put back afterwards: %s: %s)" % (
                    type(pe).__name__, str(pe).strip().splitlines()[0] if str(pe).strip() else ""))
        raise
    put_back()  # the module left as the bundle starts (as before the export)
    bundle, shared = merge_programs(reports, properties)
    warnings = drop_wrong_rules(bundle)
    table = bundle.programs[0].constants
    tensors = merged_tensors(reports)
    t1 = time.perf_counter()
    timings = {"capture_s": t1 - t0}
    note = externalize(torch, table, tensors, wopts, module, warnings)
    seen.clear()
    if note is not None:
        import os
        bundle.properties["weights.file"] = os.path.basename(note["file"])
        timings["weights_s"] = note["write_s"]
        # the programs' own bundles (the reports') say the same, and hold no
        # host copy of what the file now holds
        ext = {sptr: c.external for c, sptr in zip(table, table_storages(reports)) if c.external is not None}
        for rep in reports.values():
            for c, sptr in zip(rep.bundle.program.constants, rep.constant_storages):
                if not c.state and sptr in ext:
                    c.data, c.external = b"", ext[sptr]
    t2 = time.perf_counter()
    write_file(bundle, path)
    timings["write_s"] = time.perf_counter() - t2
    write_checked(torch, bundle, path, tensors, note["file"] if note else None, "export_programs", timings)
    return ProgramsReport(path=path, programs=reports, constants=len(table),
                          constant_bytes=sum(len(k.data) for k in table), shared_state=shared,
                          kernels=len(bundle.kernels), records=len(bundle.records), bundle=bundle,
                          warnings=warnings, timings=timings, weights=note)


def merged_tensors(reports):
    """The module tensor of each constant of merge_programs' table, in its
    order (constants are joined by storage, in the order first seen)."""
    seen, out = set(), []
    for rep in reports.values():
        tensors = getattr(rep, "constant_tensors", None) or [None] * len(rep.constant_storages)
        for sptr, t in zip(rep.constant_storages, tensors):
            if sptr not in seen:
                seen.add(sptr)
                out.append(t)
    return out


def table_storages(reports):
    """The storage of each constant of merge_programs' table, in its order."""
    seen = {}
    for rep in reports.values():
        for sptr in rep.constant_storages:
            seen.setdefault(sptr, None)
    return list(seen)
