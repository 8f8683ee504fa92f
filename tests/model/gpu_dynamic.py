#!/usr/bin/env python3
"""Shapes that vary, on a GPU (issue 32): one exported bundle runs at every
size in its declared ranges, bit-identical to the same model compiled by
PyTorch with the same dynamic dimensions and run at that size.

Models (no downloads: random weights from fixed seeds):
  encoder  transformers' BERT (2 layers, hidden 128, 4 heads, SDPA run as
           the math kernels), input_ids and attention_mask (some rows
           padded), batch 2..16 and sequence 8..128
  prefill  transformers' GPT-2 (2 layers, n_embd 128, 4 heads, SDPA),
           batch 1, sequence 8..128: the logits of a prompt

For each: export once (dynamic_shapes), then at the minimum, the maximum
and six random sizes inside, run the bundle with the C runner (plain and
CUDA-graph replay, one model for every size) and compare every output bit
for bit with the compiled model's; then sizes out of range and
inconsistent sizes, refused with tb_err_shape before anything runs. With
--bench, each size's time: the runner's graph replay, PyTorch's
reduce-overhead compile of the same dynamic model, and the kernels' own
time (the profiler's sum over one plain run of the runner); `tbundle run
--graph --bench 200` at that size, its inputs saved as .npy (the sizes
bound from their shapes), its outputs compared bit for bit too.

    python3 tests/model/gpu_dynamic.py OUTDIR [--bench] [encoder] [prefill]

Prints one line per check, a table of sizes, and "N passed, N failed, N
skipped"; OUTDIR receives NAME.tbundle and dynamic.json."""

import json
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "model"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import triton_bundle as tb  # noqa: E402
from triton_bundle import dynamic as tbdyn  # noqa: E402

from pycheck import check, counts  # noqa: E402 - the Python tests' harness


def encoder(torch):
    import transformers
    from torch.export import Dim
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=256, max_position_embeddings=128, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, attn_implementation="sdpa")
    m = transformers.BertModel(cfg, add_pooling_layer=False).cuda().eval()

    def f(ids, mask):
        return m(input_ids=ids, attention_mask=mask).last_hidden_state
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, 1000, (16, 128), device="cuda", generator=g)
    mask = torch.ones(16, 128, dtype=torch.int64, device="cuda")
    for r in range(0, 16, 3):  # padded rows
        mask[r, 100 - 5 * r:] = 0
    batch, seq = Dim("batch", min=2, max=16), Dim("seq", min=8, max=128)
    spec = {"ids": {0: batch, 1: seq}, "mask": {0: batch, 1: seq}}
    return f, m, (ids, mask), spec, ["input_ids", "attention_mask"]


def prefill(torch):
    import transformers
    from torch.export import Dim
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, n_positions=128, vocab_size=1000, use_cache=False,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    m = transformers.GPT2LMHeadModel(cfg).cuda().eval()

    def f(ids):
        return m(input_ids=ids).logits
    g = torch.Generator(device="cuda").manual_seed(2)
    ids = torch.randint(0, 1000, (1, 128), device="cuda", generator=g)
    return f, m, (ids,), {"ids": {1: Dim("seq", min=8, max=128)}}, ["input_ids"]


MODELS = {"encoder": encoder, "prefill": prefill}


def bits(torch, t):
    t = t.contiguous()
    return t.view(torch.uint8) if t.element_size() == 1 else t.view({2: torch.int16, 4: torch.int32,
                                                                        8: torch.int64}[t.element_size()])


def median_us(torch, fn):
    from gpu_generate import median_ms  # the one timer of the GPU tests
    return median_ms(torch, fn, 50) * 1e3


def kernel_us(torch, fn):
    """The GPU's own time of one call: its kernels', memsets' and copies'
    durations summed (the profiler's CUDA events)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    total = 0.0
    for e in prof.events():
        if str(getattr(e, "device_type", "")).split(".")[-1] == "CUDA" and not getattr(e, "is_user_annotation", False):
            total += e.time_range.end - e.time_range.start
    return total


def run_model(name, torch, lib, out, bench, exe):
    f, module, inputs, spec, in_names = MODELS[name](torch)
    path = os.path.join(out, name + ".tbundle")
    t0 = time.perf_counter()
    report = tb.export_model(f, inputs, path, {"dynamic_shapes": spec, "module": module, "input_names": in_names})
    export_s = time.perf_counter() - t0
    symbols = report.symbols
    print("     %s: exported in %.1f s: symbols %s, %d expressions, captured at %s; plan %d bytes at the maximum, "
          "PyTorch's peak there %d" % (name, export_s, symbols, report.expressions, report.captured_sizes,
                                       report.workspace_size, report.pytorch_peak))
    check(report.workspace_size <= report.pytorch_peak,
          "%s: the plan at the maximum (%d bytes) is at most PyTorch's peak there (%d)" % (
              name, report.workspace_size, report.pytorch_peak))
    _, dims = tbdyn.parse_spec(spec, inputs, {}, list(inputs), ["ids", "mask"])
    rng = random.Random(7)
    sizes = [[lo for _, lo, _ in symbols], [hi for _, _, hi in symbols]]
    while len(sizes) < 8:
        v = [rng.randint(lo, hi) for _, lo, hi in symbols]
        if v not in sizes:
            sizes.append(v)
    h = lib.read_file(path)
    plain, graph = lib.model(h), lib.model(h, graph=True, instance_cache=4)
    stream = torch.cuda.Stream()
    rows = []
    ro = None
    if bench:
        # the same dimensions dynamic (maybe_mark_dynamic: mark_dynamic's
        # range makes this compile refuse a guard it cannot prove, s*(8 + s -
        # s % 8) > 1); its graphs recorded per size in the warm-up runs
        ro = torch.compile(f, mode="reduce-overhead")
        # new tensors: the export's own inputs carry mark_dynamic's ranges
        at = [tbdyn.at_sizes(torch, t, dims.get(i, {}), sizes[1]).clone() for i, t in enumerate(inputs)]
        for i, ds in dims.items():
            for d in ds:
                torch._dynamo.maybe_mark_dynamic(at[i], d)
        try:
            with torch.no_grad():
                ro(*at)
        except Exception as e:  # noqa: BLE001 - the baseline only: reported, the checks go on
            print("reduce-overhead: %s: %s" % (type(e).__name__, str(e)[:300]))
            ro = None
    try:
        for values in sizes:
            at = [tbdyn.at_sizes(torch, t, dims.get(i, {}), values).clone() for i, t in enumerate(inputs)]
            label = "%s at %s" % (name, ", ".join("%s=%d" % (s[0], v) for s, v in zip(symbols, values)))
            with torch.no_grad():
                ref = [t.clone() for t in tb.output_tensors(report.compiled(*at))]
            specs = plain.output_specs(at)
            outs = [torch.empty_strided(s["shape"], s["strides"], device="cuda", dtype=r.dtype)
                    for s, r in zip(specs, ref)]
            ok = True
            row = {"sizes": values}
            for label2, m in (("plain", plain), ("graph", graph)):
                for o in outs:
                    o.fill_(float("nan") if o.is_floating_point() else -1)
                with torch.cuda.stream(stream):
                    m.run(at, outs, stream.cuda_stream)
                stream.synchronize()
                same = all(o.shape == r.shape and torch.equal(bits(torch, o), bits(torch, r))
                           for o, r in zip(outs, ref))
                row["identical_" + label2] = same
                ok = ok and same
            check(ok, "%s: bit-identical to the compiled model (plain and graph replay)" % label)
            if bench:  # tbundle run --graph at this size, its inputs from .npy files
                import numpy as np
                import bench_model
                import gpu_models

                def plain_run():
                    plain.run(at, outs, stream.cuda_stream)
                stem = os.path.join(out, "%s.%s.in" % (name, "x".join(str(v) for v in values)))
                paths = gpu_models.save_all(torch, at, stem)
                res = os.path.join(out, "%s.out" % name)
                row["graph_us"], _, _ = bench_model.tbundle_run(exe, path, paths, 200, True, res)
                row["identical_tbundle"] = all(np.array_equal(np.load(os.path.join(res, "out%d.npy" % k)),
                                                              gpu_models.to_numpy(torch, r)) for k, r in enumerate(ref))
                check(row["identical_tbundle"], "%s: tbundle run --graph binds the sizes from the .npy inputs, "
                      "bit-identical" % label)
                with torch.cuda.stream(stream):
                    row["kernel_us"] = kernel_us(torch, plain_run)
                if ro is not None:
                    with torch.no_grad():
                        row["reduce_overhead_us"] = median_us(torch, lambda: ro(*at))
            rows.append(row)
        # refused before anything runs
        for bad, why in (([s[2] + 1 if k == 0 else s[2] for k, s in enumerate(symbols)], "over the range"),
                         ([s[1] - 1 if k == len(symbols) - 1 else s[1] for k, s in enumerate(symbols)],
                          "under the range")):
            at = [tbdyn.at_sizes(torch, t, dims.get(i, {}), bad) for i, t in enumerate(inputs)]
            try:
                plain.output_specs(at)
                check(False, "%s: sizes %s (%s) refused" % (name, bad, why))
            except tb.BundleError as e:
                check(e.code == "shape", "%s: sizes %s (%s) refused: %s" % (name, bad, why, e))
        if len(inputs) > 1:
            at = [tbdyn.at_sizes(torch, t, dims.get(i, {}), sizes[0]) for i, t in enumerate(inputs)]
            at[1] = tbdyn.at_sizes(torch, inputs[1], dims.get(1, {}), [sizes[0][0] + 1] + sizes[0][1:])
            outs = [torch.empty(1, device="cuda")]
            try:
                plain.run(at, outs, stream.cuda_stream)
                check(False, "%s: inputs of disagreeing sizes refused" % name)
            except tb.BundleError as e:
                check(e.code == "shape", "%s: inputs of disagreeing sizes refused: %s" % (name, e))
    finally:
        plain.free()
        graph.free()
        lib.free(h)
    return {"model": name, "symbols": symbols, "export_s": export_s, "expressions": report.expressions,
            "workspace_size": report.workspace_size, "pytorch_peak": report.pytorch_peak,
            "device": torch.cuda.get_device_name(), "rows": rows}


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    bench = "--bench" in argv
    if not args:
        print(__doc__)
        return 2
    out, names = args[0], args[1:] or ["encoder", "prefill"]
    try:
        import torch
        import transformers  # noqa: F401
        assert torch.cuda.is_available()
    except (ImportError, AssertionError):
        print("skip: no torch, transformers or CUDA device")
        print("0 passed, 0 failed, 1 skipped")
        return 0
    os.makedirs(out, exist_ok=True)
    lib = tb.CLibrary(os.path.join(ROOT, "build", "libtriton_bundle.so"))
    results = []
    for name in names:
        try:
            results.append(run_model(name, torch, lib, out, bench, os.path.join(ROOT, "build", "tbundle")))
        except Exception as e:  # noqa: BLE001 - reported, the next model runs
            import traceback
            traceback.print_exc()
            check(False, "%s: %s: %s" % (name, type(e).__name__, e))
    for r in results:
        print("%s on %s: plan %d bytes at the maximum, PyTorch's peak %d" % (r["model"], r["device"],
                                                                            r["workspace_size"], r["pytorch_peak"]))
        print("  %-10s %16s %10s %14s %8s %9s %10s" % ("sizes", "tbundle --graph", "kernel", "reduce-overhead",
                                                        "/kernel", "/r-o", "identical"))
        for row in r["rows"]:
            g, k, ro = row.get("graph_us"), row.get("kernel_us"), row.get("reduce_overhead_us")
            print("  %-10s %16s %10s %14s %8s %9s %10s" % (
                "x".join(str(v) for v in row["sizes"]), "%.1f us" % g if g else "-", "%.1f us" % k if k else "-",
                "%.1f us" % ro if ro else "-", "%.3f" % (g / k) if g and k else "-",
                "%.3f" % (g / ro) if g and ro else "-",
                "yes" if row["identical_plain"] and row["identical_graph"] and row.get("identical_tbundle", True)
                else "NO"))
    with open(os.path.join(out, "dynamic.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("%d passed, %d failed, 0 skipped" % (counts["passed"], counts["failed"]))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
