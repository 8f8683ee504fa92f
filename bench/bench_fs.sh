#!/usr/bin/env bash
# Pack and unpack against tar and cp on the same tree, alternated in one
# script; median of RUNS. With PYTORCH=1 (and torch importable), PyTorch's
# TritonBundler runs on the same tree in the same run and the speed-ups are
# printed. usage: bench/bench_fs.sh [KERNELS] [RUNS]
set -euo pipefail
N=${1:-2000}
RUNS=${2:-5}
B=build
cd "$(dirname "$0")/.."
make -s $B/mkcache $B/tbundle   # what this script runs, built if missing
W=$(mktemp -d "${TMPDIR:-/tmp}/tbbench-XXXXXX")
trap 'rm -rf "$W"' EXIT
$B/mkcache "$W/cache" "$N" >/dev/null
files=$(find "$W/cache" -type f | wc -l)
mb=$(du -sm "$W/cache" | cut -f1)
t() { local s e; s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N); echo $(( (e - s) / 1000 )); }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
: > "$W/pack" ; : > "$W/tar" ; : > "$W/unpack" ; : > "$W/cp"
# one warm-up of each, so that every command reads from the page cache
$B/tbundle pack -o "$W/b.tbundle" "$W/cache" >/dev/null; tar cf "$W/t.tar" -C "$W" cache
for r in $(seq "$RUNS"); do
  rm -f "$W/b.tbundle" "$W/t.tar"
  t $B/tbundle pack -o "$W/b.tbundle" "$W/cache" >> "$W/pack"
  t tar cf "$W/t.tar" -C "$W" cache >> "$W/tar"
  rm -rf "$W/u" "$W/c"
  t $B/tbundle unpack "$W/b.tbundle" "$W/u" >> "$W/unpack"
  t cp -r "$W/cache" "$W/c" >> "$W/cp"
done
p=$(median < "$W/pack"); ta=$(median < "$W/tar"); u=$(median < "$W/unpack"); c=$(median < "$W/cp")
awk -v n="$N" -v f="$files" -v mb="$mb" -v p="$p" -v ta="$ta" -v u="$u" -v c="$c" -v runs="$RUNS" 'BEGIN {
  printf "pack/unpack: %d kernel directories, %d files, %d MB, median of %d runs\n", n, f, mb, runs
  printf "  tbundle pack    %8.1f ms   tar cf  %8.1f ms   ratio %.2fx (goal <= 1.0)\n", p / 1000, ta / 1000, p / ta
  printf "  tbundle unpack  %8.1f ms   cp -r   %8.1f ms   ratio %.2fx (goal <= 0.35)\n", u / 1000, c / 1000, u / c
  printf "  per kernel: pack %.1f us, unpack %.1f us\n", p / n, u / n
}'
if [ "${PYTORCH:-0}" = 1 ] && python3 -c "import torch._inductor.triton_bundler" 2>/dev/null; then
  python3 bench/bench_pytorch.py "$W/cache" "$W" 3 | tee "$W/pt"
  pp=$(awk '/^pytorch_pack_ms/ { print $2 }' "$W/pt"); pu=$(awk '/^pytorch_unpack_ms/ { print $2 }' "$W/pt")
  awk -v p="$p" -v u="$u" -v pp="$pp" -v pu="$pu" 'BEGIN {
    printf "  speed-up over PyTorch: pack %.1fx (goal >= 2.5), unpack %.1fx (goal >= 5)\n", pp * 1000 / p, pu * 1000 / u }'
fi
