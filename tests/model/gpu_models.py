#!/usr/bin/env python3
"""Small models exported whole by export_model (a bundle with a program,
FORMAT.md section 5), with their inputs and PyTorch's outputs, for the C
runner's tests. Runs on a GPU machine with PyTorch (and transformers for
the GPT model; without it a hand-written GPT stands in). No downloads:
random weights from fixed seeds, batch 1 or 8 and small sizes, so that
max-autotune compiles quickly.

    python3 tests/model/gpu_models.py export OUTDIR [NAME...]
    python3 tests/model/gpu_models.py list

Models (NAME): mlp (256 -> 1024 -> 256, batch 8, float32), gpt (a GPT-2
decoder: 2 layers, n_embd 256, 4 heads, sequence 32, bfloat16; transformers'
GPT2LMHeadModel with eager attention, its output a ModelOutput), gpt_hand
(the same shape, hand-written, not exported by default), cnn (three
convolutions as Triton templates, BatchNorm in eval mode, ReLU, pooling,
a linear layer; 1x3x64x64), stateful (BatchNorm1d in training mode, whose
running statistics change each call, a step counter and an EMA buffer
updated in place), coop (cooperative reductions, whose semaphores the
wrapper zeroes: a memset step; an output that is a view of the input: a
copy step), scatter (index_add_, whose kernel uses atomics), greedy (argmax and
argmin over rows of 50,001, 128,256 and 50,257 logits, split in two stages
by the exporter, checked against eager PyTorch too); and, not
exported by default, the real models of issue 31: vit (transformers' ViT,
SDPA, a 16x16 patch embedding), resnet18 (torchvision), gpt2_sdpa
(transformers' GPT-2 with its default SDPA attention), gpt2_full (GPT-2 at
124M) and llama1b (a Llama-style 1B in bfloat16), whose weights go to
NAME.safetensors (WEIGHTS_FILE). Default: mlp gpt cnn stateful coop
scatter greedy.

For each NAME, OUTDIR receives:
  NAME.tbundle            the bundle (kernels, records, the program)
  NAME.in0.npy ...        the inputs, in the program's input order
  NAME.ref0.npy ...       the compiled model's outputs of its first call
                          after the export (from the bundle's state)
  NAME.run2.ref0.npy ...  stateful models: the outputs of the second call
  NAME.json               the report: steps, workspace against PyTorch's
                          peak, state constants, the outputs a kernel with
                          atomics may write (compare those with a
                          tolerance), each output's dtype, shape, strides,
                          whether run 1 equals the captured run bit for
                          bit, timings
bfloat16 and float8 arrays are stored as their bit patterns (uint16,
uint8), as the format's dtype table says (DTYPES' npy column); arrays are
in C order (the JSON has each output's strides).

Prints one line per model and "N passed, N failed, N skipped"; each model
runs on its own (a failure prints its traceback, the next one runs)."""

import json
import os
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import triton_bundle as tb  # noqa: E402

DEFAULT = ["mlp", "gpt", "cnn", "stateful", "coop", "scatter", "greedy"]


# ---------------------------------------------------------------- models
def mlp(torch, nn):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))
    return m.cuda().eval(), (torch.randn(8, 256, device="cuda"),), False


def gpt(torch, nn):
    try:
        import transformers
    except ImportError:
        return gpt_hand(torch, nn)
    torch.manual_seed(0)
    # eager attention: matrix products and a softmax that Inductor decomposes
    # into Triton kernels (SDPA would be a flash-attention kernel of aten's);
    # no cache, so that the output is a ModelOutput of tensors
    cfg = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, n_positions=64, vocab_size=1000,
                                  use_cache=False, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                  attn_implementation="eager")
    m = transformers.GPT2LMHeadModel(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    ids = torch.randint(0, 1000, (1, 32), device="cuda")
    return m, (ids,), False


def gpt_hand(torch, nn):
    F = torch.nn.functional

    class Block(nn.Module):
        """A pre-norm GPT block: attention with a causal mask, then an MLP."""

        def __init__(self, d, h):
            super().__init__()
            self.h = h
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.h) ** 0.5)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self, vocab=1000, d=256, h=4, layers=2, positions=64):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(positions, d)
            self.blocks = nn.ModuleList(Block(d, h) for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.wte.weight  # tied, as GPT-2's

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            x = self.wte(ids) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    torch.manual_seed(0)
    m = GPT().to(device="cuda", dtype=torch.bfloat16).eval()
    return m, (torch.randint(0, 1000, (1, 32), device="cuda"),), False


def cnn(torch, nn):
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    with torch.no_grad():  # running statistics that are not the defaults
        for bn in (m[1], m[5]):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
    return m.cuda().eval(), (torch.randn(1, 3, 64, 64, device="cuda"),), False


def stateful(torch, nn):
    class Stateful(nn.Module):
        """BatchNorm1d in training mode (running_mean, running_var and
        num_batches_tracked change each call), a step counter and an EMA of
        the features, both buffers updated in place; the output depends on
        them, so that a second call differs from the first."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 64)
            self.bn = nn.BatchNorm1d(64)
            self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
            self.register_buffer("ema", torch.zeros(64))

        def forward(self, x):
            y = self.bn(torch.relu(self.fc(x)))
            self.steps.add_(1)
            self.ema.mul_(0.9).add_(y.mean(0), alpha=0.1)
            return y * self.steps.float() + self.ema + self.bn.running_mean

    torch.manual_seed(0)
    return Stateful().cuda().train(), (torch.randn(16, 64, device="cuda"),), True


def coop(torch, nn):
    class Coop(nn.Module):
        """Cooperative reductions (forced by OPTIONS below): Inductor's wrapper
        zeroes their graph-wide semaphores with `.zero_()`, a memset step;
        the third output, a row of the input, is a view that a copy step
        writes."""

        def forward(self, x):
            return x.sum(dim=1), x.amax(dim=1), x[1]

    torch.manual_seed(0)
    return Coop().cuda(), (torch.randn(8, 1 << 16, device="cuda"),), False


def scatter(torch, nn):
    class Scatter(nn.Module):
        """index_add_: Inductor's scatter kernel adds with atomics, so the
        first output may differ in its last bits between runs; the second
        does not depend on it."""

        def forward(self, src, idx):
            out = torch.zeros(64, src.shape[1], device=src.device, dtype=src.dtype).index_add_(0, idx, src)
            return out, src.sum(dim=0) * 2.0

    torch.manual_seed(0)
    return Scatter().cuda(), (torch.randn(4096, 16, device="cuda"),
                              torch.randint(0, 64, (4096,), device="cuda")), False


def greedy(torch, nn):
    """Greedy tokens: argmax and argmin over rows of 50,001 float32,
    128,256 bfloat16 (Llama 3's vocabulary: 64 chunks, none padded) and
    50,257 bfloat16 logits (GPT-2's: the last chunk padded), along the last
    dimension, the first (of a transposed copy) and all of them, which the
    exporter's split_argmax runs in two stages. The inputs are made to catch
    a wrong split: the row's largest value twice, in two chunks, and in the
    last element; a row all -inf; NaN in two places; the largest value in
    the padded chunk; ties at chunk edges. export_one checks the compiled
    model against eager PyTorch too, and that the split made more kernels
    than Inductor's own argmax (EAGER_EQUAL)."""
    class Greedy(nn.Module):
        def forward(self, a, b, c):
            return (a.argmax(-1), a.argmin(), (b * 2).argmax(-1, keepdim=True), b.argmin(1),
                    a.t().contiguous().argmax(0), c.argmax(-1), c.argmin(dim=None, keepdim=True))

    torch.manual_seed(0)
    a = torch.randn(4, 50001, device="cuda")
    a[0, 700] = a[0, 30000] = 9.0                     # a tie between chunks: the first wins
    a[1] = float("-inf")                              # all -inf: index 0
    a[2, 1000] = a[2, 40000] = float("nan")           # NaN counts as the largest (argmin's smallest)
    a[3, 50000] = 9.0                                 # the last element, in the padded chunk
    a[3, 12] = -9.0
    b = torch.randn(2, 128256, device="cuda").to(torch.bfloat16)
    b[0, 2003] = b[0, 2004] = 8.0                     # a tie across a chunk edge (2,004 a chunk)
    b[1, 128255] = -8.0                               # argmin's answer in the last element
    b[1, 5] = 8.0
    c = torch.randn(1, 50257, device="cuda").to(torch.bfloat16)
    c[0, 50256] = 8.0                                 # argmax's answer in the padded chunk's last element
    c[0, 50250] = -8.0                                # argmin's, in the padded chunk too
    return Greedy().cuda(), (a, b, c), False


def vit(torch, nn):
    """transformers' ViT with its default attention (SDPA): 2 layers, 192
    wide, 3 heads, a 64x64 image in 16x16 patches (a stride-16
    convolution), float32."""
    import transformers
    torch.manual_seed(0)
    cfg = transformers.ViTConfig(hidden_size=192, num_hidden_layers=2, num_attention_heads=3, intermediate_size=768,
                                 image_size=64, patch_size=16, num_channels=3, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    m = transformers.ViTModel(cfg, add_pooling_layer=False).cuda().eval()
    return m, (torch.randn(1, 3, 64, 64, device="cuda"),), False


def resnet18(torch, nn):
    """torchvision's ResNet-18 (random weights, BatchNorm statistics not
    the defaults), one 64x64 image, float32."""
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=1000)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
    return m.cuda().eval(), (torch.randn(1, 3, 64, 64, device="cuda"),), False


def gpt2_sdpa(torch, nn):
    """transformers' GPT2LMHeadModel with its default attention (SDPA),
    float32: 2 layers, n_embd 256, 4 heads, sequence 64; lm_head tied to
    wte (one storage)."""
    import transformers
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, n_positions=128, vocab_size=1000, use_cache=False,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    m = transformers.GPT2LMHeadModel(cfg).cuda().eval()
    return m, (torch.randint(0, 1000, (1, 64), device="cuda"),), False


def gpt2_full(torch, nn):
    """transformers' GPT-2 at full size (GPT2Config's defaults: 12 layers,
    n_embd 768, 12 heads, vocabulary 50257; 124M parameters), SDPA
    attention, float32, one sequence of 64 tokens."""
    import transformers
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(use_cache=False, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    m = transformers.GPT2LMHeadModel(cfg).cuda().eval()
    return m, (torch.randint(0, cfg.vocab_size, (1, 64), device="cuda"),), False


def llama1b(torch, nn):
    """A Llama-style model of about 1B parameters in bfloat16: hidden 2048,
    16 layers, 32 heads (8 key/value heads), MLP 8192, vocabulary 32000;
    SDPA attention, one sequence of 64 tokens."""
    import transformers
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                                   num_key_value_heads=8, intermediate_size=8192, vocab_size=32000,
                                   max_position_embeddings=256, use_cache=False)
    m = transformers.LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    return m, (torch.randint(0, cfg.vocab_size, (1, 64), device="cuda"),), False


MODELS = {"mlp": mlp, "gpt": gpt, "gpt_hand": gpt_hand, "cnn": cnn, "stateful": stateful, "coop": coop,
          "scatter": scatter, "greedy": greedy, "vit": vit, "resnet18": resnet18, "gpt2_sdpa": gpt2_sdpa,
          "gpt2_full": gpt2_full, "llama1b": llama1b}
# models whose constants go to a weights file, NAME.safetensors beside the bundle
WEIGHTS_FILE = {"gpt2_sdpa", "vit", "gpt2_full", "llama1b"}
# Inductor options a model is exported with, besides the Triton-only ones
OPTIONS = {"coop": {"triton.cooperative_reductions": True, "triton.force_cooperative_reductions": True}}
# models whose compiled outputs must equal eager PyTorch's bit for bit (the
# exporter's own decompositions: the same values, not only close ones)
EAGER_EQUAL = {"greedy"}


# ----------------------------------------------------------------- files
def to_numpy(torch, t):
    """A C-order numpy array of t; bfloat16 and float8 as their bits."""
    import numpy as np
    t = t.detach().contiguous().cpu()
    name = str(t.dtype).replace("torch.", "")
    npy = tb.DTYPE_BY_NAME[name].npy if name in tb.DTYPE_BY_NAME else None
    if name == "bfloat16":
        return t.view(torch.int16).numpy().view(np.uint16)
    if npy == "|u1" and name != "uint8":  # float8 kinds
        return t.view(torch.uint8).numpy()
    return t.numpy()


def save_all(torch, tensors, stem):
    import numpy as np
    paths = []
    for i, t in enumerate(tensors):
        p = "%s%d.npy" % (stem, i)
        np.save(p, to_numpy(torch, t))
        paths.append(p)
    return paths


def split_kernels(torch, fn, args):
    """The Triton kernels of fn(*args): compiled by Inductor as it is, and
    by the exporter's backend (split_argmax), each checked against eager."""
    from torch._inductor.utils import run_and_get_code
    with torch.no_grad():
        want = tb.output_tensors(fn(*args))
    counts = []
    for backend in (None, tb.exporter_backend(torch, dict(tb.TRITON_ONLY))):
        torch._dynamo.reset()
        f = torch.compile(fn, **({"backend": backend} if backend else {"options": tb.TRITON_ONLY}))
        with torch.no_grad():
            out, code = run_and_get_code(f, *args)
        got = tb.output_tensors(out)
        if len(got) != len(want) or not all(torch.equal(a, b) for a, b in zip(got, want)):
            raise AssertionError("compiled%s, the outputs differ from eager's" % (" (split)" if backend else ""))
        counts.append(sum(c.count("@triton.jit") for c in code))
    torch._dynamo.reset()
    return tuple(counts)


def export_one(torch, nn, name, outdir):
    """Exports NAME; returns its JSON report (a dict)."""
    t0 = time.perf_counter()
    model, inputs, is_stateful = MODELS[name](torch, nn)
    path = os.path.join(outdir, name + ".tbundle")
    opts = dict(OPTIONS.get(name) or {})
    if name in WEIGHTS_FILE:
        opts["weights"] = os.path.join(outdir, name + ".safetensors")
    report = tb.export_model(model, inputs, path, opts)
    compiled = report.compiled
    in_tensors = [t for t in inputs if torch.is_tensor(t)]
    save_all(torch, in_tensors, os.path.join(outdir, name + ".in"))
    with torch.no_grad():  # export_model left the module's state where the bundle starts
        run1 = [t.clone() for t in tb.output_tensors(compiled(*inputs))]
        run2 = [t.clone() for t in tb.output_tensors(compiled(*inputs))] if is_stateful else None
    torch.cuda.synchronize()
    save_all(torch, run1, os.path.join(outdir, name + ".ref"))
    if run2 is not None:
        save_all(torch, run2, os.path.join(outdir, name + ".run2.ref"))
    atomics = set(report.outputs_with_atomics)
    same = [bool(torch.equal(a, b)) for a, b in zip(report.captured_outputs, run1)]
    info = report.as_dict()
    info.update({
        "model": name, "stateful": is_stateful, "transformers": type(model).__module__.startswith("transformers"),
        "inputs_npy": len(in_tensors), "outputs_npy": len(run1), "run2": run2 is not None,
        "run1_equals_capture": same,
        "outputs_contiguous": [t.is_contiguous() for t in run1],
        "run2_differs": None if run2 is None else [not torch.equal(a, b) for a, b in zip(run1, run2)],
        "total_s": time.perf_counter() - t0,
        "workspace_vs_pytorch_peak": (report.workspace_size / report.pytorch_peak) if report.pytorch_peak else None,
        "bundle_bytes": os.path.getsize(path),
    })
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True, default=str)
    bad = [report.outputs[i].name for i, s in enumerate(same) if not s and report.outputs[i].name not in atomics]
    if bad:
        raise AssertionError("run 1 after the export differs from the captured run in %s (the state was not "
                             "restored, or a kernel is nondeterministic)" % bad)
    if name in EAGER_EQUAL:
        with torch.no_grad():
            eager = tb.output_tensors(model(*inputs))
        if len(run1) != len(eager):
            raise AssertionError("%d compiled outputs, %d eager ones" % (len(run1), len(eager)))
        diff = [i for i, (a, b) in enumerate(zip(run1, eager)) if a.shape != b.shape or not torch.equal(a, b)]
        if diff:
            raise AssertionError("the compiled outputs %s differ from eager PyTorch's: %s against %s" % (
                diff, [run1[i].flatten()[:4].tolist() for i in diff], [eager[i].flatten()[:4].tolist() for i in diff]))
        x = torch.randn(1, 128256, device="cuda").to(torch.bfloat16)
        kernels = split_kernels(torch, lambda v: v.argmax(-1), (x,))
        if kernels != (1, 2):
            raise AssertionError("an argmax over 128,256 logits compiled to %d kernel(s) by Inductor and %d by the "
                                 "exporter's backend: expected 1 and 2 (split_argmax's two stages)" % kernels)
        kernels = split_kernels(torch, model, inputs)
        if not kernels[1] > kernels[0]:
            raise AssertionError("the model compiled to %d kernel(s) by Inductor and %d by the exporter's backend: "
                                 "its argmaxes were not split" % kernels)
    if run2 is not None and not any(info["run2_differs"]):
        raise AssertionError("the stateful model's second run equals its first: its state did not change")
    return info


def main(argv):
    if len(argv) < 2 or argv[1] not in ("export", "list") or (argv[1] == "export" and len(argv) < 3):
        print(__doc__)
        return 2
    if argv[1] == "list":
        print(" ".join(MODELS))
        return 0
    outdir = argv[2]
    names = argv[3:] or DEFAULT
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print("unknown model(s) %s; known: %s" % (unknown, " ".join(MODELS)))
        return 2
    try:
        import torch
        import torch.nn as nn
        ok = torch.cuda.is_available()
    except ImportError:
        ok = False
    if not ok:
        print("skip: no torch or no CUDA device")
        print("0 passed, 0 failed, %d skipped" % len(names))
        return 0
    os.makedirs(outdir, exist_ok=True)
    passed = failed = 0
    for name in names:
        try:
            info = export_one(torch, nn, name, outdir)
        except Exception:  # noqa: BLE001 - one model's failure does not stop the others
            failed += 1
            print("FAIL %s" % name)
            traceback.print_exc()
            sys.stdout.flush()
            continue
        passed += 1
        steps = info["steps"]
        print("ok   %s: %d launches, %d memsets, %d copies; %d inputs, %d outputs, %d constants (%d bytes, state: %s); "
              "workspace %d bytes, PyTorch peak %d (%.2fx); atomics reach %s; export %.1f s" % (
                  name, steps["launch"], steps["memset"], steps["copy"], len(info["inputs"]), len(info["outputs"]),
                  info["constants"], info["constant_bytes"], ", ".join(info["state_constants"]) or "none",
                  info["workspace_size"], info["pytorch_peak"], info["workspace_vs_pytorch_peak"] or 0.0,
                  ", ".join(info["outputs_with_atomics"]) or "no output", info["total_s"]))
        for w in info.get("warnings") or ():
            print("     warning: %s" % w)
        sys.stdout.flush()
    print("%d passed, %d failed, 0 skipped" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
