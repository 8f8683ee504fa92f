#!/usr/bin/env bash
# make install into a temporary prefix, then use it as users do: a C program
# built through pkg-config, one through CMake's find_package, and the Python
# companion installed by pip into a venv of /usr/bin/python3. A check whose
# tool is missing (pkg-config, cmake, python3 -m venv with setuptools) counts
# as skipped, never as passed. Run from the repository root (make test).
set -u
cd "$(dirname "$0")/.."
W=$(mktemp -d "${TMPDIR:-/tmp}/tbinst-XXXXXX")
trap 'rm -rf "$W"' EXIT
pass=0 fail=0 skip=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
skip() { skip=$((skip + 1)); echo "skip $1"; }
bad() { # name [log file]
  fail=$((fail + 1)); echo "FAIL $1"
  if [ -n "${2:-}" ] && [ -f "$2" ]; then tail -n 25 "$2" | sed 's/^/     /'; fi
}
check() { # name, then a command that must succeed; its output goes to $W/log
  local name=$1; shift
  if "$@" >"$W/log" 2>&1; then ok "$name"; else bad "$name" "$W/log"; fi
}
CC=${CC:-cc}
VERSION=$(sed -n 's/^#define TB_VERSION_STRING "\(.*\)"$/\1/p' triton_bundle.h)
MAJOR=${VERSION%%.*}
P=$W/prefix

# --- make install
check "make install PREFIX=<temporary directory>" make --no-print-directory -s install PREFIX="$P"
check "... the header, identical" cmp triton_bundle.h "$P/include/triton_bundle.h"
check "... bin/tbundle runs" "$P/bin/tbundle" --help
check "... lib/libtriton_bundle.so exports tb_version" sh -c "nm -D '$P/lib/libtriton_bundle.so' | grep -q ' T tb_version$'"
check "... the pkg-config file and the CMake package" test -f "$P/lib/pkgconfig/triton_bundle.pc" \
  -a -f "$P/lib/cmake/triton_bundle/triton_bundle-config.cmake" \
  -a -f "$P/lib/cmake/triton_bundle/triton_bundle-config-version.cmake"
S=$W/stage
check "make install DESTDIR=<stage> PREFIX=/opt/triton_bundle" \
  make --no-print-directory -s install DESTDIR="$S" PREFIX=/opt/triton_bundle
check "... stages every file under DESTDIR" test -f "$S/opt/triton_bundle/include/triton_bundle.h" \
  -a -x "$S/opt/triton_bundle/bin/tbundle" -a -f "$S/opt/triton_bundle/lib/libtriton_bundle.so" \
  -a -f "$S/opt/triton_bundle/lib/cmake/triton_bundle/triton_bundle-config.cmake"
check "... the pkg-config file names the final prefix, not the stage" \
  sh -c "grep -qx 'prefix=/opt/triton_bundle' '$S/opt/triton_bundle/lib/pkgconfig/triton_bundle.pc' &&
         ! grep -q '$S' '$S/opt/triton_bundle/lib/pkgconfig/triton_bundle.pc'"
check "make uninstall DESTDIR=<stage> removes them" sh -c "make --no-print-directory -s uninstall DESTDIR='$S' \
  PREFIX=/opt/triton_bundle && test -z \"\$(find '$S' -type f)\""

# --- a user program: the implementation in one file, the API in another;
# built in a directory of its own, so only the installed header can be found
A=$W/app
mkdir -p "$A"
cat > "$A/impl.c" <<'EOF'
#define TRITON_BUNDLE_IMPLEMENTATION
#include "triton_bundle.h"
EOF
cat > "$A/main.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include "triton_bundle.h"
int main(void) {
    tb_bundle *b = NULL, *r = NULL; tb_error e; size_t n = 0; static unsigned char buf[4096];
    if (tb_bundle_create(NULL, &b, &e) || tb_bundle_write_memory(b, buf, sizeof buf, &n, &e) ||
        tb_bundle_read_memory(buf, n, NULL, 0, &r, &e)) { fprintf(stderr, "%s\n", e.message); return 1; }
    printf("%s %u\n", tb_version(), (unsigned)n);
    tb_bundle_free(r); tb_bundle_free(b);
    return strcmp(tb_version(), TB_VERSION_STRING) != 0;
}
EOF
run_app() { # program: prints the header's version and an empty bundle's size
  "$1" >"$W/out" 2>&1 && grep -q "^$VERSION [1-9]" "$W/out"
}

# --- pkg-config
if command -v pkg-config >/dev/null 2>&1; then
  export PKG_CONFIG_PATH="$P/lib/pkgconfig"
  check "pkg-config --modversion triton_bundle is $VERSION" sh -c "test \"\$(pkg-config --modversion triton_bundle)\" = '$VERSION'"
  check "pkg-config --cflags --libs: -I<prefix>/include -ldl -lpthread" sh -c \
    "f=\" \$(pkg-config --cflags --libs triton_bundle) \" && echo \"\$f\" &&
     case \"\$f\" in *' -I$P/include '*) ;; *) exit 1;; esac && case \"\$f\" in *' -ldl -lpthread '*) ;; *) exit 1;; esac"
  check "a C program built with pkg-config" sh -c "cd '$A' && $CC -std=c99 -Wall -Wextra -Werror -o app_pc \
    main.c impl.c \$(pkg-config --cflags --libs triton_bundle)"
  check "... runs: tb_version() is $VERSION, an empty bundle round-trips" run_app "$A/app_pc"
  for ex in run_model generate; do  # the examples build against the installed header, not the repository's
    check "examples/$ex.c built with pkg-config, away from the repository" sh -c "mkdir -p '$A/ex' && cp examples/$ex.c '$A/ex/' &&
      cd '$A/ex' && $CC -std=c99 -Wall -Wextra -Werror -o $ex $ex.c \$(pkg-config --cflags --libs triton_bundle)"
  done
  unset PKG_CONFIG_PATH
else
  skip "pkg-config: not installed (Debian: pkgconf)"
fi

# --- CMake
if command -v cmake >/dev/null 2>&1; then
  C=$W/cmake
  mkdir -p "$C"
  cp "$A/main.c" "$A/impl.c" "$C/"
  cat > "$C/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.10)
project(tb_user C)
# the version file refuses another major version
find_package(triton_bundle $((MAJOR + 1)) CONFIG QUIET)
if(triton_bundle_FOUND)
  message(FATAL_ERROR "find_package(triton_bundle $((MAJOR + 1))) accepted version \${triton_bundle_VERSION}")
endif()
find_package(triton_bundle CONFIG REQUIRED)
if(NOT triton_bundle_VERSION STREQUAL "$VERSION")
  message(FATAL_ERROR "triton_bundle_VERSION is \${triton_bundle_VERSION}")
endif()
# and accepts its own major version, and the exact one
find_package(triton_bundle $MAJOR CONFIG REQUIRED)
find_package(triton_bundle $VERSION EXACT CONFIG REQUIRED)
add_executable(app main.c impl.c)
target_link_libraries(app triton_bundle::triton_bundle)
EOF
  check "CMake: find_package(triton_bundle CONFIG REQUIRED) configures (and refuses $((MAJOR + 1)).x)" \
    cmake -S "$C" -B "$C/b" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC"
  check "... and builds app with triton_bundle::triton_bundle" cmake --build "$C/b"
  check "... app runs: tb_version() is $VERSION, an empty bundle round-trips" run_app "$C/b/app"
  # the package finds the header relative to itself: a moved prefix works
  mv "$P" "$W/moved"
  check "... the prefix moved elsewhere: CMake finds the header there" \
    cmake -S "$C" -B "$C/b2" -DCMAKE_PREFIX_PATH="$W/moved" -DCMAKE_C_COMPILER="$CC"
  mv "$W/moved" "$P"
else
  skip "CMake: not installed"
fi

# --- pip: the Python companion, in a venv of Debian's python3 (the python3
# on PATH may be another). No index: our machines reach no PyPI, so the
# build uses the system's setuptools (--no-build-isolation). pip builds in a
# copy of the files it needs, so that setuptools' build/ and .egg-info never
# land in the repository (build/ is the C build directory).
PY=/usr/bin/python3
V=$W/venv
if ! [ -x "$PY" ]; then
  skip "pip: no $PY"
elif ! "$PY" -m venv --system-site-packages "$V" >"$W/log" 2>&1; then
  skip "pip: $PY -m venv does not work here (Debian: python3-venv)"
elif ! "$V/bin/python" -c 'import sys, setuptools, importlib.util as u
v = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
sys.exit(0 if v >= (70, 1) or u.find_spec("wheel") else 1)' >/dev/null 2>&1; then
  skip "pip: no setuptools (and wheel) for $PY (Debian: python3-setuptools python3-wheel)"
else
  mkdir -p "$W/src"
  cp -R pyproject.toml MANIFEST.in README.md LICENSE python packaging "$W/src/"
  find "$W/src/python" -name __pycache__ -prune -exec rm -rf {} +
  before=$(ls -d build/lib build/bdist.* python/*.egg-info ./*.egg-info 2>/dev/null)
  check "pip install --no-build-isolation --no-index (pyproject.toml)" \
    "$V/bin/python" -m pip install --no-build-isolation --no-index --disable-pip-version-check -q "$W/src"
  after=$(ls -d build/lib build/bdist.* python/*.egg-info ./*.egg-info 2>/dev/null)
  check "... leaves no build/lib, build/bdist.* or .egg-info in the repository" test "$before" = "$after"
  # the sdist carries its build backend (MANIFEST.in), so it installs too
  mkdir -p "$W/sdist" "$W/src3" && cp -R "$W/src/." "$W/src3/"
  check "the sdist (the backend's build_sdist) holds packaging/tb_build.py and installs" sh -c "cd '$W/src3' &&
    '$V/bin/python' -c 'import sys; sys.path.insert(0, \"packaging\"); import tb_build; print(tb_build.build_sdist(sys.argv[1]))' '$W/sdist' &&
    tar tzf '$W'/sdist/*.tar.gz | grep -q '/packaging/tb_build.py\$' &&
    '$V/bin/python' -m pip install --no-build-isolation --no-index --disable-pip-version-check -q --force-reinstall '$W'/sdist/*.tar.gz"
  check "triton-bundle --version prints $VERSION" sh -c \
    "cd '$W' && test \"\$('$V/bin/triton-bundle' --version)\" = 'triton-bundle $VERSION'"
  check "python -m triton_bundle --version prints $VERSION" sh -c \
    "cd '$W' && test \"\$('$V/bin/python' -m triton_bundle --version)\" = 'triton-bundle $VERSION'"
  check "... the module is the venv's, its metadata says $VERSION and holds LICENSE" sh -c "cd '$W' && '$V/bin/python' -c '
import importlib.metadata as m, os, sys, triton_bundle as tb
d = m.distribution(\"triton-bundle\")
assert tb.__file__.startswith(sys.prefix), tb.__file__
assert tb.__version__ == d.version == \"$VERSION\", (tb.__version__, d.version)
assert any(f.name == \"LICENSE\" for f in d.files)
'"
  if [ -f "$P/lib/libtriton_bundle.so" ]; then
    check "... CLibrary() finds the installed libtriton_bundle.so through the system loader" sh -c "cd '$W' &&
      env -u TRITON_BUNDLE_LIB LD_LIBRARY_PATH='$P/lib' '$V/bin/python' -c '
import ctypes, triton_bundle as tb
lib = tb.CLibrary()
lib.L.tb_version.restype = ctypes.c_char_p
assert lib.found_by == \"system loader\" and lib.L.tb_version().decode() == tb.__version__
'"
  fi
fi

# --- the README's pip command with the python3 on the PATH (which may be
# another than Debian's: a pyenv Python with an older setuptools and no
# wheel, say): it installs, or fails naming the package to install
PYP=$(command -v python3 || true)
if [ -z "$PYP" ]; then
  skip "pip with the PATH's python3: no python3 on the PATH"
elif [ "$(readlink -f "$PYP")" = "$(readlink -f "$PY" 2>/dev/null)" ]; then
  skip "pip with the PATH's python3: it is $PY, tested above"
elif ! "$PYP" -m venv --system-site-packages "$W/venv2" >"$W/log" 2>&1; then
  skip "pip with the PATH's python3 ($PYP): its venv module does not work"
else
  mkdir -p "$W/src2"
  cp -R pyproject.toml MANIFEST.in README.md LICENSE python packaging "$W/src2/"
  if "$W/venv2/bin/python" -m pip install --no-build-isolation --no-index --disable-pip-version-check -q "$W/src2" \
      >"$W/pip2" 2>&1; then
    check "README's pip command with the PATH's python3 ($PYP) installs; triton-bundle --version prints $VERSION" \
      sh -c "cd '$W' && test \"\$('$W/venv2/bin/triton-bundle' --version)\" = 'triton-bundle $VERSION'"
  else
    check "README's pip command with the PATH's python3 ($PYP) fails naming what to install" \
      grep -q "package 'wheel'" "$W/pip2"
  fi
fi

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
