#!/usr/bin/env python3
"""The Python companion (python/triton_bundle.py) against the C library,
without a GPU or torch: the checksum, byte-for-byte round trips both ways,
grid rules evaluated on both sides, the grid compiler against Python's own
arithmetic and against the C one (tb_grid_parse), and hostile input, which
both readers must refuse alike.
usage: tests/test_python.py build/libtriton_bundle.so  (from the repository root)"""

import os
import random
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
from pycheck import check, summary  # noqa: E402

def cread(lib, data):
    """(result name, handle or None) of the C reader."""
    try:
        return "ok", lib.read(data)
    except tb.BundleError as e:
        return e.code, None


def cgrid(lib, b, rec, cfg, args, extra):
    try:
        return "ok", lib.grid(b, rec, cfg, args, extra)
    except tb.BundleError as e:
        return e.code, None


# ---- tb_grid_parse against the Python companion's GridCompiler + _fold_ops
# The names both sides resolve: "n" is an argument and a param (the argument
# wins), in_ptr0 a pointer (the parser takes any argument; the rule's check
# refuses it later).
GP_ARGS = ["in_ptr0", "n", "m", "x_numel", "ks0", "y"]
GP_PARAMS = [("XBLOCK", 1024), ("R0_BLOCK", 64), ("n", 5), ("num_warps", 4)]
I64_MAX, I64_MIN = (1 << 63) - 1, -(1 << 63)
R_PARSE = 14  # tb_err_parse


class GridParser:
    """tb_grid_parse through ctypes, with GP_ARGS and GP_PARAMS."""

    def __init__(self, lib, args=GP_ARGS, params=GP_PARAMS):
        import ctypes as ct

        class GridOp(ct.Structure):
            _fields_ = [("op", ct.c_uint32), ("index", ct.c_uint32), ("value", ct.c_int64)]

        class Param(ct.Structure):
            _fields_ = [("name", ct.c_char_p), ("value", ct.c_int64)]

        self.ct, self.lib, self.GridOp = ct, lib, GridOp
        self.f = lib.L.tb_grid_parse
        self.f.argtypes = [ct.c_char_p, ct.POINTER(ct.c_char_p), ct.c_uint32, ct.POINTER(Param), ct.c_uint32,
                           ct.POINTER(GridOp), ct.POINTER(ct.c_uint32), ct.POINTER(lib.Error)]
        self.f.restype = ct.c_int
        self.args = (ct.c_char_p * len(args))(*[a.encode() for a in args])
        self.params = (Param * len(params))(*[Param(p.encode(), v) for p, v in params])
        self.nargs, self.nparams = len(args), len(params)

    def parse(self, expr):
        """("ok", [(op, index, value)...]) or ("err", code, message, offset)."""
        ct = self.ct
        ops, n, e = (self.GridOp * tb.MAX_GRID_OPS)(), ct.c_uint32(), self.lib.Error()
        r = self.f(expr.encode(), self.args, self.nargs, self.params, self.nparams, ops, ct.byref(n), ct.byref(e))
        if r:
            return ("err", r, e.message.decode(errors="replace"), e.offset)
        return ("ok", [(o.op, o.index, o.value) for o in ops[:n.value]])


def gp_resolve(name, args=GP_ARGS, params=GP_PARAMS):
    if name in args:
        return ("arg", args.index(name))
    names = [p for p, _ in params]
    return ("param", names.index(name)) if name in names else None


def py_grid_parse(expr):
    """GridCompiler + _fold_ops: the program, or None where it refuses. A
    program C cannot hold counts as refused: a literal outside int64 (C has
    no bigger integers to fold back from; 2^63 only as -9223372036854775808,
    a literal that NEG follows at once) or more than MAX_GRID_OPS operations
    once folded (the C parser's ops array)."""
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raw = tb.GridCompiler(gp_resolve).compile(expr)
            ops = tb._fold_ops(raw)
    except (SyntaxError, ValueError, RecursionError):
        return None
    for i, (op, _, v) in enumerate(raw):
        if op == tb.CONST and not I64_MIN <= v <= I64_MAX and not (
                v == -I64_MIN and i + 1 < len(raw) and raw[i + 1][0] == tb.NEG):
            return None
    if len(ops) > tb.MAX_GRID_OPS or any(not I64_MIN <= v <= I64_MAX for _, _, v in ops):
        return None
    return [tuple(o) for o in ops]


def gp_compare(gp, exprs):
    """The expressions where C and Python disagree: not the same program,
    or only one refuses, or C refuses without tb_err_parse and a column."""
    bad = []
    for ex in exprs:
        py, c = py_grid_parse(ex), gp.parse(ex)
        if py is None:
            same = c[0] == "err" and c[1] == R_PARSE and "column " in c[2]
        else:
            same = c[0] == "ok" and c[1] == py
        if not same:
            bad.append((ex, py, c))
    return bad


def gp_show(bad, most=12):
    cut = lambda s: s if len(s) < 160 else s[:150] + "... (%d chars)" % len(s)
    for ex, py, c in bad[:most]:
        print("    %s: Python %s, C %s" % (cut(repr(ex)), cut(str(py)) if py is not None else "refuses",
                                         cut(str(c[1])) if c[0] == "ok" else "refuses (%s)" % c[2]))
    if len(bad) > most:
        print("    ... and %d more" % (len(bad) - most))


# every construct both sides take, and forms both refuse
GP_HAND = [
    # literals: decimal, 0x 0o 0b (either case), '_' between digits, zeros
    "0", "1", "42", "1024", "65535", "2147483647", "0x400", "0X1f", "0xDEAD_BEEF", "0o17", "0O777", "0o7_7",
    "0b1011", "0B1", "0b1010_1010", "1_000_000", "1_0", "00", "0_0", "000", "9223372036854775807",
    "0x7fffffffffffffff", "0x7FFF_FFFF_FFFF_FFFF", "0o777777777777777777777", "0b" + "1" * 63,
    # names: arguments, params, the argument winning over a param of its name
    "n", "m", "x_numel", "ks0", "y", "in_ptr0", "XBLOCK", "R0_BLOCK", "num_warps",
    # unary chains
    "-1", "+1", "-n", "+n", "--1", "--n", "-+-1", "+-+n", "- n", "-(-n)", "---n", "-(n)", "+(+(n))", "-0", "-(0)",
    "- - - 7", "-(+(-(n)))",
    # + - * // %, precedence, associativity, parentheses
    "n + 1", "n - 1", "n * 2", "n // 2", "n % 3", "n+m*2", "(n+m)*2", "n - m - 1", "n - (m - 1)", "n // 2 // 3",
    "n * 2 % 5", "n % 5 * 2", "-n * -m", "n*-1", "n//-2", "n%-3", "-n//2", "n - -n", "n+-+-1", "((n))",
    "(((n + 1)))", "n//2+m%3*ks0-y", "n -- 2", "n ++ 2",
    # constant folding: + - * min max and NEG of constants, never // % cdiv
    "1 + 2", "7 - 10", "6 * 7", "7 // 2", "7 % 2", "cdiv(1024, 256)", "-(2 * 3)", "2 * 3 * n", "n * 2 * 3",
    "1 + 2 + n", "n + 1 + 2", "2 * 3 + n", "n + 2 * 3", "3 * (4 + 5)", "min(3, 4) + max(5, 6)", "-(1 - 2)",
    "0 * n", "n * 0", "-(-(5))", "1 - 2 - 3", "max(1, 2)", "max(1, 2, 3, 4)", "min(4, 3, n, 1)", "max(n, 2, 3)",
    "max(2, 3, n)", "min(-1, -2)", "-1 * -1", "0 - 0",
    # calls: cdiv, triton.cdiv, ceildiv, min and max of 1..4, int
    "cdiv(n, 1024)", "triton.cdiv(n, XBLOCK)", "ceildiv(x_numel, R0_BLOCK)", "triton.language.cdiv(n, 2)",
    "cdiv (n, 2)", "cdiv( n , 2 )", "cdiv(n,2)", "min(n)", "min(n, m)", "min(n, m, 3)", "min(n, m, 3, ks0)",
    "max(n)", "max(n, 1)", "max(n, m, ks0, y)", "int(n)", "int(1024)", "int(n // 2)", "int(cdiv(n, 2))",
    "max(int(n), 1)", "builtins.max(n, 1)", "math.ceildiv(n, 2)", "cdiv(cdiv(n, 2), cdiv(m, 4))",
    "min(max(n, 1), max(m, 2))", "int(int(int(n)))",
    # meta['NAME'] (any base name, either quote)
    "meta['XBLOCK']", 'meta["XBLOCK"]', "cdiv(n, meta['XBLOCK'])", "meta[ 'R0_BLOCK' ]", "meta['n']",
    "kwargs['XBLOCK']", "meta['x_numel'] * 2", "meta['num_warps']",
    # Inductor's and Triton's own strings
    "-((x_numel) // -(128))", "((x_numel + (128 - 1)) // (128))", "(x_numel + XBLOCK - 1) // XBLOCK",
    "-(-x_numel // XBLOCK)", "max(1, cdiv(x_numel, XBLOCK))", "min(cdiv(n, 1024), 65535)",
    "triton.cdiv(x_numel, meta['XBLOCK'])", "(ks0 * 64 + 127) // 128",
    # spaces and tabs
    "\tn", "n\t+\t1", "  n  ", "n+1 ", " cdiv ( n , 1024 ) ",
    # refused by both
    "", "   ", "n +", "+", "-", "--", "n -", "n * ", "n % ", "// n", "* n", "n / 2", "n ** 2", "n @ m", "n & 1",
    "n << 1", "~n", "not n", "n < 2", "n if m else 2", "lambda: n", "[n]", "(n, m)", "n, m", "()", "1 2", "n m",
    "foo(n)", "cdiv(n)", "cdiv(n, 1, 2)", "cdiv()", "int()", "int(n, 2)", "min()", "max()", "min(n, key=m)",
    "cdiv(*n)", "min(n,,m)", "min(,n)", "01", "007", "0_1", "0x", "0b2", "0o8", "0x1g", "1_", "1__0", "1e3",
    "1.5", "1.", "1j", "a.b", "triton.x_numel", "meta.XBLOCK", "cdiv.x(n, 1)", "meta[0]", "meta[n]",
    "meta['nope']", "meta['']", "meta['XBLOCK'", "meta['XBLOCK]", "meta[XBLOCK]", "nope", "None", "'n'", '"n"',
    "n = 1", "n;", "$n", "n?", "@n", "cdiv(n, 1024", "(n", "n)", "((n)", "n // / 2", "n.x", "n..m",
    "9223372036854775808", "99999999999999999999", "0x8000000000000000", "0xffffffffffffffffffff",
    "n + " * 40 + "n",  # 79 operations
    "n" + " + n" * 32,  # 65
]

# int64's edges: folds that would overflow stay unfolded; 2^63 written
# after a minus is INT64_MIN
GP_EDGES = [
    "9223372036854775807", "9223372036854775807 + 1", "9223372036854775807 - -1", "9223372036854775807 * 2",
    "-9223372036854775807", "-9223372036854775807 - 1", "-9223372036854775807 - 2", "0 - 9223372036854775807 - 1",
    "-(-9223372036854775807 - 1)", "(-9223372036854775807 - 1) * -1", "(-9223372036854775807 - 1) // -1",
    "3037000499 * 3037000499", "3037000500 * 3037000500", "-3037000500 * 3037000500", "4611686018427387904 * 2",
    "4611686018427387904 * -2", "-4611686018427387904 * 2", "max(9223372036854775807, -9223372036854775807 - 1)",
    "0x7fffffffffffffff + 0b1", "-9223372036854775808", "-(-9223372036854775808)", "- 9223372036854775808",
    "-(9223372036854775808)", "--9223372036854775808", "-9223372036854775808 + n", "max(n, -9223372036854775808)",
    "-0x8000000000000000", "-9223372036854775808 - 1", "-9223372036854775808 * -1",
]

# Python's syntax the companion takes and the C parser's stricter grammar
# may refuse (FORMAT.md's grammar is the C one): C gives the same program
# or refuses with a column, never another program
GP_CORNERS = [
    "0x_1f", "0o_17", "0b_1",                               # '_' after the base prefix
    "min(n,)", "max(n, m,)", "cdiv(n, 1024,)", "int(n,)",   # a trailing comma
    "True", "False", "True + n",                            # bool literals are ints
    "n # a comment", "n\n", "\nn", "(n +\n m)", "n + \\\n1", "n\r",  # comments and line breaks
    "(triton).cdiv(n, 2)", "triton .cdiv(n, 2)", "triton. cdiv(n, 2)", "(max)(n, 2)",  # how a call is named
    "meta['XBLOCK']['R0_BLOCK']", "meta[('XBLOCK')]", "(meta)['XBLOCK']", "7['m']", "n . m['XBLOCK']",
    "meta['XB' 'LOCK']",                                    # how a subscript is written
    "9223372036854775808 - 1", "0 * 99999999999999999999", "min(1, 99999999999999999999)",  # past int64, folded back
    "-n" + " + n" * 30 + " + 2 * 3",  # 64 operations once folded, 65 before
]

GP_NAMES = ["n", "m", "x_numel", "ks0", "y", "XBLOCK", "R0_BLOCK", "num_warps"]
GP_EDGE_VALUES = [0, 1, 2, 3, 7, 16, 64, 128, 1024, 65535, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 3037000499, 3037000500,
                  2 ** 62, I64_MAX, I64_MAX - 1]


def gp_random_expr(rnd, depth):
    """One expression of the grammar both sides share: literals in every
    base, names, meta['NAME'], unary chains, + - * // %, parentheses,
    cdiv / triton.cdiv / ceildiv, min and max of 1..4, int; spaces and
    tabs anywhere a token may be spaced. Literals stay within int64."""
    sp = lambda: rnd.choice(["", "", " ", " ", "  ", "\t"])
    k = rnd.random()
    if depth <= 0 or k < 0.3:
        j = rnd.random()
        if j < 0.45:
            v = rnd.choice(GP_EDGE_VALUES) if rnd.random() < 0.5 else rnd.randint(0, 5000)
            f = rnd.random()
            if f < 0.55:
                return str(v)
            if f < 0.85:
                s = (hex, oct, bin)[rnd.randrange(3)](v)
                return s[0] + s[1].upper() + s[2:] if rnd.random() < 0.2 else s
            s = str(v)
            return s[0] + "".join(("_" if rnd.random() < 0.3 else "") + ch for ch in s[1:])
        if j < 0.85:
            return rnd.choice(GP_NAMES)
        q = rnd.choice("'\"")
        return rnd.choice(["meta", "kwargs", "m"]) + "[" + sp() + q + rnd.choice(GP_NAMES) + q + sp() + "]"
    if k < 0.42:
        return rnd.choice("-+") + sp() + gp_random_expr(rnd, depth - 1)
    if k < 0.72:
        op = rnd.choice(["+", "-", "*", "//", "%", "+", "-", "*"])
        return gp_random_expr(rnd, depth - 1) + sp() + op + sp() + gp_random_expr(rnd, depth - 1)
    if k < 0.80:
        return "(" + sp() + gp_random_expr(rnd, depth - 1) + sp() + ")"
    f = rnd.choice(["cdiv", "triton.cdiv", "ceildiv", "min", "max", "int", "triton.language.cdiv"])
    n = 2 if "div" in f else 1 if f == "int" else rnd.randint(1, 4)
    return f + rnd.choice(["", "", " "]) + "(" + sp() + ("," + sp()).join(
        gp_random_expr(rnd, depth - 1) for _ in range(n)) + sp() + ")"


def gp_unfolded_len(expr):
    try:
        return len(tb.GridCompiler(gp_resolve).compile(expr))
    except (SyntaxError, ValueError, RecursionError):
        return 0


def grid_parse_checks(lib):
    """The C grid expression parser against the Python companion's; the
    number of checks skipped (no tb_grid_parse in the library)."""
    if lib is None or not hasattr(lib.L, "tb_grid_parse"):
        print("skip: tb_grid_parse against GridCompiler (the C library has no tb_grid_parse)")
        return 7
    gp = GridParser(lib)

    bad = gp_compare(gp, GP_HAND)
    gp_show(bad)
    taken = sum(py_grid_parse(ex) is not None for ex in GP_HAND)
    check(not bad and 0 < taken < len(GP_HAND), "tb_grid_parse and GridCompiler + _fold_ops: the same program (or "
          "both refuse) for %d hand-written expressions, every construct (%d compile)" % (len(GP_HAND), taken))

    bad = gp_compare(gp, GP_EDGES)
    gp_show(bad)
    check(not bad, "... and at int64's edges: no fold that overflows, -9223372036854775808 is INT64_MIN (%d "
          "expressions)" % len(GP_EDGES))

    bad = [b for b in gp_compare(gp, GP_CORNERS)
           if not (b[2][0] == "err" and b[2][1] == R_PARSE and "column " in b[2][2])]  # C stricter: fine
    stricter = sum(1 for ex in GP_CORNERS if py_grid_parse(ex) is not None and gp.parse(ex)[0] == "err")
    gp_show(bad, 40)
    check(not bad and py_grid_parse(GP_CORNERS[-1]) == gp.parse(GP_CORNERS[-1])[1],
          "... and for %d corners of Python's syntax (trailing commas, 0x_1f, True, comments, (triton).cdiv, "
          "x['A']['B'], literals past int64 folded back): C gives the same program or refuses with a column (%d "
          "refused), and 64 operations once folded compile alike" % (len(GP_CORNERS), stricter))

    # a seeded grammar of what both take; programs kept under 64 operations
    # before folding, so that no expression is over the limit on one side only
    rnd = random.Random(20240611)
    exprs = []
    while len(exprs) < 400:
        ex = gp_random_expr(rnd, rnd.randint(0, 6))
        if 0 < gp_unfolded_len(ex) < tb.MAX_GRID_OPS:
            exprs.append(ex)
    bad = gp_compare(gp, exprs)
    gp_show(bad)
    taken = sum(py_grid_parse(ex) is not None for ex in exprs)
    folded = sum(1 for ex in exprs if py_grid_parse(ex) and len(py_grid_parse(ex)) < gp_unfolded_len(ex))
    check(not bad and taken == len(exprs) and folded > 20,
          "... for %d random expressions of a seeded grammar: the same program, all %d compile (%d folded)"
          % (len(exprs), taken, folded))

    # refusals: tb_err_parse, "column N" (1-based) where the error is, the
    # offset N - 1, and nothing written to op_count
    want = {"cdiv(n, 1024": 13, "n +": 4, "n / 2": 3, "n ** 2": 3, "1 2": 3, "foo(n)": 1, "01": 1, "a.b": 1, "": 1,
            "9223372036854775808": 1, "n + nope": 5, "min(n, m": 9, "meta['XBLOCK'": 14, "n,2": 2, "cdiv(n)": 1,
            "  n  m": 6, "0x": 1, "(" * 65 + "n" + ")" * 65: 65, "-" * 65 + "n": 65}
    wrong = []
    for ex, col in want.items():
        c = gp.parse(ex)
        got = re.search(r"column (\d+)", c[2]) if c[0] == "err" else None
        if not (c[0] == "err" and c[1] == R_PARSE and got and int(got.group(1)) == col and c[3] == col - 1):
            wrong.append((ex, col, c))
    for ex, col, c in wrong[:8]:
        print("    %r: want column %d, C %s" % (ex[:40], col, c))
    refused = ["cdiv(n, 1024", "n +", "n / 2", "n ** 2", "1 2", "foo(n)", "01", "a.b", "", "9223372036854775808",
               "n // 0.5", "cdiv(n, 2))", "n)", "int(n, m)", "max(n m)", "meta['nope']", "n\x01", "n +\x7f"]
    loose = [ex for ex in refused if gp.parse(ex)[0] != "err" or "column " not in gp.parse(ex)[2]]
    print("    taken: %r" % loose) if loose else None
    check(not wrong and not loose, "tb_grid_parse refuses %d malformed expressions with tb_err_parse and a column, "
          "the right one for %d of them" % (len(refused) + len(want), len(want)))

    # deep nesting: a bounded recursion, refused like 65 parentheses, in a
    # child process so that a stack overflow fails this check and no more
    code = ("import sys, ctypes; sys.path[:0] = [%r, %r]; import triton_bundle as tb, test_python as t\n"
            "gp = t.GridParser(tb.CLibrary(%r))\n"
            "for f in ('int(', 'max(', 'cdiv(', '('):\n"
            "    c = gp.parse(f * 200000 + 'n' + ', 1)' * (f == 'cdiv(') + ')' * (200000 - (f == 'cdiv(')))\n"
            "    print(f, c[0], c[1], c[2][:80] if c[0] == 'err' else len(c[1]), flush=True)\n"
            % (os.path.join(ROOT, "python"), os.path.join(ROOT, "tests"), lib.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    lines = out.stdout.split("\n")[:4]
    if out.returncode:
        print("    the child exited with %d%s, having printed: %s" % (
            out.returncode, " (SIGSEGV)" if out.returncode == -11 else "", out.stdout.strip() or "nothing"))
    check(out.returncode == 0 and all(" err 14 " in ln and "column" in ln for ln in lines),
          "tb_grid_parse of 200000 nested int( max( cdiv( and ( : refused with a column, no stack overflow")

    # what the parser gives, the rule's check takes: the program of every
    # compiled random expression, NEG and operands alike, keeps the stack
    # non-empty and leaves one value (the depth bound is the rule's)
    short = [ex for ex in exprs if not gp_stack_ok(gp.parse(ex)[1])]
    check(not short, "every program tb_grid_parse gave above runs: operands in range, the stack never short, one "
          "value left")
    return 0


def gp_stack_ok(ops):
    depth = 0
    for op, index, value in ops:
        if tb.CONST <= op <= tb.EXTRA:
            if (op == tb.ARG and index >= len(GP_ARGS)) or (op == tb.PARAM and index >= len(GP_PARAMS)) or \
                    op == tb.EXTRA or (op != tb.CONST and value) or (op == tb.CONST and index):
                return False
            depth += 1
        elif op == tb.NEG:
            if depth < 1 or index or value:
                return False
        elif tb.ADD <= op <= tb.MAX:
            if depth < 2 or index or value:
                return False
            depth -= 1
        else:
            return False
    return depth == 1 and 1 <= len(ops) <= tb.MAX_GRID_OPS


def sample_bundle():
    """Every part of the format: files, records, section 3 and section 4."""
    names = {"xnumel": ("arg", 1), "XBLOCK": ("param", 0), "_grid_1": ("extra", 1)}
    g = tb.grid_rule(["cdiv(xnumel, XBLOCK)", "_grid_1", 1], names.get)
    k = tb.Kernel("HASH1", 0, [tb.Artifact("k.cubin", b"\x7fELF" + bytes(range(200))), tb.Artifact("k.json", b"{}")])
    k2 = tb.Kernel("HASH2", 3, [tb.Artifact("d.cubin", b"x" * 17)])
    c1 = tb.Config("HASH1", "k", "k.cubin", "Oi?K", "1000", 4, 1, 128, 0, params=[("XBLOCK", 256), ("num_stages", 3)],
                   grid=g)
    c2 = tb.Config("HASH1", "k", "k.cubin", "Oi?K", "0000", 8, 1, 0, 0, params=[("XBLOCK", 1024), ("num_stages", 2)])
    c3 = tb.Config("HASH2", "d", "d.cubin", "TOii", "", 4, 2, 0, tb.CONFIG_PDL, (2, 1, 1), (1024, 128, 1), (0, 1, 1),
                   tensordescs=[tb.TensorDesc(1, 2, 3, 2, 6, 0, [64, 32])])
    r1 = tb.Record("inductor:k:1", "k", [c1, c2], tb.CallInfo(["in_out_ptr0", "xnumel", "flag", "big"], [0], [], [1]))
    r2 = tb.Record("triton:d", "d", [c3])
    return tb.Bundle([k, k2], [r1, r2])


def main():
    lib = tb.CLibrary(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "libtriton_bundle.so"))
    rnd = random.Random(7)

    # the checksum
    datas = [bytes(rnd.getrandbits(8) for _ in range(n)) for n in list(range(0, 260)) + [1023, 1024, 1025, 4096, 70000]]
    check(all(tb.xxh3_64(d) == lib.L.tb_xxh3_64(d, len(d)) for d in datas),
          "XXH3-64 equals the C library's at %d lengths (every path of the algorithm)" % len(datas))

    # C to Python to C: the fixtures packed by tbundle
    tmp = tempfile.mkdtemp(prefix="tbpy-")
    for name in ("triton-3.6-sm90", "triton-3.6-sm90-tma"):
        out = os.path.join(tmp, name + ".tbundle")
        subprocess.run([os.path.join(ROOT, "build", "tbundle"), "pack", "-o", out,
                        os.path.join(ROOT, "tests", "fixtures", name, "cache")], check=True, stdout=subprocess.DEVNULL)
        data = open(out, "rb").read()
        b = tb.read(data)
        check(tb.write(b) == data and len(b.kernels) > 0 and len(b.records) > 0,
              "tbundle pack of %s: the Python reader and writer give back the same %d bytes" % (name, len(data)))

    # Python to C to Python: every section
    sample = sample_bundle()
    data = tb.write(sample)
    code, cb = cread(lib, data)
    check(code == "ok" and lib.write(cb) == data, "a Python-written bundle with sections 3 and 4: the C library "
          "reads it and writes the same %d bytes" % len(data))
    check(tb.read(data) == sample, "and the Python reader gives back the same bundle")

    # grid rules on both sides
    agree = total = oks = 0
    # mostly grids that evaluate, some that overflow, divide by zero or go negative
    ops_pool = [tb.ADD, tb.ADD, tb.MUL, tb.CEILDIV, tb.CEILDIV, tb.FLOORDIV, tb.MAX, tb.MIN, tb.MOD, tb.SUB, tb.NEG]
    recs = []
    for i in range(150):
        dims = []
        for d in range(3):
            prog, depth = [], 0
            if d and rnd.random() < 0.6:  # y and z: mostly small
                dims.append([(tb.CONST, 0, rnd.randint(1, 8))])
                continue
            for _ in range(rnd.randint(1, 10)):
                if depth < 2 or rnd.random() < 0.45:
                    kind = rnd.choice([tb.CONST, tb.ARG, tb.PARAM, tb.EXTRA])
                    if kind == tb.CONST:
                        prog.append((kind, 0, rnd.choice([0, -1, 65535, 1 << 31, 1 << 62, -(1 << 63)]) if rnd.random() < 0.15
                                      else rnd.choice([1, 2, 3, 7, 64, 128, rnd.randint(1, 1000)])))
                    else:
                        prog.append((kind, rnd.choice([1, 2, 3]) if kind == tb.ARG else rnd.randint(0, 1), 0))
                    depth += 1
                else:
                    op = rnd.choice(ops_pool)
                    prog.append((op, 0, 0))
                    depth -= 0 if op == tb.NEG else 1
            while depth > 1:
                prog.append((rnd.choice(ops_pool[:-1]), 0, 0))
                depth -= 1
            dims.append(prog)
        cfg = tb.Config("HASH1", "k", "k.cubin", "Oi?K", "", params=[("XBLOCK", rnd.choice([1, 128, 1024, -5])), ("R", 0)],
                        grid=tb.GridRule(*dims))
        recs.append(tb.Record("r%d" % i, "k", [cfg]))
    gb = tb.Bundle([], recs)
    code, cb = cread(lib, tb.write(gb))
    check(code == "ok", "150 random grid rules written by Python, read by C")
    for i, r in enumerate(recs):
        for _ in range(4):
            args = [0, rnd.choice([1, 1000, 4096, rnd.randint(0, 100000), -1, (1 << 32) - 1]), rnd.randint(0, 3),
                    rnd.choice([5, 64, 123456789, (1 << 63) + 1, (1 << 64) - 1])]
            extra = [rnd.choice([20, 3, 1, -7])] * rnd.choice([0, 2, 2, 2])
            try:
                py = ("ok", tb.eval_grid(r.configs[0], args, extra))
            except tb.BundleError as e:
                py = (e.code, None)
            c = cgrid(lib, cb, i, 0, args, extra)
            total += 1
            if py == c:
                agree += 1
                oks += py[0] == "ok"
            elif total - agree < 5:
                print("    rule %s args %s extra %s: python %s, C %s" % (r.configs[0].grid.dims, args, extra, py, c))
    check(agree == total and oks * 4 >= total, "grid evaluation: Python and C agree on %d of %d (%d grids, the rest "
          "refusals)" % (agree, total, oks))

    # the grid compiler against Python's own arithmetic on Inductor's strings
    exprs = ["-((xnumel) // -(128))", "((xnumel + (128 - 1)) // (128))", "max(xnumel // 7, ynumel, 3) * 2",
             "min(xnumel, 65535) % 13 + -(-ynumel // 5)", "cdiv(xnumel, XBLOCK)"]
    names = {"xnumel": ("arg", 0), "ynumel": ("arg", 1), "XBLOCK": ("param", 0)}
    ok = True
    for ex in exprs:
        rule = tb.grid_rule([ex], names.get)
        cfg = tb.Config("H", "k", "k.cubin", "ll", params=[("XBLOCK", 64)], grid=rule)
        for x in (0, 1, 127, 128, 129, 100000):
            want = eval(ex, {"cdiv": lambda a, b: -(a // -b)}, {"xnumel": x, "ynumel": x + 3, "XBLOCK": 64})
            ok = ok and tb.eval_grid(cfg, [x, x + 3])[0] == want
    pre = tb.grid_rule(["-((y_grid_raw_) // -(y_grid_div_))", "y_grid_div_"], names.get,
                       ["y_grid_raw_ = -((ynumel) // -(64))", "y_grid_div_ = -((y_grid_raw_) // -(65535))"])
    cfg = tb.Config("H", "k", "k.cubin", "ll", grid=pre)
    check(ok and tb.eval_grid(cfg, [0, 64 * 70000]) == (35000, 2, 1),
          "the grid compiler: Inductor's python-mode expressions, temporaries included, evaluate as Python does")

    skipped = grid_parse_checks(lib)

    # hostile input: both readers refuse alike, with the same code (FORMAT.md [R-error-order]: the first broken rule in file order)
    mism = []
    cases = 0
    for n in range(len(data)):
        cases += 1
        code, b = cread(lib, data[:n])
        if b:
            lib.free(b)
        try:
            tb.read(data[:n])
            py = "ok"
        except tb.BundleError as e:
            py = e.code
        if code != py:
            mism.append(("truncated at %d" % n, code, py))
    for at in range(32, len(data) - 8):
        for v in (0, 1, 0x80, 0xFF, data[at] ^ 0x04):
            if v == data[at]:
                continue
            m = bytearray(data)
            m[at] = v
            m[-8:] = struct.pack("<Q", tb.bundle_checksum(bytes(m[:-8])))
            cases += 1
            code, b = cread(lib, bytes(m))
            if b:
                lib.free(b)
            try:
                tb.read(bytes(m))
                py = "ok"
            except tb.BundleError as e:
                py = e.code
            if code != py:
                mism.append(("byte %d = 0x%02x" % (at, v), code, py))
    for m in mism[:8]:
        print("    %s: C %s, Python %s" % m)
    check(not mism, "hostile input: %d truncations and resealed byte changes, the same verdict and code from both "
          "readers" % cases)

    # the command line
    path = os.path.join(tmp, "sample.tbundle")
    tb.write_file(sample, path)
    out = subprocess.run([sys.executable, os.path.join(ROOT, "python", "triton_bundle"), "list", path],
                         capture_output=True, text=True)
    check(out.returncode == 0 and "grid (cdiv(xnumel, XBLOCK), grid_args[1], 1)" in out.stdout and
          "mutated in_out_ptr0" in out.stdout, "triton_bundle.py list shows records, configs and grid rules")
    out = subprocess.run([os.path.join(ROOT, "build", "tbundle"), "list", path], capture_output=True, text=True)
    check(out.returncode == 0 and "grid (cdiv(xnumel, XBLOCK), grid_args[1], 1)" in out.stdout and
          "mutated in_out_ptr0" in out.stdout, "tbundle list shows the same grid rule and call info")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "python", "triton_bundle"), "list", path + "x"],
                         capture_output=True, text=True)
    check(out.returncode == 1 and "No such file" in out.stderr, "triton_bundle.py list of a missing file: an error")
    script = os.path.join(tmp, "make_bundle.py")
    with open(script, "w") as fh:
        fh.write("import sys\nsys.path.insert(0, %r)\nimport test_python\n\ndef export():\n"
                 "    return test_python.sample_bundle()\n" % os.path.join(ROOT, "tests"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "python", "triton_bundle"), "export", script, "-o",
                          os.path.join(tmp, "exported.tbundle")], capture_output=True, text=True)
    check(out.returncode == 0 and tb.read_file(os.path.join(tmp, "exported.tbundle")) == sample,
          "triton_bundle.py export runs a script's export() and writes its bundle")
    subprocess.run(["rm", "-rf", tmp])
    return summary(skipped)


if __name__ == "__main__":
    sys.exit(main())
