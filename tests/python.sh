#!/bin/sh
# A Python test where python3 is present: tests/test_python.py (the
# companion against the C library) by default, or the script given first.
# usage: tests/python.sh [tests/SCRIPT.py] ARGS...
script=tests/test_python.py
case "${1:-}" in *.py) script=$1; shift;; esac
if command -v python3 >/dev/null 2>&1; then exec python3 "$script" "$@"; fi
echo "skip: no python3"
echo "0 passed, 0 failed, 1 skipped"
