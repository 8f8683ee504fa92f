#!/usr/bin/env python3
"""The Python companion as a package: its __version__ is the header's
TB_VERSION_STRING, pyproject.toml installs it as one package with the
triton-bundle command, --version and the program name, its modules import
one another without a circle (lazy imports inside functions counted) and
import alone or in any order, it exports no private name, and CLibrary's lookup order (a path, then
TRITON_BUNDLE_LIB, then the system loader).
tests/test_install.sh installs it with pip; this test needs no pip.
usage: tests/test_package.py [build/libtriton_bundle.so]  (from the repository root)"""

import ast
import ctypes
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
from pycheck import check, summary  # noqa: E402

PACKAGE = os.path.join(ROOT, "python", "triton_bundle")


def header_version():
    """TB_VERSION_STRING and "MAJOR.MINOR.PATCH" of the macros, from triton_bundle.h."""
    text = open(os.path.join(ROOT, "triton_bundle.h"), encoding="utf-8").read()
    string = re.search(r'^#define TB_VERSION_STRING "([^"]*)"$', text, re.M).group(1)
    parts = [re.search(r"^#define TB_VERSION_%s (\d+)$" % p, text, re.M).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return string, ".".join(parts)


def run(args, env=None, cwd=None):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env,
                          cwd=cwd)


def env_with(**changes):
    """os.environ with changes; a value of None removes the variable."""
    env = dict(os.environ)
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def versions_agree(version):
    """One version: the header's macros define it (and the format's), and
    every other place that states it must say the same: the header's first
    line, README's "Version X, format Y" and its list --json example,
    CHANGELOG's newest entry, FORMAT.md's title and header table, the
    Python package's format constants and tbundle --version. Returns the
    checks skipped (tbundle not built)."""
    text = open(os.path.join(ROOT, "triton_bundle.h"), encoding="utf-8").read()
    fmt = "%s.%s" % tuple(re.search(r"^#define TB_FORMAT_VERSION_%s (\d+)$" % p, text, re.M).group(1)
                          for p in ("MAJOR", "MINOR"))
    fmaj, fmin = fmt.split(".")
    read = lambda *p: open(os.path.join(ROOT, *p), encoding="utf-8").read()
    first = text.splitlines()[1]
    check(("v%s - format %s" % (version, fmt)) in first, "the header's first line names v%s and format %s: %r" % (
        version, fmt, first[:60]))
    readme = read("README.md")
    m = re.search(r"Version (\d+\.\d+\.\d+), format (\d+\.\d+)", readme)
    check(m is not None and m.groups() == (version, fmt), "README states version %s, format %s: %s" % (
        version, fmt, m.group(0) if m else "no 'Version X, format Y'"))
    m = re.search(r'"format": \{"major": (\d+), "minor": (\d+)\}', readme)
    check(m is not None and m.groups() == (fmaj, fmin), "README's list --json example shows format %s" % fmt)
    head = "## " + read("CHANGELOG.md").split("## Versioning", 1)[1].split("\n## ", 1)[1].splitlines()[0]
    check(("(%s, format %s)" % (version, fmt)) in head or ("%s (format %s)" % (version, fmt)) in head,
          "CHANGELOG's newest entry is %s, format %s: %r" % (version, fmt, head))
    spec = read("docs", "FORMAT.md")
    check(spec.startswith("# The triton_bundle format, version %s\n" % fmt), "FORMAT.md's title is version %s" % fmt)
    check(("| 8 | 2 | major version, `%s` |" % fmaj) in spec and ("| 10 | 2 | minor version, `%s` " % fmin) in spec,
          "FORMAT.md's header table writes major %s and minor %s" % (fmaj, fmin))
    check((tb.FORMAT_MAJOR, tb.FORMAT_MINOR) == (int(fmaj), int(fmin)), "the Python package writes format %s" % fmt)
    exe = os.path.join(ROOT, "build", "tbundle")
    if not os.path.exists(exe):
        print("skip tbundle --version (build/tbundle not built)")
        return 1
    out = run([exe, "--version"]).stdout.strip()
    check(out.startswith("tbundle %s (writes format %s," % (version, fmt)), "tbundle --version: %r" % out)
    return 0


def package_imports():
    """{module: the package's modules it imports}, from each module's source:
    every relative import, at the top or inside a function (a lazy import
    is still a dependency). The package itself (its __init__) is left out:
    it imports every module, and cli reads its __doc__ and __version__."""
    mods = sorted(f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py") and f not in ("__init__.py", "__main__.py"))
    graph = {}
    for m in mods:
        tree = ast.parse(open(os.path.join(PACKAGE, m + ".py"), encoding="utf-8").read())
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [node.module] if node.module else [a.name for a in node.names]
                deps.update(n.split(".")[0] for n in names if n.split(".")[0] in mods)
        graph[m] = deps
    return graph


def import_order():
    """The package's modules import one another without a circle, lazy
    imports counted: spec first (it imports none of them), grid on spec
    alone, format never from inside a function; and each imports alone, and
    all of them in order and in reverse, in a fresh interpreter."""
    graph = package_imports()
    check(graph.get("spec") == set(), "spec imports no module of the package (%s)" % sorted(graph.get("spec", ())))
    check(graph.get("grid") == {"spec"}, "grid imports spec alone (%s)" % sorted(graph.get("grid", ())))
    circle, state = [], {}

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1 and not circle:
                circle.extend(path[path.index(d):] + [m, d] if d in path else [m, d])
            elif d not in state:
                visit(d, path + [m])
        state[m] = 2
    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    check(not circle, "no import circle among the package's modules%s" % (
        ": " + " -> ".join(circle) if circle else " (%d modules)" % len(graph)))
    text = open(os.path.join(PACKAGE, "format.py"), encoding="utf-8").read()
    local = [line.strip() for line in text.splitlines() if line.startswith(" ") and re.match(r"\s+from \.grid ", line)]
    check(not local, "format.py imports grid at its top, never inside a function%s" % (": %r" % local if local else ""))
    env = env_with(PYTHONPATH=os.path.join(ROOT, "python"))
    mods = sorted(graph)
    bad = []
    for order in [[m] for m in mods] + [mods, mods[::-1]]:
        code = "".join("import triton_bundle.%s\n" % m for m in order)
        r = run([sys.executable, "-c", code], env=env)
        if r.returncode:
            bad.append("%s: %s" % (", ".join(order), r.stderr.strip().splitlines()[-1:]))
    check(not bad, "each module imports alone in a fresh interpreter, and all of them in order and reversed%s" % (
        ": " + "; ".join(bad) if bad else " (%s)" % ", ".join(mods)))


def main():
    so = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "libtriton_bundle.so"))
    skipped = 0

    # the version
    string, macros = header_version()
    check(tb.__version__ == string, "triton_bundle.__version__ %r equals the header's TB_VERSION_STRING %r"
          % (tb.__version__, string))
    check(string == macros, "TB_VERSION_STRING %r agrees with TB_VERSION_MAJOR/MINOR/PATCH %s" % (string, macros))
    check(re.match(r"^\d+\.\d+\.\d+$", tb.__version__) is not None, "__version__ is MAJOR.MINOR.PATCH")
    skipped += versions_agree(string)
    import_order()
    private = sorted(n for n in vars(tb) if n.startswith("_") and not n.startswith("__"))
    check(not private, "the package exports its public names only, no private one%s" % (
        ": %s" % ", ".join(private) if private else ""))

    # pyproject.toml
    try:
        import tomllib
    except ImportError:
        tomllib = None
    if tomllib is None:
        print("skip: pyproject.toml's contents (no tomllib before Python 3.11)")
        skipped += 1
    else:
        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
            pp = tomllib.load(f)
        proj, st = pp.get("project", {}), pp.get("tool", {}).get("setuptools", {})
        check(proj.get("name") == "triton-bundle" and proj.get("dependencies", []) == [],
              "pyproject.toml: the project triton-bundle, with no dependencies (standard library only)")
        check("version" in proj.get("dynamic", []) and
              st.get("dynamic", {}).get("version") == {"attr": "triton_bundle.__version__"},
              "pyproject.toml: its version is triton_bundle.__version__ (one source)")
        check(st.get("packages") == ["triton_bundle"] and "py-modules" not in st and
              st.get("package-dir") == {"": "python"}, "pyproject.toml: one package, python/triton_bundle/")
        check(proj.get("scripts") == {"triton-bundle": "triton_bundle.cli:main"},
              "pyproject.toml: the triton-bundle command runs triton_bundle.cli.main")
        bs = pp.get("build-system", {})
        backend = open(os.path.join(ROOT, "packaging", "tb_build.py"), encoding="utf-8").read()
        check(bs.get("build-backend") == "tb_build" and bs.get("backend-path") == ["packaging"] and
              "from setuptools.build_meta import *" in backend,
              "pyproject.toml: built by setuptools (its backend, checked first for wheel), nothing compiled")

    # the command line, as the package's directory and as python -m
    r = run([sys.executable, PACKAGE, "--version"])
    check(r.returncode == 0 and r.stdout.strip() == "triton-bundle " + string,
          "python3 python/triton_bundle --version prints 'triton-bundle %s' (%r)" % (string, r.stdout.strip()))
    r = run([sys.executable, "-m", "triton_bundle", "--version"],
            env=env_with(PYTHONPATH=os.path.join(ROOT, "python")), cwd=os.path.join(ROOT, "tests"))
    check(r.returncode == 0 and r.stdout.strip() == "triton-bundle " + string,
          "python -m triton_bundle --version prints 'triton-bundle %s'" % string)
    r = run([sys.executable, PACKAGE])
    check(r.returncode == 2 and r.stdout.startswith("usage: triton-bundle "),
          "no command: the usage of triton-bundle, exit status 2")
    r = run([sys.executable, PACKAGE, "list", os.path.join(ROOT, "no-such.tbundle")])
    check(r.returncode == 1 and r.stderr.startswith("triton-bundle: "), "errors are prefixed with triton-bundle:")

    # CLibrary's lookup order
    doc = tb.CLibrary.__doc__
    check(re.search(r"1\.\s+path,.*2\.\s+the environment variable TRITON_BUNDLE_LIB.*3\.\s+the system loader", doc,
                    re.S) is not None, "CLibrary's docstring gives the order: path, TRITON_BUNDLE_LIB, system loader")
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    check("TRITON_BUNDLE_LIB" in readme, "README.md documents TRITON_BUNDLE_LIB")
    saved = os.environ.get("TRITON_BUNDLE_LIB")
    try:
        os.environ["TRITON_BUNDLE_LIB"] = "/env/lib.so"
        check(tb.CLibrary.locate("/given/lib.so") == ("/given/lib.so", "path"), "locate: a path comes first")
        check(tb.CLibrary.locate() == ("/env/lib.so", "TRITON_BUNDLE_LIB"), "locate: then TRITON_BUNDLE_LIB")
        os.environ["TRITON_BUNDLE_LIB"] = ""
        check(tb.CLibrary.locate() == ("libtriton_bundle.so", "system loader"),
              "locate: an empty TRITON_BUNDLE_LIB counts as unset")
        del os.environ["TRITON_BUNDLE_LIB"]
        check(tb.CLibrary.locate() == ("libtriton_bundle.so", "system loader"),
              "locate: then libtriton_bundle.so by the system loader")
    finally:
        if saved is None:
            os.environ.pop("TRITON_BUNDLE_LIB", None)
        else:
            os.environ["TRITON_BUNDLE_LIB"] = saved

    if not os.path.exists(so):
        print("skip: loading the library (no %s; make lib)" % so)
        return summary(skipped + 1)
    bogus = os.path.join(ROOT, "no-such-dir", "libtriton_bundle.so")
    probe = ("import ctypes, sys, triton_bundle as tb\n"
             "try:\n"
             "    lib = tb.CLibrary(*sys.argv[1:])\n"
             "except OSError as e:\n"
             "    print('OSError', e); sys.exit(0)\n"
             "lib.L.tb_version.restype = ctypes.c_char_p\n"
             "print(lib.found_by, lib.L.tb_version().decode())\n")
    pyenv = os.path.join(ROOT, "python")

    def probe_run(args, **env):
        env.setdefault("PYTHONPATH", pyenv)
        r = run([sys.executable, "-c", probe] + args, env=env_with(**env))
        return r.stdout.strip() + r.stderr.strip()

    out = probe_run([so], TRITON_BUNDLE_LIB=bogus)
    check(out == "path " + string, "CLibrary(path) loads path, even with TRITON_BUNDLE_LIB set (%s)" % out)
    out = probe_run([], TRITON_BUNDLE_LIB=so)
    check(out == "TRITON_BUNDLE_LIB " + string, "CLibrary() loads TRITON_BUNDLE_LIB (%s)" % out)
    out = probe_run([], TRITON_BUNDLE_LIB=bogus, LD_LIBRARY_PATH=os.path.dirname(so))
    check(out.startswith("OSError") and "TRITON_BUNDLE_LIB" in out and bogus in out,
          "a TRITON_BUNDLE_LIB that does not load is an error naming it, with no fallback (%s)" % out[:90])
    out = probe_run([], TRITON_BUNDLE_LIB=None, LD_LIBRARY_PATH=os.path.dirname(so))
    check(out == "system loader " + string, "CLibrary() without either: the system loader finds "
          "libtriton_bundle.so on LD_LIBRARY_PATH (%s)" % out)

    class Missing(tb.CLibrary):
        LIB_NAME = "libtriton_bundle_no_such_name.so"
    saved = os.environ.pop("TRITON_BUNDLE_LIB", None)
    try:
        Missing()
        check(False, "a library the system loader cannot find is an OSError")
    except OSError as e:
        check("make lib" in str(e) and "TRITON_BUNDLE_LIB" in str(e),
              "a library the system loader cannot find: an OSError that says how to build or point to it")
    finally:
        if saved is not None:
            os.environ["TRITON_BUNDLE_LIB"] = saved
    lib = tb.CLibrary(so)
    lib.L.tb_version.restype = ctypes.c_char_p
    check(lib.L.tb_version().decode() == tb.__version__, "the built library's tb_version() is __version__")
    return summary(skipped)


if __name__ == "__main__":
    sys.exit(main())
