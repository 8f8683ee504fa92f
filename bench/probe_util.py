"""What the decode-step probes (pdl_probe.py, prologue_probe.py) share:
the repository's import paths and a 1B-shaped decode step whose state each
run puts back."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _parts in (("python",), ("tests",), ("tests", "model"), ("bench",)):
    if os.path.join(ROOT, *_parts) not in sys.path:
        sys.path.insert(0, os.path.join(ROOT, *_parts))


def decode_step(torch, layers):
    """(decode, reset, ids, pos): tests/model/gpu_realsize.py's 1B shape
    with `layers` layers, reset() putting its cache back as it was built,
    and one token at position 40 to feed it."""
    from gpu_realsize import build
    _, _, _, _, decode, state = build(torch, "1b", layers)
    state0 = [t.clone() for t in state()]

    def reset():
        for t, s0 in zip(state(), state0):
            t.copy_(s0)
    return decode, reset, torch.tensor([[7]], device="cuda"), torch.tensor([40], device="cuda")
