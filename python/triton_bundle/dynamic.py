"""Shapes that vary (format 2.6): export_model's dynamic_shapes.

A program whose dimensions vary holds symbols (a batch size, a sequence
length), each with its range, and for every field that follows them (an
input's or output's size or stride, a buffer's size, a launch's scalar
arguments and grid, a pointer's byte offset, a memset's or copy's count) an
expression over them in the grid language (FORMAT.md section 4, with the
SYM operand). The fields themselves hold the program at every symbol's
maximum, where the workspace is planned.

Where the expressions come from
-------------------------------
Not from the captured values: from Inductor's generated wrapper, the
Python module whose `call` launches the kernels. Its code is the symbolic
program, printed:

    buf5 = empty_strided_cuda((s23*s27, 128), (128, 1), torch.float32)
    triton_tem_fused_addmm_t_view_1.run(buf4, arg13_1, buf5, s23, s27,
                                        2*((31 + s23*s27) // 32), 1, 1, stream=stream0)
    buf8 = reinterpret_tensor(buf5, (s23, 4, 32, s27), (128*s27, 32*s27, s27, 1), 0)

Each captured operation knows the line of `call` that issued it (the
frame's line, found on the stack when the launch or the aten operation
runs), and each intermediate storage the line that allocated it (the
module's empty_strided_cuda is wrapped during the captures). A scalar
argument's expression is that argument's text; a pointer's byte offset is
the reinterpret_tensor offsets down to its allocation (or graph input)
times the element's bytes; a buffer's size is its allocation's extent; a
memset's count its tensor's elements; an output's sizes and strides the
returned tensor's; a grid the config's grid rule with the arguments'
expressions in place of ARG (and of EXTRA: the fixed grids of templates,
which the wrapper passes as the last arguments). Names resolve through the
assignments before the line (`ps0 = 32*s27`, `..._xnumel = 128*s23*s27`,
`buf4 = buf0`); Inductor's symbols (`s23 = arg0_1`, a SymInt input) are
matched to the declared dimensions by their values in every capture, which
are chosen so that no two dimensions agree in all of them.

Then every expression is checked: the model is captured again at each
symbol's minimum and at two sizes inside the ranges (besides the maximum),
and each capture's program must be the program the expressions give at
its sizes, field by field; a mismatch refuses the export, naming the step
and the operand. Dynamo recompiling at another size (a guard Inductor
added) is refused too, by the capture's own check."""

import ast
import collections
import random
import re
import sys

from .format import Expr, Symbol, specialize
from .spec import (ADD, ARG, BUFFER, CONST, COPY, EXTRA, FIELD_BUFFER_SIZE, FIELD_COUNT, FIELD_GRID,
                   FIELD_INPUT_SIZE, FIELD_INPUT_STRIDE, FIELD_OPERAND, FIELD_OUTPUT_SIZE, FIELD_OUTPUT_STRIDE,
                   INT_CODES, LAUNCH, LITERAL, MAX_EXPR_OPS, MEMSET, MUL, OUTPUT, PARAM, SUB, SYM, SYMBOL_MAX,
                   BundleError)
from .grid import GridCompiler, _fold_ops, _grid_arg, eval_expr

_ALLOCATORS = ("empty_strided_cuda", "empty_strided", "empty_strided_xpu")
_SYMBOL = re.compile(r"^s\d+$")


# ------------------------------------------------------------ the spec
def _dim(d, what):
    """(name, min, max) of a torch.export.Dim (a class with __name__, min
    and max), or of a (name, min, max) tuple."""
    if isinstance(d, tuple) and len(d) == 3:
        name, lo, hi = d
    else:
        name, lo, hi = getattr(d, "__name__", None), getattr(d, "min", None), getattr(d, "max", None)
    if not isinstance(name, str) or not name or not isinstance(lo, int) or not isinstance(hi, int):
        raise BundleError("invalid_argument", "%s: %r is not a Dim (torch.export.Dim(name, min=, max=)) or a "
                          "(name, min, max) tuple" % (what, d))
    if lo < 2:
        raise BundleError("invalid_argument", "%s: Dim %r starts at %d; Inductor specializes sizes 0 and 1, so a "
                          "dynamic range starts at 2 (export size 1 as a program of its own)" % (what, name, lo))
    if hi < lo or hi > SYMBOL_MAX:
        raise BundleError("invalid_argument", "%s: Dim %r has the range %d..%d (at most 2^31 - 1)" % (what, name, lo,
                                                                                                      hi))
    return name, lo, hi


def parse_spec(spec, args, kwargs, inputs, param_names):
    """torch.export's dynamic_shapes on the flattened inputs: (symbols, dims)
    where dims maps an input's index to {dimension: symbol index}. spec: a
    dict by argument name (or position) or a list by position; each entry a
    dict {dimension: Dim}, a list with a Dim or None per dimension, or None.
    One Dim name is one symbol wherever it appears."""
    if isinstance(spec, dict):
        entries = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        entries = list(enumerate(spec))
    else:
        raise BundleError("invalid_argument", "dynamic_shapes is a dict or a list, not %s" % type(spec).__name__)
    symbols, dims, by_name = [], {}, {}
    for key, entry in entries:
        if entry is None:
            continue
        if isinstance(key, int):
            if not 0 <= key < len(args):
                raise BundleError("invalid_argument", "dynamic_shapes: argument %d of %d" % (key, len(args)))
            t = args[key]
        elif key in kwargs:
            t = kwargs[key]
        elif key in param_names and param_names.index(key) < len(args):
            t = args[param_names.index(key)]
        else:
            raise BundleError("invalid_argument", "dynamic_shapes names %r, which is no argument of the call (%s)" % (
                key, ", ".join(list(param_names[:len(args)]) + list(kwargs)) or "none"))
        where = [i for i, x in enumerate(inputs) if x is t]
        if not where:
            raise BundleError("invalid_argument", "dynamic_shapes: argument %r is not a tensor" % (key,))
        i = where[0]
        items = entry.items() if isinstance(entry, dict) else enumerate(entry)
        for d, dimobj in items:
            if dimobj is None:
                continue
            what = "dynamic_shapes[%r][%d]" % (key, d)
            if not 0 <= d < t.dim():
                raise BundleError("invalid_argument", "%s: the tensor has %d dimensions" % (what, t.dim()))
            name, lo, hi = _dim(dimobj, what)
            if name in by_name:
                k = by_name[name]
                if (symbols[k].min, symbols[k].max) != (lo, hi):
                    raise BundleError("invalid_argument", "%s: Dim %r with two ranges" % (what, name))
            else:
                k = by_name[name] = len(symbols)
                symbols.append(Symbol(name, lo, hi))
            dims.setdefault(i, {})[d] = k
    if not symbols:
        raise BundleError("invalid_argument", "dynamic_shapes declares no Dim")
    return symbols, dims


def capture_sizes(symbols, seed=0):
    """The sizes captured: every maximum (the program's own, where the plan
    is made), every minimum, and two tuples inside the ranges; chosen so
    that no two symbols take equal values in every tuple (Inductor's symbols
    are matched to them by their values)."""
    rng = random.Random(seed)
    tuples = [[y.max for y in symbols], [y.min for y in symbols]]
    for _ in range(2):
        tuples.append([rng.randint(y.min, y.max) for y in symbols])
    for _ in range(64):
        cols = [tuple(t[k] for t in tuples) for k in range(len(symbols))]
        if len(set(cols)) == len(cols):
            break
        for t in tuples[2:]:
            for k, y in enumerate(symbols):
                t[k] = rng.randint(y.min, y.max)
    out = []
    for t in tuples:
        if t not in out:
            out.append(t)
    return out


def at_sizes(torch, t, dims, values):
    """Input t with its dynamic dimensions at values: rows taken cyclically
    from the example (token ids stay ids, masks stay masks), contiguous."""
    for d, k in sorted(dims.items()):
        n = values[k]
        if t.shape[d] != n:
            idx = torch.arange(n, device=t.device) % t.shape[d]
            t = t.index_select(d, idx)
    return t.contiguous()


# ------------------------------------------------------- the wrapper code
class WrapperCode:
    """Inductor's generated module, parsed once: the statements of its
    `call` in order, the assignments to each name, the graph inputs (the
    names unpacked from args) and the return."""

    def __init__(self, filename):
        with open(filename, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename)
        fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "call"), None)
        if fn is None:
            raise BundleError("unsupported", "%s: Inductor's wrapper has no call function" % filename)
        self.filename, self.stmts, self.by_line = filename, [], {}
        self.assigns = collections.defaultdict(list)
        self.inputs, self.ret = set(), None
        self.branchy = set()  # names assigned under a condition or in a loop: which line ran is not known

        def flat(body, branch=False):
            for s in body:
                if isinstance(s, ast.With):  # (torch.cuda._DeviceGuard: no branch)
                    flat(s.body, branch)
                    continue
                if isinstance(s, (ast.If, ast.For, ast.While, ast.Try)):
                    for part in (s.body, getattr(s, "orelse", []) or [], getattr(s, "finalbody", []) or []):
                        flat(part, True)
                    for h in getattr(s, "handlers", []) or []:
                        flat(h.body, True)
                    continue
                if branch and isinstance(s, ast.Assign):
                    for tg in s.targets:
                        self.branchy.update(n.id for n in ast.walk(tg) if isinstance(n, ast.Name))
                self.stmts.append(s)
                for ln in range(s.lineno, (s.end_lineno or s.lineno) + 1):
                    self.by_line.setdefault(ln, s)
                if isinstance(s, ast.Assign) and len(s.targets) == 1:
                    tg = s.targets[0]
                    if isinstance(tg, ast.Name):
                        self.assigns[tg.id].append((s.lineno, s.value))
                    elif isinstance(tg, ast.Tuple) and isinstance(s.value, ast.Name) and s.value.id == "args":
                        self.inputs.update(e.id for e in tg.elts if isinstance(e, ast.Name))
                if isinstance(s, ast.Return):
                    self.ret = s
        flat(fn.body)

    def stmt(self, line):
        return self.by_line.get(line)

    def value_of(self, name, line):
        """(line, value) of the last assignment to name before line; a name
        a branch or a loop assigns is refused (which assignment ran, the
        code does not say)."""
        if name in self.branchy:
            raise ValueError("%s is assigned under a condition or in a loop of the wrapper" % name)
        best = None
        for ln, v in self.assigns.get(name, ()):
            if ln < line and (best is None or ln >= best[0]):
                best = (ln, v)
        return best


class _Compiler(GridCompiler):
    """An expression of the wrapper's code into the grid language: its
    symbols become SYM, its other names their assignments' expressions."""

    def __init__(self, wc, line, symmap):
        GridCompiler.__init__(self, lambda n: None)
        self.wc, self.line, self.symmap = wc, line, symmap

    def _name(self, name):
        if name in self.symmap:
            return [(SYM, self.symmap[name], 0)]
        if _SYMBOL.match(name):
            raise ValueError("Inductor's symbol %s is none of the declared dimensions" % name)
        v = self.wc.value_of(name, self.line)
        if v is None:
            raise ValueError("%s is neither a symbol nor assigned before line %d" % (name, self.line))
        return _Compiler(self.wc, v[0], self.symmap)._ops(v[1])


def _compile(wc, node, line, symmap):
    return _fold_ops(_Compiler(wc, line, symmap)._ops(node))


def _const(ops):
    return ops[0][2] if len(ops) == 1 and ops[0][0] == CONST else None


def _mul(a, b):
    return _fold_ops(list(a) + list(b) + [(MUL, 0, 0)])


def _add(a, b):
    return _fold_ops(list(a) + list(b) + [(ADD, 0, 0)])


def _product(opss):
    out = [(CONST, 0, 1)]
    for o in opss:
        out = _mul(out, o)
    return out


def _extent(sizes, strides, elem):
    """Bytes from the first element to the end of the last, as ops: (1 +
    sum((size - 1) * stride)) * elem; 0 where a fixed size is 0."""
    if any(_const(s) == 0 for s in sizes):
        return [(CONST, 0, 0)]
    out = [(CONST, 0, 1)]
    for s, st in zip(sizes, strides):
        out = _add(out, _mul(_fold_ops(list(s) + [(CONST, 0, 1), (SUB, 0, 0)]), st))
    return _mul(out, [(CONST, 0, elem)])


class SymTensor(collections.namedtuple("SymTensor", "base key off sizes strides")):
    """A tensor of the wrapper's code: its base ("alloc", the allocating
    line) or ("input", the graph input's name), its offset in elements from
    the base, its sizes and strides (None for a graph input itself)."""


def sym_tensor(wc, node, line, symmap):
    """The SymTensor that node names at line: the chain of names and views
    (reinterpret_tensor) followed back to its base, iteratively. A model
    of many layers chains hundreds of them (Inductor reuses a buffer under
    a new name, layer after layer: a Llama-3-8B prefill passes 64); each
    name steps to an assignment on an earlier line and each view into its
    own argument, so the walk ends within the wrapper's statements and
    their nesting."""
    offs, view = [], None  # each view's offset, the outermost first; the outermost view's sizes and strides
    for _ in range(2 * len(wc.stmts) + 64):
        if isinstance(node, ast.Name):
            if node.id in wc.inputs and wc.value_of(node.id, line) is None:
                return SymTensor("input", node.id, _sum_offsets(offs), *(view or (None, None)))
            v = wc.value_of(node.id, line)
            if v is None:
                raise ValueError("%s is not assigned before line %d" % (node.id, line))
            line, node = v  # an allocation's key: the line that assigns it
            continue
        if isinstance(node, ast.Call):
            f = _fname(node)
            if f in _ALLOCATORS and len(node.args) >= 2:
                here = ([_compile(wc, e, line, symmap) for e in _elts(node.args[0])],
                        [_compile(wc, e, line, symmap) for e in _elts(node.args[1])])
                return SymTensor("alloc", line, _sum_offsets(offs), *(view or here))
            if f == "reinterpret_tensor" and len(node.args) == 4:
                # every view's sizes and strides compiled (an undeclared
                # symbol in an inner one refused), the outermost one's kept
                here = ([_compile(wc, e, line, symmap) for e in _elts(node.args[1])],
                        [_compile(wc, e, line, symmap) for e in _elts(node.args[2])])
                view = view or here
                offs.append(_compile(wc, node.args[3], line, symmap))
                node = node.args[0]
                continue
        raise ValueError("%s is not a tensor the wrapper allocates, views or takes" % ast.unparse(node)[:120])
    raise ValueError("a chain of names and views longer than the wrapper's statements")


def _sum_offsets(offs):
    """The views' offsets added from the innermost out (the order the ops
    were always folded in)."""
    out = [(CONST, 0, 0)]
    for o in reversed(offs):
        out = _add(out, o)
    return out


def _fname(call):
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _elts(node):
    if isinstance(node, (ast.Tuple, ast.List)):
        return node.elts
    raise ValueError("%s is not a tuple of sizes" % ast.unparse(node)[:80])


# --------------------------------------------------- during the captures
def wrapper_frame(start=2):
    """The frame of Inductor's generated `call` on the stack, or None."""
    try:
        f = sys._getframe(start)
    except ValueError:
        return None
    while f is not None:
        g = f.f_globals
        if f.f_code.co_name == "call" and "reinterpret_tensor" in g and any(a in g for a in _ALLOCATORS):
            return f
        f = f.f_back
    return None


class Sites:
    """What each captured operation's wrapper line was, and the line that
    allocated each storage: filled during one capture run."""

    def __init__(self):
        self.launch = {}      # launch index -> site
        self.allocs = {}      # storage data_ptr -> (filename, line)
        self.active = False

    @staticmethod
    def site(extra=None):
        f = wrapper_frame(1)
        if f is None:
            return None
        loc = f.f_locals
        syms = {k: int(v) for k, v in loc.items() if _SYMBOL.match(k) and isinstance(v, int)}
        ptrs = {k: v.data_ptr() for k, v in loc.items() if hasattr(v, "data_ptr") and hasattr(v, "is_cuda")}
        s = {"file": f.f_code.co_filename, "line": f.f_lineno, "syms": syms, "ptrs": ptrs}
        if extra:
            s.update(extra)
        return s


class AllocHook:
    """Wraps the allocators of the wrapper modules found (their globals), so
    that each storage a capture allocates knows its line."""

    def __init__(self):
        self.patched = []
        self.sites = None

    def install(self, g):
        for name in _ALLOCATORS:
            orig = g.get(name)
            if orig is None or getattr(orig, "_tb_alloc_hook", False):
                continue
            hook = self

            def alloc(*a, _orig=orig, **k):
                t = _orig(*a, **k)
                s = hook.sites
                if s is not None and s.active:
                    f = sys._getframe(1)
                    s.allocs[t.untyped_storage().data_ptr()] = (f.f_code.co_filename, f.f_lineno)
                return t
            alloc._tb_alloc_hook = True
            g[name] = alloc
            self.patched.append((g, name, orig))

    def remove(self):
        for g, name, orig in reversed(self.patched):
            g[name] = orig
        self.patched = []


def find_wrappers(torch, call):
    """Runs call once and returns the globals of each Inductor wrapper whose
    `call` launched a kernel."""
    import torch._inductor.runtime.triton_heuristics as th
    found, orig = {}, th.CachingAutotuner.run

    def run(tuner, *args, **kwargs):
        f = wrapper_frame(2)
        if f is not None:
            found[f.f_code.co_filename] = f.f_globals
        return orig(tuner, *args, **kwargs)
    th.CachingAutotuner.run = run
    try:
        out = call()
        torch.cuda.synchronize()
        del out
    finally:
        th.CachingAutotuner.run = orig
    return found


# --------------------------------------------------------- the expressions
class BuildState:
    """What Derive reads of the capture at every maximum: export_model's
    build of it and the sites of its run. raw: each step's launch or
    operation as captured, in step order (with its "site"); buffer_ptrs:
    each workspace buffer's storage pointer; storages: the storages by
    pointer; outs: the output tensors; allocs: Sites.allocs, {storage
    pointer: (wrapper file, line)} of what the wrapper allocated; alloc_at:
    the same, inverted; files: the wrapper files whose lines launched;
    values: the symbols' values of the capture."""

    __slots__ = ("raw", "buffer_ptrs", "storages", "outs", "allocs", "alloc_at", "files", "values")

    def __init__(self, raw, buffer_ptrs, storages, outs, allocs, alloc_at, files, values):
        self.raw, self.buffer_ptrs, self.storages, self.outs = raw, buffer_ptrs, storages, outs
        self.allocs, self.alloc_at, self.files, self.values = allocs, alloc_at, files, values


class Derive:
    """The expressions of a captured program (the one at every maximum),
    from the wrapper code of each operation's line. cap: a BuildState (its
    raw steps with their sites, storages, spaces); symbols; values: the
    capture's symbol values; symmap: {Inductor symbol: symbol index}."""

    def __init__(self, cap, program, bundle, symbols, dims, symmap, code):
        self.cap, self.p, self.bundle = cap, program, bundle
        self.symbols, self.dims, self.symmap, self.code = symbols, dims, symmap, code
        self.exprs = {}

    def wc(self, site):
        return self.code(site["file"])

    def put(self, field, index, sub, ops, now, what):
        ops = _fold_ops(ops)
        if len(ops) > MAX_EXPR_OPS:
            raise BundleError("unsupported", "%s: its expression has %d operations, over %d" % (what, len(ops),
                                                                                               MAX_EXPR_OPS))
        if _const(ops) is not None:
            if _const(ops) != now:
                raise BundleError("unsupported", "%s: the wrapper's code gives %d, the capture %d" % (
                    what, _const(ops), now))
            return
        self.exprs[(field, index, sub)] = Expr(field, index, sub, ops)

    def run(self):
        cap, p = self.cap, self.p
        self.inputs()
        self.outputs()
        self.buffers()
        opexpr = {}
        for s, st in enumerate(p.steps):
            raw = cap.raw[s]
            what = "step %d (%s)" % (s, raw.get("name", ""))
            try:
                if st.kind == LAUNCH:
                    opexpr[s] = self.launch(s, st, raw, what)
                else:
                    self.memset_copy(s, st, raw, what)
            except ValueError as e:
                raise BundleError("unsupported", "dynamic shapes: %s: %s" % (what, e)) from None
        return [self.exprs[k] for k in sorted(self.exprs)]

    # inputs: their dynamic dimensions, contiguous strides
    def inputs(self):
        for i, t in enumerate(self.p.inputs):
            if i not in self.dims:  # the same at every size, whatever its strides
                continue
            dims = self.dims[i]
            sizes = [[(SYM, dims[d], 0)] if d in dims else [(CONST, 0, n)] for d, n in enumerate(t.shape)]
            for d in dims:
                self.put(FIELD_INPUT_SIZE, i, d, sizes[d], t.shape[d], "input %d dimension %d" % (i, d))
            for d in range(len(t.shape)):
                self.put(FIELD_INPUT_STRIDE, i, d, _product(sizes[d + 1:]), t.strides[d],
                         "input %d stride %d" % (i, d))

    def _match_return(self, k, t):
        """The wrapper's returned tensor that output k is: its SymTensor."""
        cap = self.cap
        for site_file in cap.files:
            wc = self.code(site_file)
            if wc.ret is None or not isinstance(wc.ret.value, (ast.Tuple, ast.List)):
                continue
            for e in wc.ret.value.elts:
                try:
                    st = sym_tensor(wc, e, wc.ret.lineno, self.symmap)
                except ValueError:
                    continue
                if st.base != "alloc" or st.sizes is None:
                    continue
                ptr = cap.alloc_at.get((site_file, st.key))
                vals = cap.values
                try:
                    off = eval_expr(st.off, vals) * t.element_size()
                    sizes = [eval_expr(x, vals) for x in st.sizes]
                    strides = [eval_expr(x, vals) for x in st.strides]
                except BundleError:
                    continue
                sptr = t.untyped_storage().data_ptr()
                if ptr == sptr and off == t.data_ptr() - sptr and sizes == list(t.shape) and strides == list(
                        t.stride()):
                    return st
        return None

    def outputs(self):
        self.out_sym = []
        for k, (spec, t) in enumerate(zip(self.p.outputs, self.cap.outs)):
            st = self._match_return(k, t)
            if st is None:
                raise BundleError("unsupported", "dynamic shapes: output %d (%s) is none of the tensors Inductor's "
                                  "wrapper returns (a view made outside the compiled code?): its sizes have no "
                                  "expression" % (k, spec.name))
            self.out_sym.append(st)
            for d in range(len(spec.shape)):
                self.put(FIELD_OUTPUT_SIZE, k, d, st.sizes[d], spec.shape[d], "output %d dimension %d" % (k, d))
                self.put(FIELD_OUTPUT_STRIDE, k, d, st.strides[d], spec.strides[d], "output %d stride %d" % (k, d))

    def buffers(self):
        cap = self.cap
        for b, (buf, sptr) in enumerate(zip(self.p.buffers, cap.buffer_ptrs)):
            where = cap.allocs.get(sptr)
            what = "buffer %d (first used by step %d)" % (b, buf.first)
            if where is None:
                raise BundleError("unsupported", "dynamic shapes: %s was not allocated by Inductor's wrapper code: "
                                  "its size has no expression" % what)
            wc = self.code(where[0])
            stmt = wc.stmt(where[1])
            call = stmt.value if isinstance(stmt, ast.Assign) else None
            if not isinstance(call, ast.Call) or _fname(call) not in _ALLOCATORS:
                raise BundleError("unsupported", "dynamic shapes: %s: line %d of the wrapper is not an allocation" % (
                    what, where[1]))
            try:
                st = sym_tensor(wc, call, where[1], self.symmap)
            except ValueError as e:
                raise BundleError("unsupported", "dynamic shapes: %s: %s" % (what, e)) from None
            elem = cap.storages[sptr].element_size()
            self.put(FIELD_BUFFER_SIZE, b, 0, _extent(st.sizes, st.strides, elem), buf.size, what)

    def _pointer(self, wc, node, line, site, op, tensor):
        """A pointer operand's byte offset: the views' offsets down to the
        allocation or graph input, times the element's bytes, plus where
        that graph input lies in the operand's space."""
        st = sym_tensor(wc, node, line, self.symmap)
        elem = tensor.element_size()
        ops = _mul(st.off, [(CONST, 0, elem)])
        if st.base == "input":  # where the graph input lies in the operand's space (a constant's view: not 0)
            at = site["ptrs"].get(st.key)
            if at is None:
                raise ValueError("graph input %s is not on the frame" % st.key)
            start = tensor.data_ptr() - op[2]  # the address the operand's space starts at
            ops = _add([(CONST, 0, at - start)], ops)
        return ops, st

    def launch(self, s, st, raw, what):
        site = raw.get("site")
        if site is None:
            raise ValueError("no wrapper line issued it")
        wc = self.wc(site)
        stmt = wc.stmt(site["line"])
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not isinstance(call, ast.Call) or _fname(call) != "run":
            raise ValueError("line %d of the wrapper is not a kernel's .run(...)" % site["line"])
        names = site["names"]
        if len(call.args) != len(names):
            raise ValueError("the wrapper passes %d arguments, the launcher takes %d" % (len(call.args), len(names)))
        rec = self.bundle.records[st.record]
        cfg = rec.configs[st.config]
        arg_names = rec.call.arg_names
        exprs = []
        for j, (n, code, op) in enumerate(zip(arg_names, cfg.arg_types, st.operands)):
            node = call.args[names.index(n)]
            ow = "%s operand %d (%s)" % (what, j, n)
            if code == "O":
                ops, _ = self._pointer(wc, node, site["line"], site, op, raw["tensors"][j])
                self.put(FIELD_OPERAND, s, j, ops, op[2], ow)
                exprs.append(None)
            elif code in INT_CODES and code != "?":
                ops = _compile(wc, node, site["line"], self.symmap)
                self.put(FIELD_OPERAND, s, j, ops, _signed(op[2]), ow)
                exprs.append(ops)
            else:
                if not isinstance(node, ast.Constant):
                    try:
                        ops = _compile(wc, node, site["line"], self.symmap)
                    except ValueError:
                        ops = None
                    if ops is None or _const(ops) is None:
                        raise ValueError("operand %d (%s, code '%s') is %s, which depends on the sizes: only integer "
                                         "arguments may" % (j, n, code, ast.unparse(node)[:80]))
                exprs.append(None)
        # the grid: the config's rule with the arguments' expressions inlined
        if cfg.grid is None:
            if any(e is not None and _const(e) is None for e in exprs):
                raise ValueError("its config has no grid rule, and its arguments vary")
            return exprs
        extra_names = site.get("extra") or []
        for d, prog in enumerate(cfg.grid.dims):
            out = []
            for op, index, value in prog:
                if op == ARG:
                    e = exprs[index]
                    out += e if e is not None else [(CONST, 0, _grid_arg(cfg.arg_types[index], st.operands[index][2]))]
                elif op == PARAM:
                    out.append((CONST, 0, cfg.params[index][1]))
                elif op == EXTRA:
                    if index >= len(extra_names) or extra_names[index] not in names:
                        raise ValueError("its grid rule reads grid value %d, which the launch does not name" % index)
                    out += _compile(wc, call.args[names.index(extra_names[index])], site["line"], self.symmap)
                else:
                    out.append((op, index, value))
            self.put(FIELD_GRID, s, d, out, st.grid[d], "%s grid %s" % (what, "xyz"[d]))
        return exprs

    def memset_copy(self, s, st, raw, what):
        site = raw.get("site")
        if raw.get("output") is not None:  # the copy of an output that is a view, added at the end
            k = raw["output"]
            spec, sym = self.p.outputs[k], self.out_sym[k]
            elem = self.cap.outs[k].element_size()
            self.put(FIELD_COUNT, s, 0, _extent(sym.sizes, sym.strides, elem), st.count, "%s count" % what)
            self.put(FIELD_OPERAND, s, 1, _mul(sym.off, [(CONST, 0, elem)]), st.operands[1][2], "%s source" % what)
            return
        if site is None:
            raise ValueError("no wrapper line issued it")
        wc = self.wc(site)
        stmt = wc.stmt(site["line"])
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        nodes = None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                call.func.attr in ("zero_", "fill_", "copy_"):
            nodes = [call.func.value] + ([call.args[0]] if call.func.attr == "copy_" and call.args else [])
        elif isinstance(call, ast.Call) and _fname(call) == "run":
            # a kernel's arguments that its launcher zeroes first: the
            # argument of the next launch of this line with this pointer
            nxt = next((q for q in range(s + 1, len(self.p.steps)) if self.cap.raw[q].get("site") and
                        self.cap.raw[q]["site"]["line"] == site["line"]), None)
            if nxt is not None:
                rec = self.bundle.records[self.p.steps[nxt].record]
                for j, op in enumerate(self.p.steps[nxt].operands):
                    if tuple(op) == tuple(st.operands[0]):
                        nodes = [call.args[self.cap.raw[nxt]["site"]["names"].index(rec.call.arg_names[j])]]
                        break
        if not nodes:
            raise ValueError("line %d of the wrapper (%s) names no tensor it writes" % (
                site["line"], ast.unparse(stmt)[:80] if stmt is not None else "?"))
        counts = None
        for j, node in enumerate(nodes[:len(st.operands)]):
            ops, sym = self._pointer(wc, node, site["line"], site, st.operands[j], raw["tensors"][j])
            self.put(FIELD_OPERAND, s, j, ops, st.operands[j][2], "%s operand %d" % (what, j))
            if j == 0:
                if sym.sizes is None:
                    raise ValueError("it writes a graph input, whose sizes the wrapper does not state")
                numel = _product(sym.sizes)
                t = raw["tensors"][0]
                if st.kind == MEMSET:
                    n = eval_expr(numel, self.cap.values)
                    if n <= 0 or st.count % n:
                        raise ValueError("a memset of %d elements of a %d-element tensor" % (st.count, n))
                    counts = _mul(numel, [(CONST, 0, st.count // n)])
                else:
                    counts = _mul(numel, [(CONST, 0, t.element_size())])
        self.put(FIELD_COUNT, s, 0, counts, st.count, "%s count" % what)


def _signed(v):
    return v - (1 << 64) if v >> 63 else v


def match_symbols(symbols, captures):
    """{Inductor symbol name: symbol index}: each of the wrapper's symbols
    is the declared symbol whose value it had in every capture.
    captures: [(values, {name: value})]."""
    names = set()
    for _, syms in captures:
        names.update(syms)
    out = {}
    for n in sorted(names):
        seen = [syms.get(n) for _, syms in captures]
        hits = [k for k in range(len(symbols)) if all(v is None or v == vals[k] for v, (vals, _) in zip(seen, captures))]
        if len(hits) != 1:
            raise BundleError("unsupported", "dynamic shapes: Inductor's symbol %s took the values %s in the captures, "
                              "which %s" % (n, seen, "no declared dimension took" if not hits else
                                            "dimensions %s all took" % [symbols[k].name for k in hits]))
        out[n] = hits[0]
    return out


def check_monotone(symbols, exprs, buffers, limit=65536):
    """The writer's check: each buffer's size never shrinks as a symbol
    grows (with the others at their minimum or maximum), so that the plan
    at every maximum holds every size in the ranges."""
    for x in exprs:
        if x.field != FIELD_BUFFER_SIZE:
            continue
        for k, y in enumerate(symbols):
            n = y.max - y.min + 1
            step = max(1, n // limit)
            for rest in ("min", "max"):
                vals = [getattr(z, rest) for z in symbols]
                prev = None
                for v in list(range(y.min, y.max + 1, step)) + [y.max]:
                    vals[k] = v
                    cur = eval_expr(x.ops, vals, checked=True)
                    if prev is not None and cur < prev:
                        raise BundleError("unsupported", "dynamic shapes: buffer %d's size shrinks from %d to %d "
                                          "bytes as %s grows to %d: the plan at every maximum would not hold it"
                                          % (x.index, prev, cur, y.name, v))
                    if cur > buffers[x.index].size:
                        raise BundleError("unsupported", "dynamic shapes: buffer %d needs %d bytes at %s = %d, over "
                                          "its %d at every maximum" % (x.index, cur, y.name, v,
                                                                       buffers[x.index].size))
                    prev = cur


def compare(records, template, captured, values, symbols):
    """The program the expressions give at values against the program
    captured there: every field; the first difference refused, named."""
    at = ", ".join("%s=%d" % (y.name, v) for y, v in zip(symbols, values))
    try:
        want = specialize(records, template, values)
    except BundleError as e:
        raise BundleError("unsupported", "dynamic shapes: at %s the expressions give no valid program: %s" % (
            at, e)) from None

    def fail(what, got, exp):
        raise BundleError("unsupported", "dynamic shapes: at %s, %s: captured %r, Inductor's expressions give %r"
                          % (at, what, got, exp))
    for group, a, b in (("input", captured.inputs, want.inputs), ("output", captured.outputs, want.outputs)):
        if len(a) != len(b):
            fail("the %ss" % group, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            if list(x.shape) != list(y.shape) or list(x.strides) != list(y.strides):
                fail("%s %d (%s) sizes and strides" % (group, i, x.name), (x.shape, x.strides), (y.shape, y.strides))
    if len(captured.constants) != len(want.constants):
        fail("the constants", len(captured.constants), len(want.constants))
    for k, (x, y) in enumerate(zip(captured.constants, want.constants)):
        if (x.name, x.dtype, x.nbytes(), x.state) != (y.name, y.dtype, y.nbytes(), y.state):
            fail("constant %d" % k, (x.name, x.dtype, x.nbytes(), x.state), (y.name, y.dtype, y.nbytes(), y.state))
        if x.external is None and y.external is None and bytes(x.data) != bytes(y.data):
            fail("constant %d (%s): its bytes" % (k, x.name), "other bytes", "the maximum's")
    if len(captured.buffers) != len(want.buffers):
        fail("the buffers", len(captured.buffers), len(want.buffers))
    for b, (x, y) in enumerate(zip(captured.buffers, want.buffers)):
        if x.size != y.size or (x.first, x.last) != (y.first, y.last):
            fail("buffer %d" % b, (x.size, x.first, x.last), (y.size, y.first, y.last))
    if len(captured.steps) != len(want.steps):
        fail("the steps", len(captured.steps), len(want.steps))
    for s, (x, y) in enumerate(zip(captured.steps, want.steps)):
        for f in ("kind", "record", "config", "width", "value", "count", "grid"):
            if getattr(x, f) != getattr(y, f):
                fail("step %d %s" % (s, f), getattr(x, f), getattr(y, f))
        for j, (o, q) in enumerate(zip(x.operands, y.operands)):
            if tuple(o) != tuple(q):
                fail("step %d operand %d" % (s, j), tuple(o), tuple(q))
    return want
