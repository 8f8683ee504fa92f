#!/bin/sh
# The house style that a tool can check: every line of the C sources (the
# header, the examples, the tests, the benches, the fuzz targets) within
# the 120 columns of .clang-format's ColumnLimit, and the .clang-format
# there to say so. One check per rule; ends with the summary line.
cd "$(dirname "$0")/.." || exit 1
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
limit=$(sed -n 's/^ColumnLimit: *\([0-9][0-9]*\).*/\1/p' .clang-format 2>/dev/null)
[ "$limit" = 120 ] && ok ".clang-format sets ColumnLimit 120" || bad ".clang-format's ColumnLimit is '$limit', not 120"
for f in triton_bundle.h examples/*.c examples/*.h tests/*.c tests/*.h bench/*.c bench/*.h fuzz/*.c; do
  [ -f "$f" ] || continue
  over=$(awk -v w="${limit:-120}" 'length > w {printf "%d ", FNR}' "$f")
  [ -z "$over" ] && ok "$f: every line within ${limit:-120} columns" || bad "$f: lines over ${limit:-120} columns: $over"
done
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
