#!/usr/bin/env bash
# Runs each test command given (a program and its arguments, one word), shows its output, and ends with one line
# summing their "N passed, N failed, N skipped" lines. Exits non-zero if any
# program failed or printed no summary.
set -u
pass=0 fail=0 skip=0 status=0
for prog in "$@"; do
  echo "== $prog"
  out=$($prog 2>&1); rc=$?
  printf '%s\n' "$out"
  line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' | tail -n 1)
  if [ -z "$line" ]; then
    echo "!! $prog printed no summary (exit $rc)"; fail=$((fail + 1)); status=1; continue
  fi
  read -r p _ f _ s _ <<<"$line"
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
  [ "$rc" -eq 0 ] || status=1
done
echo "total: $pass passed, $fail failed, $skip skipped"
# TB_REQUIRE_RUN=1 (make test-gpu REQUIRE_GPU=1): a run where every test
# was skipped fails, for a runner that must have the GPU it skips without
if [ "${TB_REQUIRE_RUN:-0}" = 1 ] && [ "$pass" -eq 0 ]; then
  echo "!! TB_REQUIRE_RUN=1 and no test ran (all $skip skipped): no GPU or driver here?"; status=1
fi
exit $status
