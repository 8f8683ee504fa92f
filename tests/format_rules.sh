#!/usr/bin/env bash
# Every rule docs/FORMAT.md states carries a tag ([R-name]); each tag must be
# named by at least one test. One check per tag; ends with the summary line.
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
for tag in $(grep -o '\[R-[a-z0-9-]*\]' docs/FORMAT.md | sort -u); do
  files=$(grep -lF -- "$tag" tests/*.c tests/*.sh tests/*.py 2>/dev/null | grep -v format_rules.sh | tr '\n' ' ')
  if [ -n "$files" ]; then echo "ok   $tag: $files"; pass=$((pass + 1))
  else echo "FAIL $tag: no test names it"; fail=$((fail + 1)); fi
done
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
