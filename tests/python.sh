#!/bin/sh
# The Python companion's tests (tests/test_python.py) where python3 is present.
if command -v python3 >/dev/null 2>&1; then exec python3 tests/test_python.py "$@"; fi
echo "skip: no python3"
echo "0 passed, 0 failed, 1 skipped"
