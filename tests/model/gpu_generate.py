#!/usr/bin/env python3
"""Greedy generation from C on a GPU, against the same compiled functions
driven from PyTorch. No downloads: random weights from fixed seeds.

    python3 tests/model/gpu_generate.py OUTDIR [MODEL...] [--budget SECONDS] [--bench] [--buckets]

Models: gptfast (a gpt-fast style decoder: its KV cache a pair of module
buffers per layer, written with index_copy_ at a position tensor; the mask
a row of a causal buffer at that position) and llama (transformers'
LlamaForCausalLM with eager attention and a StaticCache, whose tensors are
not module buffers). Each is exported with export_programs as prefill
(one program whose length varies: dynamic_shapes, 2 to 16 tokens) and
decode (its argmax inside: next_token), the property generate.max_seq set
(--buckets: prefill_8 and prefill_16 instead, the prompt right-padded to
its bucket), then:

  1. the compiled functions generate 64 tokens from two prompts (5 and 11
     tokens, each prefilled at its own length) in PyTorch, the state put
     back between them: the reference tokens and every step's logits;
  2. the C runner (tb_model_run_program through ctypes) does the same with
     and without graphs, tb_model_reset_state between the prompts: every
     step's logits and token compared bit for bit;
  3. tbundle generate, with and without --graph: the same ids.
--bench adds, for the first model: the decode step's kernel time (the
profiler's sum), tbundle generate's per-token time with the graph, the
same decode step compiled with mode="reduce-overhead" and driven from
Python, the prefill at 8 and 16 tokens from tbundle run --graph --bench against
its reduce-overhead compile, the time to first token against one pageable
copy of the weights, and the workspace against PyTorch's peaks.

OUTDIR receives MODEL.tbundle, MODEL.json (the results) and the prompts'
reference ids. Prints one line per check and "N passed, N failed, N
skipped"; a stage that would pass the budget is skipped and says so."""

import json
import os
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402

passed = failed = skipped = 0
START = time.time()
BUDGET = 540.0
PROMPTS = [[17, 3, 250, 9, 44], [5, 301, 77, 12, 90, 8, 140, 33, 2, 61, 19]]
NEW = 64
MAX_SEQ = 96
BUCKETS = (8, 16)
DYNAMIC = True      # the prefill: one program whose length varies (2 to BUCKETS[-1]); --buckets: one per bucket
PREFILL_MIN = 2


def prefill_name(T):
    return "prefill" if DYNAMIC else "prefill_%d" % T


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   %s" % what)
    else:
        failed += 1
        print("FAIL %s%s" % (what, (": " + detail) if detail else ""))
    sys.stdout.flush()


def skip(n, what):
    global skipped
    skipped += n
    print("skip %s" % what)
    sys.stdout.flush()


def left():
    return BUDGET - (time.time() - START)


# ---------------------------------------------------------------- models
def gptfast(torch):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, d, h, max_seq):
            super().__init__()
            self.h, self.hd = h, d // h
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.wqkv, self.wo = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.register_buffer("k_cache", torch.zeros(1, h, max_seq, d // h))
            self.register_buffer("v_cache", torch.zeros(1, h, max_seq, d // h))

        def forward(self, x, pos, mask):
            b, t, d = x.shape
            q, k, v = self.wqkv(self.n1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, self.h, self.hd).transpose(1, 2) for z in (q, k, v))
            self.k_cache.index_copy_(2, pos, k)
            self.v_cache.index_copy_(2, pos, v)
            att = (q @ self.k_cache.transpose(-2, -1)) * (self.hd ** -0.5)
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = (att @ self.v_cache).transpose(1, 2).reshape(b, t, d)
            x = x + self.wo(y)
            return x + self.fc2(F.gelu(self.fc1(self.n2(x))))

    class Decoder(nn.Module):
        def __init__(self, vocab=512, d=128, h=4, layers=2, max_seq=MAX_SEQ):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_seq, d)
            self.blocks = nn.ModuleList(Block(d, h, max_seq) for _ in range(layers))
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
            self.register_buffer("causal", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool)))

        def forward(self, ids, pos):
            mask = self.causal[pos].view(1, 1, ids.shape[1], -1)
            x = self.tok(ids) + self.pos(pos)
            for blk in self.blocks:
                x = blk(x, pos, mask)
            return self.head(self.norm(x))

    torch.manual_seed(0)
    model = Decoder().cuda().eval()

    def prefill(ids):
        return model(ids, torch.arange(ids.shape[1], device=ids.device))

    def decode(ids, pos):
        logits = model(ids, pos)
        return logits, logits[:, -1].argmax(-1, keepdim=True)
    return model, prefill, decode, {}, lambda: [b for _, b in model.named_buffers() if "cache" in _]


def llama_programs(torch, model, cfg, max_seq, dtype):
    """prefill and decode over a transformers StaticCache of max_seq
    positions (made here, eagerly), and the cache's state tensors."""
    from transformers import StaticCache
    try:
        cache = StaticCache(config=cfg, max_cache_len=max_seq)
    except TypeError:  # transformers before the lazily made layers
        cache = StaticCache(config=cfg, max_batch_size=1, max_cache_len=max_seq, device="cuda", dtype=dtype)
    with torch.no_grad():  # the cache's tensors made here, eagerly, not inside a compiled function
        model(input_ids=torch.zeros(1, 8, dtype=torch.long, device="cuda"), past_key_values=cache,
              cache_position=torch.arange(8, device="cuda"), use_cache=True)

    def prefill(ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        return model(input_ids=ids, past_key_values=cache, cache_position=pos, use_cache=True).logits

    def decode(ids, pos):
        logits = model(input_ids=ids, past_key_values=cache, cache_position=pos, use_cache=True).logits
        return logits, logits[:, -1].argmax(-1, keepdim=True)

    def state():  # every tensor of the cache: keys, values and (newer transformers) a length per layer
        out = []
        for layer in getattr(cache, "layers", []):
            out += [v for _, v in sorted(vars(layer).items()) if torch.is_tensor(v)]
        out += [t for t in getattr(cache, "key_cache", []) + getattr(cache, "value_cache", []) if torch.is_tensor(t)]
        return out
    return prefill, decode, cache, state


def llama(torch):
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      attn_implementation="eager")
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).cuda().eval()
    prefill, decode, cache, state = llama_programs(torch, model, cfg, MAX_SEQ, torch.float32)
    print("     transformers %s" % transformers.__version__)
    return model, prefill, decode, {"names": {"kv": cache}}, state


MODELS = {"gptfast": gptfast, "llama": llama}


# ------------------------------------------------------------- the test
def bucket_of(n):
    """The length a prompt of n tokens is prefilled at: its own (at least
    the range's minimum) with the dynamic prefill, else its bucket."""
    return max(n, PREFILL_MIN) if DYNAMIC else min(b for b in BUCKETS if b >= n)


def reference(torch, fns, state0, state_tensors):
    """The compiled functions' greedy loop: per prompt, the ids and every
    step's logits (CPU), the state put back before each prompt."""
    out = []
    with torch.no_grad():
        for prompt in PROMPTS:
            for t, s in zip(state_tensors(), state0):
                t.copy_(s)
            T = bucket_of(len(prompt))
            ids = torch.zeros(1, T, dtype=torch.long, device="cuda")
            ids[0, :len(prompt)] = torch.tensor(prompt, device="cuda")
            lg = tb.output_tensors(fns[prefill_name(T)](ids))[0]
            steps = [lg.clone().cpu()]
            tok = int(lg[0, len(prompt) - 1].argmax())
            toks = [tok]
            for i in range(NEW - 1):
                o = tb.output_tensors(fns["decode"](torch.tensor([[tok]], device="cuda"),
                                                    torch.tensor([len(prompt) + i], device="cuda")))
                steps.append(o[0].clone().cpu())
                tok = int(o[1].item())
                toks.append(tok)
            out.append((toks, steps))
    return out


def c_generate(torch, lib, path, graph, ref):
    """The C runner through ctypes: every step's logits and token against
    the reference; tb_model_reset_state between the prompts. (ok, detail)."""
    h = lib.read_file(path)
    m = None
    try:
        m = lib.model(h, graph=graph)
        s = torch.cuda.Stream()

        def like(prog, k, what):  # a tensor of exactly the program's spec (sizes and strides)
            sp = m.programs[prog][what][k]
            return torch.empty_strided(sp["shape"], sp["strides"], device="cuda",
                                       dtype=getattr(torch, tb.DTYPE_BY_NUMBER[sp["dtype"]].name))
        ids1, pos = like("decode", 0, "inputs"), like("decode", 1, "inputs")
        lg1, nxt = like("decode", 0, "outputs"), like("decode", 1, "outputs")
        torch.cuda.synchronize()
        for k, (prompt, (toks, steps)) in enumerate(zip(PROMPTS, ref)):
            if k:
                m.reset_state(s.cuda_stream)
            T = bucket_of(len(prompt))
            ids = torch.zeros(1, T, dtype=torch.long, device="cuda")
            ids[0, :len(prompt)] = torch.tensor(prompt, device="cuda")
            sp = m.output_specs([ids], program=prefill_name(T))[0]  # (2.6) the logits at this length
            lg = torch.empty_strided(sp["shape"], sp["strides"], device="cuda",
                                     dtype=getattr(torch, tb.DTYPE_BY_NUMBER[sp["dtype"]].name))
            torch.cuda.synchronize()
            m.run([ids], [lg], stream=s.cuda_stream, program=prefill_name(T))
            s.synchronize()
            if lg.shape != steps[0].shape or not torch.equal(lg.cpu(), steps[0]):
                return False, "prompt %d: %s's logits at %d tokens differ" % (k, prefill_name(T), T)
            tok = int(lg[0, len(prompt) - 1].argmax())
            if tok != toks[0]:
                return False, "prompt %d: first token %d, want %d" % (k, tok, toks[0])
            for i in range(NEW - 1):
                ids1.fill_(tok)
                pos.fill_(len(prompt) + i)
                torch.cuda.synchronize()
                m.run([ids1, pos], [lg1, nxt], stream=s.cuda_stream, program="decode")
                s.synchronize()
                if lg1.shape != steps[i + 1].shape or not torch.equal(lg1.cpu(), steps[i + 1]):
                    return False, "prompt %d, decode step %d: the logits differ" % (k, i)
                tok = int(nxt.item())
                if tok != toks[i + 1]:
                    return False, "prompt %d, decode step %d: token %d, want %d" % (k, i, tok, toks[i + 1])
        return True, "%d prompts x %d tokens, every step's logits bit-identical" % (len(PROMPTS), NEW)
    finally:
        if m is not None:
            m.free()
        lib.free(h)


def tbundle_generate(exe, path, prompt, graph, bench=False):
    cmd = [exe, "generate", path, "--prompt-ids", ",".join(map(str, prompt)), "--max-new", str(NEW)]
    if graph:
        cmd.append("--graph")
    if bench:
        cmd.append("--bench")
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = r.stdout.strip().splitlines()
    ids = [int(x) for x in lines[0].split(",")] if r.returncode == 0 and lines else None
    return ids, bench_lines(lines[1:]), r.stderr.strip()


def bench_lines(lines):
    """--bench's "name value unit" lines after the ids, as {name: value}."""
    kv = {}
    for ln in lines:
        parts = ln.split()
        if len(parts) >= 2:
            try:
                kv[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return kv


def median_ms(torch, fn, n=200):
    import statistics
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def bench(torch, name, path, fns, raw, state0, state_tensors, info, outdir, exe):
    """The goals' figures, in info["bench"]."""
    import numpy as np
    model_fns = raw
    res = info.setdefault("bench", {})
    with torch.no_grad():
        for t, s in zip(state_tensors(), state0):
            t.copy_(s)
        ids1 = torch.tensor([[7]], device="cuda")
        pos = torch.tensor([20], device="cuda")
        # the decode step's kernel time: the profiler's sum over one step
        from torch.profiler import ProfilerActivity, profile
        fns["decode"](ids1, pos)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                fns["decode"](ids1, pos)
            torch.cuda.synchronize()
        gpu = [e for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")]
        dur = lambda e: e.time_range.end - e.time_range.start  # us
        res["decode_kernel_us"] = sum(dur(e) for e in gpu) / 5.0 if gpu else None
        res["decode_kernel_events"] = len(gpu) / 5.0
    # C: tbundle generate --graph --bench
    ids_g, kv, err = tbundle_generate(exe, path, PROMPTS[1], True, bench=True)
    res["c_decode_median_us"] = kv.get("decode_median")
    res["c_time_to_first_token_ms"] = kv.get("time_to_first_token")
    res["c_load_ms"] = kv.get("load")
    res["c_prefill_ms"] = kv.get("prefill")
    res["h2d_weights_ms"] = kv.get("h2d_weights")
    res["weights_bytes"] = kv.get("weights")
    res["generate_stderr"] = err
    # reduce-overhead, driven from Python
    if left() > 90:
        with torch.no_grad():
            ro = torch.compile(model_fns["decode"], mode="reduce-overhead")
            for t, s in zip(state_tensors(), state0):
                t.copy_(s)
            idsr = torch.tensor([[7]], device="cuda")
            posr = torch.tensor([20], device="cuda")
            for _ in range(4):
                lg, nt = ro(idsr, posr)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(NEW):  # the token fed back on the device, no host sync per token
                lg, nt = ro(idsr, posr)
                idsr.copy_(nt)
                posr.add_(1)
            torch.cuda.synchronize()
            res["ro_decode_device_fed_us"] = (time.perf_counter() - t0) / NEW * 1e6
            for t, s in zip(state_tensors(), state0):
                t.copy_(s)
            posr.fill_(20)
            t0 = time.perf_counter()
            for i in range(NEW):  # the token read on the host each step, as a C generator reads it
                lg, nt = ro(idsr, posr)
                tok = int(nt.item())
                idsr.fill_(tok)
                posr.add_(1)
            res["ro_decode_host_token_us"] = (time.perf_counter() - t0) / NEW * 1e6
            for T in BUCKETS:
                rp = torch.compile(model_fns["prefill"], mode="reduce-overhead")
                ids = torch.randint(0, 500, (1, T), device="cuda")
                res["ro_prefill_%d_us" % T] = median_ms(torch, lambda: rp(ids)) * 1e3
    else:
        skip(1, "%s: reduce-overhead timings (%.0f s of the budget left)" % (name, left()))
    # C: each prefill bucket, tbundle run --graph --bench
    for T in BUCKETS:
        f = os.path.join(outdir, "%s.ids%d.npy" % (name, T))
        np.save(f, np.random.RandomState(T).randint(0, 500, (1, T)).astype(np.int64))
        r = subprocess.run([exe, "run", path, "--program", prefill_name(T), "--in", f, "--out",
                            os.path.join(outdir, "run_%s_%d" % (name, T)), "--graph", "--bench", "300"],
                           capture_output=True, text=True)
        for ln in r.stdout.splitlines():
            if ln.startswith("median "):
                res["c_prefill_%d_us" % T] = float(ln.split()[1])
        if r.returncode:
            res["c_prefill_%d_error" % T] = r.stderr.strip()[-300:]
    for T in BUCKETS:  # (a stateful program run many times: the cache's bytes no longer the bundle's)
        pass
    return res


def weights_variants(torch, model, programs, options, outdir, exe, ref, info, reset):
    """export_programs with the weights outside the bundle (issue 37: 2.5.0
    wrote such a bundle's weights with neither bytes nor a tensor of the
    file): options weights (a file written) and weights_from (the
    checkpoint save_pretrained wrote). Every weight external, weights.file
    set, the bundle read back and checked by the export, and tbundle
    generate (the file found beside the bundle) gives the reference's ids."""
    ck = os.path.join(outdir, "llama_ckpt")
    model.save_pretrained(ck, safe_serialization=True)
    variants = [("weights", os.path.join(outdir, "llama_w.safetensors")),
                ("weights_from", os.path.join(ck, "model.safetensors"))]
    for opt, wfile in variants:
        if left() < 60:
            skip(3, "llama: export_programs with %s (%.0f s of the budget left)" % (opt, left()))
            continue
        path = os.path.join(os.path.dirname(wfile), "llama_%s.tbundle" % opt)
        o = dict(options)
        o["keep_ir"] = False
        o[opt] = wfile
        reset()  # the state the first export started from: the cache as the bundle holds it
        try:
            rep = tb.export_programs(programs, path, o, module=model, properties={"generate.max_seq": str(MAX_SEQ)})
        except Exception as e:  # noqa: BLE001
            check(False, "llama: export_programs with %s" % opt, "%s: %s" % (type(e).__name__, str(e)[-800:]))
            continue
        b = tb.read_file(path)
        table = b.programs[0].constants
        weights = [c for c in table if not c.state]
        ext = [c for c in weights if c.external is not None]
        # weights: every weight goes to the file; weights_from: every one the
        # checkpoint holds (a non-persistent buffer such as rotary's inv_freq
        # is not saved, so it stays in the bundle, named in the report)
        held = set(tb.weights.read_header(wfile))
        left_in = [c.name for c in weights if c.external is None]
        want_left = [] if opt == "weights" else [c.name for c in weights if c.name not in held]
        check(weights and ext and sorted(left_in) == sorted(want_left) and all(not c.data for c in ext) and
              sorted(rep.weights["in_bundle"]) == sorted(want_left) and
              b.properties.get("weights.file") == os.path.basename(wfile) and rep.timings.get("check_s") is not None,
              "llama: export_programs with %s: every weight the file holds (%d of %d) a tensor of %s, weights.file "
              "set, read back and checked (%.2f s)" % (opt, len(ext), len(weights), os.path.basename(wfile),
                                                      rep.timings.get("check_s") or -1),
              "%d of %d external, property %r, in bundle %s" % (len(ext), len(weights), b.properties.get("weights.file"),
                                                               rep.weights and rep.weights.get("in_bundle")))
        for graph in (False, True):
            got, kv, err = tbundle_generate(exe, path, PROMPTS[0], graph)
            check(got == ref[0][0], "llama (%s): tbundle generate%s: the reference's %d ids" % (
                opt, " --graph" if graph else "", NEW), err[-400:] if got != ref[0][0] else "")
        info.setdefault("weights_variants", []).append({"option": opt, "external": len(ext), "timings": rep.timings})


def run_model(torch, name, outdir, lib, exe, do_bench):
    t0 = time.time()
    model, prefill, decode, opts, state_tensors = MODELS[name](torch)
    raw = {"prefill": prefill, "decode": decode}
    ids = {T: torch.zeros(1, T, dtype=torch.long, device="cuda") for T in BUCKETS}
    programs = {}
    if DYNAMIC:  # (2.6) one program for every prompt length of the range, tuned and planned at its maximum
        from torch.export import Dim
        programs["prefill"] = (prefill, (ids[BUCKETS[-1]],), {
            "input_names": ["ids"], "output_names": ["logits"],
            "dynamic_shapes": {"ids": {1: Dim("seq", min=PREFILL_MIN, max=BUCKETS[-1])}}})
    for T in BUCKETS if not DYNAMIC else ():
        programs["prefill_%d" % T] = (prefill, (ids[T],), {"input_names": ["ids"], "output_names": ["logits"]})
    programs["decode"] = (decode, (torch.zeros(1, 1, dtype=torch.long, device="cuda"),
                                   torch.tensor([10], device="cuda")),
                          {"input_names": ["ids", "pos"], "output_names": ["logits", "next_token"]})
    path = os.path.join(outdir, name + ".tbundle")
    options = dict(opts)
    options["keep_ir"] = False
    rep = tb.export_programs(programs, path, options, module=model, properties={"generate.max_seq": str(MAX_SEQ)})
    export_s = time.time() - t0
    check(True, "%s: export_programs %s in %.0f s: %d constants (%d bytes) shared by %d programs, shared state %s, "
          "bundle %d bytes" % (name, list(programs), export_s, rep.constants, rep.constant_bytes, len(programs),
                               rep.shared_state, os.path.getsize(path)))
    info = {"model": name, "export_s": export_s, "bundle_bytes": os.path.getsize(path),
            "constants": rep.constants, "constant_bytes": rep.constant_bytes, "shared_state": rep.shared_state,
            "programs": {k: {"steps": v.steps, "workspace": v.workspace_size, "pytorch_peak": v.pytorch_peak,
                             "timings": v.timings} for k, v in rep.programs.items()}}
    info["warnings"] = list(rep.warnings) + [w for v in rep.programs.values() for w in v.warnings]
    info["program_tuning"] = {k: getattr(v, "program_tuning", {}) for k, v in rep.programs.items()}
    print("     program tuning: %s kernels changed" % {k: len(v) for k, v in info["program_tuning"].items()})
    for w in info["warnings"]:
        print("     warning: %s" % w)
    fns = {k: v.compiled for k, v in rep.programs.items()}
    state0 = [t.clone() for t in state_tensors()]
    check(len(state0) > 0 and set(rep.shared_state) and len(rep.shared_state) == len(state0),
          "%s: the cache is shared state, one constant per tensor (%d)" % (name, len(state0)))
    ref = reference(torch, fns, state0, state_tensors)
    info["reference_ids"] = [toks for toks, _ in ref]
    for graph in (False, True):
        try:
            ok, detail = c_generate(torch, lib, path, graph, ref)
        except Exception as e:  # noqa: BLE001
            ok, detail = False, "%s: %s" % (type(e).__name__, e)
        check(ok, "%s: tb_model_run_program%s, two prompts, reset between them" % (name, " (graph)" if graph else ""),
              detail)
        info["c_%s" % ("graph" if graph else "direct")] = detail
    for graph in (False, True):
        for k, prompt in enumerate(PROMPTS):
            got, kv, err = tbundle_generate(exe, path, prompt, graph)
            check(got == ref[k][0], "%s: tbundle generate%s, prompt %d: the reference's %d ids" % (
                name, " --graph" if graph else "", k, NEW), err[-400:] if got != ref[k][0] else "")
            info.setdefault("tbundle_generate", []).append({"graph": graph, "prompt": prompt, "ids": got,
                                                             "stderr": err})
    if name == "llama":
        def reset():
            for t, s in zip(state_tensors(), state0):
                t.copy_(s)
            torch.cuda.synchronize()
        weights_variants(torch, model, programs, options, outdir, exe, ref, info, reset)
    m = lib.model(lib.read_file(path))
    info["c_workspace"] = m.workspace_size
    info["c_constant_bytes"] = m.constant_bytes
    m.free()
    info["max_pytorch_peak"] = max(v["pytorch_peak"] or 0 for v in info["programs"].values())
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(info, f, indent=1, default=str)
    if do_bench:
        if left() > 60:
            try:
                bench(torch, name, path, fns, raw, state0, state_tensors, info, outdir, exe)
            except Exception:  # noqa: BLE001 - the figures so far are kept
                info.setdefault("bench", {})["error"] = traceback.format_exc()[-1500:]
                print("     bench: %s" % info["bench"]["error"])
        else:
            skip(1, "%s: the bench (%.0f s of the budget left)" % (name, left()))
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(info, f, indent=1, default=str)
    print("     %s" % json.dumps({k: v for k, v in info.items() if k in ("bench", "c_workspace", "max_pytorch_peak",
                                                                           "reference_ids")}, default=str)[:3000])
    sys.stdout.flush()


def main(argv):
    global BUDGET, DYNAMIC
    args = [a for a in argv[1:]]
    do_bench = "--bench" in args
    if "--buckets" in args:
        DYNAMIC = False
        args.remove("--buckets")
    if "--budget" in args:
        BUDGET = float(args[args.index("--budget") + 1])
        del args[args.index("--budget"):args.index("--budget") + 2]
    args = [a for a in args if a != "--bench"]
    if not args:
        print(__doc__)
        return 2
    outdir, names = args[0], args[1:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print("unknown model(s) %s; known: %s" % (unknown, " ".join(MODELS)))
        return 2
    try:
        import torch
        ok = torch.cuda.is_available()
    except ImportError:
        ok = False
    if not ok:
        print("skip: no torch or no CUDA device")
        print("0 passed, 0 failed, %d skipped" % len(names))
        return 0
    os.makedirs(outdir, exist_ok=True)
    lib = tb.CLibrary(os.path.join(ROOT, "build", "libtriton_bundle.so"))
    exe = os.path.join(ROOT, "build", "tbundle")
    for i, name in enumerate(names):
        if left() < 150:
            skip(1, "%s: %.0f s of the budget left" % (name, left()))
            continue
        try:
            run_model(torch, name, outdir, lib, exe, do_bench and i == 0)
        except Exception:  # noqa: BLE001 - one model's failure does not stop the others
            check(False, "%s" % name, traceback.format_exc()[-2500:])
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
