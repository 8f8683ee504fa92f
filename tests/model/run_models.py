#!/usr/bin/env python3
"""The C runner on the models tests/model/gpu_models.py exported: each
bundle run by `tbundle run` (with and without --graph) and by
tb_model_run in this process (native.Model, on torch tensors: direct, as a
graph, with the caller's workspace; the stateful ones twice, then after
tb_model_reset_state), every output compared bit for bit with the compiled
model's (NAME.ref*.npy, NAME.run2.ref*.npy). Outputs that a kernel with
atomics may write (the export's report names them) are compared with a
tolerance instead: |a - b| <= 1e-3 * |b| + 1e-5, as float32; the line says
which. Also prints each model's workspace against PyTorch's peak.

    python3 tests/model/run_models.py MODEL_DIR [build/tbundle] [build/libtriton_bundle.so]

Prints one line per check and "N passed, N failed, N skipped"."""

import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402

passed = failed = skipped = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   %s" % what)
    else:
        failed += 1
        print("FAIL %s%s" % (what, (": " + detail) if detail else ""))
    sys.stdout.flush()


def as_float(np, a, dtype):
    if dtype == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    if dtype.startswith("float8"):
        return a.astype(np.float32)  # bit patterns: exact comparison only
    return a.astype(np.float64 if dtype == "float64" else np.float32)


def same(np, got, want, dtype, tolerant):
    """(equal?, how): bit for bit, or within the tolerance for atomics."""
    if got.shape != want.shape:
        return False, "shape %s, want %s" % (got.shape, want.shape)
    if got.tobytes() == want.tobytes():
        return True, "bit-identical"
    if not tolerant:
        n = int((got.reshape(-1).view(np.uint8) != want.reshape(-1).view(np.uint8)).sum()) \
            if got.dtype == want.dtype else -1  # (0-dim arrays viewed as rows first)
        return False, "%d bytes differ" % n
    g, w = as_float(np, got, dtype), as_float(np, want, dtype)
    err = np.abs(g - w) - (1e-3 * np.abs(w) + 1e-5)
    return bool((err <= 0).all()), "within the atomics tolerance (max excess %g)" % float(err.max())


def run_cli(np, exe, name, d, info, graph, tmp):
    ins = sorted(glob.glob(os.path.join(d, name + ".in*.npy")), key=lambda p: int(p.rsplit(".in", 1)[1][:-4]))
    out = os.path.join(tmp, "%s%s" % (name, "_g" if graph else ""))
    os.makedirs(out, exist_ok=True)
    cmd = [exe, "run", os.path.join(d, name + ".tbundle"), "--out", out] + sum((["--in", p] for p in ins), [])
    if graph:
        cmd.append("--graph")
    r = subprocess.run(cmd, capture_output=True, text=True)
    what = "%s: tbundle run%s" % (name, " --graph" if graph else "")
    if r.returncode:
        check(False, what, r.stderr.strip()[-600:])
        return
    tol = set(info.get("outputs_with_atomics") or [])
    bad, notes = [], set()
    for i, o in enumerate(info["outputs"]):
        got, want = np.load(os.path.join(out, "out%d.npy" % i)), np.load(os.path.join(d, "%s.ref%d.npy" % (name, i)))
        ok, how = same(np, got, want, o["dtype"], o["name"] in tol)
        notes.add(how if ok else "")
        if not ok:
            bad.append("%s (%s)" % (o["name"], how))
    check(not bad, "%s: %d outputs %s" % (what, len(info["outputs"]), ", ".join(sorted(n for n in notes if n))),
          "; ".join(bad))


def torch_inputs(torch, np, d, name, specs):
    ts = []
    for i, s in enumerate(specs):
        a = np.load(os.path.join(d, "%s.in%d.npy" % (name, i)))
        t = torch.from_numpy(a.copy())
        if s["dtype"] == "bfloat16":
            t = t.view(torch.bfloat16)
        elif s["dtype"].startswith("float8"):
            t = t.view(getattr(torch, s["dtype"]))
        ts.append(torch.empty_strided(s["shape"], s["strides"], dtype=t.dtype, device="cuda").copy_(t.reshape(s["shape"])))
    return ts


def to_np(torch, np, t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if str(t.dtype).startswith("torch.float8"):
        return t.view(torch.uint8).numpy()
    return t.numpy()


def run_native(torch, np, lib, name, d, info):
    s = torch.cuda.Stream()  # a graph cannot capture the legacy default stream
    with torch.cuda.stream(s):
        _run_native(torch, np, lib, name, d, info)


def _run_native(torch, np, lib, name, d, info):
    specs_in, specs_out = info["inputs"], info["outputs"]
    tol = set(info.get("outputs_with_atomics") or [])
    b = lib.read_file(os.path.join(d, name + ".tbundle"))
    try:
        for graph in (False, True):
            w = os.path.join(d, name + ".safetensors")  # external weights (gpu_models.WEIGHTS_FILE)
            m = lib.model(b, graph=graph, weights=w if os.path.exists(w) else None)
            try:
                ins = torch_inputs(torch, np, d, name, specs_in)
                dt = {s["name"]: s["dtype"] for s in specs_out}
                outs = [torch.empty_strided(s["shape"], s["strides"], dtype=getattr(torch, s["dtype"]), device="cuda")
                        for s in specs_out]
                stream = torch.cuda.current_stream().cuda_stream
                runs = [("run 1", "ref")]
                if info.get("run2"):
                    runs += [("run 2", "run2.ref"), ("after reset_state", "ref")]
                for label, stem in runs:
                    if label == "after reset_state":
                        m.reset_state(stream)
                    m.run(ins, outs, stream)
                    torch.cuda.synchronize()
                    bad = []
                    for i, (o, s) in enumerate(zip(outs, specs_out)):
                        want = np.load(os.path.join(d, "%s.%s%d.npy" % (name, stem, i)))
                        ok, how = same(np, to_np(torch, np, o), want, dt[s["name"]], s["name"] in tol)
                        if not ok:
                            bad.append("%s (%s)" % (s["name"], how))
                    check(not bad, "%s: tb_model_run%s, %s" % (name, " (graph)" if graph else "", label), "; ".join(bad))
                if not graph and not info.get("run2"):
                    ws = torch.empty(max(1, m.workspace_size), dtype=torch.uint8, device="cuda")
                    outs2 = [torch.empty_like(o) for o in outs]
                    m.run(ins, outs2, stream, workspace=ws.data_ptr())
                    torch.cuda.synchronize()
                    def raw(t):  # the bytes (a 0-dim output, greedy's argmin, viewed as a row first)
                        return t.reshape(-1) if t.dtype == torch.bool else t.reshape(-1).view(torch.uint8)
                    check(all(torch.equal(raw(a), raw(c)) or s["name"] in tol
                              for a, c, s in zip(outs, outs2, specs_out)),
                          "%s: tb_model_run_workspace (the caller's %d-byte workspace) gives the same outputs"
                          % (name, m.workspace_size))
                    # a wrong shape is refused, naming the input
                    if specs_in:
                        s0 = specs_in[0]
                        bad_in = [torch.empty([n + 1 for n in s0["shape"]] or [2], dtype=ins[0].dtype, device="cuda")] + ins[1:]
                        try:
                            m.run(bad_in, outs, stream)
                            check(False, "%s: a wrong shape refused" % name, "it ran")
                        except tb.BundleError as e:
                            check(e.code == "arg_mismatch" and s0["name"] in str(e),
                                  "%s: a wrong shape refused, naming input %r" % (name, s0["name"]), str(e))
            finally:
                m.free()
    finally:
        lib.free(b)


def main(argv):
    global skipped
    if len(argv) < 2:
        print(__doc__)
        return 2
    d = argv[1]
    exe = argv[2] if len(argv) > 2 else os.path.join(ROOT, "build", "tbundle")
    so = argv[3] if len(argv) > 3 else os.path.join(ROOT, "build", "libtriton_bundle.so")
    import numpy as np
    names = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(d, "*.json")))
    try:
        import torch
        have_torch = torch.cuda.is_available()
    except ImportError:
        have_torch = False
    lib = tb.CLibrary(so)
    tmp = tempfile.mkdtemp(prefix="tbrun-")
    for name in names:
        info = json.load(open(os.path.join(d, name + ".json")))
        if not os.path.exists(os.path.join(d, name + ".tbundle")):
            continue
        peak, ws = info.get("pytorch_peak") or 0, info.get("workspace_size") or 0
        print("     %s: workspace %d bytes, PyTorch's peak %d (%.2fx), constants %d bytes" % (
            name, ws, peak, ws / peak if peak else 0.0, info.get("constant_bytes", 0)))
        check(not peak or ws <= peak, "%s: the workspace is no larger than PyTorch's peak" % name)
        for graph in (False, True):
            run_cli(np, exe, name, d, info, graph, tmp)
        if have_torch:
            try:
                run_native(torch, np, lib, name, d, info)
            except Exception as e:  # noqa: BLE001 - one model's failure does not stop the others
                import traceback
                traceback.print_exc()
                check(False, "%s: tb_model_run from Python" % name, repr(e))
        else:
            skipped += 1
            print("skip %s: tb_model_run from Python needs torch with CUDA" % name)
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
