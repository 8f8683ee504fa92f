"""What export_model asks of Inductor: its options that make every GPU
operation of a forward a Triton kernel (TRITON_ONLY), a torch.compile
backend with the exporter's decompositions (exporter_backend: 2-D
convolutions as Triton matrix products, an argmax over a long row in two
stages, a decode step's eager attention as one kernel of ours found in
Dynamo's graph (attention_pass); conv_as_mm_backend, the first alone), and
one config for a decode step's one-row products (NARROW_PRODUCT_CONFIG,
given by narrow_product_configs)."""

import re
import threading

# Inductor's options that make every GPU operation of a forward a Triton
# kernel: matrix products and convolutions as Triton templates, and no CUDA
# graphs (a graph replay launches kernels outside CachingAutotuner.run).
TRITON_ONLY = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON",
               "max_autotune_conv_backends": "TRITON", "triton.cudagraphs": False}


def conv_as_mm_backend(torch, compile_options, split_k=True, sms=132, prologue_fusion=False):
    """A torch.compile backend: Inductor (compile_fx) with compile_options
    and one more decomposition, of aten.convolution (2-D, not transposed,
    one group) into a gather of the input's windows and a matrix product,
    which Inductor's Triton matrix-product templates run and tune. A
    convolution whose stride is its kernel (a ViT's patch embedding) is a
    reshape and a matrix product, bytes and all; any other gathers its
    windows (im2col) first. Inductor's own convolution template is slower
    than cuDNN at these sizes (FORMAT.md's performance notes); this is
    measured against it in bench/."""
    return exporter_backend(torch, compile_options, conv=True, argmax=False, split_k=split_k, sms=sms,
                            prologue_fusion=prologue_fusion)


def exporter_backend(torch, compile_options, conv=True, argmax=True, split_k=True, sms=132, prologue_fusion=False,
                     attention=False, activation=False):
    """A torch.compile backend: Inductor (compile_fx) with compile_options
    and the exporter's decompositions: with conv, 2-D convolutions as a
    gather and a matrix product (conv_as_mm_backend says how; Inductor's
    prologue fusion then off unless prologue_fusion); with argmax, an
    argmax or argmin over a long row in two stages (_split_arg_reduction);
    with attention, eager attention with one query per head as one Triton
    kernel of ours (attention_pass); with activation, SiLU(gate) * up
    before a one-row product stored once (activation_pass).
    backend.attentions and backend.activations count, per graph compiled,
    the attentions replaced and the activations stored."""
    from torch._decomp import register_decomposition
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.decomposition import select_decomp_table
    aten = torch.ops.aten
    table = dict(select_decomp_table())

    def _conv(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
        if transposed or groups != 1 or x.dim() != 4 or w.dim() != 4 or any(d != 1 for d in dilation):
            return NotImplemented
        n, c, h, wd = x.shape
        d, _, kh, kw = w.shape
        sh, sw = stride
        ph, pw = padding
        ho, wo = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
        if (sh, sw) == (kh, kw) and (ph, pw) == (0, 0):
            cols = x[:, :, :ho * kh, :wo * kw].reshape(n, c, ho, kh, wo, kw).permute(0, 2, 4, 1, 3, 5)
        else:
            xp = torch.nn.functional.pad(x, (pw, pw, ph, ph)) if ph or pw else x
            # windows: [n, c, ho, wo, kh, kw] by strides, as unfold
            cols = xp.unfold(2, kh, sh).unfold(3, kw, sw).permute(0, 2, 3, 1, 4, 5)
        m_, k_ = n * ho * wo, c * kh * kw
        cols = cols.reshape(m_, k_)
        # split K where the product has too few 64x64 tiles to fill the GPU
        # (ResNet's late layers at small images: M = 4, K = 4608): S products
        # of K/S each, then their sum, every chunk at least 256 deep
        s_ = 1
        tiles = -(-m_ // 64) * -(-d // 64)
        while split_k and tiles * s_ * 2 <= sms and k_ % (s_ * 2) == 0 and k_ // (s_ * 2) >= 256:
            s_ *= 2
        if s_ > 1:
            out = torch.bmm(cols.reshape(m_, s_, k_ // s_).permute(1, 0, 2),
                            w.reshape(d, s_, k_ // s_).permute(1, 2, 0)).sum(0)
        else:
            out = torch.mm(cols, w.reshape(d, k_).t())
        if b is not None:
            out = out + b
        return out.reshape(n, ho, wo, d).permute(0, 3, 1, 2)

    patches = dict(compile_options)
    if conv:
        register_decomposition(aten.convolution.default, registry=table)(_conv)
        if not prologue_fusion and hasattr(torch._inductor.config, "prologue_fusion"):
            # a window gather fused into the matrix product's loads makes them
            # uncoalesced: measured 345 us for one of ResNet-18's products
            patches["prologue_fusion"] = False
    if argmax:
        for op, largest in ((aten.argmax.default, True), (aten.argmin.default, False)):
            register_decomposition(op, registry=table)(_split_arg_reduction(torch, largest))

    def backend(gm, example_inputs, **_):
        replaced = attention_pass(torch, gm) if attention else 0
        if attention:
            backend.attentions.append(replaced)
        stored = activation_pass(torch, gm) if activation else 0
        if activation:
            backend.activations.append(stored)
        # AOTAutograd's cache keys on the graph before decomposition, not on
        # this table: a model compiled without it would come back
        with torch._functorch.config.patch(enable_autograd_cache=False), _quiet_asm_analysis(replaced):
            try:
                return compile_fx(gm, example_inputs, config_patches=patches, decompositions=table)
            except Exception as e:
                if not replaced and not stored:
                    raise
                raise RuntimeError("compiling a graph where %d eager attentions were replaced by "
                                   "triton_bundle::decode_attention (options[\"decode_attention\"] = False keeps "
                                   "Inductor's) and %d activations stored once (options[\"store_activation\"] = "
                                   "False keeps Inductor's) failed: %s: %s" % (
                                       replaced, stored, type(e).__name__, e)) from e
    backend.attentions = []
    backend.activations = []
    return backend


class _quiet_asm_analysis:
    """A context manager: while a graph with decode attentions replaced
    compiles (n > 0), drops PyTorch's warning, with its traceback, that its
    analysis of which arguments a Triton kernel writes met inline assembly
    and so takes every argument as written. The decode attention's kernel,
    in a program compiled with programmatic dependent launch, waits for the
    kernel before it (gdc_wait: inline assembly in Triton 3.6) and writes
    only its output. Taking every argument as written is safe: each
    argument's value after the kernel is then the kernel's output, which
    Inductor writes in place (the 1B step had no copy for it: PERFORMANCE.md
    section 24); the warning would come with every such export. Another
    kernel's warning of the same kind in the same graph is dropped with it.
    .log: the logger it filters (the analysis module's, "torch._dynamo" in
    PyTorch 2.11), or None."""

    def __init__(self, n):
        import logging
        self.log = None
        if n:
            try:
                import importlib
                self.log = getattr(importlib.import_module("torch._higher_order_ops.triton_kernel_wrap"), "log", None)
            except ImportError:
                pass
            if not isinstance(self.log, logging.Logger):
                self.log = logging.getLogger("torch._dynamo")

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return not ("identify_mutated_tensors" in str(record.msg) and "elementwise_inline_asm" in str(exc))

    def __enter__(self):
        if self.log is not None:
            self.log.addFilter(self)
        return self

    def __exit__(self, *exc):
        if self.log is not None:
            self.log.removeFilter(self)
        return False


# An argmax over a row this long, in this few rows, is split in two stages.
# Inductor runs an argmax as one reduction with a program per row, and does
# not split it as it splits a sum: a decode step's argmax over a vocabulary
# of 128,256 logits took 18-29 us in one program (PERFORMANCE.md section 20),
# where the bytes (256 KB) take well under a microsecond at the bandwidth.
SPLIT_ARG_LEAST = 32768     # elements in the row
SPLIT_ARG_ROWS = 8          # rows at most (a decode's batch)
SPLIT_ARG_CHUNK = 1024      # elements in a stage-1 chunk at least
SPLIT_ARG_CHUNKS = 64       # chunks in a row at most


def split_arg_shape(n, rows):
    """(S, C): the chunks a row of n elements, in `rows` rows, is cut into
    by split_argmax (S chunks of C, S * C - n of them padding, all in the
    last chunk, which holds one element of the row at least), or None:
    Inductor's own argmax (a row under SPLIT_ARG_LEAST, or more rows than
    SPLIT_ARG_ROWS, or none)."""
    if n < SPLIT_ARG_LEAST or not 1 <= rows <= SPLIT_ARG_ROWS:
        return None
    s = min(SPLIT_ARG_CHUNKS, n // SPLIT_ARG_CHUNK)
    c = -(-n // s)
    return -(-n // c), c  # fewer chunks where the last would be padding alone


def _split_arg_reduction(torch, largest):
    """aten.argmax (largest) or aten.argmin as two reductions, for a
    float16, bfloat16, float32 or float64 tensor of static shape whose
    reduced row has at least SPLIT_ARG_LEAST elements, in at most
    SPLIT_ARG_ROWS rows (else NotImplemented: Inductor's own lowering). The
    row is cut into S chunks of C (split_arg_shape; the last padded with
    -inf for an argmax, +inf for an argmin); stage 1 is each chunk's max
    and its index (aten.max.dim: many programs), stage 2 the argmax of the
    chunks' maxima and the index in that chunk. The same index as one
    argmax: ties go to the first chunk and, in it, to the first element, so
    to the first in the row; a NaN counts as the largest value (an
    argmin's smallest) in every stage, as in Inductor's argmax; a padded
    element never comes first, since it ties at most with an element
    before it."""
    # the dtypes to split: float8 is left out (e4m3fn has no infinity to pad with)
    padded = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

    def split(x, dim=None, keepdim=False):
        shape = list(x.shape)
        if x.dtype not in padded or not shape or not all(isinstance(s, int) for s in shape):
            return NotImplemented
        if dim is None:
            v, rows, n = x.reshape(1, -1), 1, x.numel()
            out_shape = [1] * len(shape) if keepdim else []
        else:
            d = dim % len(shape)
            n = shape[d]
            rows = x.numel() // n if n else 0
            v = x.movedim(d, -1).reshape(rows, n)
            out_shape = [1 if i == d else s for i, s in enumerate(shape)] if keepdim else shape[:d] + shape[d + 1:]
        shape_ = split_arg_shape(n, rows)
        if shape_ is None:
            return NotImplemented
        s, c = shape_
        if s * c > n:
            v = torch.nn.functional.pad(v, (0, s * c - n), value=float("-inf") if largest else float("inf"))
        best, at = (torch.max if largest else torch.min)(v.reshape(rows, s, c), -1)
        j = (best.argmax if largest else best.argmin)(-1, keepdim=True)
        return (j * c + torch.gather(at, -1, j)).reshape(out_shape)
    return split


# The config of every one-row product that Inductor's decomposition made a
# reduction (options["narrow_mm"]; a one-column product matches as well), in
# place of coordinate descent's walk from one config to its neighbours, whose
# choice for the same kernel varied by up to 2x from one compile to the next
# (PERFORMANCE.md sections 18 and 19). Two outputs per program, 2,048-element
# steps, 8 warps: on an H200 a Llama-3.2-1B-shaped decode step took 1,234 us
# with it against coordinate descent's 1,396 us in the same run, one output
# per program 1,283 us, 512-element steps 1,405 us; on another machine 1,153
# us, four outputs 1,348 us, eight 1,247 us (bench/gemv_probe.py). Alone, a
# plain product is within 2% of the best of 80 configs with one output per
# program; in the step, a product whose prologue (a norm, SiLU) every program
# recomputes does better with two.
NARROW_PRODUCT_CONFIG = {"XBLOCK": 2, "R0_BLOCK": 2048, "num_warps": 8, "num_stages": 1}


def _narrow_product(tuner, launcher):
    """Whether an Inductor kernel is a one-row product as a reduction: a
    looped reduction whose name has the mm it came from (Inductor's
    descriptive names, its default), or whose name says nothing of what it
    computes (triton_red_fused_N: with combo kernels on, options["combo"],
    Inductor names every kernel so, a combo of the query's, key's and
    value's products or a product alone), over at least 1,024 contiguous
    elements (the weight's rows), tiled by XBLOCK and R0_BLOCK only, and
    not in Inductor's deterministic mode (where a reduction's config is
    part of its numerics and coordinate descent leaves it alone)."""
    meta = getattr(tuner, "inductor_meta", None) or {}
    hints = dict(getattr(tuner, "size_hints", None) or {})
    kind = str(getattr(tuner, "heuristic_type", ""))
    name = str(meta.get("kernel_name", ""))
    return (kind.endswith("REDUCTION") and "PERSISTENT" not in kind
            and not getattr(tuner, "deterministic_mode", False)
            and ("mm" in name.split("_") or re.fullmatch(r"triton_red_fused_\d+", name) is not None)
            and str(meta.get("reduction_hint", "")).endswith("INNER")
            and set(hints) == {"x", "r0_"} and hints["r0_"] >= 1024
            and set(launcher.config.kwargs) == {"XBLOCK", "R0_BLOCK"})


# The contexts active now, newest last, and Inductor's own tuning while any
# is: the method is replaced once, by the first to enter, and put back by
# the last to leave, in whichever order they leave; the newest one's config
# applies. (It is process-wide: a kernel another thread tunes meanwhile
# gets the config too.)
_ACTIVE = []
_ACTIVE_LOCK = threading.Lock()
_INDUCTOR_TUNING = [None]


def _tuning(tuner, launcher, *args, **kwargs):
    """CachingAutotuner.coordinate_descent_tuning while a
    narrow_product_configs is active."""
    with _ACTIVE_LOCK:
        ctx, orig = (_ACTIVE[-1] if _ACTIVE else None), _INDUCTOR_TUNING[0]
    if ctx is None or not _narrow_product(tuner, launcher):
        return orig(tuner, launcher, *args, **kwargs)
    c = ctx.config
    blocks = {"XBLOCK": min(c["XBLOCK"], tuner.size_hints["x"]),
              "R0_BLOCK": min(c["R0_BLOCK"], tuner.size_hints["r0_"])}
    chosen = _launcher(tuner, blocks, c["num_warps"], c["num_stages"])
    if chosen is None:  # out of resources, a compiler error, spilled registers: Inductor's tuning instead
        ctx.fallbacks += 1
        return orig(tuner, launcher, *args, **kwargs)
    ctx.chosen[tuner.inductor_meta.get("kernel_name")] = blocks
    return chosen


def _launcher(tuner, kwargs, warps, stages=1):
    """A launcher of the kernel with that config, compiled the way
    coordinate descent compiles its own and marked as its choice (so that
    Inductor tunes it no more); None where it does not compile or spills
    registers (coordinate descent's benchmark counts such a config
    infinitely slow)."""
    import torch._inductor.runtime.triton_heuristics as th
    cfg = th.Config(dict(kwargs), num_warps=warps, num_stages=stages)
    if getattr(tuner.fn, "fn", True) is None:  # compiled in a worker: load it here, as coordinate descent does
        tuner.fn = tuner._reload_kernel().fn
    try:
        with tuner.lock:
            ln = tuner._precompile_config(cfg).make_launcher()
    except Exception:  # noqa: BLE001 - out of resources, a compiler error: not a candidate
        return None
    if (getattr(ln, "n_spills", 0) or 0) > (tuner.inductor_meta or {}).get("spill_threshold", 16):
        return None
    cfg.found_by_coordesc = True
    return ln


class narrow_product_configs:
    """A context manager: while it is active, Inductor's coordinate descent
    gives each one-row product (_narrow_product) one config
    (NARROW_PRODUCT_CONFIG, or the dict given: XBLOCK, R0_BLOCK, num_warps,
    num_stages) instead of tuning it; every other kernel is tuned as
    before, and so is a product whose config does not compile or spills
    registers (.fallbacks counts them). The config is compiled the way
    coordinate descent compiles its own (a compile result of the kernel's
    autotuner), so a capture records it as any other. .chosen maps each
    product's kernel name to its block sizes (clamped to the kernel's
    sizes). Contexts nest, the newest one's config applying; one context
    is entered once at a time."""

    def __init__(self, config=None):
        self.config = dict(NARROW_PRODUCT_CONFIG if config is None else config)
        if set(self.config) != {"XBLOCK", "R0_BLOCK", "num_warps", "num_stages"}:
            raise ValueError("a narrow product's config names XBLOCK, R0_BLOCK, num_warps and num_stages, not %s"
                             % sorted(self.config))
        limits = {"XBLOCK": 1024, "R0_BLOCK": 16384, "num_warps": 32, "num_stages": 8}
        for k, v in sorted(self.config.items()):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1 or v > limits[k] or \
                    (k != "num_stages" and v & (v - 1)):
                raise ValueError("%s is %r: an integer from 1 to %d%s" % (
                    k, v, limits[k], "" if k == "num_stages" else ", a power of two"))
        if self.config["XBLOCK"] * self.config["R0_BLOCK"] > 16384:
            raise ValueError("XBLOCK x R0_BLOCK is %d: at most 16384 (a program's tile)"
                             % (self.config["XBLOCK"] * self.config["R0_BLOCK"]))
        self.chosen = {}
        self.fallbacks = 0

    def __enter__(self):
        import torch._inductor.runtime.triton_heuristics as th
        with _ACTIVE_LOCK:
            if self in _ACTIVE:
                raise RuntimeError("this narrow_product_configs is active already")
            if not _ACTIVE:
                _INDUCTOR_TUNING[0] = th.CachingAutotuner.coordinate_descent_tuning
                th.CachingAutotuner.coordinate_descent_tuning = _tuning
            _ACTIVE.append(self)
        return self

    def __exit__(self, *exc):
        import torch._inductor.runtime.triton_heuristics as th
        with _ACTIVE_LOCK:
            if self in _ACTIVE:
                _ACTIVE.remove(self)
                if not _ACTIVE:
                    th.CachingAutotuner.coordinate_descent_tuning = _INDUCTOR_TUNING[0]
        return False


# ------------------------------------------------------ in-program tuning
# Inductor benchmarks each kernel alone (and coordinate descent walks from
# one config to its neighbours by those benchmarks). In a decode step that
# misjudges kernels whose cost is what the program around them leaves: a
# product whose prologue (SiLU times up) every program recomputes, the
# softmax of a 256-position attention (coordinate descent gave it 16-element
# steps, 6.4 us a launch, where 128-element steps and 16 rows take 2.0), the
# LM head (134 us against 118). tune_in_program times every candidate
# config of the program's costly reductions in the program itself: each
# round gives every such kernel its next candidate and runs the program
# under the profiler, which times each kernel where it runs; a kernel keeps
# the candidate that took least, where it took clearly less than its own,
# and the choices stand only if the program's kernels, all of them, then
# take less than before (a kernel's choice may slow the next one).
# The candidates, clamped to a kernel's sizes: (XBLOCK, R0_BLOCK, warps) of
# a looped reduction, (XBLOCK, warps) of a persistent one.
PROGRAM_TUNING_CONFIGS = {
    "reduction": ((1, 1024, 4), (2, 2048, 8), (4, 1024, 8), (8, 1024, 8), (16, 512, 8), (16, 1024, 8),
                  # (2.14) longer steps and 16 warps: more bytes in flight a program, for the down product
                  # (8,192-element rows, 74% of the bandwidth with (4, 1024, 8))
                  (1, 4096, 8), (2, 4096, 16), (4, 2048, 16), (8, 2048, 16)),
    "persistent": ((1, 4), (4, 4), (16, 4), (64, 8)),
}


class record_tuners:
    """A context manager: Inductor's kernels (CachingAutotuner objects)
    that run while it is active, by kernel name, in the order first run
    (.tuners); a name that two kernels share (two compiled graphs) is left
    out (.shared), as the profiler could not tell them apart."""

    def __init__(self):
        self.tuners, self.shared = {}, set()

    def __enter__(self):
        import torch._inductor.runtime.triton_heuristics as th
        self._orig = th.CachingAutotuner.run
        rec, orig = self, self._orig

        def run(tuner, *args, **kwargs):
            name = (getattr(tuner, "inductor_meta", None) or {}).get("kernel_name")
            if name and rec.tuners.setdefault(name, tuner) is not tuner:
                rec.shared.add(name)
            return orig(tuner, *args, **kwargs)
        th.CachingAutotuner.run = run
        return self

    def __exit__(self, *exc):
        import torch._inductor.runtime.triton_heuristics as th
        th.CachingAutotuner.run = self._orig
        for name in self.shared:
            self.tuners.pop(name, None)
        return False


def kernel_times(torch, run, steps=5):
    """The GPU operations of run() run steps times under PyTorch's
    profiler: {name: [microseconds per run, launches per run]}."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run()
        torch.cuda.synchronize()
    per = {}
    for e in prof.events():
        if str(getattr(e, "device_type", "")).split(".")[-1] == "CUDA" and not getattr(e, "is_user_annotation", False):
            d = per.setdefault(e.name, [0.0, 0.0])
            d[0] += (e.time_range.end - e.time_range.start) / float(steps)
            d[1] += 1.0 / steps
    return per


def _kernel_times(torch, run, steps):
    """Microseconds per run of each GPU operation, by name."""
    return {k: v[0] for k, v in kernel_times(torch, run, steps).items()}


def _program_candidates(tuner, table):
    """A kernel's candidate configs ({block sizes}, warps), clamped to its
    sizes, its own left out; [] for a kernel this does not tune (a
    template, a pointwise kernel, deterministic mode)."""
    if getattr(tuner, "deterministic_mode", False) or len(getattr(tuner, "launchers", None) or []) != 1:
        return []
    cur = tuner.launchers[0].config
    kw, hints = dict(cur.kwargs), dict(getattr(tuner, "size_hints", None) or {})
    kind = str(getattr(tuner, "heuristic_type", ""))
    if not kind.endswith("REDUCTION"):
        return []
    if "PERSISTENT" not in kind and set(kw) == {"XBLOCK", "R0_BLOCK"} and set(hints) == {"x", "r0_"}:
        out = [({"XBLOCK": min(x, hints["x"]), "R0_BLOCK": min(r, hints["r0_"])}, w)
               for x, r, w in table["reduction"]]
    elif "PERSISTENT" in kind and set(kw) == {"XBLOCK"} and set(hints) == {"x", "r0_"}:
        out = [({"XBLOCK": min(x, hints["x"])}, w) for x, w in table["persistent"]
               if min(x, hints["x"]) * hints["r0_"] <= 16384]
    else:
        return []
    seen, keep = {(tuple(sorted(kw.items())), cur.num_warps)}, []
    for c, w in out:
        k = (tuple(sorted(c.items())), w)
        if k not in seen:
            seen.add(k)
            keep.append((c, w))
    return keep


def tune_in_program(torch, run, tuners, share=0.01, gain=0.03, steps=3, table=None, most=24, keep=()):
    """Tunes the reductions of a program in the program (see
    PROGRAM_TUNING_CONFIGS): run() runs it once (its state put back first),
    tuners as record_tuners found them; the kernels named in keep are left
    alone. Only kernels with candidates that take at least share of the
    program's Inductor-kernel time are tuned (the `most` costliest), and
    one keeps a candidate only where it took at least `gain` less and 0.25
    us less a run than its own config; if the program's Inductor kernels
    together do not then take less than before, every kernel goes back.
    The launchers are Inductor's (CachingAutotuner.launchers), so the
    capture that follows records what was chosen. Returns {kernel name:
    {"config": block sizes and num_warps, "us": [before, after]}} for the
    kernels changed; raises where the profiler saw none of the kernels."""
    table = PROGRAM_TUNING_CONFIGS if table is None else table
    base = _kernel_times(torch, run, steps)
    total = sum(base.get(n, 0.0) for n in tuners)
    if not total:
        raise RuntimeError("the profiler timed none of the program's %d Inductor kernels" % len(tuners))
    cands = {n: _program_candidates(tuners[n], table) for n in tuners
             if n not in keep and base.get(n, 0.0) >= share * total}
    names = sorted((n for n in cands if cands[n]), key=lambda n: -base[n])[:most]
    own = {n: tuners[n].launchers for n in names}
    built = {}
    times = {n: [] for n in names}

    def inductor_time(got):
        return sum(got.get(n, 0.0) for n in tuners)
    try:
        for i in range(max([len(cands[n]) for n in names] or [0])):
            live = []
            for n in names:
                if i < len(cands[n]):
                    if (n, i) not in built:
                        built[(n, i)] = _launcher(tuners[n], *cands[n][i])
                    if built[(n, i)] is not None:
                        tuners[n].launchers = [built[(n, i)]]
                        live.append(n)
            if not live:
                continue
            got = _kernel_times(torch, run, steps)
            for n in live:
                if n in got:
                    times[n].append((got[n], i))
                tuners[n].launchers = own[n]
        again = _kernel_times(torch, run, steps)
        before = {n: min(base.get(n, 0.0), again.get(n, base.get(n, 0.0))) for n in names}
        chosen = {}
        for n in names:
            if times[n]:
                t, i = min(times[n])
                if t <= before[n] * (1.0 - gain) and before[n] - t >= 0.25:
                    chosen[n] = i
        for n, i in chosen.items():
            tuners[n].launchers = [built[(n, i)]]
        after = _kernel_times(torch, run, steps) if chosen else {}
        if chosen and (any(n not in after for n in chosen) or inductor_time(after) >= inductor_time(again)):
            for n in chosen:
                tuners[n].launchers = own[n]
            chosen = {}
    except BaseException:
        for n in names:
            tuners[n].launchers = own[n]
        raise
    out = {}
    for n, i in chosen.items():
        c, w = cands[n][i]
        out[n] = {"config": dict(c, num_warps=w), "us": [round(before[n], 2), round(after[n], 2)]}
    return out


# ------------------------------------------------------------ decode attention
# transformers' eager attention with one query per head (a decode step),
# found in the graph that Dynamo hands the backend (torch's functions and
# methods, not aten's: the replacement must be traced by AOTAutograd, which
# makes Inductor see its Triton kernel) and replaced by
# triton_bundle::decode_attention (attention.py).

# Positions a decode attention replaced has at most: the kernel holds them
# all in one block (attention.py; at 2,048 its passes over blocks were 3.5x
# slower than Inductor's kernels); and the elements of that block (the
# positions rounded up to a power of two, times the head's size) at most,
# its keys and its values in registers: 512 positions of 64 (measured), 256
# of 128 and 128 of 256 (not timed).
DECODE_ATTENTION_MOST = 512
DECODE_ATTENTION_BLOCK = 32768


class Attention:
    """One eager attention found by find_decode_attention: the final
    matmul node to replace, the op's arguments (q, k, v, mask or None,
    scale, group: query heads per key/value head, and cos and sin or None:
    the rotary embedding of q, which the op applies) and the nodes it
    leaves unused, consumers first."""

    def __init__(self, final, q, k, v, mask, scale, group, nodes, cos=None, sin=None):
        self.final, self.q, self.k, self.v, self.mask = final, q, k, v, mask
        self.scale, self.group, self.nodes = scale, group, nodes
        self.cos, self.sin = cos, sin


def attention_targets(torch):
    """The functions and methods find_decode_attention knows, by role."""
    import operator
    f = torch.nn.functional
    return {"fn": {"matmul": {torch.matmul, operator.matmul}, "softmax": {f.softmax, torch.softmax},
                   "dropout": {f.dropout, torch.dropout}, "mul": {operator.mul, torch.mul},
                   "add": {operator.add, torch.add}, "getitem": {operator.getitem},
                   "transpose": {torch.transpose}, "reshape": {torch.reshape}, "cat": {torch.cat},
                   "neg": {operator.neg, torch.neg}, "unsqueeze": {torch.unsqueeze}},
            "method": {"matmul": {"matmul", "__matmul__"}, "softmax": {"softmax"}, "mul": {"mul", "__mul__"},
                       "add": {"add", "__add__"}, "transpose": {"transpose"}, "reshape": {"reshape", "view"},
                       "to": {"to"}, "expand": {"expand"}, "neg": {"neg", "__neg__"},
                       "unsqueeze": {"unsqueeze"}},
            "half": {torch.float16, torch.bfloat16}, "float32": torch.float32}


def _is(node, t, role):
    op = getattr(node, "op", None)
    if op == "call_function":
        return node.target in t["fn"].get(role, ())
    return op == "call_method" and node.target in t["method"].get(role, ())


def _one_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _val(node):
    meta = getattr(node, "meta", None)
    return meta.get("example_value") if isinstance(meta, dict) else None


def _static_shape(node, rank):
    v = _val(node)
    shape = getattr(v, "shape", None)
    if shape is None or len(shape) != rank or not all(type(s) is int for s in shape):
        return None
    return tuple(shape)


def _last_stride_one(node):
    # the kernel steps through a head's elements one by one (where the
    # example value says its strides)
    stride = getattr(_val(node), "stride", None)
    return not callable(stride) or stride()[-1] == 1


def _unrepeat(node, t):
    """(source, n, nodes): repeat_kv's x[:, :, None].expand(B, Hkv, n, S,
    D).reshape(B, Hkv * n, S, D) undone (its nodes, consumers first), or
    (node, 1, [])."""
    e = node.args[0] if _is(node, t, "reshape") and node.args else None
    g = e.args[0] if e is not None and _is(e, t, "expand") and e.args else None
    if g is None or not _is(g, t, "getitem") or len(g.args) != 2 or not isinstance(g.args[1], tuple):
        return node, 1, []
    idx, src = g.args[1], g.args[0]
    full = slice(None)
    if len(idx) < 3 or idx[0] != full or idx[1] != full or idx[2] is not None or \
            any(i != full and i is not Ellipsis for i in idx[3:]):
        return node, 1, []
    s, ex = _static_shape(src, 4), _static_shape(e, 5)
    if s is None or ex is None or ex[:2] != s[:2] or ex[3:] != s[2:] or \
            _static_shape(node, 4) != (s[0], s[1] * ex[2], s[2], s[3]):
        return node, 1, []
    return src, ex[2], [node, e, g]


def _half_of(node, t, d):
    """(x, 0) where node is x[..., :d / 2] and (x, 1) where it is
    x[..., d / 2:] (or x[:, :, :, ...]), else None."""
    if not _is(node, t, "getitem") or len(node.args) != 2 or node.kwargs or not isinstance(node.args[1], tuple):
        return None
    idx, full = node.args[1], slice(None)
    if not idx or not isinstance(idx[-1], slice) or idx[:-1] not in ((Ellipsis,), (full, full, full)):
        return None
    sl, h = idx[-1], d // 2
    if sl.step not in (None, 1):
        return None
    if sl.start in (None, 0) and sl.stop == h:
        return node.args[0], 0
    if sl.start == h and sl.stop in (None, d):
        return node.args[0], 1
    return None


def _rotated(node, t, d):
    """x where node is transformers' rotate_half(x), cat((-x[..., d / 2:],
    x[..., :d / 2]), dim=-1), each of its nodes used once; else None."""
    if not _is(node, t, "cat") or _one_user(node) is None or not node.args or \
            not isinstance(node.args[0], (tuple, list)) or len(node.args[0]) != 2 or \
            node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0) not in (-1, 3) or \
            len(node.args) > 2 or set(node.kwargs) - {"dim"}:
        return None
    neg, lo = node.args[0]
    if not _is(neg, t, "neg") or len(neg.args) != 1 or neg.kwargs or _one_user(neg) is not node or \
            _one_user(lo) is not node:
        return None
    a, b = _half_of(neg.args[0], t, d), _half_of(lo, t, d)
    if a is None or b is None or a[1] != 1 or b[1] != 0 or a[0] is not b[0] or _one_user(neg.args[0]) is not neg:
        return None
    return a[0]


def _rope(node, t):
    """(x, cos, sin, nodes) where node is transformers' rotary embedding of
    a query, x * cos + rotate_half(x) * sin (either order of each product
    and of the sum), cos and sin [B or 1, 1, 1, D] of x's dtype with a last
    stride of 1, and its nodes (used once each; cos and sin left) consumers
    first; else None."""
    if not _is(node, t, "add") or len(node.args) != 2 or node.kwargs:
        return None
    shape, dt = _static_shape(node, 4), getattr(_val(node), "dtype", None)
    if shape is None:
        return None
    d = shape[3]
    for p1, p2 in (node.args, node.args[::-1]):
        if not all(_is(p, t, "mul") and len(p.args) == 2 and not p.kwargs and _one_user(p) is node
                   for p in (p1, p2)):
            return None
        for x, cos in (p1.args, p1.args[::-1]):
            for r, sin in (p2.args, p2.args[::-1]):
                if _rotated(r, t, d) is not x:
                    continue
                if _static_shape(x, 4) != shape or getattr(_val(x), "dtype", None) is not dt or \
                        not _last_stride_one(x):
                    return None
                for c in (cos, sin):
                    cs = _static_shape(c, 4)
                    if cs is None or cs[0] not in (1, shape[0]) or cs[1:] != (1, 1, d) or \
                            getattr(_val(c), "dtype", None) is not dt or not _last_stride_one(c):
                        return None
                if any(getattr(_val(n), "dtype", None) is not dt for n in (p1, p2, r)):
                    return None
                neg = r.args[0][0]
                return x, _squeezed(cos, t), _squeezed(sin, t), [node, p1, p2, r, neg, neg.args[0], r.args[0][1]]
    return None


def _squeezed(node, t):
    """c where node is c.unsqueeze(1) of c [B or 1, 1, D] (transformers'
    apply_rotary_pos_emb: each layer unsqueezes the one cos and sin of the
    step, and Inductor would copy each layer's view for the op), else node."""
    c = node.args[0] if _is(node, t, "unsqueeze") and node.args else None
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None) if c is not None else None
    shape = _static_shape(node, 4)
    if c is None or dim != 1 or _static_shape(c, 3) != (shape[0], 1, shape[3]) or \
            getattr(_val(c), "dtype", None) is not getattr(_val(node), "dtype", None) or not _last_stride_one(c):
        return node
    return c


def _to_dtype(node, t):
    if not _is(node, t, "to"):
        return None
    if len(node.args) == 2 and not node.kwargs:
        return node.args[1]
    if len(node.args) == 1 and set(node.kwargs) == {"dtype"}:
        return node.kwargs["dtype"]
    return None


def find_decode_attention(nodes, t):
    """[Attention]: each eager attention among nodes (an FX graph's, t from
    attention_targets) of the form matmul(q, k.transpose(2, 3)) * scale
    [+ mask] -> softmax(dim=-1[, dtype=float32]) [-> .to(q's dtype)]
    [-> dropout(p=0 or training=False)] -> matmul(., v), with q of static
    shape [B, H, 1, D] in float16 or bfloat16, D a power of two from 16 to
    256, k and v [B, H, S, D] (or repeat_kv's expansion of [B, H / n, S, D]),
    S from 1 to DECODE_ATTENTION_MOST (and S rounded up to a power of two
    times D at most DECODE_ATTENTION_BLOCK), a mask [B or 1, H or 1, 1, S]
    of q's dtype, a float scale, the scores, probabilities and output of
    q's dtype, q, k and v with a last stride of 1, on a CUDA device, none
    of them requiring grad (the op has no backward), and every node
    between used once. Where q is transformers' rotary embedding of a
    query x (_rope: x * cos + rotate_half(x) * sin, used only by the
    scores), the Attention's q is x, with its cos and sin."""
    return [a for a in (_attention_or_none(n, t) for n in nodes) if a is not None]


def _attention_or_none(node, t):
    # a graph this does not understand is left as it is, never an error
    try:
        return _match_attention(node, t)
    except Exception:  # noqa: BLE001
        return None


def _match_attention(sm, t):
    if not _is(sm, t, "softmax") or not sm.args:
        return None
    dim = sm.kwargs.get("dim", sm.args[1] if len(sm.args) > 1 else None)
    if dim not in (-1, 3) or len(sm.args) > 2 or set(sm.kwargs) - {"dim", "dtype"}:
        return None
    chain = [sm]
    x, mask = sm.args[0], None
    if _is(x, t, "add") and len(x.args) == 2 and not x.kwargs and _one_user(x) is sm:
        a, b = x.args
        x, mask = (a, b) if _is(a, t, "mul") else (b, a)
        chain.append(sm.args[0])
    if not _is(x, t, "mul") or len(x.args) != 2 or x.kwargs or _one_user(x) is None:
        return None
    a, b = x.args
    sc, scale = (a, b) if isinstance(b, float) else (b, a)
    if not isinstance(scale, float) or not _is(sc, t, "matmul") or _one_user(sc) is not x or len(sc.args) != 2 or \
            sc.kwargs:
        return None
    chain += [x, sc]
    q, kt = sc.args
    if not _is(kt, t, "transpose") or len(kt.args) != 3 or kt.kwargs or \
            {d % 4 for d in kt.args[1:] if isinstance(d, int)} != {2, 3}:
        return None
    qs, ks = _static_shape(q, 4), _static_shape(kt.args[0], 4)
    qv = _val(q)
    if qs is None or ks is None or qs[2] != 1 or qv.dtype not in t["half"] or qs[3] not in (16, 32, 64, 128, 256):
        return None
    bq, h, _, d = qs
    if ks[:2] != (bq, h) or ks[3] != d or not 1 <= ks[2] <= DECODE_ATTENTION_MOST or \
            (1 << (ks[2] - 1).bit_length()) * d > DECODE_ATTENTION_BLOCK:
        return None
    # forward from the softmax: back to q's dtype, a dropout that drops nothing, the product with v
    p = _one_user(sm)
    if sm.kwargs.get("dtype") is not None:
        if sm.kwargs["dtype"] is not t["float32"] or p is None or _to_dtype(p, t) is not qv.dtype:
            return None
        chain.insert(0, p)
        p = _one_user(p)
    elif _val(sm) is None or _val(sm).dtype is not qv.dtype:
        return None
    if p is not None and _is(p, t, "dropout"):
        rate = p.kwargs.get("p", p.args[1] if len(p.args) > 1 else 0.5)
        training = p.kwargs.get("training", p.args[2] if len(p.args) > 2 else True)
        if not p.args or p.args[0] is not chain[0] or (rate != 0 and training is not False):
            return None
        chain.insert(0, p)
        p = _one_user(p)
    if p is None or not _is(p, t, "matmul") or len(p.args) != 2 or p.kwargs or p.args[0] is not chain[0]:
        return None
    final, vrep = p, p.args[1]
    if _static_shape(vrep, 4) != ks or _val(vrep).dtype is not qv.dtype or _val(kt.args[0]).dtype is not qv.dtype:
        return None
    if mask is not None:
        ms, mv = _static_shape(mask, 4), _val(mask)
        if ms is None or mv.dtype is not qv.dtype or ms[0] not in (1, bq) or ms[1] not in (1, h) or \
                ms[2] != 1 or ms[3] != ks[2]:
            return None
    k, nk, knodes = _unrepeat(kt.args[0], t)
    v, nv, vnodes = _unrepeat(vrep, t)
    if nk != nv or nk < 1 or h % nk or not all(_last_stride_one(n) for n in (q, k, v)):
        return None
    if any(getattr(_val(n), "dtype", None) is not qv.dtype for n in (sc, x, sm.args[0], final)) or \
            any(getattr(_val(n), "requires_grad", False) for n in (q, k, v, mask) if n is not None) or \
            getattr(getattr(qv, "device", None), "type", "cuda") != "cuda":
        return None
    nodes = [final] + chain + [kt] + knodes + vnodes
    rope = _rope(q, t) if _one_user(q) is sc else None
    if rope is not None:
        return Attention(final, rope[0], k, v, mask, scale, nk, nodes + rope[3], cos=rope[1], sin=rope[2])
    return Attention(final, q, k, v, mask, scale, nk, nodes)


def attention_pass(torch, gm):
    """Replace each eager decode attention in gm (a Dynamo graph) by
    triton_bundle::decode_attention; the number replaced."""
    found = find_decode_attention(list(gm.graph.nodes), attention_targets(torch))
    if not found or not hasattr(torch.library, "triton_op"):  # PyTorch before 2.6 has no triton_op
        return 0
    # (a version of PyTorch that keeps only the stride order of a Triton
    # op's inputs could hand the kernel other strides than these graph's;
    # 2.11 keeps them exactly)
    try:
        import triton  # noqa: F401 - the kernel's compiler
    except ImportError:
        return 0
    from .attention import decode_attention_op
    op = decode_attention_op(torch, DECODE_ATTENTION_MOST, DECODE_ATTENTION_BLOCK)
    erased = set()
    for a in reversed(found):  # the last first: an attention's output may be a later one's input
        with gm.graph.inserting_before(a.final):
            new = gm.graph.call_function(op, (a.q, a.k, a.v, a.mask, a.scale, a.group, a.cos, a.sin))
        new.meta.update(a.final.meta)
        a.final.replace_all_uses_with(new)
        for n in a.nodes:
            if not n.users and n not in erased:  # two attentions may share a repeat_kv
                gm.graph.erase_node(n)
                erased.add(n)
    gm.graph.lint()
    gm.recompile()
    return len(found)


# ------------------------------------------------------------ the activation
# (2.15) Inductor makes a one-row product (M = 1) a reduction and inlines
# the pointwise operations that make its input into each of its programs:
# the down product of a decode layer, SiLU(gate) * up times its weight,
# computed SiLU(gate) * up, 8,192 exponentials and divisions, again in each
# of its programs (512 to 1,024 in the 1B step's tilings, each a few of its
# 2,048 rows), and read the gate and up products (float32) from the L2
# cache in each. activation_pass makes Inductor store the activation once:
# it passes it through prims.inductor_force_stride_order (its own strides:
# a value unchanged), whose lowering asks for a buffer of those strides
# (in the activation's dtype: rounded as eager rounds it); in the 1B step
# Inductor fused that buffer into the kernel of the gate and up products,
# and the down product read it and nothing more. transformers' LlamaMLP
# (and every MLP that writes down(act(gate(x)) * up(x)) with SiLU) is this
# pattern.
def activation_targets(torch):
    """The functions activation_pass knows, by role: attention_targets'
    and the product and SiLU."""
    t = attention_targets(torch)
    f = torch.nn.functional
    t["fn"].update(linear={torch._C._nn.linear, f.linear}, silu={f.silu, torch._C._nn.silu})
    return t


def _narrow_linear_input(node, t):
    """x where node is x w^T (a linear, any bias) of one row x of static
    shape, float16 or bfloat16, else None."""
    if not _is(node, t, "linear") or not 2 <= len(node.args) <= 3 or set(node.kwargs) - {"bias"}:
        return None
    x = node.args[0]
    v = _val(x)
    shape = getattr(v, "shape", None)
    if shape is None or not len(shape) or not all(type(s) is int for s in shape) or v.dtype not in t["half"]:
        return None
    rows = 1
    for s in shape[:-1]:
        rows *= s
    return x if rows == 1 else None


def find_activations(nodes, t):
    """The mul nodes, in order, that are SiLU(a) * b (either order, no
    keyword arguments; the SiLU not in place, used only by the mul), used
    only by a one-row product (_narrow_linear_input: a linear of an input
    of static shape and one row, float16 or bfloat16) as its input, with a
    and b of the mul's static shape and all three of one dtype, and strides
    that are numbers."""
    found = []
    for n in nodes:
        try:
            if not _is(n, t, "mul") or len(n.args) != 2 or n.kwargs:
                continue
            user = _one_user(n)
            if user is None or _narrow_linear_input(user, t) is not n:
                continue
            v = _val(n)
            shape = _static_shape(n, len(v.shape))
            if shape is None or not all(type(d) is int for d in v.stride()):
                continue
            for s, b in (n.args, n.args[::-1]):
                if _is(s, t, "silu") and 1 <= len(s.args) <= 2 and not set(s.kwargs) - {"inplace"} and \
                        not s.kwargs.get("inplace", s.args[1] if len(s.args) > 1 else False) and \
                        _one_user(s) is n and _static_shape(s.args[0], len(shape)) == shape == \
                        _static_shape(b, len(shape)) and _val(s.args[0]).dtype is _val(b).dtype is v.dtype:
                    found.append(n)
                    break
        except Exception:  # noqa: BLE001 - a graph this does not understand is left as it is
            continue
    return found


def activation_pass(torch, gm):
    """Pass each activation find_activations finds in gm (a Dynamo graph)
    through prims.inductor_force_stride_order with its own strides; the
    number passed (0 where PyTorch lacks the op, or where grad is on: the
    op has no backward)."""
    if torch.is_grad_enabled():
        return 0
    try:
        import torch._inductor.inductor_prims  # noqa: F401 - defines the op
    except ImportError:
        return 0
    op = getattr(getattr(getattr(torch.ops, "prims", None), "inductor_force_stride_order", None), "default", None)
    if op is None:
        return 0
    found = find_activations(list(gm.graph.nodes), activation_targets(torch))
    for n in found:
        user = _one_user(n)
        with gm.graph.inserting_after(n):
            new = gm.graph.call_function(op, (n, list(_val(n).stride())))
        new.meta.update(n.meta)
        user.replace_input_with(n, new)
    if found:
        gm.graph.lint()
        gm.recompile()
    return len(found)
