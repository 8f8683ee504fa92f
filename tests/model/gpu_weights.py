#!/usr/bin/env python3
"""Weights by name on a GPU (issue 31): transformers' GPT-2 with SDPA
attention (tests/model/gpu_models.py's gpt2_sdpa) saved with
save_pretrained, exported with weights_from= that checkpoint (nothing
stored twice: lm_head is wte, the bundle holds no weight), run by `tbundle
run --weights` bit-identical to the compiled model; then a "fine-tuned"
checkpoint (every weight changed, saved the same way) run by the same
bundle, bit-identical to the compiled model with those weights, with no new
export; and a checkpoint whose tensor has another shape refused before the
GPU is touched.

    python3 tests/model/gpu_weights.py OUTDIR [build/tbundle]

Prints one line per check and "N passed, N failed, N skipped"."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "model"))
import triton_bundle as tb  # noqa: E402

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what)
    sys.stdout.flush()


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    out, exe = argv[1], argv[2] if len(argv) > 2 else os.path.join(ROOT, "build", "tbundle")
    try:
        import numpy as np
        import torch
        import transformers  # noqa: F401
        assert torch.cuda.is_available()
    except (ImportError, AssertionError):
        print("skip: no torch, transformers or CUDA device")
        print("0 passed, 0 failed, 1 skipped")
        return 0
    import gpu_models
    os.makedirs(out, exist_ok=True)
    model, (ids,), _ = gpu_models.gpt2_sdpa(torch, torch.nn)
    hf = os.path.join(out, "hf")
    model.save_pretrained(hf)
    ckpt = os.path.join(hf, "model.safetensors")
    bundle = os.path.join(out, "gpt2.tbundle")
    report = tb.export_model(model, (ids,), bundle, {"weights_from": ckpt})
    w = report.weights
    check(w and w["external"] == report.constants - len(w["in_bundle"]) and w["external"] >= 20 and
          not any(n.endswith("weight") for n in w["in_bundle"]),
          "weights_from the checkpoint save_pretrained wrote: %d weights refer to it (%d bytes), in the bundle: %s"
          % (w["external"], w["bytes"], w["in_bundle"] or "none"))
    with open(bundle, "rb") as f:  # (tbundle run verified its checksum)
        table = tb.read(f.read(), verify_checksum=False).programs[0].constants
    held = sum(memoryview(k.data).nbytes for k in table if k.external is None)
    check(held == sum(k.nbytes() for k in table if k.name in w["in_bundle"]) and
          sum(k.nbytes() for k in table if k.external is not None) == w["bytes"],
          "the bundle stores the bytes of no external weight (%d bytes of constants in it, %d in the checkpoint)"
          % (held, w["bytes"]))
    np.save(os.path.join(out, "ids.npy"), ids.cpu().numpy())

    def run(weights, where):
        r = subprocess.run([exe, "run", bundle, "--in", os.path.join(out, "ids.npy"), "--out", where, "--weights",
                            weights], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        return r.returncode, r.stdout

    with torch.no_grad():
        ref = tb.output_tensors(report.compiled(ids))[0].clone()
    rc, text = run(ckpt, os.path.join(out, "o1"))
    got = np.load(os.path.join(out, "o1", "out0.npy")) if rc == 0 else None
    check(rc == 0 and np.array_equal(got, ref.cpu().numpy()),
          "tbundle run --weights the checkpoint: bit-identical to the compiled model%s" % ("" if rc == 0 else
                                                                                      ": " + text[-400:]))
    # a fine-tune: every weight changed, saved the same way, run with no new export
    with torch.no_grad():
        g = torch.Generator(device="cuda").manual_seed(1)
        for p in model.parameters():
            p.add_(torch.randn(p.shape, device="cuda", generator=g, dtype=p.dtype) * 0.01)
        ref2 = tb.output_tensors(report.compiled(ids))[0].clone()
    ft = os.path.join(out, "ft")
    model.save_pretrained(ft)
    rc, text = run(os.path.join(ft, "model.safetensors"), os.path.join(out, "o2"))
    got2 = np.load(os.path.join(out, "o2", "out0.npy")) if rc == 0 else None
    check(rc == 0 and np.array_equal(got2, ref2.cpu().numpy()) and not np.array_equal(got2, got),
          "a fine-tuned checkpoint of the same names and shapes: the same bundle runs it, bit-identical to the "
          "compiled model with those weights%s" % ("" if rc == 0 else ": " + text[-400:]))
    # another shape: refused before the GPU, naming the tensor
    from safetensors.torch import load_file, save_file
    sd = load_file(ckpt)
    name = next(n for n in sd if n.endswith("c_attn.weight"))
    sd[name] = sd[name][:-1].contiguous()
    bad = os.path.join(out, "bad.safetensors")
    save_file(sd, bad)
    rc, text = run(bad, os.path.join(out, "o3"))
    check(rc == 1 and name in text and "the bundle wants" in text,
          "a checkpoint whose %s has another shape: refused (1), naming it: %s" % (name, text.strip()[-200:]))
    print("%d passed, %d failed, 0 skipped" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
