"""The command line: triton-bundle list FILE | export ... (--help,
--version), also python -m triton_bundle."""

import argparse
import sys

from . import __doc__ as PACKAGE_DOC, __version__
from .export import export_triton
from .format import read_file, write_file
from .spec import COPY, LAUNCH, MEMSET, BundleError


def _list(path, out=sys.stdout):
    b = read_file(path)
    out.write("%s: format %d.%d, %d kernels, %d records\n" % (path, b.version[0], b.version[1], len(b.kernels),
                                                              len(b.records)))
    for k in b.kernels:
        out.write("kernel %s %s (%d files)\n" % (k.hash, k.name(), len(k.artifacts)))
    for r in b.records:
        out.write("record %s: %s, %d config(s)\n" % (r.cache_key, r.kernel_name, len(r.configs)))
        if r.call and r.call.arg_names:
            out.write("  args %s%s\n" % (", ".join(r.call.arg_names), "; mutated " + ", ".join(
                r.call.arg_names[i] for i in r.call.mutated) if r.call.mutated else ""))
        for i, c in enumerate(r.configs):
            out.write("  [%d] %s \"%s\" warps %d%s%s\n" % (
                i, c.function_name, c.arg_types, c.num_warps,
                " " + " ".join("%s=%d" % p for p in c.params) if c.params else "",
                " grid " + c.grid.text(r.call.arg_names if r.call else None, c.params) if c.grid else ""))
    for prog in b.programs:
        _list_program(prog, out, len(b.programs) > 1)
    for k, v in b.properties.items():
        out.write("property %s = %s\n" % (k, v))


def _tensor_text(t):
    return "%s %s[%s]%s" % (t.name, t.dtype, ", ".join(str(n) for n in t.shape),
                            "" if t.strides == _contiguous(t.shape) else " strides (%s)" % ", ".join(
                                str(s) for s in t.strides))


def _contiguous(shape):
    strides, n = [], 1
    for size in reversed(shape):
        strides.insert(0, n)
        n *= size
    return strides


def _list_program(p, out, shared_table=False):
    """A program (sections 5 and 6): its name, inputs and outputs with dtype
    and shape, the constants' count and bytes (the bundle's one table where
    the programs share it), the workspace, the steps by kind."""
    kinds = [sum(1 for st in p.steps if st.kind == k) for k in (LAUNCH, MEMSET, COPY)]
    state = [k for k in p.constants if k.state]
    out.write("program %s: %d inputs, %d outputs, %d constants%s (%d bytes%s), workspace %d bytes in %d buffers, "
              "%d steps (%d launch, %d memset, %d copy)\n" % (
                  p.name, len(p.inputs), len(p.outputs), len(p.constants),
                  " shared by the programs" if shared_table else "", sum(memoryview(k.data).nbytes for k in p.constants),
                  ", %d state: %d bytes" % (len(state), sum(memoryview(k.data).nbytes for k in state)) if state else "",
                  p.workspace_size, len(p.buffers), len(p.steps), kinds[0], kinds[1], kinds[2]))
    for i, t in enumerate(p.inputs):
        out.write("  input %d: %s\n" % (i, _tensor_text(t)))
    for i, t in enumerate(p.outputs):
        out.write("  output %d: %s\n" % (i, _tensor_text(t)))


def _export_cli(ns):
    """export: runs a Python file that defines export() and returns a
    Bundle, or a list of @triton.jit functions (launched already)."""
    import runpy
    scope = runpy.run_path(ns.script, run_name="__triton_bundle_export__")
    fn = scope.get(ns.function)
    if fn is None:
        raise SystemExit("%s defines no %s()" % (ns.script, ns.function))
    b = fn()
    if not (hasattr(b, "kernels") and hasattr(b, "records")):
        b = export_triton(b)
    write_file(b, ns.output)
    sys.stdout.write("%s: %d kernels, %d records\n" % (ns.output, len(b.kernels), len(b.records)))


PROG = "triton-bundle"


def main(argv=None):
    """The command line (the triton-bundle command, python -m triton_bundle):
    returns the exit status, 0 on success, 1 on failure, 2 on a usage error."""
    p = argparse.ArgumentParser(prog=PROG, description=PACKAGE_DOC.split("\n\n")[0])
    p.add_argument("--version", action="version", version="%(prog)s " + __version__)
    sub = p.add_subparsers(dest="cmd")
    pl = sub.add_parser("list", help="list a bundle's kernels, records, configs, grid rules and program")
    pl.add_argument("file")
    pe = sub.add_parser("export", help="run SCRIPT's FUNCTION() (torch.compile or Triton launches that return a "
                        "Bundle via TorchCapture/export_triton, or @triton.jit functions) and write the bundle")
    pe.add_argument("script")
    pe.add_argument("-o", "--output", required=True)
    pe.add_argument("-f", "--function", default="export")
    ns = p.parse_args(argv)
    try:
        if ns.cmd == "list":
            _list(ns.file)
        elif ns.cmd == "export":
            _export_cli(ns)
        else:
            p.print_help()
            return 2
    except BundleError as e:  # the file named, as tbundle names it
        hint = ": the file was damaged after it was written; copy it again, or make it again (pack its cache, or export its model)" if (
            e.code == "checksum") else ""
        sys.stderr.write("%s: %s: %s%s%s%s\n" % (PROG, e.code, e.message, hint, " [offset %d]" % e.offset
                                                   if e.offset >= 0 else "",
                                                   " [file %s]" % ns.file if ns.cmd == "list" else ""))
        return 1
    except OSError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return 1
    return 0
