#!/usr/bin/env python3
"""Generation at real size from C (issue 37), on one GPU, random weights,
no downloads.

    python3 tests/model/gpu_realsize.py OUTDIR [1b|8b] [--prefill-max N] [--narrow auto|off]
                                        [--budget SECONDS] [--no-ro] [--no-first-token]

Models: transformers' LlamaForCausalLM, eager attention, bf16, a StaticCache
of MAX_SEQ positions, in the shapes of Llama-3.2-1B (hidden 2048, 16 layers,
32/8 heads, FF 8192, vocabulary 128,256, tied embeddings: 2.47 GB) and
Llama-3-8B (hidden 4096, 32 layers, 32/8 heads, FF 14,336, untied: 16 GB).
Exported with export_programs as "prefill" (its length varying from 2 to
--prefill-max, default 64) and "decode" (its argmax inside), the weights in
a safetensors file beside the bundle (option weights), then:

  1. the exporter's compiled functions generate NEW tokens greedily from
     two prompts, the cache put back between them: the reference ids;
  2. tbundle generate, plain and --graph, must give the same ids;
  3. the first token (issue 40): from the process's start (the spawn) to
     the first id tbundle generate prints, the weights file in the page
     cache, the kernels loaded beside the upload and (--serial-load)
     before it, alternated, with each load's phases; beside the pinned
     cuMemcpyHtoD time of the same bytes (the floor) and PyTorch's
     safetensors.torch.load_file(device="cuda") plus the first token from
     the already-compiled prefill; then build/bench_load: 20 loads and
     frees in one process (no device or pinned memory kept, the last
     load within 1.1x the second) and two models at once;
  4. the figures (in OUTDIR/SIZE.json and one table): tbundle generate
     --graph --bench's decode time per token against the floor (the bytes
     a step must read: every weight but the rows of an untied embedding
     it does not look up, plus the KV cache up to the position, over a
     device-to-device copy's bandwidth measured in this process), the
     decode step's kernel sum (the profiler's, the exporter's compiled
     function), the same decode compiled with mode="reduce-overhead" and
     driven from Python (the token fed back on the device), the export's
     time and the sizes; where the decode's kernels have programmatic
     dependent launch (options["pdl"]), the same bundle with every
     config's pdl flag cleared too (the kernels launched one after
     another), which must give the same ids.

--narrow off exports with options["narrow_mm"] = False (Triton's mm
template for the one-row products), for the comparison. Prints one line
per check and "N passed, N failed, N skipped"."""

import json
import os
import statistics
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "model"))
from pycheck import check as _check, summary  # noqa: E402 - the Python tests' harness
from gpu_generate import NEW, bench_lines, llama_programs, tbundle_generate  # noqa: E402 - 64 new tokens, the programs

SIZES = {
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False),
}
MAX_SEQ = 256
START = time.time()
BUDGET = 570.0
SKIPPED = [0]


def check(ok, what, detail=""):
    return _check(ok, what + (": " + detail if detail and not ok else ""))


def skip(n, what):
    SKIPPED[0] += n
    print("skip %s" % what)
    sys.stdout.flush()


def left():
    return BUDGET - (time.time() - START)


def build(torch, size, layers=None):
    """The model in the shape (layers: fewer than the shape's, for
    bench/decode_kernels.py), its programs over a StaticCache of MAX_SEQ."""
    from transformers import LlamaConfig, LlamaForCausalLM
    shape = dict(SIZES[size], **({"num_hidden_layers": layers} if layers else {}))
    cfg = LlamaConfig(max_position_embeddings=4096, attn_implementation="eager", **shape)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    prefill, decode, cache, state = llama_programs(torch, model, cfg, MAX_SEQ, torch.bfloat16)
    return cfg, model, cache, prefill, decode, state


def copy_bandwidth(torch, nbytes=2 << 30):
    """Bytes read plus written per second of a device-to-device copy."""
    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        y.copy_(x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    del x, y
    return 2 * nbytes / statistics.median(times)


def spawn_first_token(exe, path, prompt, serial):
    """tbundle generate --bench, timed from the spawn: (ms from the spawn
    to the first id printed, its --bench lines) or (None, stderr)."""
    cmd = [exe, "generate", path, "--prompt-ids", ",".join(map(str, prompt)), "--max-new", "2", "--bench"]
    if serial:
        cmd.append("--serial-load")
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    kv = bench_lines(r.stdout.strip().splitlines()[1:])
    if r.returncode or "first_token_wall" not in kv:
        return None, r.stderr.strip()[-400:]
    return (kv["first_token_wall"] - t0) * 1e3, kv


def first_token(torch, exe, path, wfile, prompt, fns, reset, info):
    """Issue 40's figures and checks: the first token from the process's
    start, the load's phases, PyTorch's way, 20 loads in one process."""
    if left() < 120:
        skip(2, "the first token (%.0f s left)" % left())
        return
    wbytes = os.path.getsize(wfile)
    with open(wfile, "rb") as f:  # the page cache
        while f.read(64 << 20):
            pass
    runs = {False: [], True: []}
    err = ""
    for k in range(6):  # alternated: both ways see the same host
        serial = bool(k & 1)
        ms, kv = spawn_first_token(exe, path, prompt, serial)
        if ms is None:
            err = kv
            break
        kv["from_spawn_ms"] = ms
        runs[serial].append(kv)
    ok = all(len(v) == 3 for v in runs.values())
    check(ok, "first token: tbundle generate --bench from the spawn, 3 runs each way", err)
    if ok:
        def med(serial, key):
            return statistics.median(r[key] for r in runs[serial])
        ph = ("phase_before_load", "phase_driver", "phase_weights_file", "phase_context", "phase_kernels",
              "phase_memory", "phase_upload", "phase_pinning", "phase_first_prefill")
        info["first_token"] = {("serial" if s else "beside"): {k: med(s, k) for k in ("from_spawn_ms",
                               "time_to_first_token", "load") + ph} for s in (False, True)}
        b = info["first_token"]["beside"]
        print("     first token from the spawn: %.1f ms with the kernels beside the upload, %.1f ms before it "
              "(--serial-load); medians of 3" % (b["from_spawn_ms"], info["first_token"]["serial"]["from_spawn_ms"]))
        print("     phases (beside), ms: " + ", ".join("%s %.1f" % (k[6:], b[k]) for k in ph))
    # the floor: one pinned cuMemcpyHtoD's bandwidth (2 GiB) over the weights' bytes
    n = min(wbytes, 2 << 30)
    src = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst.copy_(src)
    torch.cuda.synchronize()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    del src, dst
    h2d_bw = n / min(times)
    info["pinned_h2d_GBps"], info["weights_floor_ms"] = h2d_bw / 1e9, wbytes / h2d_bw * 1e3
    # PyTorch: safetensors' load_file to the GPU, then the first token from the compiled prefill
    try:
        import safetensors.torch
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        sd = safetensors.torch.load_file(wfile, device="cuda")
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        with torch.no_grad():
            reset()
            ids = torch.tensor([prompt], device="cuda")
            tok = int(tb.output_tensors(fns["prefill"](ids))[0][0, len(prompt) - 1].argmax())
        t2 = time.perf_counter()
        del sd
        info["pytorch_first_token"] = {"load_file_ms": (t1 - t0) * 1e3, "prefill_ms": (t2 - t1) * 1e3,
                                       "token": tok}
        print("     PyTorch: safetensors.torch.load_file(device='cuda') %.1f ms + the compiled prefill's first token "
              "%.1f ms (in a process with CUDA and the model already up); the pinned copy of the %.2f GB: %.1f ms "
              "(%.1f GB/s)" % ((t1 - t0) * 1e3, (t2 - t1) * 1e3, wbytes / 1e9, info["weights_floor_ms"],
                               h2d_bw / 1e9))
    except ImportError:
        print("     PyTorch's load: no safetensors module")
    torch.cuda.empty_cache()
    # 20 loads and frees in one process, and two at once
    bench_load = os.path.join(ROOT, "build", "bench_load")
    if not os.path.exists(bench_load):
        check(False, "20 loads and frees in one process", "no build/bench_load: make build/bench_load")
        return
    r = subprocess.run([bench_load, path, "--loads", "20", "--serial"], capture_output=True, text=True)
    out = r.stdout
    info["bench_load"] = out[-3000:]
    print("     " + "\n     ".join(out.strip().splitlines()[-9:]))
    fails = [ln for ln in out.splitlines() if ln.startswith("FAIL")]
    oks = [ln for ln in out.splitlines() if ln.startswith("ok")]
    check(r.returncode == 0 and len(oks) == 4 and not fails,
          "20 loads and frees in one process: no device or pinned memory kept, the last load within 1.1x the "
          "second; two models at once share the staging area", (fails or [r.stderr[-400:] or out[-400:]])[0])


def main(argv):
    global BUDGET
    args = argv[1:]
    opt = {"--prefill-max": "64", "--narrow": "auto", "--budget": str(BUDGET)}
    for k in list(opt):
        if k in args:
            i = args.index(k)
            opt[k] = args[i + 1]
            del args[i:i + 2]
    no_ro, no_ttft = "--no-ro" in args, "--no-first-token" in args
    args = [a for a in args if a not in ("--no-ro", "--no-first-token")]
    if not args or (len(args) > 1 and args[1] not in SIZES):
        print(__doc__)
        return 2
    BUDGET = float(opt["--budget"])
    outdir, size = args[0], (args[1] if len(args) > 1 else "1b")
    try:
        import torch
        ok = torch.cuda.is_available()
    except ImportError:
        ok = False
    if not ok:
        print("skip: no torch or no CUDA device\n0 passed, 0 failed, 1 skipped")
        return 0
    os.makedirs(outdir, exist_ok=True)
    exe = os.path.join(ROOT, "build", "tbundle")
    info = {"size": size, "card": torch.cuda.get_device_name(), "narrow_mm": opt["--narrow"]}
    cfg, model, cache, prefill, decode, state = build(torch, size)
    print("     %s: %s, %.2f GB of parameters, built in %.0f s" % (size, info["card"], sum(
        p.numel() * p.element_size() for p in model.parameters()) / 1e9, time.time() - START))
    from torch.export import Dim
    pmax = int(opt["--prefill-max"])
    V = cfg.vocab_size
    rs = __import__("random").Random(0)
    prompts = [[rs.randrange(V) for _ in range(n)] for n in (5, min(pmax, 37))]
    programs = {
        "prefill": (prefill, (torch.zeros(1, pmax, dtype=torch.long, device="cuda"),),
                    {"input_names": ["ids"], "output_names": ["logits"],
                     "dynamic_shapes": {"ids": {1: Dim("seq", min=2, max=pmax)}}}),
        "decode": (decode, (torch.zeros(1, 1, dtype=torch.long, device="cuda"), torch.tensor([10], device="cuda")),
                   {"input_names": ["ids", "pos"], "output_names": ["logits", "next_token"]}),
    }
    path = os.path.join(outdir, "llama%s.tbundle" % size)
    wfile = os.path.join(outdir, "llama%s.safetensors" % size)
    options = {"names": {"kv": cache}, "keep_ir": False, "weights": wfile,
               "narrow_mm": {"auto": "auto", "off": False, "on": True}[opt["--narrow"]]}
    t0 = time.time()
    try:
        rep = tb.export_programs(programs, path, options, module=model, properties={"generate.max_seq": str(MAX_SEQ)})
    except tb.ExportStageError as e:
        check(False, "%s: export_programs" % size, str(e))
        print("     the original error: %s" % "".join(traceback.format_exception(e.original))[-1500:])
        return summary(SKIPPED[0])
    info["export_s"] = time.time() - t0
    info["bundle_bytes"], info["weights_bytes"] = os.path.getsize(path), os.path.getsize(wfile)
    info["narrow_products"] = {k: v.narrow_products for k, v in rep.programs.items()}
    info["narrow_configs"] = {k: len(getattr(v, "narrow_configs", None) or {}) for k, v in rep.programs.items()}
    info["timings"] = {k: v.timings for k, v in rep.programs.items()}
    info["export_timings"] = rep.timings
    check(rep.weights and rep.weights["external"] > 0 and not rep.weights["in_bundle"],
          "%s: export_programs in %.0f s: %d weights (%.2f GB) in %s, bundle %.1f MB, read back and checked; one-row "
          "products %s" % (size, info["export_s"], rep.weights["external"], rep.weights["bytes"] / 1e9,
                           os.path.basename(wfile), info["bundle_bytes"] / 1e6, info["narrow_products"]))
    check(opt["--narrow"] == "off" or info["narrow_configs"].get("decode", 0) > 0,
          "%s: the decode's one-row products given narrow_mm_config (%s kernels)" % (size, info["narrow_configs"]))
    info["program_tuning"] = {k: getattr(v, "program_tuning", {}) for k, v in rep.programs.items()}
    tuning_left = [w for v in rep.programs.values() for w in v.warnings if w.startswith("program tuning")]
    tuned = info["program_tuning"].get("decode", {})
    check(opt["--narrow"] == "off" or (not tuning_left and "program_tuning_s" in info["timings"].get("decode", {})),
          "%s: the decode tuned in the program: %d kernels changed, %.1f us a step before, %.1f after (%s s)" % (
              size, len(tuned), sum(t["us"][0] for t in tuned.values()), sum(t["us"][1] for t in tuned.values()),
              info["timings"].get("decode", {}).get("program_tuning_s")), str(tuning_left))
    info["combo"] = {k: getattr(v, "combo", False) for k, v in rep.programs.items()}
    check(opt["--narrow"] == "off" or not hasattr(torch._inductor.config, "combo_kernels") or
          info["combo"] == {"prefill": False, "decode": True},
          "%s: Inductor's combo kernels in the decode, not in the prefill (%s)" % (size, info["combo"]))
    info["pdl_launches"] = {k: getattr(v, "pdl_launches", 0) for k, v in rep.programs.items()}
    check(opt["--narrow"] == "off" or torch.cuda.get_device_capability()[0] < 9 or
          not hasattr(torch._inductor.config.triton, "enable_pdl") or info["pdl_launches"].get("decode", 0) > 0,
          "%s: the decode's kernels launched with programmatic dependent launch (%s launches)" % (
              size, info["pdl_launches"]))
    info["decode_attentions"] = {k: getattr(v, "decode_attentions", 0) for k, v in rep.programs.items()}
    check(info["decode_attentions"].get("decode", 0) == cfg.num_hidden_layers and
          not info["decode_attentions"].get("prefill", 0),
          "%s: the decode's attention one kernel of ours in each of its %d layers, the prefill's Inductor's (%s)" % (
              size, cfg.num_hidden_layers, info["decode_attentions"]))
    info["stored_activations"] = {k: getattr(v, "stored_activations", 0) for k, v in rep.programs.items()}
    check(info["stored_activations"].get("decode", 0) == cfg.num_hidden_layers and
          not info["stored_activations"].get("prefill", 0),
          "%s: the decode's SiLU(gate) * up stored once in each of its %d layers, the prefill's not (%s)" % (
              size, cfg.num_hidden_layers, info["stored_activations"]))
    fns = {k: v.compiled for k, v in rep.programs.items()}
    state0 = [t.clone() for t in state()]

    def reset():
        for t, s in zip(state(), state0):
            t.copy_(s)
    ref = []
    with torch.no_grad():
        for prompt in prompts:
            reset()
            ids = torch.tensor([prompt + [0] * (max(2, len(prompt)) - len(prompt))], device="cuda")
            lg = tb.output_tensors(fns["prefill"](ids))[0]
            tok = int(lg[0, len(prompt) - 1].argmax())
            toks = [tok]
            for i in range(NEW - 1):
                o = tb.output_tensors(fns["decode"](torch.tensor([[tok]], device="cuda"),
                                                    torch.tensor([len(prompt) + i], device="cuda")))
                tok = int(o[1].item())
                toks.append(tok)
            ref.append(toks)
    info["reference_ids"] = ref
    for graph in (False, True):
        for k, prompt in enumerate(prompts):
            got, kv, err = tbundle_generate(exe, path, prompt, graph)
            check(got == ref[k], "%s: tbundle generate%s, prompt of %d tokens: the compiled functions' %d ids" % (
                size, " --graph" if graph else "", len(prompt), NEW), (err[-600:] if got is None else
                                                                      "got %s, want %s" % (got[:8], ref[k][:8])))
    if no_ttft:
        skip(2, "the first token (--no-first-token)")
    else:
        first_token(torch, exe, path, wfile, prompts[1], fns, reset, info)
    # the figures
    bw = copy_bandwidth(torch)
    params = {id(p): p for p in model.parameters()}
    weight_bytes = sum(p.numel() * p.element_size() for p in params.values())
    emb = model.get_input_embeddings().weight
    if not cfg.tie_word_embeddings:  # the decode step reads one row of an untied embedding
        weight_bytes -= emb.numel() * emb.element_size() - emb.shape[1] * emb.element_size()
    hd = cfg.hidden_size // cfg.num_attention_heads
    pos_mid = len(prompts[1]) + NEW // 2
    kv_bytes = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * hd * 2 * pos_mid
    floor_us = (weight_bytes + kv_bytes) / bw * 1e6
    got, kv, err = tbundle_generate(exe, path, prompts[1], True, bench=True)
    c_us = kv.get("decode_median")
    info.update({"copy_bandwidth_GBps": bw / 1e9, "step_bytes": weight_bytes + kv_bytes, "floor_us": floor_us,
                 "c_decode_us": c_us, "c_ttft_ms": kv.get("time_to_first_token"), "c_load_ms": kv.get("load"),
                 "c_prefill_ms": kv.get("prefill"), "generate_stderr": err[-400:]})
    if info["pdl_launches"].get("decode", 0):
        # the same bundle with every config's pdl flag cleared: the kernels
        # (their gdc_wait returns at once) launched one after another. (Not
        # quite the same run: the runner does not update a launch with
        # attributes in a graph, so with the flags it copies the inputs and
        # outputs through static buffers around each replay.)
        nopdl = os.path.join(outdir, "llama%s.nopdl.tbundle" % size)
        b = tb.read_file(path)
        for r in b.records:
            for c in r.configs:
                c.flags &= ~tb.CONFIG_PDL
        tb.write_file(b, nopdl)
        got2, kv2, err2 = tbundle_generate(exe, nopdl, prompts[1], True, bench=True)
        info["c_decode_nopdl_us"] = kv2.get("decode_median")
        check(got2 == ref[1] and info["c_decode_nopdl_us"] is not None and c_us is not None,
              "%s: without programmatic dependent launch (flags cleared), the same ids; decode %s us a token, %s us "
              "with it" % (size, info["c_decode_nopdl_us"], c_us), err2[-400:])
    with torch.no_grad():
        from torch.profiler import ProfilerActivity, profile
        reset()
        ids1, pos = torch.tensor([[7]], device="cuda"), torch.tensor([40], device="cuda")
        fns["decode"](ids1, pos)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                fns["decode"](ids1, pos)
            torch.cuda.synchronize()
        gpu = [e for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")]
        info["kernel_sum_us"] = sum(e.time_range.end - e.time_range.start for e in gpu) / 5.0 if gpu else None
        info["kernels_per_step"] = len(gpu) / 5.0
        top = {}
        for e in gpu:
            top[e.name] = top.get(e.name, 0) + (e.time_range.end - e.time_range.start) / 5.0
        info["top_kernels_us"] = sorted(top.items(), key=lambda x: -x[1])[:12]
    if no_ro or left() < 150:
        skip(1, "%s: reduce-overhead's decode (%s)" % (size, "--no-ro" if no_ro else "%.0f s left" % left()))
    else:
        with torch.no_grad():
            reset()
            ro = torch.compile(decode, mode="reduce-overhead")
            idsr, posr = torch.tensor([[7]], device="cuda"), torch.tensor([20], device="cuda")
            for _ in range(4):
                lg, nt = ro(idsr, posr)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(NEW):  # the token fed back on the device, no host sync per token
                lg, nt = ro(idsr, posr)
                idsr.copy_(nt)
                posr.add_(1)
            torch.cuda.synchronize()
            info["ro_decode_us"] = (time.perf_counter() - t0) / NEW * 1e6
    ok = c_us is not None
    print("     | %s on %s | us/token | tokens/s | x floor | floor us (%.2f GB at %.0f GB/s) | kernel sum us | "
          "reduce-overhead us | export s |" % (size, info["card"], (weight_bytes + kv_bytes) / 1e9, bw / 1e9))
    if ok:
        print("     | tbundle generate --graph | %.1f | %.1f | %.2f | %.1f | %s | %s | %.0f |" % (
            c_us, 1e6 / c_us, c_us / floor_us, floor_us, "%.1f" % info["kernel_sum_us"] if info["kernel_sum_us"]
            else "-", "%.1f" % info["ro_decode_us"] if info.get("ro_decode_us") else "-", info["export_s"]))
        if info.get("c_decode_nopdl_us"):
            nu = info["c_decode_nopdl_us"]
            print("     | the same bundle, pdl flags cleared | %.1f | %.1f | %.2f | %.1f | - | - | - |" % (
                nu, 1e6 / nu, nu / floor_us, floor_us))
    check(ok, "%s: tbundle generate --graph --bench gave a decode time" % size, err[-400:])
    with open(os.path.join(outdir, "%s.json" % size), "w") as f:
        json.dump(info, f, indent=1, default=str)
    print("     %s" % json.dumps({k: info[k] for k in ("top_kernels_us", "narrow_products", "narrow_configs",
                                                          "program_tuning", "export_timings", "pdl_launches",
                                                          "decode_attentions", "stored_activations",
                                                          "c_decode_nopdl_us")
                                  if k in info}, default=str)[:2500])
    return summary(SKIPPED[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
