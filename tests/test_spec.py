#!/usr/bin/env python3
"""The Python companion's numbers against the header's, by name: every
#define of the families the companion mirrors (limits, format version and
layout sizes, section ids, config, constant, launch and model flags, grid
opcodes, spaces, step kinds, field codes, dtypes, argument kinds) has its
twin in python/triton_bundle/spec.py (or a reason on the list of C-only
ones below) with the same value, and spec.py holds nothing else but
the few Python-only numbers listed below; format.SECTIONS' rows are the
header's tb__sections[] rows; spec.GRID_OPS is TB__GRID_OPS(X) row for row,
spec.STEP_KINDS is TB__STEP_KINDS(X), and spec.RESULT_CODES is the enum
tb_result with tb__result_strings (and, with the shared object,
tb_result_string). tests/test_codes.py checks ARG_CODES and DTYPES.
usage: tests/test_spec.py [build/libtriton_bundle.so] [--header triton_bundle.h]  (from the repository root)"""

import ast
import ctypes
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402
from triton_bundle import format as tbf, grid as tbg, spec  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
from pycheck import check, summary  # noqa: E402

# The C constants the companion mirrors: these families, and these names.
MIRRORED = re.compile(r"^TB_(VERSION|FORMAT_VERSION|MAX|CONFIG|GRID|SPACE|STEP|FIELD|DTYPE|CONSTANT|LAUNCH|MODEL)_\w+$"
                      r"|^TB__(KIND|SEC)_\w+$"
                      r"|^TB__(HEADER_SIZE|TRAILER_SIZE|SECTION_HEADER|DESC_ENTRY|CALL_ENTRY|GRID_HEAD|GRID_OP"
                      r"|PROGRAM_HEAD|PROGRAMS_HEAD|PROGRAM6_HEAD|PROGRAM_STEP|PROGRAM_OPERAND|CONSTANT_ALIGN"
                      r"|DEFAULT_PROGRAM)$|^TB_REPLACE_SENTINEL$")

# Of those, the ones Python has no twin of, and why.
C_ONLY = {
    "TB_MAX_TEXT_SIZE": "the C library's cap on a Triton text file it reads; the companion reads them whole",
    "TB_MAX_WEIGHTS_TENSORS": "the C weights reader's table; weights.py holds a dict",
    "TB_MAX_INSTANCE_CACHE": "tb_model_desc.instance_cache's cap: CLibrary.model passes the caller's, C refuses more",
    "TB_LAUNCH_COOPERATIVE": "the older name of TB_CONFIG_COOPERATIVE",
    "TB_LAUNCH_PDL": "the older name of TB_CONFIG_PDL",
    "TB_MODEL_VERIFY_WEIGHTS": "a tb_model_load flag CLibrary.model does not offer",
    "TB_MODEL_SERIAL_LOAD": "a tb_model_load flag CLibrary.model does not offer",
}

# spec.py's numbers that mirror no #define, and why.
PY_ONLY = {
    "I64_MIN": "stdint.h's INT64_MIN", "I64_MAX": "stdint.h's INT64_MAX", "I32_MIN": "stdint.h's INT32_MIN",
    "I32_MAX": "stdint.h's INT32_MAX", "U32_MAX": "stdint.h's UINT32_MAX", "U64_MAX": "stdint.h's UINT64_MAX",
    "GRID_X_MAX": "CUDA's launch limit, a literal in C", "GRID_YZ_MAX": "CUDA's launch limit, a literal in C",
    "SYMBOL_MAX": "INT32_MAX in C", "MAGIC": "tb__magic[], checked below",
    "PROGRAM_TENSOR_MIN": "a literal in the C reader", "PROGRAM_CONSTANT_MIN": "a literal in the C reader",
    "PROGRAM_BUFFER": "a literal in the C reader and writer",
}


def python_twin(c):
    """(the Python name, its value) of C constant c, or None where Python
    has none."""
    version = [int(x) for x in tb.__version__.split(".")]
    special = {
        "TB_VERSION_STRING": ("triton_bundle.__version__", tb.__version__),
        "TB_VERSION_MAJOR": ("triton_bundle.__version__'s major", version[0]),
        "TB_VERSION_MINOR": ("triton_bundle.__version__'s minor", version[1]),
        "TB_VERSION_PATCH": ("triton_bundle.__version__'s patch", version[2]),
        "TB_REPLACE_SENTINEL": ("SENTINEL", spec.SENTINEL.decode()),
    }
    if c in special:
        return special[c]
    renamed = {"TB_FORMAT_VERSION_MAJOR": "FORMAT_MAJOR", "TB_FORMAT_VERSION_MINOR": "FORMAT_MINOR",
               "TB__SEC_REQUIRED": "SECTION_REQUIRED", "TB__SECTION_HEADER": "SECTION_HEADER_SIZE",
               "TB__PROGRAM_HEAD": "PROGRAM_HEADER", "TB__PROGRAMS_HEAD": "PROGRAMS_HEADER",
               "TB__PROGRAM6_HEAD": "PROGRAM6_HEADER", "TB_GRID_STACK": "GRID_STACK"}
    if c.startswith("TB_DTYPE_"):
        d = spec.DTYPE_BY_NAME.get(c[len("TB_DTYPE_"):].lower())
        return ("DTYPE_BY_NAME[%r].number" % d.name, d.number) if d else None
    name = renamed.get(c)
    if name is None:
        for pre, to in (("TB_GRID_", ""), ("TB_SPACE_", ""), ("TB_STEP_", ""), ("TB__KIND_", "KIND_"),
                        ("TB__SEC_", "SEC_"), ("TB__", ""), ("TB_", "")):
            if c.startswith(pre):
                name = to + c[len(pre):]
                break
    return (name, getattr(spec, name)) if hasattr(spec, name) else None


# ----------------------------------------------------------- the header
def strip_comments(text):
    """C text without its comments (string and character literals kept:
    "//" is the grid language's floor division)."""
    return re.sub(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|/\*.*?\*/|//[^\n]*',
                  lambda m: m.group(0) if m.group(0)[0] in "\"'" else " ", text, flags=re.S)


def c_defines(text):
    """{name: the text of its first object-like #define} for every TB_ and
    TB__ macro (the first: a limit's default inside its #ifndef)."""
    out = {}
    for m in re.finditer(r"^#\s*define\s+(TB_\w+)(?!\()[ \t]+((?:[^\n]*\\\n)*[^\n]*)$", text, re.M):
        out.setdefault(m.group(1), strip_comments(m.group(2).replace("\\\n", " ")).strip())
    return out


def c_value(expr, defs, depth=0):
    """The value of a #define's text: an integer expression (casts and
    suffixes dropped, other TB_ macros resolved) or a string literal; None
    where it is neither."""
    e = strip_comments(expr).strip()
    m = re.match(r'^"((?:[^"\\]|\\.)*)"$', e)
    if m:
        return m.group(1)
    e = re.sub(r"\(\s*(?:u?int\d+_t|size_t|unsigned|int|long)\s*\)", "", e)
    e = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)(?:[uU]|[lL]|[uU][lL]{1,2}|[lL]{1,2}[uU])\b", r"\1", e)
    if depth < 8:
        e = re.sub(r"\bTB_\w+\b", lambda n: "(%s)" % c_value(defs[n.group(0)], defs, depth + 1)
                   if n.group(0) in defs else n.group(0), e)
    try:
        tree = ast.parse(e, mode="eval")
    except SyntaxError:
        return None
    ok = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.LShift, ast.RShift, ast.BitOr, ast.BitAnd,
          ast.Add, ast.Sub, ast.Mult, ast.USub, ast.Invert)
    if not all(isinstance(n, ok) for n in ast.walk(tree)) or \
            any(isinstance(n, ast.Constant) and not isinstance(n.value, int) for n in ast.walk(tree)):
        return None
    return eval(compile(tree, "<define>", "eval"))


def macro_rows(text, macro, row):
    """(the rows of X-macro `macro` as row's groups, how many X( it holds),
    or (None, 0) where the header has no such macro."""
    m = re.search(r"^#\s*define\s+%s\(X\)((?:[^\n]*\\\n)*[^\n]*)" % re.escape(macro), text, re.M)
    if m is None:
        return None, 0
    body = strip_comments(m.group(1))
    return [r.groups() for r in re.finditer(row, body)], body.count("X(")


GRID_ROW = r'X\(\s*(TB_GRID_\w+)\s*,\s*"([^"]*)"\s*,\s*"((?:[^"\\]|\\.)*)"\s*,\s*(-?\d+)\s*\)'
STEP_ROW = r'X\(\s*(TB_STEP_\w+)\s*,\s*"([^"]*)"\s*,\s*(-?\d+)\s*,\s*"((?:[^"\\]|\\.)*)"\s*\)'


def grid_rows(text, defs):
    rows, xs = macro_rows(text, "TB__GRID_OPS", GRID_ROW)
    if rows is None:
        return None, 0
    return [(c_value(defs.get(c, c), defs), name, txt, int(arity)) for c, name, txt, arity in rows], xs


def step_rows(text, defs):
    rows, xs = macro_rows(text, "TB__STEP_KINDS", STEP_ROW)
    if rows is None:
        return None, 0
    return [(c_value(defs.get(c, c), defs), name, int(n), writes) for c, name, n, writes in rows], xs


def c_strings(body):
    """The string literals of an initializer, adjacent ones joined."""
    out, joined = [], False
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"|(,)', strip_comments(body)):
        if m.group(2):
            joined = False
        elif joined:
            out[-1] += m.group(1)
        else:
            out.append(m.group(1))
            joined = True
    return out


def c_array(text, name):
    m = re.search(r"\b%s\[\w*\]\s*=\s*\{(.*?)\};" % re.escape(name), text, re.S)
    return m.group(1) if m else None


def result_enum(text):
    """[(number, name without tb_err_ / tb_)] of enum tb_result, its
    count marker left out."""
    m = re.search(r"typedef enum tb_result \{(.*?)\} tb_result;", text, re.S)
    if m is None:
        return []
    out, n = [], 0
    for item in strip_comments(m.group(1)).split(","):
        item = item.strip()
        if not item:
            continue
        name, _, value = item.partition("=")
        name = name.strip()
        if value.strip():
            n = int(value.strip(), 0)
        if name != "tb_result_count_":
            out.append((n, name[len("tb_err_"):] if name.startswith("tb_err_") else name[len("tb_"):]))
        n += 1
    return out


def section_rows(text, defs):
    """[(type, flags, after mask, always)] of the header's tb__sections[]."""
    body = c_array(text, "tb__sections")
    if body is None:
        return None
    rows = []
    for r in re.finditer(r"\{([^{}]*)\}", strip_comments(body)):
        fields = [f.strip() for f in r.group(1).split(",")]
        rows.append(tuple(c_value(f, defs) for f in fields[:4]))
    return rows


def same_rows(rows, py):
    """The same rows, each code once (the order of the header's rows is
    its own: both sides look an operation or a kind up by its code)."""
    return len(rows) == len(py) == len({r[0] for r in rows}) and {r[0]: r for r in rows} == {r[0]: r for r in py}


def print_differences(rows, py):
    """The rows of one code that differ, or that one side lacks."""
    h, p = {r[0]: r for r in rows}, {r[0]: r for r in py}
    for code in sorted(set(h) | set(p), key=repr):
        if h.get(code) != p.get(code):
            print("    code %r: the header's row %r, Python's %r" % (code, h.get(code), p.get(code)))


# ---------------------------------------------------------------- checks
def self_test():
    """The parsing of the two X-macros the header is getting, on rows of the
    shape it will hold: so that their checks below fail for a row that
    differs, not for a regex that reads nothing."""
    sample = ('#define TB_GRID_CONST 1u\n#define TB_GRID_ADD 16u\n#define TB_GRID_FLOORDIV 19u /* a // b */\n'
              '#define TB_GRID_CEILDIV 20u\n#define TB_GRID_NEG 24u\n'
              '#define TB_STEP_LAUNCH 1u\n#define TB_STEP_COPY 3u\n'
              '/* the operations: code, name, text, arity */\n'
              '#define TB__GRID_OPS(X) \\\n'
              '    X(TB_GRID_CONST, "CONST", "", 0)        /* an operand */ \\\n'
              '    X(TB_GRID_ADD,   "ADD",   "+", 2) \\\n'
              '    X(TB_GRID_FLOORDIV, "FLOORDIV", "//", 2) // a // b \\\n'
              '    X(TB_GRID_CEILDIV, "CEILDIV", "cdiv", 2) \\\n'
              '    X(TB_GRID_NEG, "NEG", "-", 1)\n'
              'static int after_it(void);\n'
              '#define TB__STEP_KINDS(X) \\\n'
              '    X(TB_STEP_LAUNCH, "launch", -1, "the kernel\'s pointer arguments") \\\n'
              '    X(TB_STEP_COPY, "copy", 2, "operand 0")\n')
    defs = c_defines(sample)
    g, gx = grid_rows(sample, defs)
    check(g == [(1, "CONST", "", 0), (16, "ADD", "+", 2), (19, "FLOORDIV", "//", 2), (20, "CEILDIV", "cdiv", 2),
                (24, "NEG", "-", 1)] and gx == 5,
          "self-test: a sample TB__GRID_OPS(X) reads as its 5 rows (code, name, text, arity): %r" % (g,))
    s, sx = step_rows(sample, defs)
    check(s == [(1, "launch", -1, "the kernel's pointer arguments"), (3, "copy", 2, "operand 0")] and sx == 2,
          "self-test: a sample TB__STEP_KINDS(X) reads as its 2 rows (code, name, operands, writes): %r" % (s,))
    check(grid_rows("#define TB__GRID_OP 16u\n", {})[0] is None and step_rows("", {})[0] is None,
          "self-test: a header without the macros reads as none")
    check(c_value("(((uint64_t)1) << 32)", {}) == 1 << 32 and c_value("0xFFFFFFFFu", {}) == 0xFFFFFFFF and
          c_value("TB_A", {"TB_A": "(1u << 20) /* x */"}) == 1 << 20 and c_value('"forward"', {}) == "forward" and
          c_value("60000.0", {}) is None, "self-test: #define values: casts, suffixes, shifts, other macros, strings")


def check_constants(text, defs):
    mirrored = sorted(c for c in defs if MIRRORED.match(c))
    missing, differ, same, c_only = [], [], [], []
    for c in mirrored:
        twin = python_twin(c)
        if twin is None:
            (c_only if c in C_ONLY else missing).append(c)
            continue
        value = c_value(defs[c], defs)
        (same if value == twin[1] else differ).append((c, value, twin))
    for c, value, (name, py) in differ:
        print("    %s is %r in the header, %s is %r" % (c, value, name, py))
    check(not differ, "each of the header's %d mirrored constants equals its Python twin%s" % (
        len(same) + len(differ), ": %d differ" % len(differ) if differ else ""))
    for c in missing:
        print("    %s = %s has no twin in spec.py (add one, or it to C_ONLY with a reason)" % (c, defs[c]))
    check(not missing, "every constant of the mirrored families has a twin in Python (%d), or is C-only by a reason "
          "(%s)" % (len(same) + len(differ), ", ".join(c_only)) + (": without one: %s" % ", ".join(missing)
                                                                   if missing else ""))
    stale = sorted(c for c in C_ONLY if c not in defs or python_twin(c) is not None)
    check(not stale, "the C-only list names only constants the header defines and Python lacks%s" % (
        ": %s" % ", ".join(stale) if stale else ""))
    twins = {python_twin(c)[0] for c in mirrored if python_twin(c)}
    own = sorted(n for n, v in vars(spec).items() if n.isupper() and isinstance(v, (int, str, bytes))
                 and not isinstance(v, bool) and n not in twins and n not in PY_ONLY)
    check(not own, "spec.py holds mirrors of the header and the %d numbers listed Python-only, nothing else%s" % (
        len(PY_ONLY), ": %s" % ", ".join(own) if own else ""))
    check(sorted(n for n in PY_ONLY if not hasattr(spec, n)) == [], "every Python-only name is spec.py's")
    chars = {"'\\r'": 13, "'\\n'": 10}
    magic = [x.strip() for x in (c_array(text, "tb__magic") or "").split(",") if x.strip()]
    want = bytes(chars[x] if x in chars else ord(x[1]) if x.startswith("'") else c_value(x, {}) for x in magic)
    check(want == spec.MAGIC, "MAGIC is the header's tb__magic (%r)" % want)


def check_tables(text, defs):
    # the sections
    rows = section_rows(text, defs)
    py = [(r.type, r.flags, sum(1 << t for t in r.after), int(r.always)) for r in tbf.SECTIONS]
    check(rows == py, "format.SECTIONS equals tb__sections[] row for row (type, flags, the sections before it, "
          "always written): %d rows%s" % (len(py), "" if rows == py else ", the header's %r" % (rows,)))
    check([r.type for r in tbf.SECTIONS] == [spec.SEC_KERNELS, spec.SEC_RECORDS, spec.SEC_TENSORDESCS, spec.SEC_CALLS,
                                             spec.SEC_PROGRAM, spec.SEC_PROGRAMS],
          "the sections' rows are SEC_KERNELS .. SEC_PROGRAMS, in order")

    # the results
    enum = result_enum(text)
    strings = c_strings(c_array(text, "tb__result_strings") or "")
    py = [(r.code, r.name) for r in spec.RESULT_CODES]
    check(enum == py, "RESULT_CODES' numbers and names are enum tb_result's (%d)%s" % (
        len(py), "" if enum == py else ": the header's %r" % (enum,)))
    check(strings == [r.text for r in spec.RESULT_CODES], "RESULT_CODES' texts are tb__result_strings (%d)%s" % (
        len(strings), "" if strings == [r.text for r in spec.RESULT_CODES] else ": the header's %r" % (strings,)))
    check(spec.RESULTS == [r.name for r in spec.RESULT_CODES] and tb.native.RESULTS is spec.RESULTS,
          "RESULTS (native's too) are RESULT_CODES' names by number")

    # the names of the spaces and the fields
    spaces = c_strings(c_array(text, "tb__space_names") or "")
    check(spaces == [spec.SPACE_NAMES[k].lower() for k in sorted(spec.SPACE_NAMES)],
          "SPACE_NAMES are tb__space_names, in capitals (%s)" % ", ".join(spaces))
    fields = c_strings(c_array(text, "tb__field_names") or "")
    check(fields[1:] == [spec.FIELD_NAMES[k] for k in sorted(spec.FIELD_NAMES)] and fields[:1] == [""] and
          sorted(spec.FIELD_NAMES) == list(range(1, len(fields))),
          "FIELD_NAMES are tb__field_names, by field code (%d)" % len(spec.FIELD_NAMES))

    # the grid operations
    rows, xs = grid_rows(text, defs)
    py = sorted(tuple(r) for r in spec.GRID_OPS)
    if rows is None:
        check(False, "triton_bundle.h defines TB__GRID_OPS(X), the grid operations' rows (code, name, text, arity) "
              "that spec.GRID_OPS mirrors: it does not")
    else:
        check(len(rows) == xs, "every X( of TB__GRID_OPS is a row this test reads (%d of %d)" % (len(rows), xs))
        print_differences(rows, py)
        check(same_rows(rows, py), "GRID_OPS equals TB__GRID_OPS(X) row for row, by code (%d rows: %s)" % (
            len(py), " ".join(r[1] for r in py)))
    check(len({r.code for r in spec.GRID_OPS}) == len(spec.GRID_OPS), "each grid operation has one row")
    check(spec.OP_NAMES == {r.code: r.name for r in spec.GRID_OPS if r.code != spec.SYM} and
          spec.OPERANDS == {r.code for r in spec.GRID_OPS if r.arity == 0} and
          all(spec.OP_ARITY[r.code] == r.arity for r in spec.GRID_OPS if r.arity) and
          all(getattr(spec, r.name) == r.code for r in spec.GRID_OPS),
          "OP_NAMES, OPERANDS, OP_ARITY and the opcodes by name say what GRID_OPS says")
    bad = []
    for r in spec.GRID_OPS:
        if r.arity == 0:
            continue
        expr = ("%s(a, b)" % r.text if r.text[0].isalpha() else "a %s b" % r.text) if r.arity == 2 else "%sa" % r.text
        names = {"a": ("arg", 0), "b": ("arg", 1)}.get
        want = [(spec.ARG, i, 0) for i in range(r.arity)] + [(r.code, 0, 0)]
        got = tbg.GridCompiler(names).compile(expr)
        if got != want or tbg.ops_text(want, ["a", "b"]) not in (expr, "(%s)" % expr, "%s(a)" % r.text):
            bad.append((r.name, expr, got, tbg.ops_text(want, ["a", "b"])))
    check(not bad, "each operator's text is what GridCompiler reads it as, and what ops_text writes%s" % (
        ": %r" % bad if bad else ""))

    # the step kinds
    rows, xs = step_rows(text, defs)
    py = sorted(tuple(r) for r in spec.STEP_KINDS)
    if rows is None:
        check(False, "triton_bundle.h defines TB__STEP_KINDS(X), the step kinds' rows (code, name, operands, writes) "
              "that spec.STEP_KINDS mirrors: it does not")
    else:
        check(len(rows) == xs, "every X( of TB__STEP_KINDS is a row this test reads (%d of %d)" % (len(rows), xs))
        print_differences(rows, py)
        check(same_rows(rows, py), "STEP_KINDS equals TB__STEP_KINDS(X) row for row, by code (%d rows: %s)" % (
            len(py), ", ".join(r[1] for r in py)))
    check(spec.STEP_NAMES == {r.code: r.name for r in spec.STEP_KINDS} and
          spec.STEP_OPERANDS == {r.code: r.operands for r in spec.STEP_KINDS} and
          all(getattr(spec, r.name.upper()) == r.code for r in spec.STEP_KINDS),
          "STEP_NAMES, STEP_OPERANDS and the kinds by name say what STEP_KINDS says")


def main():
    args = sys.argv[1:]
    header = os.path.join(ROOT, "triton_bundle.h")
    if "--header" in args:  # another copy of the header (one with a table the repository's has not yet)
        at = args.index("--header")
        header = args[at + 1]
        del args[at:at + 2]
    text = open(header, encoding="utf-8").read()
    self_test()
    defs = c_defines(text)
    check_constants(text, defs)
    check_tables(text, defs)

    so = args[0] if args else os.path.join(ROOT, "build", "libtriton_bundle.so")
    if not os.path.exists(so):
        print("skip: tb_result_string (no %s; make lib)" % so)
        return summary(1)
    lib = ctypes.CDLL(os.path.abspath(so))
    lib.tb_result_string.argtypes = [ctypes.c_int]
    lib.tb_result_string.restype = ctypes.c_char_p
    bad = [r for r in spec.RESULT_CODES if lib.tb_result_string(r.code) != r.text.encode()]
    check(not bad and lib.tb_result_string(len(spec.RESULT_CODES)) == b"unknown result",
          "the library's tb_result_string gives each RESULT_CODES text, and no more codes%s" % (
              ": differs at %r" % bad if bad else ""))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
