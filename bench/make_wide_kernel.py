"""Compiles tb_wide, a Triton kernel of 44 arguments (a pointer and 43 int32
scalars), into the Triton cache directory given, for bench_launch.
usage: python3 bench/make_wide_kernel.py CACHE_DIR"""
import importlib.util
import os
import sys
import tempfile

os.environ["TRITON_CACHE_DIR"] = os.path.abspath(sys.argv[1])
import torch  # noqa: E402

N = 43
names = [f"a{i}" for i in range(N)]
source = (
    "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
    f"def tb_wide(out_ptr, {', '.join(names)}):\n"
    f"    tl.store(out_ptr, {' + '.join(names)})\n"
)
# triton.jit reads the function's source, so it must come from a real file
with tempfile.NamedTemporaryFile("w", suffix="_tb_wide.py", delete=False) as f:
    f.write(source)
spec = importlib.util.spec_from_file_location("tb_wide_module", f.name)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
out = torch.zeros(1, dtype=torch.int32, device="cuda")
values = [3 + 2 * i for i in range(N)]  # odd, never 1: no argument is specialised away
module.tb_wide[(1,)](out, *values)
torch.cuda.synchronize()
assert out.item() == sum(values), (out.item(), sum(values))
print(f"tb_wide: {N + 1} arguments compiled into {sys.argv[1]}")
