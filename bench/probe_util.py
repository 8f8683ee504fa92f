"""What the decode-step probes (pdl_probe.py, prologue_probe.py,
layer_probe.py, activation_probe.py, combo_probe.py) share:
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


def probe_setup(argv, layers):
    """What prologue_probe.py, layer_probe.py and activation_probe.py
    start from: None (a line said so) without torch and a GPU, else
    (torch, tb: the companion, gemv_probe: its time_graph, step_kernels,
    narrow_product_configs, layers: --layers N, else `layers`, and
    decode_step's decode, reset, ids and pos)."""
    layers = int(argv[argv.index("--layers") + 1]) if "--layers" in argv else layers
    from pycheck import cuda_torch, step_kernels
    torch = cuda_torch()
    if torch is None:
        print("skip: no CUDA device")
        return None
    import gemv_probe
    gemv_probe.torch = torch
    import triton_bundle as tb
    from triton_bundle.inductor import narrow_product_configs
    decode, reset, ids, pos = decode_step(torch, layers)
    return torch, tb, gemv_probe, step_kernels, narrow_product_configs, layers, decode, reset, ids, pos


def compile_step(torch, narrow_product_configs, decode, reset, ids, pos, **compile_kwargs):
    """decode compiled by torch.compile(decode, **compile_kwargs) (backend=
    or options=) under the narrow products' config, without grad, and run
    twice from the state reset() puts back."""
    with narrow_product_configs(), torch.no_grad():
        fn = torch.compile(decode, **compile_kwargs)
        for _ in range(2):
            reset()
            fn(ids, pos)
        torch.cuda.synchronize()
    return fn


def measure_step(torch, gemv_probe, step_kernels, fn, reset, ids, pos, graphs=3):
    """(us, per, out): fn(ids, pos)'s best step in a CUDA graph of 20
    steps (of `graphs` graphs), its kernels under the profiler ({name:
    [us a step, launches a step]}) and its outputs (output_tensors), each
    from the state reset() puts back."""
    from triton_bundle import output_tensors
    with torch.no_grad():
        us = min(gemv_probe.time_graph(lambda: fn(ids, pos), 20, reset) for _ in range(graphs))
        reset()
        per = step_kernels(torch, lambda: fn(ids, pos))
        reset()
        out = [t.clone() for t in output_tensors(fn(ids, pos))]
    return us, per, out
