#!/bin/sh
# make demo [INPUT=CACHE_DIR]: pack a Triton cache (the bundled fixture by
# default), list and verify the bundle, unpack it into a fresh cache, show
# that every file came back, then launch tb_add from the bundle if a GPU is
# here; then list the model that ships with the repository (examples/model/)
# and run it from C (build/run_model), its output against PyTorch's.
set -e
B=build
D=$B/demo
INPUT=${1:-}
rm -rf "$D" && mkdir -p "$D"
if [ -z "$INPUT" ]; then
  INPUT=tests/fixtures/triton-3.6-sm90/cache
  AS="--as /tmp/triton_cache"   # where Triton wrote this cache
  echo "== no INPUT given: packing the bundled Triton 3.6 fixture ($INPUT)"
else
  AS=""
  echo "== packing $INPUT"
fi
$B/tbundle pack -o $D/kernels.tbundle $AS "$INPUT"
echo "== tbundle list (its first kernel; the whole listing has a line per file and record)"
$B/tbundle list $D/kernels.tbundle > $D/list.txt
awk '/^kernel/ { n++ } n == 1' $D/list.txt
echo "    ... $(wc -l < $D/list.txt) lines in all ($B/tbundle list $D/kernels.tbundle), ending with the totals:"
tail -n 1 $D/list.txt
echo "== tbundle verify"
$B/tbundle verify $D/kernels.tbundle
echo "== tbundle unpack into a fresh cache"
$B/tbundle unpack $D/kernels.tbundle $D/cache
echo "== comparing every file with the original"
SRC_ABS=$(cd "$INPUT" && pwd)
[ -n "$AS" ] && SRC_ABS=/tmp/triton_cache
NEW_ABS=$(cd "$D/cache" && pwd)
files=0 same=0 swapped=0
for f in $(cd "$INPUT" && find . -type f | sort); do
  files=$((files + 1))
  if cmp -s "$INPUT/$f" "$D/cache/$f"; then
    same=$((same + 1))
  elif sed "s#$SRC_ABS#$NEW_ABS#g" "$INPUT/$f" | cmp -s - "$D/cache/$f"; then
    swapped=$((swapped + 1))
  else
    echo "DIFFERENT: $f"; exit 1
  fi
done
echo "$files files: $same identical, $swapped identical once the cache path is swapped"
g=$(cd "$D/cache" && ls */__grp__tb_add.json | head -n 1)
echo "-- $g before (in the source cache):"
head -c 160 "$INPUT/$g"; echo " ..."
echo "-- after unpacking:"
head -c 160 "$D/cache/$g"; echo " ..."
echo "== launching tb_add from the bundle"
$B/launch $D/kernels.tbundle
echo "== the model that ships with the repository: tbundle list examples/model/tiny.tbundle (its program)"
$B/tbundle list examples/model/tiny.tbundle | sed -n '/^program/,$p'
echo "== running it from C: build/run_model, its output against the compiled model's"
M=examples/model
if out=$($B/run_model $M/tiny.tbundle $M/tiny.in0.npy --expect $M/tiny.ref0.npy 2>&1); then
  echo "$out"
else
  case "$out" in
    *"CUDA driver"*|*"libcuda"*|*"no CUDA device"*|*"requested, 0 present"*)
      echo "skipped: ${out#run_model: }";;
    *NO_BINARY_FOR_GPU*|*"no kernel image"*)
      echo "skipped: its cubins are for sm_90, not this GPU (examples/model/export_tiny.py exports it again): ${out#run_model: }";;
    *) echo "$out"; exit 1;;
  esac
fi
