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
from triton_bundle import grid as tbg  # noqa: E402

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
            ops = tbg._fold_ops(raw)
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


# ---- section 5, the program (format 2.3)
FMT = sys.modules["triton_bundle.format"]
U64 = (1 << 64) - 1


def u64(v):
    return v & U64


def fbits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def program_bundle():
    """sample_bundle and a program that uses every part of section 5: each
    operand space and step kind, every argument code's edges, divisibility,
    a state constant, an empty constant and output, a rank-0 input, a
    constant of another format (array 'f'), one large enough to be written
    as a piece of its own, and buffers that share bytes at different times."""
    import array
    b = sample_bundle()
    add = tb.Config("HASH1", "add", "k.cubin", "OOi", "110", params=[("XBLOCK", 128)],
                    grid=tb.grid_rule(["cdiv(n, XBLOCK)", 1, 1], {"n": ("arg", 2), "XBLOCK": ("param", 0)}.get))
    allc = tb.Config("HASH1", "all", "k.cubin", "O?bBhHiIlKefyd", "1" + "0" * 13)
    allir = tb.Config("HASH1", "all", "k.cubin", "O?bBhHiIlKefyd", "", flags=tb.CONFIG_TYPES_FROM_IR)
    divs = tb.Config("HASH1", "divs", "k.cubin", "OOlf", "1111")
    b.records += [tb.Record("prog:add", "add", [add]), tb.Record("prog:all", "all", [allc, allir]),
                  tb.Record("prog:div", "divs", [divs])]  # records 2, 3 and 4 (1 is "TOii")
    L, I, O, C, B = tb.LITERAL, tb.INPUT, tb.OUTPUT, tb.CONSTANT, tb.BUFFER
    every = [(L, 0, 1), (L, 0, u64(-128)), (L, 0, 255), (L, 0, 32767), (L, 0, 65535), (L, 0, u64(-(1 << 31))),
             (L, 0, (1 << 32) - 1), (L, 0, u64(-1)), (L, 0, U64), (L, 0, 0x3c00), (L, 0, fbits(1.5)),
             (L, 0, 0x3f80), (L, 0, 0x7ff8000000000001)]
    every_ir = list(every)
    every_ir[3], every_ir[5] = (L, 0, 65535), (L, 0, (1 << 32) - 1)  # 'h', 'i': either sign's range
    p = tb.Program(
        inputs=[tb.TensorSpec("x", "float32", [4, 8], [8, 1], 16), tb.TensorSpec("idx", "int64", [3], [1], 8),
                tb.TensorSpec("s", "float16", [], [], 2)],
        outputs=[tb.TensorSpec("y", "float32", [4, 8], [8, 1], 16), tb.TensorSpec("x", "int32", [0, 5], [5, 1], 4)],
        constants=[tb.Constant("fc1.weight", "float32", memoryview(array.array("f", range(25)))),
                   tb.Constant("bn.running_mean", "float32", bytes(range(1, 33)), True),
                   tb.Constant("empty", "bool", b""),
                   tb.Constant("big", "uint8", bytearray(bytes(range(1, 256)) * 275)[:70001])],
        buffers=[tb.Buffer(0, 128, 0, 2), tb.Buffer(128, 128, 1, 3), tb.Buffer(0, 64, 4, 5), tb.Buffer(256, 0, 0, 0)],
        workspace_size=384,
        steps=[tb.Step(tb.MEMSET, [(B, 0, 0)], width=4, value=0xdeadbeef, count=32),
               tb.Step(tb.LAUNCH, [(B, 1, 0), (I, 0, 0), (L, 0, 32)], record=2, grid=(1, 1, 1)),
               tb.Step(tb.LAUNCH, [(B, 0, 16)] + every, record=3, grid=((1 << 31) - 1, 65535, 65535)),
               tb.Step(tb.COPY, [(O, 0, 0), (B, 1, 0)], count=128),
               tb.Step(tb.COPY, [(B, 2, 0), (C, 0, 36)], count=64),
               tb.Step(tb.LAUNCH, [(B, 2, 64)] + every_ir, record=3, config=1, grid=(3, 2, 1)),
               tb.Step(tb.MEMSET, [(C, 1, 0)], width=2, value=65535, count=16),
               tb.Step(tb.LAUNCH, [(C, 3, 64), (O, 0, 32), (L, 0, u64(-16)), (L, 0, fbits(0.1))], record=4,
                       grid=(5, 1, 1)),
               tb.Step(tb.MEMSET, [(O, 1, 0)], width=1, count=0),
               tb.Step(tb.LAUNCH, [(I, 2, 2)] + every_ir, record=3, config=1, grid=(1, 1, 1))])
    b.program = p
    return b


def program_layout(data):
    """Where section 5's fields are in a bundle's bytes (a second reading
    of FORMAT.md's layout, trusting the data): the section header and
    payload, the program header, each tensor's, constant's, buffer's and
    step's position and each step's operands'; None without section 5."""
    u32 = lambda at: struct.unpack_from("<I", data, at)[0]
    pos = 32
    for _ in range(u32(24)):
        typ, _flags, length = struct.unpack_from("<IIQ", data, pos)
        if typ == 5:
            break
        pos += 16 + length
        pos += -pos % 8
    else:
        return None
    L = {"section": pos, "start": pos + 16, "end": pos + 16 + length, "header": pos + 16}
    p = pos + 16
    ni, no, nk, nb, ns = (u32(p + 4 * i) for i in range(5))
    p += 40

    def string(at):
        q = at + 4 + u32(at) + 1
        return q + -q % 8
    L["tensors"] = []
    for _ in range(ni + no):
        t = {"name": p}
        p = string(p)
        rank = u32(p + 4)
        t.update(dtype=p, rank=p + 4, align=p + 8, reserved=p + 12, sizes=p + 16, strides=p + 16 + 8 * rank)
        p += 16 + 16 * rank
        L["tensors"].append(t)
    L["constants"] = []
    for _ in range(nk):
        k = {"name": p}
        p = string(p)
        k.update(dtype=p, flags=p + 4, size=p + 8, offset=p + 16)
        p += 24
        L["constants"].append(k)
    L["buffers"] = [p + 24 * i for i in range(nb)]
    p += 24 * nb
    L["steps"] = []
    for _ in range(ns):
        n = u32(p + 4)
        L["steps"].append({"at": p, "ops": [p + 48 + 16 * j for j in range(n)]})
        p += 48 + 16 * n
    L["end_steps"] = p
    return L


STEP_FIELDS = {"kind": 0, "operand_count": 4, "record": 8, "config": 12, "grid_x": 16, "grid_y": 20, "grid_z": 24,
               "width": 28, "value": 32, "reserved": 36, "count": 40}


def resealed(data, *patches):
    """data with (offset, struct format, value) patches and a new checksum."""
    m = bytearray(data)
    for at, fmt, v in patches:
        struct.pack_into(fmt, m, at, v)
    m[-8:] = struct.pack("<Q", tb.bundle_checksum(bytes(m[:-8])))
    return bytes(m)


class no_checksum:
    """The writer with a zero checksum, for loops that read without
    checking it: the pure-Python XXH3 would take most of their time."""

    def __enter__(self):
        self.saved = FMT._checksum_pieces
        FMT._checksum_pieces = lambda pieces: 0

    def __exit__(self, *exc):
        FMT._checksum_pieces = self.saved


class unchecked:
    """The writer without check_program: the bytes of a program it refuses,
    for the reader's refusal."""

    def __enter__(self):
        self.saved = FMT.check_program
        FMT.check_program = lambda bundle: None

    def __exit__(self, *exc):
        FMT.check_program = self.saved


def py_code(data, verify_checksum=True):
    try:
        tb.read(data, verify_checksum)
        return "ok"
    except tb.BundleError as e:
        return e.code


def st(b, i, **kw):
    s = b.program.steps[i]
    for k, v in kw.items():
        setattr(s, k, v)


def op(b, i, j, o):
    b.program.steps[i].operands[j] = tuple(o)


L_, I_, O_, C_, B_ = tb.LITERAL, tb.INPUT, tb.OUTPUT, tb.CONSTANT, tb.BUFFER

# (what, the code, a change to program_bundle(), whether the unchecked
# writer can frame it for the reader). Every rule of FORMAT.md's section 5.
MODEL_CASES = [
    # counts over the limits (the reader's side: BYTE_CASES)
    ("65537 inputs", "limit", lambda b: setattr(b.program, "inputs", [tb.TensorSpec("t%d" % i, "int8", [], [], 1)
                                                                    for i in range(65537)]), False),
    ("65537 outputs", "limit", lambda b: setattr(b.program, "outputs", [tb.TensorSpec("t%d" % i, "int8", [], [], 1)
                                                                      for i in range(65537)]), False),
    ("1000001 constants", "limit", lambda b: setattr(b.program, "constants", [b.program.constants[2]] * 1000001), False),
    ("1000001 buffers", "limit", lambda b: setattr(b.program, "buffers", [b.program.buffers[3]] * 1000001), False),
    ("1000001 steps", "limit", lambda b: setattr(b.program, "steps", [b.program.steps[8]] * 1000001), False),
    ("workspace_size -1", "malformed", lambda b: setattr(b.program, "workspace_size", -1), False),
    # tensors
    ("an input's empty name", "bad_name", lambda b: setattr(b.program.inputs[1], "name", ""), True),
    ("an output's empty name", "bad_name", lambda b: setattr(b.program.outputs[0], "name", ""), True),
    ("a 256-byte input name", "limit", lambda b: setattr(b.program.inputs[0], "name", "n" * 256), True),
    ("an input name holding a zero byte", "malformed", lambda b: setattr(b.program.inputs[0], "name", "a\0b"), True),
    ("two inputs of one name", "malformed", lambda b: setattr(b.program.inputs[2], "name", "x"), True),
    ("two outputs of one name", "malformed", lambda b: setattr(b.program.outputs[1], "name", "y"), True),
    ("an unknown dtype", "unsupported_type", lambda b: setattr(b.program.inputs[0], "dtype", "complex64"), False),
    ("rank 9", "limit", lambda b: (setattr(b.program.outputs[1], "shape", [1] * 9),
                                   setattr(b.program.outputs[1], "strides", [1] * 9)), True),
    ("sizes and strides of different counts", "malformed", lambda b: setattr(b.program.inputs[0], "strides", [1]),
     False),
    ("align 0", "malformed", lambda b: setattr(b.program.inputs[0], "align", 0), True),
    ("align 3", "malformed", lambda b: setattr(b.program.inputs[0], "align", 3), True),
    ("align 8192", "malformed", lambda b: setattr(b.program.inputs[0], "align", 8192), True),
    ("a negative size", "malformed", lambda b: setattr(b.program.inputs[0], "shape", [4, -8]), True),
    ("a negative stride", "malformed", lambda b: setattr(b.program.outputs[0], "strides", [-8, 1]), True),
    # constants
    ("a constant's empty name", "bad_name", lambda b: setattr(b.program.constants[1], "name", ""), True),
    ("a constant name of 65537 bytes", "limit", lambda b: setattr(b.program.constants[0], "name", "w" * 65537), True),
    ("a constant's unknown dtype", "unsupported_type", lambda b: setattr(b.program.constants[0], "dtype", "int4"),
     False),
    ("constant data that is not bytes", "invalid_argument", lambda b: setattr(b.program.constants[0], "data", "abc"),
     False),
    # buffers and the plan [R-program-plan]
    ("a buffer past the workspace", "malformed", lambda b: setattr(b.program.buffers[1], "size", 257), True),
    ("a buffer whose first step is after its last", "malformed", lambda b: setattr(b.program.buffers[0], "first", 3),
     True),
    ("a buffer's last step past the steps", "malformed", lambda b: setattr(b.program.buffers[2], "last", 10), True),
    ("two live buffers sharing a byte", "malformed", lambda b: setattr(b.program.buffers[2], "first", 2), True),
    ("two live buffers, one inside the other", "malformed",
     lambda b: b.program.buffers.append(tb.Buffer(200, 8, 3, 3)), True),
    # steps: kinds, fields and unused fields [R-program-steps]
    ("step kind 0", "malformed", lambda b: st(b, 0, kind=0), True),
    ("step kind 4", "malformed", lambda b: st(b, 3, kind=4), True),
    ("a launch of record 5 (of 5)", "malformed", lambda b: st(b, 1, record=5), True),
    ("a launch of config 1 (of 1)", "malformed", lambda b: st(b, 1, config=1), True),
    ("grid x 0", "malformed", lambda b: st(b, 1, grid=(0, 1, 1)), True),
    ("grid x 2^31", "malformed", lambda b: st(b, 1, grid=(1 << 31, 1, 1)), True),
    ("grid y 65536", "malformed", lambda b: st(b, 1, grid=(1, 65536, 1)), True),
    ("grid z 0", "malformed", lambda b: st(b, 1, grid=(1, 1, 0)), True),
    ("a launch's width", "malformed", lambda b: st(b, 1, width=1), True),
    ("a launch's value", "malformed", lambda b: st(b, 1, value=1), True),
    ("a launch's count", "malformed", lambda b: st(b, 1, count=1), True),
    ("a memset's record", "malformed", lambda b: st(b, 0, record=1), True),
    ("a memset's config", "malformed", lambda b: st(b, 0, config=1), True),
    ("a memset's grid", "malformed", lambda b: st(b, 0, grid=(1, 0, 0)), True),
    ("a copy's grid", "malformed", lambda b: st(b, 3, grid=(0, 0, 1)), True),
    ("a copy's width", "malformed", lambda b: st(b, 3, width=1), True),
    ("a copy's value", "malformed", lambda b: st(b, 3, value=1), True),
    ("memset width 3", "malformed", lambda b: st(b, 0, width=3), True),
    ("memset width 0", "malformed", lambda b: st(b, 8, width=0), True),
    ("memset width 8", "malformed", lambda b: st(b, 8, width=8), True),
    ("memset value 256, width 1", "malformed", lambda b: st(b, 8, value=256), True),
    ("memset value 65536, width 2", "malformed", lambda b: st(b, 6, value=65536), True),
    # operand counts
    ("a launch short of an operand", "malformed", lambda b: b.program.steps[1].operands.pop(), True),
    ("a launch with an extra operand", "malformed", lambda b: b.program.steps[1].operands.append((L_, 0, 0)), True),
    ("a memset of two operands", "malformed", lambda b: b.program.steps[0].operands.append((B_, 0, 0)), True),
    ("a copy of one operand", "malformed", lambda b: b.program.steps[3].operands.pop(), True),
    ("513 operands", "limit", lambda b: b.program.steps[1].operands.extend([(L_, 0, 0)] * 510), True),
    # operands [R-program-operands]
    ("operand space 5", "malformed", lambda b: op(b, 1, 2, (5, 0, 32)), True),
    ("a LITERAL of index 1", "malformed", lambda b: op(b, 1, 2, (L_, 1, 32)), True),
    ("input 3 (of 3)", "malformed", lambda b: op(b, 1, 1, (I_, 3, 0)), True),
    ("output 2 (of 2)", "malformed", lambda b: op(b, 3, 0, (O_, 2, 0)), True),
    ("constant 4 (of 4)", "malformed", lambda b: op(b, 7, 0, (C_, 4, 64)), True),
    ("buffer 4 (of 4)", "malformed", lambda b: op(b, 1, 0, (B_, 4, 0)), True),
    ("a pointer past its input's extent", "malformed", lambda b: op(b, 9, 0, (I_, 2, 3)), True),
    ("a pointer past its buffer", "malformed", lambda b: op(b, 5, 0, (B_, 2, 65)), True),
    ("a pointer past its constant", "malformed", lambda b: op(b, 7, 0, (C_, 2, 16)), True),
    ("an operand value over 64 bits", "malformed", lambda b: op(b, 1, 2, (L_, 0, 1 << 64)), False),
    ("a buffer used before its first step", "malformed", lambda b: op(b, 1, 0, (B_, 2, 0)), True),
    ("a buffer used after its last step", "malformed", lambda b: op(b, 5, 0, (B_, 0, 0)), True),
    # argument codes
    ("a pointer argument given a LITERAL", "malformed", lambda b: op(b, 1, 0, (L_, 0, 0)), True),
    ("an integer argument given a pointer", "malformed", lambda b: op(b, 1, 2, (I_, 0, 0)), True),
    ("a tensor descriptor argument", "unsupported_type",
     lambda b: b.program.steps.append(tb.Step(tb.LAUNCH, [(I_, 0, 0), (I_, 0, 0), (L_, 0, 0), (L_, 0, 0)], record=1,
                                              grid=(1, 1, 1))), True),
    ("'?' 2", "malformed", lambda b: op(b, 2, 1, (L_, 0, 2)), True),
    ("'b' -129", "malformed", lambda b: op(b, 2, 2, (L_, 0, u64(-129))), True),
    ("'b' 256", "malformed", lambda b: op(b, 2, 2, (L_, 0, 256)), True),
    ("'B' 256", "malformed", lambda b: op(b, 2, 3, (L_, 0, 256)), True),
    ("'h' 32768", "malformed", lambda b: op(b, 2, 4, (L_, 0, 32768)), True),
    ("'h' -32769", "malformed", lambda b: op(b, 2, 4, (L_, 0, u64(-32769))), True),
    ("'h' 65536 (types from the IR)", "malformed", lambda b: op(b, 5, 4, (L_, 0, 65536)), True),
    ("'H' 65536", "malformed", lambda b: op(b, 2, 5, (L_, 0, 65536)), True),
    ("'H' -32769", "malformed", lambda b: op(b, 2, 5, (L_, 0, u64(-32769))), True),
    ("'i' 2^31", "malformed", lambda b: op(b, 2, 6, (L_, 0, 1 << 31)), True),
    ("'i' -2^31-1", "malformed", lambda b: op(b, 2, 6, (L_, 0, u64(-(1 << 31) - 1))), True),
    ("'i' 2^32 (types from the IR)", "malformed", lambda b: op(b, 5, 6, (L_, 0, 1 << 32)), True),
    ("'I' 2^32", "malformed", lambda b: op(b, 2, 7, (L_, 0, 1 << 32)), True),
    ("'I' -2^31-1", "malformed", lambda b: op(b, 2, 7, (L_, 0, u64(-(1 << 31) - 1))), True),
    # divisibility
    ("a 16-aligned pointer at offset 8", "malformed", lambda b: op(b, 2, 0, (B_, 0, 8)), True),
    ("a 16-aligned pointer into an input of align 8", "malformed", lambda b: op(b, 7, 0, (I_, 1, 0)), True),
    ("an integer divisible by 16 given 8", "malformed", lambda b: op(b, 7, 2, (L_, 0, 8)), True),
    ("an integer divisible by 16 given -8", "malformed", lambda b: op(b, 7, 2, (L_, 0, u64(-8))), True),
    # memset and copy
    ("a memset's LITERAL destination", "malformed", lambda b: op(b, 0, 0, (L_, 0, 0)), True),
    ("a copy's LITERAL source", "malformed", lambda b: op(b, 3, 1, (L_, 0, 0)), True),
    ("a memset past its buffer", "malformed", lambda b: st(b, 0, count=33), True),
    ("a memset at an offset, past its buffer", "malformed", lambda b: op(b, 0, 0, (B_, 0, 4)), True),
    ("a copy's destination past its output", "malformed", lambda b: op(b, 3, 0, (O_, 0, 1)), True),
    ("a copy's source past its constant", "malformed", lambda b: op(b, 4, 1, (C_, 0, 37)), True),
    ("a memset of a constant that is not state", "malformed", lambda b: op(b, 6, 0, (C_, 0, 0)), True),
    ("a copy into a constant that is not state", "malformed",
     lambda b: b.program.steps.append(tb.Step(tb.COPY, [(C_, 0, 0), (I_, 0, 0)], count=4)), True),
    ("a copy between overlapping bytes of one buffer", "malformed",
     lambda b: b.program.steps.__setitem__(3, tb.Step(tb.COPY, [(B_, 1, 0), (B_, 1, 64)], count=65)), True),
    # launches that write a read-only constant, and grids [R-program-grid]
    ("a launch's in_out_ptr0 on a read-only constant", "malformed",
     lambda b: b.program.steps.append(tb.Step(tb.LAUNCH, [(C_, 0, 0), (L_, 0, 4), (L_, 0, 1), (L_, 0, 0)],
                                              grid=(1, 1, 1))), True),
    ("a grid other than its config's rule gives", "malformed", lambda b: st(b, 1, grid=(2, 1, 1)), True),
    ("a grid whose rule reads a literal over the grid's range", "malformed",
     lambda b: (op(b, 1, 2, (L_, 0, 1 << 31)), st(b, 1, grid=(1, 1, 1))), True),
    ("2^29 blocks in clusters of 4", "malformed",
     lambda b: (b.records.append(tb.Record("prog:cl", "cl", [tb.Config("HASH1", "cl", "k.cubin", "O", "", 4, 4)])),
                b.program.steps.append(tb.Step(tb.LAUNCH, [(I_, 0, 0)], record=len(b.records) - 1,
                                               grid=(1 << 29, 1, 1)))), True),
]

# what the writer takes: edges that are not refusals
MODEL_OK = [
    ("an input and an output of one name", lambda b: None),
    ("align 4096 and 1", lambda b: (setattr(b.program.inputs[0], "align", 4096),
                                     setattr(b.program.inputs[1], "align", 1))),
    ("rank 8", lambda b: (setattr(b.program.outputs[1], "shape", [1] * 7 + [0]),
                          setattr(b.program.outputs[1], "strides", [0] * 8))),
    ("a size 2^63-1", lambda b: (setattr(b.program.outputs[1], "shape", [I64_MAX, 0]))),
    ("buffers that touch, live together", lambda b: b.program.buffers.append(tb.Buffer(256, 128, 0, 9))),
    ("a zero-size buffer inside a live one", lambda b: b.program.buffers.append(tb.Buffer(64, 0, 0, 9))),
    ("a copy between adjacent bytes of one buffer",
     lambda b: b.program.steps.__setitem__(3, tb.Step(tb.COPY, [(B_, 1, 0), (B_, 1, 64)], count=64))),
    ("a copy of 0 bytes onto itself", lambda b: b.program.steps.__setitem__(
        3, tb.Step(tb.COPY, [(B_, 1, 8), (B_, 1, 8)], count=0))),
    ("a pointer at its object's end", lambda b: op(b, 1, 1, (I_, 0, 128))),
    ("'?' 0, 'b' 127, 'i' 2^31-1, 'I' -2^31", lambda b: [op(b, 2, j, (L_, 0, v)) for j, v in
                                                         ((1, 0), (2, 127), (6, I32_MAX), (7, u64(I32_MIN)))]),
    ("an integer divisible by 16: 0 and -32", lambda b: op(b, 7, 2, (L_, 0, u64(-32)))),
    ("a float marked divisible, any bits", lambda b: op(b, 7, 3, (L_, 0, 0x7ff0000000000001))),
    ("an empty program", lambda b: setattr(b, "program", tb.Program())),
    ("memset width 1, value 255", lambda b: st(b, 8, value=255)),
    ("a launch's in_out_ptr0 on a state constant", lambda b: b.program.steps.append(
        tb.Step(tb.LAUNCH, [(C_, 1, 0), (L_, 0, 4), (L_, 0, 1), (L_, 0, 0)], grid=(1, 1, 1)))),
    ("2^29 - 1 blocks in clusters of 4", lambda b: (
        b.records.append(tb.Record("prog:cl", "cl", [tb.Config("HASH1", "cl", "k.cubin", "O", "", 4, 4)])),
        b.program.steps.append(tb.Step(tb.LAUNCH, [(I_, 0, 0)], record=len(b.records) - 1,
                                       grid=((1 << 29) - 1, 1, 1))))),
]
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def byte_cases(data, L):
    """(what, the code, bytes) of refusals the writer cannot make: patches of
    a well-formed program bundle's section 5, resealed."""
    h = L["header"]
    t0, k0, k1, k3 = L["tensors"][0], L["constants"][0], L["constants"][1], L["constants"][3]
    s0, s1 = L["steps"][0]["at"], L["steps"][1]["at"]
    left = L["end"] - h - 4  # the bytes after the first count
    u32 = lambda at: struct.unpack_from("<I", data, at)[0]
    u64_ = lambda at: struct.unpack_from("<Q", data, at)[0]
    cases = [
        ("input count 65537", "limit", [(h, "<I", 65537)]),
        ("input count past the bytes that remain", "truncated", [(h, "<I", left // 24 + 1)]),
        ("output count 65537", "limit", [(h + 4, "<I", 65537)]),
        ("output count past the bytes that remain", "truncated", [(h + 4, "<I", (left - 4) // 24 + 1)]),
        ("constant count 1000001", "limit", [(h + 8, "<I", 1000001)]),
        ("constant count past the bytes that remain", "truncated", [(h + 8, "<I", (left - 8) // 32 + 1)]),
        ("buffer count 1000001", "limit", [(h + 12, "<I", 1000001)]),
        ("buffer count past the bytes that remain", "truncated", [(h + 12, "<I", (left - 12) // 24 + 1)]),
        ("step count 1000001", "limit", [(h + 16, "<I", 1000001)]),
        ("step count past the bytes that remain", "truncated", [(h + 16, "<I", (left - 16) // 48 + 1)]),
        ("operand total past the bytes that remain", "truncated", [(h + 20, "<I", (left - 20) // 16 + 1)]),
        # [R-program-totals]
        ("operand total one more than the steps hold", "malformed", [(h + 20, "<I", u32(h + 20) + 1)]),
        ("operand total one less than the steps hold", "malformed", [(h + 20, "<I", u32(h + 20) - 1)]),
        ("program flags 1", "malformed", [(h + 24, "<I", 1)]),
        ("program reserved field", "malformed", [(h + 28, "<I", 1)]),
        ("dtype 0", "unsupported_type", [(t0["dtype"], "<I", 0)]),
        ("dtype 18", "unsupported_type", [(t0["dtype"], "<I", 18)]),
        ("rank 9", "limit", [(t0["rank"], "<I", 9)]),
        ("a tensor's reserved field", "malformed", [(t0["reserved"], "<I", 1)]),
        ("a size of 2^63", "malformed", [(t0["sizes"], "<Q", 1 << 63)]),
        # [R-program-constants]
        ("a constant's dtype 99", "unsupported_type", [(k0["dtype"], "<I", 99)]),
        ("constant flags 2", "malformed", [(k0["flags"], "<I", 2)]),
        ("constant flags 0x80000001", "malformed", [(k1["flags"], "<I", 0x80000001)]),
        ("a constant's offset not a multiple of 64", "malformed", [(k0["offset"], "<Q", u64_(k0["offset"]) + 8)]),
        ("a constant's offset 64 on (non-zero bytes before it)", "malformed",
         [(k0["offset"], "<Q", u64_(k0["offset"]) + 64)]),
        ("a constant before the end of the steps", "malformed", [(k0["offset"], "<Q", u64_(k0["offset"]) - 64)]),
        ("a constant at offset 0", "malformed", [(k0["offset"], "<Q", 0)]),
        ("a constant past the section's end", "truncated", [(k3["size"], "<Q", u64_(k3["size"]) + 64)]),
        ("a constant of 2^64-1 bytes", "truncated", [(k3["size"], "<Q", U64)]),
        ("a constant at 2^64-64", "truncated", [(k3["offset"], "<Q", U64 - 63)]),
        ("constants out of table order", "malformed", [(k0["offset"], "<Q", u64_(k3["offset"])),
                                                       (k3["offset"], "<Q", u64_(k0["offset"]))]),
        ("two constants on the same bytes", "malformed", [(k1["offset"], "<Q", u64_(k0["offset"]))]),
        ("a non-zero byte between the steps and the constants", "malformed", [(L["end_steps"], "<B", 1)]),
        ("a non-zero byte in the section's padding after the last constant", "malformed", [(L["end"], "<B", 1)]),
        ("a step's reserved field", "malformed", [(s0 + STEP_FIELDS["reserved"], "<I", 1)]),
        ("a step's operand count 513", "limit", [(s1 + 4, "<I", 513)]),
        ("a launch's operand count one more", "malformed", [(s1 + 4, "<I", 4)]),
        # the order of the checks, where two rules break at once (FORMAT.md): a tensor's fixed fields
        # in file order (its name before its reserved field, its dtype before its rank), the names'
        # uniqueness after every tensor, a step's operand total before its operands' bytes
        ("an empty input name and a reserved field", "bad_name",
         [(t0["name"], "<I", 0), (t0["name"] + 4, "<B", 0), (t0["reserved"], "<I", 1)]),
        ("dtype 99 of rank 99", "unsupported_type", [(t0["dtype"], "<I", 99), (t0["rank"], "<I", 99)]),
        ("two inputs named x, then an output of dtype 99", "unsupported_type",
         [(L["tensors"][2]["name"] + 4, "<B", ord("x")), (L["tensors"][3]["dtype"], "<I", 99)]),
        # each buffer checked as it is read (issue 38 #14): buffer 0 outside the workspace, refused before the
        # bytes run out for a buffer count that fits the bytes after it but not those after the tables
        ("buffer 0 outside the workspace, then buffers past the bytes that remain", "malformed",
         [(h + 12, "<I", (left - 12) // 24), (L["buffers"][0], "<Q", 1 << 40)]),
    ]
    out = []
    for what, code, patches in cases:
        out.append((what, code, resealed(data, *patches)))
    # one change in place of each field of step 1 and step 0
    for name, at in STEP_FIELDS.items():
        if name in ("operand_count", "reserved"):
            continue
        if name == "count":
            out.append(("step 1's %s 1" % name, "malformed", resealed(data, (s1 + at, "<Q", 1))))
        else:
            out.append(("step 1's %s 0xffffffff" % name, "malformed", resealed(data, (s1 + at, "<I", 0xFFFFFFFF))))
    return out


def program_checks(lib, tmp):
    """Section 5 in Python alone: round trips, every rule's refusal with its
    code from the writer and the reader, hostile bytes. Returns the
    refusals' (what, code, bytes) for program_c_checks."""
    b = program_bundle()
    data = tb.write(b)
    back = tb.read(data)
    check(back == b and tb.write(back) == data and back.version == (2, tb.FORMAT_MINOR),
          "a bundle with a program: written, read back equal (the writer's format), written again to the same %d bytes"
          % len(data))
    L = program_layout(data)
    sec = struct.unpack_from("<IIQ", data, L["section"])
    nsec = struct.unpack_from("<I", data, 24)[0]
    offs = [struct.unpack_from("<Q", data, k["offset"])[0] for k in L["constants"]]
    sizes = [struct.unpack_from("<Q", data, k["size"])[0] for k in L["constants"]]
    want, pos = [], L["end_steps"]
    for n in sizes:
        pos += -pos % 64
        want.append(pos)
        pos += n
    check(nsec == 5 and sec[:2] == (5, 0) and L["end"] + (-L["end"] % 8) == len(data) - 8 and L["end"] % 8 and
          offs == want and pos == L["end"] and struct.unpack_from("<H", data, 10)[0] == tb.FORMAT_MINOR,
          "section 5 is last and optional (flags 0), its payload ending with the last constant, each at the next "
          "multiple of 64 after the steps or the constant before, in table order; the header says the writer's version")
    check(all(isinstance(k.data, memoryview) and k.data.obj is data for k in back.program.constants) and
          bytes(back.program.constants[0].data) == bytes(b.program.constants[0].data) and
          len(back.program.constants[0].data) == 100,
          "the reader's constants are views into the input, not copies (an array('f') constant: its 100 bytes)")
    check(tb.read(tb.write(sample_bundle())).program is None and
          struct.unpack_from("<I", tb.write(sample_bundle()), 24)[0] == 4 and
          struct.unpack_from("<H", tb.write(sample_bundle()), 10)[0] == tb.format.FORMAT_MINOR,
          "a bundle without a program: no section 5, program None when read back, and the writer's minor version")
    e = tb.Bundle(program=tb.Program())
    d = tb.write(e)
    check(tb.read(d) == e and tb.read(d).program is not None and program_layout(d)["end"] - program_layout(d)["start"]
          == 40, "an empty program: a 40-byte section 5, read back as an empty Program")

    # the pieces: large constants are not joined before the checksum or the file
    path = os.path.join(tmp, "program.tbundle")
    big = tb.Bundle(program=tb.Program(constants=[tb.Constant("a", "uint8", bytes(range(256)) * 6000),
                                                  tb.Constant("b", "int8", b"\x01" * 70000),
                                                  tb.Constant("c", "int8", b"\x02" * 3)]))
    bd = tb.write(big)
    tb.write_file(big, path)
    pieces = FMT._write_pieces(big)
    check(open(path, "rb").read() == bd and len(pieces) >= 4 and bd[-8:] == struct.pack(
        "<Q", tb.bundle_checksum(bd[:-8])) and tb.read(bd) == big,
          "constants of 1.5 MiB and 70000 bytes: written as pieces of their own (%d pieces), the checksum over "
          "blocks that span them equals the whole file's, write_file gives write's bytes" % len(pieces))

    # every rule, from the writer and from the reader
    refusals, wrong = [], []
    for what, code, change, framed in MODEL_CASES:
        m = program_bundle()
        change(m)
        try:
            tb.write(m)
            got = "ok"
        except tb.BundleError as err:
            got = err.code
        rd = "-"
        if framed:
            with unchecked():
                raw = tb.write(m)
            rd = py_code(raw)
            refusals.append((what, code, raw))
        if got != code or rd not in (code, "-"):
            wrong.append("%s: writer %s, reader %s, want %s" % (what, got, rd, code))
    for w in wrong:
        print("    " + w)
    check(not wrong, "%d programs that break a rule of section 5: the writer refuses each with its code, and the "
          "reader the bytes of the %d it can frame" % (len(MODEL_CASES), sum(c[3] for c in MODEL_CASES)))
    bad = []
    for what, change in MODEL_OK:
        m = program_bundle()
        change(m)
        try:
            ok = tb.read(tb.write(m)) == m
        except tb.BundleError as err:
            ok = err
        if ok is not True:
            bad.append("%s: %s" % (what, ok))
    for w in bad:
        print("    " + w)
    check(not bad, "%d edges that break no rule: written, read back equal" % len(MODEL_OK))
    wrong = []
    for what, code, raw in byte_cases(data, L):
        got = py_code(raw)
        if got != code:
            wrong.append("%s: reader %s, want %s" % (what, got, code))
        refusals.append((what, code, raw))
    for w in wrong:
        print("    " + w)
    check(not wrong, "%d changes of the bytes the writer never writes (counts, reserved fields, flags, offsets, "
          "padding): the reader refuses each with its code" % len(byte_cases(data, L)))

    # section order and duplicates: a program without constants moved or doubled
    nb = program_bundle()
    nb.program.constants = []  # and the steps 4, 6 and 7 that use them: buffer 2's step 5 becomes 4
    nb.program.steps = [s for s in nb.program.steps if not any(o[0] == C_ for o in s.operands)]
    nb.program.buffers[2].last = 4
    nd = tb.write(nb)
    secs, pos = [], 32
    for _ in range(struct.unpack_from("<I", nd, 24)[0]):
        n = 16 + struct.unpack_from("<Q", nd, pos + 8)[0]
        n += -n % 8
        secs.append(nd[pos:pos + n])
        pos += n

    def framed(parts):
        body = b"".join(parts)
        m = bytearray(nd[:32]) + body + bytes(8)
        struct.pack_into("<QI", m, 16, len(m), len(parts))
        return resealed(bytes(m))
    orders = {"5 before 2": ([secs[0], secs[4], secs[1], secs[2], secs[3]], "malformed"),
              "5 twice": (secs + [secs[4]], "malformed"),
              "5 before 3 and 4": ([secs[0], secs[1], secs[4], secs[2], secs[3]], "ok"),
              "5 before 1": ([secs[1], secs[4], secs[0], secs[2], secs[3]], "ok"),
              "5 alone, without 2 (its launch names no record)": ([secs[4]], "malformed")}
    wrong = []
    for what, (parts, code) in orders.items():
        raw = framed(parts)
        got = py_code(raw)
        if got != code:
            wrong.append("%s: %s, want %s" % (what, got, code))
        if code != "ok":
            refusals.append(("sections " + what, code, raw))
    check(tb.read(framed(secs)) == nb and not wrong, "section 5 is read after section 2 in any place, at most once "
          "(%s)" % "; ".join(wrong or ["%d orders" % len(orders)]))
    last = program_layout(nd)["steps"][-1]  # nothing follows its operands
    raw = resealed(nd, (last["at"] + 4, "<I", (program_layout(nd)["end"] - last["at"] - 8) // 16 + 1))
    check(py_code(raw) == "truncated", "the last step's operand count past the bytes that remain: truncated")
    refusals.append(("the last step's operand count past the bytes that remain", "truncated", raw))
    # one that fits the bytes when its count is read, but not after the step's fields, and is past the
    # operand total: the total is checked first
    raw = resealed(nd, (last["at"] + 4, "<I", (program_layout(nd)["end"] - last["at"] - 8) // 16))
    check(py_code(raw) == "malformed", "the last step's operand count past the total and the bytes after its "
          "fields: malformed (the total before the operands' bytes)")
    refusals.append(("the last step's operand count past the total and the bytes", "malformed", raw))

    # hostile bytes: every truncation, and resealed changes of section 5's
    # bytes, give BundleError or a bundle the writer takes
    small = program_bundle()
    small.program.constants[3].data = b"\x05" * 100
    sd = tb.write(small)
    sl = program_layout(sd)
    other = []
    for n in range(len(sd)):
        try:
            tb.read(sd[:n])
            other.append((n, "accepted"))
        except tb.BundleError:
            pass
        except Exception as err:  # noqa: BLE001
            other.append((n, repr(err)))
    for o in other[:5]:
        print("    truncated at %d: %s" % o)
    check(not other, "a program bundle truncated at each of its %d bytes: BundleError every time" % len(sd))
    other, taken, same = [], 0, 0
    rnd = random.Random(5)
    with no_checksum():
        for at in range(sl["section"], len(sd) - 8):
            for v in {0, 0xFF, sd[at] ^ (1 << rnd.randrange(8))} - {sd[at]}:
                m = bytearray(sd)
                m[at] = v
                m = bytes(m)
                try:
                    r = tb.read(m, verify_checksum=False)
                except tb.BundleError:
                    continue
                except Exception as err:  # noqa: BLE001
                    other.append((at, v, repr(err)))
                    continue
                taken += 1
                try:
                    same += tb.write(r)[:-8] == m[:-8]
                except Exception as err:  # noqa: BLE001
                    other.append((at, v, "read, then refused by the writer: %r" % err))
    for o in other[:5]:
        print("    byte %d = 0x%02x: %s" % o)
    check(not other and taken, "every byte of section 5 changed (%d bytes; to 0, 0xff and one bit flipped): "
          "BundleError, or a "
          "bundle the writer takes (%d taken, %d of them written back to the same bytes)" % (
              len(sd) - 8 - sl["section"], taken, same))

    # the plan: the forward scan against all pairs, and its speed
    rnd = random.Random(11)
    disagree = 0
    for trial in range(400):
        bufs = [tb.Buffer(rnd.randrange(0, 64, 8), rnd.choice([0, 8, 16, 24, 40]), 0, 0)
                for _ in range(rnd.randint(1, 12))]
        for bf in bufs:
            bf.first = rnd.randrange(10)
            bf.last = bf.first + rnd.randrange(3)
        brute = any(a.size and c.size and a.offset < c.offset + c.size and c.offset < a.offset + a.size and
                    a.first <= c.last and c.first <= a.last for i, a in enumerate(bufs) for c in bufs[i + 1:])
        try:
            FMT._check_plan(bufs)
            scan = False
        except tb.BundleError:
            scan = True
        disagree += brute != scan
    import time
    t = time.time()
    FMT._check_plan([tb.Buffer(0, 1 << 20, i, i) for i in range(200000)])
    FMT._check_plan([tb.Buffer(i * 64, 64, 0, 199999) for i in range(200000)])
    took = time.time() - t
    check(not disagree and took < 20, "the plan's check agrees with all pairs on 400 random plans, and takes "
          "%.1f s for 200000 buffers at one offset and 200000 side by side" % took)

    # the command line
    path = os.path.join(tmp, "program.tbundle")
    tb.write_file(b, path)
    out = subprocess.run([sys.executable, os.path.join(ROOT, "python", "triton_bundle"), "list", path],
                         capture_output=True, text=True)
    check(out.returncode == 0 and "program forward: 3 inputs, 2 outputs, 4 constants (70133 bytes, 1 state: 32 bytes), "
          "workspace 384 bytes in 4 buffers, 10 steps (5 launch, 3 memset, 2 copy)" in out.stdout and
          "input 0: x float32[4, 8]" in out.stdout and "output 1: x int32[0, 5]" in out.stdout and
          "input 2: s float16[]" in out.stdout, "triton_bundle list prints the program%s" % (
              "" if out.returncode == 0 else ": " + out.stderr.strip()))
    return refusals


def programs_bundle():
    """sample_bundle and two programs as a prefill and a decode: "fill"
    writes its input into the shared state kv, "step" reads kv and writes
    its own input into kv[0]; both read the weight w. Added with
    add_program, so each constant is in the table once."""
    b = sample_bundle()
    I, O, C = tb.INPUT, tb.OUTPUT, tb.CONSTANT
    w = tb.Constant("w", "float32", struct.pack("<4f", 0.5, 1.5, 2.5, 3.5))
    kv = tb.Constant("kv", "int32", struct.pack("<4i", 7, 7, 7, 7), state=True, shared=True)
    fill = tb.Program([tb.TensorSpec("x", "int32", [4], [1])], [tb.TensorSpec("y", "float32", [4], [1])], [w, kv],
                      steps=[tb.Step(tb.COPY, [(C, 1, 0), (I, 0, 0)], count=16),
                             tb.Step(tb.COPY, [(O, 0, 0), (C, 0, 0)], count=16)], name="fill")
    step = tb.Program([tb.TensorSpec("t", "int32", [1], [1])], [tb.TensorSpec("o", "int32", [4], [1])],
                      [tb.Constant("kv", "int32", struct.pack("<4i", 7, 7, 7, 7), True, True),
                       tb.Constant("w", "float32", struct.pack("<4f", 0.5, 1.5, 2.5, 3.5))],
                      steps=[tb.Step(tb.COPY, [(O, 0, 0), (C, 0, 0)], count=16),
                             tb.Step(tb.COPY, [(C, 0, 0), (I, 0, 0)], count=4)], name="step")
    b.add_program(fill)
    b.add_program(step)
    b.properties = {"generate.max_seq": "4", "generate.max_seX": ""}
    return b


def section_offsets(data):
    """{section type: its header's offset} of a bundle's bytes."""
    secs, pos = {}, 32
    for _ in range(struct.unpack_from("<I", data, 24)[0]):
        typ, _, n = struct.unpack_from("<IIQ", data, pos)
        secs[typ] = pos
        pos += 16 + n + (-(16 + n) % 8)
    return secs


def reader_mismatches(lib, data, start):
    """Every truncation of data from byte start on, and every byte from
    start on set to 0, 1, 0x80 and 0xFF with the checksum resealed (C's
    XXH3: data is one checksum block): (cases, [(what, C's code, Python's
    code)] where the two readers disagree)."""
    def sealed(m):
        value = struct.pack("<Q", lib.L.tb_xxh3_64(bytes(m[:-8]), len(m) - 8))
        m[-8:] = struct.pack("<Q", lib.L.tb_xxh3_64(value, 8))
        return bytes(m)

    def compare(raw, what):
        c, h = cread(lib, raw)
        if h:
            lib.free(h)
        py = py_code(raw, False)  # sealed: checking the seal again in Python would only take time
        if c != py:
            mism.append((what, c, py))
    assert len(data) <= 1 << 20
    mism, cases = [], 0
    for n in range(start, len(data)):
        cases += 1
        compare(data[:n], "truncated at %d" % n)
    for at in range(start, len(data) - 8):
        for v in (0, 1, 0x80, 0xFF):
            if v == data[at]:
                continue
            m = bytearray(data)
            m[at] = v
            cases += 1
            compare(sealed(m), "byte %d = 0x%02x" % (at, v))
    return cases, mism


def external_bundle():
    """programs_bundle with its weight w external: tensor "model.w" of a
    weights file (2.5)."""
    import zlib
    b = programs_bundle()
    w = b.programs[0].constants[0]
    assert w.name == "w"
    w.external = tb.External("model.w", [4], zlib.crc32(bytes(w.data)))
    w.data = b""
    return b


def weights_code(lib, raw):
    """The C library's result name for a safetensors file of these bytes."""
    import ctypes as ct
    L = lib.L
    L.tb_weights_open_memory.argtypes = [ct.c_char_p, ct.c_size_t, ct.c_void_p, ct.POINTER(ct.c_void_p), ct.c_void_p]
    L.tb_weights_open_memory.restype = ct.c_int
    L.tb_weights_free.argtypes = [ct.c_void_p]
    err = ct.create_string_buffer(2048)
    h = ct.c_void_p()
    r = L.tb_weights_open_memory(raw, len(raw), None, ct.byref(h), err)
    if h.value:
        L.tb_weights_free(h)
    return tb.native.RESULTS[r]


def external_checks(lib):
    """External constants (2.5) and weights files: Python writes, C reads
    the same bytes, every byte of section 6 changed read alike; the
    safetensors reader of each side refuses the same files with the same
    codes. [R-external] [R-weights]"""
    from triton_bundle import weights as tw
    b = external_bundle()
    data = tb.write(b)
    back = tb.read(data)
    w = back.programs[0].constants[0]
    check(back == b and w.external == tb.External("model.w", [4], b.programs[0].constants[0].external.crc32) and
          not bytes(w.data) and w.nbytes() == 16 and struct.unpack_from("<H", data, 10)[0] == tb.FORMAT_MINOR,
          "an external constant: written by Python (at 2.%d)" % tb.FORMAT_MINOR + ", read back with its tensor, shape and CRC-32, no bytes")
    check(lib.write(lib.read(data)) == data, "the C library reads it and writes the same %d bytes" % len(data))
    secs = section_offsets(data)
    cases, mism = reader_mismatches(lib, data, secs[6])
    check(not mism, "every truncation and changed byte of section 6 with an external constant: both readers agree "
          "(%d cases)%s" % (cases, ": %r" % mism[:5] if mism else ""))
    # an external constant after one the bundle holds (a state one first, as a KV cache before the weights)
    import zlib
    C = tb.CONSTANT
    p2 = tb.Program([tb.TensorSpec("x", "int32", [4], [1])], [tb.TensorSpec("y", "float32", [4], [1])],
                    [tb.Constant("kv", "int32", struct.pack("<4i", 7, 7, 7, 7), state=True),
                     tb.Constant("w", "float32", b"", external=tb.External("model.w", [4], zlib.crc32(b"\0" * 16)))],
                    steps=[tb.Step(tb.COPY, [(C, 0, 0), (tb.INPUT, 0, 0)], count=16),
                           tb.Step(tb.COPY, [(tb.OUTPUT, 0, 0), (C, 1, 0)], count=16)])
    b2 = sample_bundle()
    b2.program = p2
    d2 = tb.write(b2)
    check(tb.read(d2) == b2 and lib.write(lib.read(d2)) == d2,
          "a state constant, then an external one: both readers read it, the C library writes the same bytes")
    old = resealed(data, (10, "<H", 4))
    check(cread(lib, old)[0] == py_code(old, False) == "malformed",
          "an external constant in a file that says 2.4: refused by both")
    # safetensors files
    tmp = tempfile.mkdtemp(prefix="tbst-")
    path = os.path.join(tmp, "w.safetensors")
    crcs = tw.write_file(path, [("a", "float32", [2, 3], bytes(range(24))), ("b.c", "bfloat16", [4], bytes(8))],
                         {"format": "pt"})
    raw = open(path, "rb").read()
    hd = tw.read_header(path)
    check(sorted(hd) == ["a", "b.c"] and hd["a"].shape == [2, 3] and hd["b.c"].dtype == "bfloat16" and
          (struct.unpack_from("<Q", raw, 0)[0] + 8) % 8 == 0 and tw.crc32_of(path, hd["a"]) == crcs["a"] and
          weights_code(lib, raw) == "ok", "write_file: a safetensors file the C library opens, 8-aligned data, "
          "the CRC-32s it returned")
    mism, cases = [], 0
    hlen = struct.unpack_from("<Q", raw, 0)[0]

    def py_st(m):
        try:
            tw.parse_header(m, len(m))
            return "ok"
        except tb.BundleError as e:
            return e.code
    for n in range(len(raw)):
        cases += 1
        if weights_code(lib, raw[:n]) != py_st(raw[:n]):
            mism.append(("truncated at %d" % n, weights_code(lib, raw[:n]), py_st(raw[:n])))
    for at in range(8 + hlen):
        for v in (0x20, 0x30, 0x7b, 0x22):
            m = bytearray(raw)
            if m[at] == v:
                continue
            m[at] = v
            cases += 1
            c, py = weights_code(lib, bytes(m)), py_st(bytes(m))
            if (c == "ok") != (py == "ok"):
                mism.append(("byte %d = %r" % (at, chr(v)), c, py))
    check(not mism, "safetensors headers: every truncation and %d changed bytes, the C and Python readers accept "
          "the same files%s" % (cases, ": %r" % mism[:5] if mism else ""))
    # keys with their escapes decoded, whatever their length (FORMAT.md, issue 38 #4)

    def st_raw(head, data=bytes(8)):
        head += b" " * (-len(head) % 8)
        return struct.pack("<Q", len(head)) + head + data
    esc = b'"\\u0064\\u0074\\u0079\\u0070\\u0065": "U8"'
    rest = b'"shape": [8], "data_offsets": [0, 8]'
    got = [(weights_code(lib, r), py_st(r)) for r in (
        st_raw(b'{"a": {' + esc + b", " + rest + b"}}"),
        st_raw(b'{"a": {"dtype": "U8", ' + esc + b", " + rest + b"}}"),
        st_raw(b'{"' + b"n" * 65536 + b'": {"dtype": "U8", ' + rest + b"}}"),
        st_raw(b'{"' + b"n" * 65537 + b'": {"dtype": "U8", ' + rest + b"}}"))]
    check(got == [("ok", "ok"), ("malformed", "malformed"), ("ok", "ok"), ("limit", "limit")],
          "safetensors keys: dtype in escapes is dtype (beside a plain one, twice: malformed); a tensor name of "
          "65,536 bytes read, of 65,537 refused (limit): the C and Python readers alike (%r)" % got)


def programs_checks(lib):
    """Section 6 (2.4): several programs sharing their constants, in Python
    and against the C library: the same bytes both ways, the refusals of
    sharing, every byte changed read alike."""
    b = programs_bundle()
    data = tb.write(b)
    back = tb.read(data)
    secs, pos = [], 32
    for _ in range(struct.unpack_from("<I", data, 24)[0]):
        typ, _, n = struct.unpack_from("<IIQ", data, pos)
        secs.append((typ, pos))
        pos += 16 + n + (-(16 + n) % 8)
    at6 = dict(secs).get(6)
    check(back == b and [p.name for p in back.programs] == ["fill", "step"] and len(back.programs[0].constants) == 2
          and back.programs[1].constants is back.programs[0].constants and back.programs[1].steps[0].operands[1] ==
          (tb.CONSTANT, 1, 0) and at6 and 5 not in dict(secs),
          "two programs sharing a weight and a state: one table of 2 constants (step's kv renumbered to 1), written "
          "as section 6, read back equal")
    cw = lib.write(lib.read(data))
    check(cw == data, "the C library reads the two programs and writes the same %d bytes" % len(data))
    wrong = []

    def refused(what, code, change):
        m = programs_bundle()
        try:
            change(m)
            got = "ok"
        except tb.BundleError as e:
            got = e.code
        if got != code:
            wrong.append("%s: %s, want %s" % (what, got, code))
    refused("a second program named step", "invalid_argument", lambda m: m.add_program(tb.Program(name="step")))
    refused("w with other bytes", "invalid_argument", lambda m: m.add_program(tb.Program(
        constants=[tb.Constant("w", "float32", bytes(16))], name="s2")))
    refused("kv state but not shared", "invalid_argument", lambda m: m.add_program(tb.Program(
        constants=[tb.Constant("kv", "int32", struct.pack("<4i", 7, 7, 7, 7), True)], name="s2")))
    refused("two constants of one name in a program", "invalid_argument", lambda m: m.add_program(tb.Program(
        constants=[tb.Constant("z", "int8", b"1"), tb.Constant("z", "int8", b"1")], name="s2")))
    refused("shared but not state", "malformed", lambda m: (setattr(m.programs[0].constants[0], "shared", True),
                                                            tb.write(m)))
    refused("an empty program name", "bad_name", lambda m: (setattr(m.programs[1], "name", ""), tb.write(m)))
    refused("programs with tables of their own", "invalid_argument", lambda m: (
        setattr(m.programs[1], "constants", [m.programs[0].constants[0], tb.Constant("kv", "int32", bytes(16), True,
                                                                                    True)]), tb.write(m)))
    refused("a property key of 256 bytes", "limit", lambda m: (m.properties.update({"k" * 256: "v"}), tb.write(m)))
    refused("an empty property key", "bad_name", lambda m: (m.properties.update({"": "v"}), tb.write(m)))
    refused("a property value that is no string", "invalid_argument", lambda m: (m.properties.update({"k": 4}),
                                                                                  tb.write(m)))
    props = tb.Bundle(properties={"a": "1"})
    pd = tb.write(props)
    one = tb.Bundle(programs=[tb.Program()], properties={"generate.max_seq": "9"})
    od = tb.write(one)
    check(tb.read(pd) == props and lib.write(lib.read(pd)) == pd and tb.read(od) == one and
          lib.write(lib.read(od)) == od and b"\x06\x00\x00\x00" in od[32:40 + len(od)],
          "properties alone, and with one program named forward (then section 6): read back equal, the same bytes "
          "from C")
    check(not wrong, "add_program and the writer refuse what section 6 forbids%s" % (
        "" if not wrong else ": " + "; ".join(wrong)))
    # the reader's refusals, each against the C reader
    # kv's flags: after the properties, w's entry and kv's name
    k1flags = at6 + 16 + 16 + (24 + 8) + (24 + 8) + 8 + 24 + 8 + 4
    cases = [("kv state, not shared, used by both", "malformed", [(k1flags, "<I", 1)]),
             ("kv shared, not state", "malformed", [(k1flags, "<I", 2)]),
             ("constant flags 4", "malformed", [(k1flags, "<I", 7)]),
             ("section 6 in a 2.3 file", "malformed", [(10, "<H", 3)]),
             ("program count 0", "malformed", [(at6 + 16, "<I", 0)]),
             ("program count 1025", "limit", [(at6 + 16, "<I", 1025)]),
             ("section 6's reserved field", "malformed", [(at6 + 28, "<I", 1)]),
             ("property count 4097", "limit", [(at6 + 24, "<I", 4097)])]
    pkey = data.index(b"generate.max_seX", at6)
    cases.append(("two properties named generate.max_seq", "malformed", [(pkey + 15, "<B", ord("q"))]))
    name2 = data.index(b"step", at6)
    cases.append(("two programs named fill", "malformed", [(name2, "<4s", b"fill")]))
    mism = []
    for what, code, patches in cases:
        raw = resealed(data, *patches)
        py = py_code(raw)
        c, h = cread(lib, raw)
        if h:
            lib.free(h)
        if py != code or c != code:
            mism.append("%s: Python %s, C %s, want %s" % (what, py, c, code))
    check(not mism, "%d sections 6 that break a rule: both readers refuse each with its code%s" % (
        len(cases), "" if not mism else ": " + "; ".join(mism)))
    # both sections: refused in either order
    one = sample_bundle()
    one.program = tb.Program()

    def sections(d):
        out, pos = {}, 32
        for _ in range(struct.unpack_from("<I", d, 24)[0]):
            typ, _, n = struct.unpack_from("<IIQ", d, pos)
            end = pos + 16 + n + (-(16 + n) % 8)
            out[typ] = d[pos:end]
            pos = end
        return out
    s6, s5 = sections(data), sections(tb.write(one))
    both = []
    for order in ((5, 6), (6, 5)):
        body = b"".join(s6[t] for t in sorted(s6) if t != 6) + b"".join((s5 if t == 5 else s6)[t] for t in order)
        m = bytearray(data[:32]) + body + bytes(8)
        struct.pack_into("<QI", m, 16, len(m), len(s6) + 1)
        raw = resealed(bytes(m))
        c, h = cread(lib, raw)
        if h:
            lib.free(h)
        both.append((py_code(raw), c))
    check(all(x == ("malformed", "malformed") for x in both),
          "a file with sections 5 and 6 (in either order): both readers refuse it (%s)" % both)
    # every byte of section 6 changed, and every truncation: the same verdict and code from both readers
    cases, mism = reader_mismatches(lib, data, at6)
    for x in mism[:10]:
        print("    %s: C %s, Python %s" % x)
    check(not mism, "section 6 truncated and changed byte by byte (%d cases): the same verdict and code from both "
          "readers" % cases)


def program_c_checks(lib, refusals):
    """The C library against the Python companion on programs: the same
    bytes both ways and the same refusals. Skipped (the number of checks
    skipped) while the C library does not know format 2.3."""
    import ctypes
    data = tb.write(program_bundle())
    try:
        cw = lib.write(lib.read(data))
        h = lib.read(cw)
        lib.L.tb_bundle_format_version.argtypes = [ctypes.c_void_p]
        lib.L.tb_bundle_format_version.restype = ctypes.c_uint32
        version = lib.L.tb_bundle_format_version(h)
        lib.free(h)
        kept = tb.read(cw).program is not None
    except tb.BundleError as err:
        version, kept = 0, False
        print("    the C library refuses the program bundle: %s" % err)
    if version < 0x20003 or not kept:
        print("skip: C against Python on programs (the C library writes format %d.%d%s)" % (
            version >> 16, version & 0xFFFF, "" if kept else " and drops section 5"))
        return 3
    check(cw == data, "a Python-written program bundle: the C library reads it and writes the same %d bytes"
          % len(data))
    wrong = []
    for what, code, raw in refusals:
        c, h = cread(lib, raw)
        if h:
            lib.free(h)
        if c != code:
            wrong.append("%s: C %s, Python %s" % (what, c, code))
    for w in wrong[:10]:
        print("    " + w)
    check(not wrong, "%d programs that break a rule: the C reader refuses each with Python's code" % len(refusals))
    small = program_bundle()
    small.program.constants[3].data = b"\x05" * 100
    sd = tb.write(small)
    sl = program_layout(sd)
    cases, mism = reader_mismatches(lib, sd, sl["section"])
    for m in mism[:10]:
        print("    %s: C %s, Python %s" % m)
    check(not mism, "a program bundle's section 5 truncated and changed byte by byte (%d cases): the same verdict "
          "and code from both readers" % cases)
    return 0


def dynamic_bundle():
    """sample_bundle and a program with symbols (2.6): x f32[n] -> a launch
    (x, buf, n) with the grid cdiv(n, XBLOCK), a copy of 4n bytes to y, a
    memset of n elements of z; n in 2..64, stored at 64."""
    b = sample_bundle()
    add = tb.Config("HASH1", "add", "k.cubin", "OOi", "110", params=[("XBLOCK", 16)],
                    grid=tb.grid_rule(["cdiv(n, XBLOCK)", 1, 1], {"n": ("arg", 2), "XBLOCK": ("param", 0)}.get))
    b.records.append(tb.Record("dyn:add", "add", [add]))
    r = len(b.records) - 1
    L, I, O, B, S, C = tb.LITERAL, tb.INPUT, tb.OUTPUT, tb.BUFFER, tb.SYM, tb.CONST
    n = [(S, 0, 0)]
    p = tb.Program(inputs=[tb.TensorSpec("x", "float32", [64], [1])],
                   outputs=[tb.TensorSpec("y", "float32", [64], [1]), tb.TensorSpec("z", "float32", [64], [1])],
                   buffers=[tb.Buffer(0, 256, 0, 1)], workspace_size=256,
                   steps=[tb.Step(tb.LAUNCH, [(I, 0, 0), (B, 0, 0), (L, 0, 64)], record=r, grid=(4, 1, 1)),
                          tb.Step(tb.COPY, [(O, 0, 0), (B, 0, 0)], count=256),
                          tb.Step(tb.MEMSET, [(O, 1, 0)], width=4, value=0x3f800000, count=64)],
                   symbols=[tb.Symbol("n", 2, 64)],
                   exprs=[tb.Expr(tb.FIELD_INPUT_SIZE, 0, 0, n), tb.Expr(tb.FIELD_OUTPUT_SIZE, 0, 0, n),
                          tb.Expr(tb.FIELD_OUTPUT_SIZE, 1, 0, n),
                          tb.Expr(tb.FIELD_BUFFER_SIZE, 0, 0, n + [(C, 0, 4), (tb.MUL, 0, 0)]),
                          tb.Expr(tb.FIELD_GRID, 0, 0, n + [(C, 0, 16), (tb.CEILDIV, 0, 0)]),
                          tb.Expr(tb.FIELD_COUNT, 1, 0, n + [(C, 0, 4), (tb.MUL, 0, 0)]),
                          tb.Expr(tb.FIELD_COUNT, 2, 0, n),
                          tb.Expr(tb.FIELD_OPERAND, 0, 2, n)])
    b.program = p
    return b


def dynamic_checks(lib):
    """Programs with symbols (2.6): Python writes, C reads the same bytes
    back; every truncation and changed byte of section 6 read alike by both
    readers; a program at other sizes what its expressions give; the two
    evaluators agree; each rule broken refused alike. [R-symbols]"""
    import ctypes as ct
    from triton_bundle import dynamic as tbdyn
    b = dynamic_bundle()
    data = tb.write(b)
    back = tb.read(data)
    check(back == b and back.programs[0].symbols == [tb.Symbol("n", 2, 64)] and len(back.programs[0].exprs) == 8,
          "a program with symbols: Python writes it, reads back the symbol and its 8 expressions")
    check(lib.write(lib.read(data)) == data, "the C library reads it and writes the same %d bytes" % len(data))
    secs = section_offsets(data)
    check(5 not in secs and 6 in secs, "it is written as section 6 (section 5 holds no symbols)")
    cases, mism = reader_mismatches(lib, data, secs[6])
    check(not mism, "every truncation and changed byte of section 6 with symbols: both readers agree (%d cases)%s"
          % (cases, ": %r" % mism[:5] if mism else ""))
    q = tb.specialize(b.records, b.programs[0], [37])
    check(q.inputs[0].shape == [37] and q.outputs[1].shape == [37] and q.buffers[0].size == 148 and
          q.steps[0].grid == (3, 1, 1) and q.steps[0].operands[2] == (tb.LITERAL, 0, 37) and q.steps[1].count == 148 and
          q.steps[2].count == 37 and b.programs[0].steps[0].grid == (4, 1, 1),
          "specialize at n = 37: every field its expression gives, the program itself untouched")
    try:
        tb.specialize(b.records, b.programs[0], [65])
        check(False, "n = 65 refused")
    except tb.BundleError as e:
        check(e.code == "shape", "n = 65, over the range: BundleError('shape')")
    # the evaluators: Python's eval_expr and the C library's tb_expr_eval
    L = lib.L
    L.tb_expr_eval.argtypes = [ct.c_void_p, ct.c_uint32, ct.POINTER(ct.c_int64), ct.c_uint32, ct.POINTER(ct.c_int64),
                               ct.c_void_p]
    L.tb_expr_eval.restype = ct.c_int

    class Op(ct.Structure):
        _fields_ = [("op", ct.c_uint32), ("index", ct.c_uint32), ("value", ct.c_int64)]
    rnd = random.Random(11)
    agree = total = 0
    err = ct.create_string_buffer(2048)
    for _ in range(3000):
        prog, depth = [], 0
        for _ in range(rnd.randint(1, 12)):
            if depth < 2 or rnd.random() < 0.45:
                prog.append((tb.SYM, rnd.randint(0, 2), 0) if rnd.random() < 0.5 else
                            (tb.CONST, 0, rnd.choice([0, 1, -1, 2, 16, 1 << 40, (1 << 63) - 1, -(1 << 63)])))
                depth += 1
            else:
                o = rnd.choice([tb.ADD, tb.SUB, tb.MUL, tb.FLOORDIV, tb.CEILDIV, tb.MOD, tb.MIN, tb.MAX, tb.NEG])
                prog.append((o, 0, 0))
                depth -= 0 if o == tb.NEG else 1
        while depth > 1:
            prog.append((tb.ADD, 0, 0))
            depth -= 1
        vals = [rnd.choice([2, 7, 64, 1 << 31, -3]) for _ in range(3)]
        arr = (Op * len(prog))(*[Op(*o) for o in prog])
        v = (ct.c_int64 * 3)(*vals)
        out = ct.c_int64()
        r = L.tb_expr_eval(arr, len(prog), v, 3, ct.byref(out), err)
        try:
            py = ("ok", tb.eval_expr(prog, vals))
        except tb.BundleError as e:
            py = (e.code, None)
        c = (tb.native.RESULTS[r], out.value if r == 0 else None)
        total += 1
        agree += c == py
    check(agree == total, "tb_expr_eval and eval_expr agree on %d random expressions (%d of them)" % (total, agree))
    # each rule broken once: both sides refuse it with the same code
    def refused(what, change, code):
        bb = dynamic_bundle()
        change(bb.programs[0])
        try:
            tb.check_program(bb)
            py = "ok"
        except tb.BundleError as e:
            py = e.code
        check(py == code, "%s: Python refuses it (%s)" % (what, py))
    refused("min over max", lambda p: setattr(p.symbols[0], "min", 65), "malformed")
    refused("an expression at the maximum other than the field", lambda p: p.steps[0].__setattr__("grid", (3, 1, 1)),
            "malformed")
    refused("expressions out of order", lambda p: p.exprs.reverse(), "malformed")
    refused("a symbol no input binds", lambda p: p.exprs.pop(0), "malformed")
    refused("ARG in an expression", lambda p: setattr(p.exprs[7], "ops", [(tb.ARG, 0, 0)]), "malformed")
    refused("an unknown operation", lambda p: setattr(p.exprs[7], "ops", [(99, 0, 0)]), "unsupported_version")
    refused("a float's operand", lambda p: setattr(p.exprs[1], "field", tb.FIELD_OPERAND), "malformed")
    # the exporter's parts that need no GPU
    sizes = tbdyn.capture_sizes([tb.Symbol("a", 2, 16), tb.Symbol("b", 2, 16)])
    check(sizes[0] == [16, 16] and sizes[1] == [2, 2] and len({tuple(t[k] for t in sizes) for k in range(2)}) == 2,
          "capture sizes: every maximum first, every minimum, and no two symbols alike in all of them (%s)" % sizes)
    try:
        class T:  # a stand-in tensor: parse_spec asks only its rank
            def dim(self):
                return 2
        t = T()
        tbdyn.parse_spec({"x": {0: ("n", 1, 8)}}, (), {"x": t}, [t], [])
        check(False, "a Dim from 1 refused")
    except tb.BundleError as e:
        check("starts at 2" in str(e), "a Dim from 1 refused: %s" % e)
    # the writer's plan check: a buffer that shrinks as a symbol grows refused
    pd = dynamic_bundle().programs[0]
    tbdyn.check_monotone(pd.symbols, pd.exprs, pd.buffers)
    shrink = [tb.Expr(tb.FIELD_BUFFER_SIZE, 0, 0, [(tb.CONST, 0, 512), (tb.SYM, 0, 0), (tb.CONST, 0, 4), (tb.MUL, 0, 0),
                                                     (tb.SUB, 0, 0)])]  # 512 - 4n: 256 at n = 64, more below
    try:
        tbdyn.check_monotone(pd.symbols, shrink, pd.buffers)
        check(False, "a buffer that shrinks as its symbol grows refused")
    except tb.BundleError as e:
        check("shrinks" in str(e) or "over its 256 at every maximum" in str(e),
              "the plan check: a buffer that shrinks as its symbol grows refused (%s)" % e)
    # a capture that is not what the expressions give: refused, naming the step and the operand
    bd = dynamic_bundle()
    at7 = tb.specialize(bd.records, bd.programs[0], [7])
    tbdyn.compare(bd.records, bd.programs[0], at7, [7], bd.programs[0].symbols)
    ops = list(at7.steps[0].operands)
    ops[2] = (tb.LITERAL, 0, 8)
    at7.steps[0].operands = ops
    try:
        tbdyn.compare(bd.records, bd.programs[0], at7, [7], bd.programs[0].symbols)
        check(False, "a capture that differs from the expressions refused")
    except tb.BundleError as e:
        check("step 0 operand 2" in str(e) and "n=7" in str(e),
              "a capture that differs from the expressions refused, naming the size, step and operand: %s" % e)
    m = tbdyn.match_symbols([tb.Symbol("a", 2, 16), tb.Symbol("b", 2, 16)],
                            [([16, 16], {"s1": 16, "s9": 16}), ([2, 2], {"s1": 2}), ([5, 9], {"s1": 5, "s9": 9})])
    check(m == {"s1": 0, "s9": 1}, "Inductor's symbols matched to the declared ones by their values (%s)" % m)
    try:
        tbdyn.match_symbols([tb.Symbol("a", 2, 16)], [([16], {"s1": 16}), ([2], {"s1": 3})])
        check(False, "a symbol that is no declared dimension refused")
    except tb.BundleError as e:
        check("no declared dimension" in str(e), "a symbol that is no declared dimension refused")


def wrapper_checks(tmp):
    """The exporter reads Inductor's wrapper code: a wrapper of the form
    PyTorch 2.11 generates (written here), each kernel argument's, view's
    and allocation's expression. [the dynamic export]"""
    from triton_bundle import dynamic as tbdyn
    src = """
class Runner:
    def call(self, args):
        arg0_1, arg1_1, arg2_1, arg3_1 = args
        args.clear()
        s23 = arg0_1
        s27 = arg1_1
        with torch.cuda._DeviceGuard(0):
            buf0 = empty_strided_cuda((s23, s27, 128), (128*s27, 128, 1), torch.float32)
            buf4 = buf0; del buf0  # reuse
            k_xnumel = s23*s27
            k.run(buf4, arg2_1, s27, k_xnumel, 128, stream=stream0)
            ps0 = 32*s27
            buf8 = reinterpret_tensor(buf4, (s23, 4, 32, s27), (128*s27, 32*s27, s27, 1), 64*s27)
            t.run(buf8, arg3_1, ps0, 2*((31 + s23*s27) // 32), 1, 1, stream=stream0)
            buf9 = empty_strided_cuda((4*s23, s27, s27), (s27*s27, s27, 1), torch.float32)
            buf9.zero_()
        return (buf4, buf9, )
"""
    path = os.path.join(tmp, "wrapper.py")
    with open(path, "w") as f:
        f.write(src)
    wc = tbdyn.WrapperCode(path)
    symmap = {"s23": 0, "s27": 1}
    run_k = [ln for ln, txt in enumerate(src.split("\n"), 1) if "k.run" in txt][0]
    run_t = [ln for ln, txt in enumerate(src.split("\n"), 1) if "t.run" in txt][0]
    call = wc.stmt(run_k).value
    xn = tbdyn._compile(wc, call.args[3], run_k, symmap)
    check(tb.eval_expr(xn, [5, 37]) == 185 and tb.SYM in [o[0] for o in xn],
          "an argument that names an assignment (k_xnumel = s23*s27): its expression")
    t4 = tbdyn.sym_tensor(wc, call.args[0], run_k, symmap)
    check(t4.base == "alloc" and [tb.eval_expr(x, [5, 37]) for x in t4.sizes] == [5, 37, 128],
          "a buffer reused under another name (buf4 = buf0): its allocation and sizes")
    check(tbdyn.sym_tensor(wc, call.args[1], run_k, symmap).base == "input", "a graph input is an input")
    call = wc.stmt(run_t).value
    t8 = tbdyn.sym_tensor(wc, call.args[0], run_t, symmap)
    check(t8.key == t4.key and tb.eval_expr(t8.off, [5, 37]) == 64 * 37 and
          [tb.eval_expr(x, [5, 37]) for x in t8.strides] == [128 * 37, 32 * 37, 37, 1],
          "reinterpret_tensor: the base's allocation, the offset and strides in the symbols")
    g = tbdyn._compile(wc, call.args[3], run_t, symmap)
    check(tb.eval_expr(g, [5, 37]) == 2 * ((31 + 185) // 32), "a template's fixed grid value: its expression")
    ret = [tbdyn.sym_tensor(wc, e, wc.ret.lineno, symmap) for e in wc.ret.value.elts]
    check(len(ret) == 2 and ret[0].key == t4.key and ret[1].key != t4.key, "the returned tensors: their allocations")
    # a chain of 300 names and views, as a model of many layers writes (a Llama-3-8B prefill passed 64)
    lines = ["class Runner:", "    def call(self, args):", "        arg0_1, = args", "        s23 = arg0_1",
             "        buf0 = empty_strided_cuda((s23, 4096), (4096, 1), torch.float32)"]
    for i in range(1, 301):
        lines.append("        buf%d = buf%d; del buf%d  # reuse" % (i, i - 1, i - 1) if i % 2 else
                     "        buf%d = reinterpret_tensor(buf%d, (s23, 8), (4096, 1), %d)" % (i, i - 1, i))
    lines += ["        k.run(buf300, s23, stream=stream0)", "        return ()", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    wc2 = tbdyn.WrapperCode(path)
    run = len(lines) - 2
    deep = tbdyn.sym_tensor(wc2, wc2.stmt(run).value.args[0], run, {"s23": 0})
    check(deep.base == "alloc" and deep.key == 5 and tb.eval_expr(deep.off, [3]) == sum(range(2, 301, 2)) and
          [tb.eval_expr(x, [3]) for x in deep.sizes] == [3, 8],
          "a chain of 300 names and views: the allocation, the summed offsets and the outermost view's sizes")
    try:
        tbdyn._compile(wc, call.args[2], run_t, {"s23": 0})
        check(False, "a symbol that is no declared dimension refused")
    except ValueError as e:
        check("none of the declared dimensions" in str(e), "an undeclared symbol in an argument refused: %s" % e)
    ext = tbdyn._extent(t8.sizes, t8.strides, 4)
    check(tb.eval_expr(ext, [5, 37]) == 4 * (1 + 4 * 128 * 37 + 3 * 32 * 37 + 31 * 37 + 36),
          "a view's extent in bytes, as an expression")


def main():
    lib = tb.CLibrary(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "libtriton_bundle.so"))
    rnd = random.Random(7)

    # the checksum
    datas = [bytes(rnd.getrandbits(8) for _ in range(n)) for n in list(range(0, 260)) + [1023, 1024, 1025, 4096, 70000]]
    check(all(tb.xxh3_64(d, native=False) == lib.L.tb_xxh3_64(d, len(d)) for d in datas),
          "XXH3-64 equals the C library's at %d lengths (every path of the algorithm)" % len(datas))
    os.environ["TRITON_BUNDLE_LIB"] = lib.path  # the opt-in fast path: the C library's, for long inputs
    from triton_bundle import xxh3 as tbx
    tbx._NATIVE_XXH3 = None
    check(tbx._native_xxh3() is not None and all(tb.xxh3_64(d) == tb.xxh3_64(d, native=False) for d in datas[-2:]),
          "with TRITON_BUNDLE_LIB, long inputs hash in the C library, to the same values")
    del os.environ["TRITON_BUNDLE_LIB"]
    tbx._NATIVE_XXH3 = None

    # C to Python to C: the fixtures packed by tbundle
    tmp = tempfile.mkdtemp(prefix="tbpy-")
    for name, wrote_at in (("triton-3.6-sm90", "/tmp/triton_cache"), ("triton-3.6-sm90-tma", "/tmp/probe_cache")):
        out = os.path.join(tmp, name + ".tbundle")
        # --as: where Triton wrote each fixture (else pack warns that the cache moved)
        subprocess.run([os.path.join(ROOT, "build", "tbundle"), "pack", "-o", out, "--as", wrote_at,
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
    flip = bytearray(open(path, "rb").read())
    flip[len(flip) // 2] ^= 1
    with open(path + ".flip", "wb") as fh:
        fh.write(flip)
    out = subprocess.run([sys.executable, os.path.join(ROOT, "python", "triton_bundle"), "list", path + ".flip"],
                         capture_output=True, text=True)
    check(out.returncode == 1 and out.stderr.startswith("triton-bundle: checksum: ") and
          "export its model" in out.stderr and out.stderr.rstrip().endswith("[file %s.flip]" % path),
          "triton_bundle.py list of a damaged file names the file and says what to do, as tbundle does (%s)" %
          out.stderr.strip()[:200])
    script = os.path.join(tmp, "make_bundle.py")
    with open(script, "w") as fh:
        fh.write("import sys\nsys.path.insert(0, %r)\nimport test_python\n\ndef export():\n"
                 "    return test_python.sample_bundle()\n" % os.path.join(ROOT, "tests"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "python", "triton_bundle"), "export", script, "-o",
                          os.path.join(tmp, "exported.tbundle")], capture_output=True, text=True)
    check(out.returncode == 0 and tb.read_file(os.path.join(tmp, "exported.tbundle")) == sample,
          "triton_bundle.py export runs a script's export() and writes its bundle")
    refusals = program_checks(lib, tmp)
    skipped += program_c_checks(lib, refusals)
    programs_checks(lib)
    external_checks(lib)
    dynamic_checks(lib)
    wrapper_checks(tmp)
    subprocess.run(["rm", "-rf", tmp])
    return summary(skipped)


if __name__ == "__main__":
    sys.exit(main())
