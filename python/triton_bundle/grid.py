"""The grid language, as the header's >>grid section: the small postfix
language of grid rules and (2.6) program expressions, with its one home
here. GridRule (a rule's three programs) and its text for people
(ops_text); the checkers (check_grid for a rule, check_expr_ops for a
program expression), which take each operator's arity from spec.GRID_OPS;
a rule evaluated exactly as the C library evaluates it (eval_grid,
tb_grid_compute) and an expression as tb_expr_eval does (eval_expr); and
Inductor's and Triton's grid expressions compiled into the language
(GridCompiler, grid_rule). It imports nothing of the package but spec."""

import ast

from .spec import (ADD, ARG, ARG_CODES, CEILDIV, CONST, EXTRA, FLOORDIV, GRID_OP_BY_CODE, GRID_STACK, GRID_X_MAX,
                   GRID_YZ_MAX, I64_MAX, I64_MIN, INT_CODES, KIND_BOOL, KIND_SINT, MAX, MAX_EXPR_OPS, MAX_GRID_EXTRA,
                   MAX_GRID_OPS, MIN, MOD, MUL, NEG, OP_ARITY, OPERANDS, PARAM, SUB, SYM, BundleError)


class GridRule:
    """Three postfix programs (x, y, z), each a list of (op, index, value)."""

    def __init__(self, x, y, z):
        self.dims = [list(x), list(y), list(z)]

    def __eq__(self, o):
        return isinstance(o, GridRule) and self.dims == o.dims

    def text(self, arg_names=None, params=None):
        """The rule as infix text, for people."""
        return "(%s)" % ", ".join(ops_text(prog, arg_names, params) for prog in self.dims)


def ops_text(ops, arg_names=None, params=None):
    """One program of the language as infix text, for people: arguments by
    their names where arg_names has them (else arg0...), params by theirs
    (params: a config's (name, value) pairs), the operators as GRID_OPS
    writes them (the grid language's own syntax: a + b, cdiv(a, b), -(a)),
    an operation it does not know as opN(a, b); "?" for an empty program."""
    st = []
    for op, index, value in ops:
        if op == CONST:
            st.append(str(value))
        elif op == ARG:
            st.append(arg_names[index] if arg_names and index < len(arg_names) else "arg%d" % index)
        elif op == PARAM:
            st.append(params[index][0] if params and index < len(params) else "param%d" % index)
        elif op == EXTRA:
            st.append("grid_args[%d]" % index)
        elif OP_ARITY.get(op) == 1:
            st.append("%s(%s)" % (GRID_OP_BY_CODE[op].text, st.pop()))
        else:
            b, a = st.pop(), st.pop()
            text = GRID_OP_BY_CODE[op].text if OP_ARITY.get(op) == 2 else "op%d" % op
            st.append("%s(%s, %s)" % (text, a, b) if text[0].isalpha() else "(%s %s %s)" % (a, text, b))
    return st[-1] if st else "?"


def check_grid(g, c):
    """FORMAT.md [R-grid-program]: a rule that runs."""
    for d, prog in enumerate(g.dims):
        if not prog or len(prog) > MAX_GRID_OPS:
            raise BundleError("limit" if len(prog) > MAX_GRID_OPS else "malformed",
                              "grid rule dimension %d has %d operations" % (d, len(prog)))
        depth = 0
        for i, (op, index, value) in enumerate(prog):
            if op == SYM:
                raise BundleError("malformed", "grid rule dimension %d, operation %d: SYM (a program's symbol) in a "
                                  "grid rule" % (d, i))
            operand = op in OPERANDS
            if not operand and op not in OP_ARITY:
                raise BundleError("unsupported_version", "grid rule operation %d is unknown" % op)
            if ((op != CONST and value) or ((not operand or op == CONST) and index) or
                    (op == ARG and (index >= len(c.arg_types) or c.arg_types[index] not in INT_CODES)) or
                    (op == PARAM and index >= len(c.params)) or (op == EXTRA and index >= MAX_GRID_EXTRA)):
                raise BundleError("malformed", "grid rule dimension %d, operation %d: a bad operand" % (d, i))
            depth = _stack_step(depth, op, operand)
            if depth is None:
                raise BundleError("malformed", "grid rule dimension %d, operation %d: too few values" % (d, i))
            if depth > GRID_STACK:
                raise BundleError("limit", "grid rule dimension %d needs more than %d stack entries" % (d, GRID_STACK))
        if depth != 1:
            raise BundleError("malformed", "grid rule dimension %d leaves %d values" % (d, depth))


def check_expr_ops(ops, nsyms, e=0):
    """An expression must run: CONST, SYM and the operators, one value left."""
    if not ops or len(ops) > MAX_EXPR_OPS:
        raise BundleError("limit" if len(ops) > MAX_EXPR_OPS else "malformed",
                          "program expression %d has %d operations (1..%d)" % (e, len(ops), MAX_EXPR_OPS))
    depth = 0
    for i, (op, index, value) in enumerate(ops):
        operand = op in (CONST, SYM)
        if not operand and op not in OP_ARITY:
            raise BundleError("malformed" if op in OPERANDS else "unsupported_version",
                              "program expression %d, operation %d: op %d is %s" % (
                                  e, i, op, "a grid rule's operand" if op in OPERANDS else "unknown"))
        if (op != CONST and value) or (op != SYM and index) or (op == SYM and index >= nsyms):
            _bad_expr("program expression %d, operation %d" % (e, i), "symbol %d of %d, or an unused field not zero"
                      % (index, nsyms))
        depth = _stack_step(depth, op, operand)
        if depth is None:
            _bad_expr("program expression %d, operation %d" % (e, i), "too few values on the stack")
        if depth > GRID_STACK:
            raise BundleError("limit", "program expression %d needs more than %d stack entries" % (e, GRID_STACK))
    if depth != 1:
        _bad_expr("program expression %d" % e, "leaves %d values, not one" % depth)


def _stack_step(depth, op, operand):
    """The stack's depth after op (an operand pushes one value, an operator
    pops its arity and pushes one), or None where it pops more than there
    are: the stack discipline both checkers share."""
    if operand:
        return depth + 1
    if depth < OP_ARITY[op]:
        return None
    return depth - OP_ARITY[op] + 1


def _bad_expr(what, why):
    raise BundleError("malformed", "%s: %s" % (what, why))


def _floordiv(a, b):
    if b == 0 or (a == I64_MIN and b == -1):
        raise BundleError("arg_range", "division by zero or overflow")
    return a // b


# (bytes, kind) of the codes a rule may read, from the table of codes
_INT_ARGS = {r.code: (r.bytes, r.kind) for r in ARG_CODES if r.code in INT_CODES}


def _grid_arg(code, v):
    """What the kernel reads from argument v of this code, as an int64."""
    size, kind = _INT_ARGS[code]
    if kind == KIND_BOOL:
        return 1 if v else 0
    bits = 8 * size
    u = v & ((1 << bits) - 1)
    if kind == KIND_SINT and u >> (bits - 1):
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

    def operand(op, index, value):
        if op == CONST:
            return value
        if op == ARG:
            return _grid_arg(config.arg_types[index], int(args[index]))
        if op == PARAM:
            return config.params[index][1]
        if index >= len(grid_args):
            raise BundleError("arg_range", "the rule reads grid_args[%d], and %d were given" % (index, len(grid_args)))
        return int(grid_args[index])
    out = []
    for d, prog in enumerate(g.dims):
        v = _run(prog, operand, "grid %s: the rule overflows" % "xyz"[d])
        most = GRID_X_MAX if d == 0 else GRID_YZ_MAX
        if not 0 <= v <= most:
            raise BundleError("arg_range", "grid %s is %d, outside 0..%d" % ("xyz"[d], v, most))
        out.append(v)
    return tuple(out)


def eval_expr(ops, values, checked=False):
    """(2.6) A program expression's value for the symbols' values (CONST,
    SYM and the operators), exactly as the C library's tb_expr_eval: the
    program checked first (check_expr_ops) unless checked says it was."""
    if not checked:
        check_expr_ops(ops, len(values))

    def operand(op, index, value):
        if op == CONST:
            return value
        if op == SYM and index < len(values):
            return int(values[index])
        raise BundleError("malformed", "expression: op %d (index %d) is not CONST or a symbol of %d" % (
            op, index, len(values)))
    return _run(ops, operand, "expression: an operation overflows")


def _run(prog, operand, overflow):
    """The one evaluator of the language: operands through operand(), the
    operators exact, every intermediate within 64 bits."""
    st = []
    for op, index, value in prog:
        if op < ADD:
            st.append(operand(op, index, value))
        else:
            if op == NEG:
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
            raise BundleError("arg_range", overflow)
    return st[0]


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
        return [{"arg": (ARG, v, 0), "param": (PARAM, v, 0), "extra": (EXTRA, v, 0), "const": (CONST, 0, v),
                 "sym": (SYM, v, 0)}[kind]]

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
