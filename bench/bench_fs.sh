#!/usr/bin/env bash
# Pack and unpack against tar and cp on the same tree, alternated in one
# script; median of RUNS. usage: bench/bench_fs.sh [KERNELS] [RUNS]
set -euo pipefail
N=${1:-2000}
RUNS=${2:-5}
B=build
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
  printf "  tbundle unpack  %8.1f ms   cp -r   %8.1f ms   ratio %.2fx (goal <= 1.0)\n", u / 1000, c / 1000, u / c
}'
