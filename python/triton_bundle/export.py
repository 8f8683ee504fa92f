"""The exporters, which import torch or triton only when called:
export_triton (the compiled kernels of @triton.jit functions) and
TorchCapture (every Triton kernel a torch.compile'd callable launches)."""

import ast
import os

from .collect import _code, _int_params, _metadata_config, collect_kernel, file_stem
from .format import Bundle, CallInfo, Record
from .spec import BundleError
from .grid import grid_rule


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
    passed, not copied). before_launch, when given, is called as
    before_launch(tuner, args) just before each launch that is recorded
    (not before autotuning's benchmark runs), while the arguments still
    hold what the kernel will read."""

    def __init__(self, keep_args=False, before_launch=None):
        self.keep_args = keep_args
        self.before_launch = before_launch
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
            if not benchmark_run and cap.before_launch is not None:
                cap.before_launch(tuner, args)
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
        d = os.path.join(base, sub) if base else ""
        if d and os.path.isdir(d):
            stem = file_stem(os.listdir(d), k.name)  # Triton cuts long names short in file names
            if os.path.isfile(os.path.join(d, stem + ".cubin")):
                return None, {i: None for i in k.full_constexprs}, d, k.name
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
