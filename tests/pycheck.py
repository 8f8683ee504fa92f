"""The Python tests' harness: check() counts and prints each assertion,
summary() prints the line "N passed, N failed, N skipped" the runner sums."""
import sys

counts = {"passed": 0, "failed": 0}


def check(cond, what):
    counts["passed" if cond else "failed"] += 1
    print(("ok   " if cond else "FAIL ") + what)
    sys.stdout.flush()
    return cond


def summary(skipped=0):
    print("%d passed, %d failed, %d skipped" % (counts["passed"], counts["failed"], skipped))
    return 1 if counts["failed"] else 0


def cuda_torch():
    """torch, where it imports and sees a CUDA device; else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def step_kernels(torch, fn, steps=5):
    """The GPU kernels of fn() run steps times under PyTorch's profiler:
    {name: [microseconds per step, launches per step]}
    (triton_bundle.inductor.kernel_times)."""
    from triton_bundle.inductor import kernel_times
    return kernel_times(torch, fn, steps)
