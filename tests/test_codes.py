#!/usr/bin/env python3
"""The argument codes and the dtypes: the Python companion's ARG_CODES table equals the
header's TB__ARG_CODES(X) rows, row for row and in order (code, bytes, kind,
Triton names, MLIR name), its kinds equal the header's TB__KIND_*, and the
maps derived from it (CODE_SIZES, INT_CODES, TRITON_CODES) say what the
table says; its DTYPES equals the header's TB__DTYPES(X) rows. With the
shared object, tb_arg_code_size agrees on every byte, and tb_dtype_name,
_size, _npy and _from_name on every dtype.
usage: tests/test_codes.py [build/libtriton_bundle.so]  (from the repository root)"""

import ctypes
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402
from triton_bundle import format as tbf  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
from pycheck import check, summary  # noqa: E402

ROW = re.compile(r"""X\(\s*'(.)'\s*,\s*(\d+)\s*,\s*(TB__KIND_\w+)\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*\)""")


def header_table(text):
    """(rows, kinds, how many X( the macro holds): the TB__ARG_CODES(X)
    rows with their kinds resolved, and the TB__KIND_* values by name."""
    kinds = {m.group(1): int(m.group(2)) for m in re.finditer(r"^#define TB__KIND_(\w+) (\d+)$", text, re.M)}
    m = re.search(r"^#define TB__ARG_CODES\(X\)[^\n]*\\\n((?:[^\n]*\\\n)*[^\n]*\n)", text, re.M)
    if m is None:
        return None, kinds, 0
    body = m.group(1)
    rows = []
    for r in ROW.finditer(body):
        kind = r.group(3)[len("TB__KIND_"):]
        rows.append((r.group(1), int(r.group(2)), kinds.get(kind, kind), r.group(4), r.group(5), r.group(6)))
    return rows, kinds, body.count("X(")


def main():
    text = open(os.path.join(ROOT, "triton_bundle.h"), encoding="utf-8").read()
    rows, kinds, xs = header_table(text)
    check(rows is not None and len(rows) > 0, "triton_bundle.h defines TB__ARG_CODES(X) (%d rows)" % len(rows or []))
    if not rows:
        return summary()
    check(len(rows) == xs, "every X( of the macro is a row this test reads (%d of %d)" % (len(rows), xs))

    py_kinds = {name[len("KIND_"):]: getattr(tb, name) for name in dir(tb) if name.startswith("KIND_")}
    check(py_kinds == kinds, "Python's KIND_* equal the header's TB__KIND_* (%s)" % ", ".join(
        "%s=%d" % kv for kv in sorted(kinds.items(), key=lambda kv: kv[1])))

    py = [tuple(r) for r in tb.ARG_CODES]
    bad = [(i, h, p) for i, (h, p) in enumerate(zip(rows, py)) if h != p]
    for i, h, p in bad[:5]:
        print("    row %d: header %r, Python %r" % (i, h, p))
    if len(rows) != len(py):
        print("    the header has %d rows, Python %d; rows only the header has: %r; only Python has: %r" % (
            len(rows), len(py), rows[len(py):], py[len(rows):]))
    check(not bad and len(rows) == len(py), "ARG_CODES equals TB__ARG_CODES row for row, in order (%d rows: %s)" % (
        len(py), "".join(r[0] for r in py)))
    check(len({r[0] for r in py}) == len(py), "each code has one row")

    # the derived maps
    check(tb.CODE_SIZES == {r[0]: r[1] for r in rows}, "CODE_SIZES: each code's bytes, as the rows give them")
    ints = {kinds["BOOL"], kinds["SINT"], kinds["UINT"]}
    check(tb.INT_CODES == {r[0] for r in rows if r[2] in ints},
          "INT_CODES: the bool, signed and unsigned codes (%s)" % "".join(sorted(tb.INT_CODES)))
    scalars = {name: r[0] for r in rows if r[2] not in (kinds["PTR"], kinds["DESC"]) for name in r[3:5] if name}
    check(tb.TRITON_CODES == scalars, "TRITON_CODES: both Triton names of every scalar code")

    # the dtypes (program section 5)
    drow = re.compile(r'''X\(\s*(\d+)\s*,\s*"([^"]*)"\s*,\s*(\d+)\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*\)''')
    m = re.search(r"^#define TB__DTYPES\(X\)[^\n]*\\\n((?:[^\n]*\\\n)*[^\n]*\n)", text, re.M)
    hd = [(int(r.group(1)), r.group(2), int(r.group(3)), r.group(4), r.group(5)) for r in drow.finditer(m.group(1))] if m else []
    check(bool(hd) and hd == [tuple(d) for d in tbf.DTYPES],
          "DTYPES equals TB__DTYPES row for row (%d rows)" % len(hd))
    check([d[0] for d in hd] == list(range(1, len(hd) + 1)), "dtypes are numbered 1.. in row order (the C lookup indexes)")

    so = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "libtriton_bundle.so")
    if not os.path.exists(so):
        print("skip: tb_arg_code_size (no %s; make lib)" % so)
        return summary(1)
    lib = ctypes.CDLL(os.path.abspath(so))
    lib.tb_arg_code_size.argtypes = [ctypes.c_char]
    lib.tb_arg_code_size.restype = ctypes.c_uint32
    wrong = [c for c in range(1, 256) if lib.tb_arg_code_size(bytes([c])) != tb.CODE_SIZES.get(chr(c), 0)]
    check(not wrong, "the library's tb_arg_code_size equals CODE_SIZES for every byte (0 for other codes)%s" % (
        ": differs at %r" % [chr(c) for c in wrong[:8]] if wrong else ""))
    for f, rt in (("tb_dtype_name", ctypes.c_char_p), ("tb_dtype_npy", ctypes.c_char_p), ("tb_dtype_size", ctypes.c_uint32)):
        getattr(lib, f).argtypes = [ctypes.c_uint32]
        getattr(lib, f).restype = rt
    lib.tb_dtype_from_name.argtypes = [ctypes.c_char_p]
    lib.tb_dtype_from_name.restype = ctypes.c_uint32
    bad = [d for d in tbf.DTYPES if lib.tb_dtype_name(d.number) != d.name.encode() or lib.tb_dtype_size(d.number) != d.bytes
           or lib.tb_dtype_npy(d.number) != d.npy.encode() or lib.tb_dtype_from_name(d.name.encode()) != d.number
           or lib.tb_dtype_from_name(b"torch." + d.name.encode()) != d.number]
    outside = [n for n in (0, len(tbf.DTYPES) + 1, 0xffffffff) if lib.tb_dtype_name(n) is not None or lib.tb_dtype_size(n)]
    check(not bad and not outside and lib.tb_dtype_from_name(b"float") == 0,
          "the library's tb_dtype_* agree with DTYPES, and know nothing else%s" % (": %r" % (bad + outside) if bad or outside else ""))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
