#!/usr/bin/env bash
# The README's C program (examples/run_model.c, build/run_model) on the
# model that ships with the repository (examples/model/): its output
# compared bit for bit with the one PyTorch's compiled model gave, directly
# and as a CUDA graph. Needs a GPU of the kind the model was compiled for
# (sm_90); skipped elsewhere. Part of make test-gpu.
set -u
cd "$(dirname "$0")/.." || exit 1
R=build/run_model M=examples/model
pass=0 fail=0 skip=0
why=$($R $M/tiny.tbundle 2>&1 >/dev/null)
case "$why" in
  *"CUDA driver"*|*"libcuda"*|*"no CUDA device"*|*"requested, 0 present"*|*NO_BINARY_FOR_GPU*|*"no kernel image"*)
    echo "skip run_model on the shipped model: ${why#run_model: }"
    echo "0 passed, 0 failed, 2 skipped"; exit 0;;
esac
for g in "" --graph; do
  if out=$($R $M/tiny.tbundle $M/tiny.in0.npy --expect $M/tiny.ref0.npy $g 2>&1); then
    pass=$((pass + 1)); echo "ok   run_model $g: the shipped model's output equals PyTorch's, bit for bit"
  else
    fail=$((fail + 1)); echo "FAIL run_model $g"; echo "$out" | sed 's/^/    /'
  fi
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
