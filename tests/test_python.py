#!/usr/bin/env python3
"""The Python companion (python/triton_bundle.py) against the C library,
without a GPU or torch: the checksum, byte-for-byte round trips both ways,
grid rules evaluated on both sides, the grid compiler against Python's own
arithmetic, and hostile input, which both readers must refuse alike.
usage: tests/test_python.py build/libtriton_bundle.so  (from the repository root)"""

import os
import random
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
    return summary()


if __name__ == "__main__":
    sys.exit(main())
