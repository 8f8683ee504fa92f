"""PyTorch Inductor's TritonBundler on a Triton cache: collect + pickle, and
unpickle + read_and_emit into a fresh directory; prints the medians in
milliseconds as 'pytorch_pack_ms X' and 'pytorch_unpack_ms Y'.
usage: python3 bench/bench_pytorch.py CACHE_DIR WORK_DIR [RUNS]"""
import os
import pickle
import shutil
import statistics
import sys
import time

cache, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
from torch._inductor import config  # noqa: E402
from torch._inductor.triton_bundler import TritonBundler  # noqa: E402

config.bundle_triton_into_fx_graph_cache = True
hashes = sorted(h for h in os.listdir(cache) if os.path.isdir(os.path.join(cache, h)))
times = {"collect": [], "pickle": [], "unpickle": [], "emit": []}
for r in range(runs):
    os.environ["TRITON_CACHE_DIR"] = cache
    t0 = time.perf_counter()
    TritonBundler.begin_compile()
    for h in hashes:
        TritonBundler.put(h, 0)
    bundle, _ = TritonBundler.collect()
    t1 = time.perf_counter()
    blob = pickle.dumps(bundle)
    t2 = time.perf_counter()
    again = pickle.loads(blob)
    t3 = time.perf_counter()
    out = os.path.join(work, f"pytorch_emit_{r}")
    os.environ["TRITON_CACHE_DIR"] = out
    TritonBundler.read_and_emit(again)
    t4 = time.perf_counter()
    assert len(bundle.kernel_artifacts) == len(hashes)
    assert len(os.listdir(out)) == len(hashes)
    shutil.rmtree(out)
    for k, v in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
        times[k].append(v * 1e3)
m = {k: statistics.median(v) for k, v in times.items()}
print(f"pytorch: collect {m['collect']:.1f} ms + pickle {m['pickle']:.1f} ms; "
      f"unpickle {m['unpickle']:.1f} ms + emit {m['emit']:.1f} ms ({len(hashes)} kernels, median of {runs})")
print(f"pytorch_pack_ms {m['collect'] + m['pickle']:.1f}")
print(f"pytorch_unpack_ms {m['unpickle'] + m['emit']:.1f}")
