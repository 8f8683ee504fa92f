#!/usr/bin/env python3
"""The ctypes mirrors of the header's structs (triton_bundle.native.c_structs,
what CLibrary passes to the library) against the C compiler's layout, which
build/layout (tests/layout.c) prints: every struct's size and every field's
offset and size must be equal, and the fields the same, in the header's
order (the field names are also read from the header's struct definitions,
so that a field added there and to neither mirror is caught).
usage: tests/test_layout.py [build/layout]  (from the repository root)"""

import ctypes
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
from pycheck import check, summary  # noqa: E402


def header_fields(text, name):
    """The field names of `typedef struct|union NAME { ... } NAME;` (or of
    `struct NAME { ... };`, typedef'd ahead of it) in the header, in order;
    None if it is not there."""
    m = (re.search(r"typedef (?:struct|union) %s \{(.*?)\} %s;" % (name, name), text, re.S) or
         re.search(r"^(?:struct|union) %s \{(.*?)^\};" % name, text, re.S | re.M))
    if m is None:
        return None
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    names = []
    for decl in body.split(";"):
        decl = re.sub(r"\[[^\]]*\]", "", decl).strip()
        if decl:  # "uint32_t a, b" and "const T *a, *b": each declarator after the first comes after a comma
            parts = decl.split(",")
            names.append(re.findall(r"[A-Za-z_]\w*", parts[0])[-1])
            names += [re.findall(r"[A-Za-z_]\w*", q)[-1] for q in parts[1:]]
    return names


def main():
    prog = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "layout")
    if not os.path.exists(prog):
        print("skip: no %s (make %s)" % (prog, os.path.relpath(prog, ROOT)))
        return summary(1)
    out = subprocess.run([prog], stdout=subprocess.PIPE, universal_newlines=True)
    check(out.returncode == 0, "%s runs" % os.path.relpath(prog, ROOT))
    c = json.loads(out.stdout)
    py = tb.native.c_structs()
    text = open(os.path.join(ROOT, "triton_bundle.h"), encoding="utf-8").read()

    check(sorted(c) == sorted(py), "layout prints the structs the ctypes mirrors are (%s)" % ", ".join(sorted(py)))
    for name in sorted(set(c) & set(py)):
        cs, ps = c[name], py[name]
        cfields = list(cs["fields"])
        pfields = [f[0] for f in ps._fields_]
        hfields = header_fields(text, name)
        check(hfields == cfields, "%s: tests/layout.c prints every field of the header's struct, in order (%s)" % (
            name, "header %s, layout.c %s" % (hfields, cfields) if hfields != cfields else ", ".join(cfields)))
        check(pfields == cfields, "%s: the ctypes fields are the C fields, in order%s" % (
            name, "" if pfields == cfields else ": ctypes %s, C %s" % (pfields, cfields)))
        bad = []
        for f in cfields:
            if f not in pfields:
                continue
            off, size = cs["fields"][f]
            d = getattr(ps, f)
            if (d.offset, d.size) != (off, size):
                bad.append("%s.%s: C offset %d size %d, ctypes offset %d size %d" % (
                    name, f, off, size, d.offset, d.size))
        for b in bad:
            print("    " + b)
        check(not bad, "%s: every field's offset and size equal the C compiler's%s" % (
            name, "" if not bad else " (%s)" % "; ".join(bad)))
        check(ctypes.sizeof(ps) == cs["size"], "%s: sizeof %d, ctypes.sizeof %d" % (
            name, cs["size"], ctypes.sizeof(ps)))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
