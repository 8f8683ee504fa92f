#!/bin/sh
# No file of the repository's fixtures or fuzz seeds may name the checkout
# that built them (an absolute path of a developer's machine, in debug info
# or elsewhere): grep them for this checkout's own path. The absolute
# paths Triton writes into a cache's .json files (/tmp/src, /tmp/probe_cache
# and the like) are what real caches hold, and stay.
cd "$(dirname "$0")/.." || exit 1
here=$(pwd -P)
pass=0 fail=0
for d in tests/fixtures fuzz/corpus; do
  hits=$(grep -rlaF -- "$here" "$d" 2>/dev/null)
  if [ -n "$hits" ]; then echo "FAIL $d names this checkout ($here):"; echo "$hits" | head -5; fail=$((fail + 1))
  else echo "ok   $d names no path of this checkout"; pass=$((pass + 1)); fi
done
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
