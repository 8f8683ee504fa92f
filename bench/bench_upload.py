#!/usr/bin/env python3
"""The upload row of make bench: build/bench_upload (tb_model_load's upload
of a weights file in the page cache, its pinned way in a first load, the
staging area pinned in it, and reused by later loads, and its pageable
way, against one cuMemcpyHtoD of the same bytes from pinned and from
pageable memory, in one process; issue 40's goal: 0.9x the pinned copy's
bandwidth from 1 GiB on, setup included), then, where safetensors and torch are there, the time
of safetensors.torch.load_file(path, device="cuda") of the same files
(the medians of 3, the file in the page cache), and the ratio of the
runner's upload to it (goal: at most 0.5x).

    python3 bench/bench_upload.py [--exe build/bench_upload] [--dir DIR] [SIZE_MIB...]"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", default="build/bench_upload")
    ap.add_argument("--dir", default=None)
    ap.add_argument("sizes", nargs="*", default=["256", "1024", "4096"])
    a = ap.parse_args()
    d = a.dir or tempfile.mkdtemp(prefix="tbupload-")
    r = subprocess.run([a.exe, "--dir", d, "--keep"] + a.sizes, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    sys.stdout.write(r.stdout)
    if r.returncode or "skipped" in r.stdout:
        return r.returncode
    ours = {int(m.group(1)): float(m.group(2)) for m in
            re.finditer(r"^upload (\d+) MiB from the page cache: pinned way ([0-9.]+) ms", r.stdout, re.M)}
    try:
        import torch
        from safetensors.torch import load_file
        assert torch.cuda.is_available()
    except (ImportError, AssertionError):
        print("safetensors.torch.load_file: skipped (no safetensors, torch or GPU)")
        return 0
    torch.zeros(1, device="cuda")  # the context, before any timing
    for mib in sorted(ours):
        path = os.path.join(d, "upload-%d.safetensors" % mib)
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            t = load_file(path, device="cuda")
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
            del t
        st = statistics.median(times)
        print("safetensors.torch.load_file(device=\"cuda\") %d MiB: %.2f ms; the runner's upload %.2f ms: %.2fx its time "
              "(goal at most 0.5x)" % (mib, st, ours[mib], ours[mib] / st))
        os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
