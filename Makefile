# triton_bundle.h: build, test, demo, benchmarks.
# make demo | make test | make test-gpu | make sanitize | make tsan | make fuzz | make torture | make bench
# make install PREFIX=/usr/local [DESTDIR=] | make uninstall
CC      ?= cc
CXX     ?= c++
CLANG   ?= clang
OPT     ?= -O2 -g
WARN    := -Wall -Wextra -Werror -pedantic
LIBS    := -ldl -lpthread
B       := build
HDR     := triton_bundle.h
TESTHDR := tests/harness.h tests/util.h tests/fp16_vectors.h tests/fake_cuda.h tests/fake_client.h tests/program_util.h
FUZZ_SECONDS ?= 60
TORTURE_ROUNDS ?= 200

# Programs build in parallel, a job a core, unless the command line says
# otherwise (make -j1): on a 2-core machine the compiles are most of make
# test's time. Each test program still runs alone, in tests/run.sh.
ifeq ($(filter -j% j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif

.PHONY: all test test-gpu test-gpu-corpus test-gpu-models lib demo sanitize tsan fuzz torture big bench check-compile corpus clean \
	install uninstall

all: $(B)/tbundle $(B)/launch $(B)/run_model $(B)/generate

$(B):
	mkdir -p $(B)

# tbundle: tbundle.c (main, pack, list, unpack, verify, clean; the one file
# that defines TRITON_BUNDLE_IMPLEMENTATION), tbundle_run.c (run) and
# generate.c (generate, without its main), sharing examples/tbundle_cli.h
TBUNDLE_SRC := examples/tbundle.c examples/tbundle_run.c examples/generate.c
$(B)/tbundle: $(TBUNDLE_SRC) examples/tbundle_cli.h $(HDR) | $(B)
	$(CC) -std=c99 $(WARN) $(OPT) -I. -DGENERATE_NO_MAIN -o $@ $(TBUNDLE_SRC) $(LIBS)

# the examples: C99, and as C++ (the header and a program of the README's
# are both languages'), -Werror; -I. as a user's -I or pkg-config's cflags
$(B)/launch $(B)/run_model $(B)/generate: $(B)/%: examples/%.c $(HDR) examples/tbundle_cli.h | $(B)
	$(CC) -std=c99 $(WARN) $(OPT) -I. -o $@ $< $(LIBS)
	$(CXX) -x c++ -std=c++11 $(WARN) $(OPT) -I. -o $@_cpp $< $(LIBS)

# The CPU tests, one program per layer, each built as C99 and as C++11.
CPUTESTS := format parsers args fs hostile launcher graphs grid table autotune limits program symbols runner upload

# (-O1: a third less compile time than -O2, which is most of make test's
# time on 2 cores; the tools and examples keep OPT)
TESTOPT ?= -O1 -g
$(B)/test_%: tests/test_%.c $(HDR) $(TESTHDR) | $(B)
	$(CC) -std=c99 -D_GNU_SOURCE $(WARN) $(TESTOPT) -o $@ $< $(LIBS)

$(B)/test_%_cpp: tests/test_%.c $(HDR) $(TESTHDR) | $(B)
	$(CXX) -x c++ -std=c++11 -D_GNU_SOURCE $(WARN) $(TESTOPT) -o $@ $< $(LIBS)

# the launcher against a stand-in driver (tests/fake_cuda.c), for machines
# without a GPU
$(B)/libfakecuda.so: tests/fake_cuda.c tests/fake_cuda.h | $(B)
	$(CC) -std=c99 $(WARN) -O2 -fPIC -shared -o $@ $<

FAKETESTS := launcher graphs grid table autotune program symbols runner upload
$(foreach t,$(FAKETESTS),$(B)/test_$(t) $(B)/test_$(t)_cpp): $(B)/libfakecuda.so

# autotune again without the per-thread launch memo (TB_NO_LAUNCH_MEMO)
$(B)/test_autotune_nomemo: tests/test_autotune.c $(HDR) $(TESTHDR) $(B)/libfakecuda.so | $(B)
	$(CC) -std=c99 -D_GNU_SOURCE -DTB_NO_LAUNCH_MEMO $(WARN) $(TESTOPT) -o $@ $< $(LIBS)

# tbundle run without a GPU (tests/test_tbundle.sh): tbundle against the
# stand-in driver, whose device memory is host memory, and a bundle whose
# program is memset and copy steps (tests/mkprogram.c)
$(B)/tbundle_fake: $(TBUNDLE_SRC) examples/tbundle_cli.h $(HDR) $(B)/libfakecuda.so | $(B)
	$(CC) -std=c99 $(WARN) $(OPT) -I. -DGENERATE_NO_MAIN -DTB_LIBCUDA_NAME='"$(CURDIR)/$(B)/libfakecuda.so"' -o $@ \
	  $(TBUNDLE_SRC) $(LIBS)

# run_model (the README's C program) against the stand-in driver
$(B)/run_model_fake: examples/run_model.c $(HDR) $(B)/libfakecuda.so | $(B)
	$(CC) -std=c99 $(WARN) $(OPT) -I. -DTB_LIBCUDA_NAME='"$(CURDIR)/$(B)/libfakecuda.so"' -o $@ $< $(LIBS)

$(B)/mkprogram: tests/mkprogram.c $(HDR) | $(B)
	$(CC) -std=c99 $(WARN) $(OPT) -o $@ $< $(LIBS)

# The header alone, as users compile it: C99, C11, C17 and C2x, C++11, 14,
# 17 and 20, gcc and clang, -Werror, no CUDA include path, with and without
# TB_STATIC, custom allocators and TB_NO_LAUNCHER; and the docs' examples.
check-compile: | $(B)
	@printf '#define TRITON_BUNDLE_IMPLEMENTATION\n#include "triton_bundle.h"\n' > $(B)/impl.c
	@printf '#define TB_STATIC\n#define TRITON_BUNDLE_IMPLEMENTATION\n#include "triton_bundle.h"\n#include "triton_bundle.h"\nint tb_use(void){return tb_version()[0];}\n' > $(B)/impl_static.c
	@printf '#define TB_MALLOC(u,n) malloc(n)\n#define TB_REALLOC(u,p,n) realloc(p,n)\n#define TB_FREE(u,p) free(p)\n#define TRITON_BUNDLE_IMPLEMENTATION\n#include "triton_bundle.h"\n' > $(B)/impl_alloc.c
	@printf '#include "triton_bundle.h"\nint main(void){return tb_version()[0] == 0;}\n' > $(B)/user.c
	@printf '#define TB_NO_LAUNCHER\n#define TRITON_BUNDLE_IMPLEMENTATION\n#include "triton_bundle.h"\n' > $(B)/impl_nolauncher.c
	@cp $(B)/impl.c $(B)/impl.cc
	@sh tests/doc_examples.sh $(CC) $(CXX) $(B)
	@for cc in gcc clang; do command -v $$cc >/dev/null || continue; \
	  for std in c99 c11 c17 c2x; do for f in impl impl_static impl_alloc impl_nolauncher user; do \
	    $$cc -std=$$std $(WARN) -I. -c $(B)/$$f.c -o $(B)/$$f.$$cc.o || exit 1; done; \
	    $$cc -std=$$std $(WARN) -c $(B)/doc_examples.c -o $(B)/doc_examples.o || exit 1; done; done
	@for cxx in g++ clang++; do command -v $$cxx >/dev/null || continue; \
	  for std in c++11 c++14 c++17 c++20; do \
	    $$cxx -std=$$std $(WARN) -I. -c $(B)/impl.cc -o $(B)/impl.$$cxx.o || exit 1; \
	    $$cxx -x c++ -std=$$std $(WARN) -c $(B)/doc_examples.c -o $(B)/doc_examples.o || exit 1; done; done
	@! grep -n '#include *<cuda' $(HDR)
	@printf '#include <stdio.h>\n#define TRITON_BUNDLE_IMPLEMENTATION\n#include "triton_bundle.h"\n' > $(B)/order.c
	@$(CC) -std=c99 -I. -c $(B)/order.c -o /dev/null 2>&1 | grep -m1 'error' | grep -q 'POSIX 2008' || \
	  { echo "check-compile: a system header first must stop at the header's #error, first"; exit 1; }
	@printf '#define TB_NO_LAUNCHER\n#include "triton_bundle.h"\nint f(void){return (int)tb_launch(0,0,0);}\n' > $(B)/nolauncher_use.c
	@! $(CC) -std=c99 -Werror -I. -c $(B)/nolauncher_use.c -o /dev/null 2>/dev/null || \
	  { echo "check-compile: TB_NO_LAUNCHER must leave tb_launch undeclared"; exit 1; }
	@printf '#define TB_MAX_ARGS ((unsigned)65535)\n#include "triton_bundle.h"\n' > $(B)/max_args.c
	@$(CC) -std=c99 $(WARN) -I. -c $(B)/max_args.c -o /dev/null || \
	  { echo "check-compile: TB_MAX_ARGS may be 65535, and defined with a cast"; exit 1; }
	@printf '#define TB_MAX_ARGS 65536u\n#include "triton_bundle.h"\n' > $(B)/max_args.c
	@$(CC) -std=c99 -I. -c $(B)/max_args.c -o /dev/null 2>&1 | grep -q 'TB_MAX_ARGS_is_at_most_65535' || \
	  { echo "check-compile: a TB_MAX_ARGS over 65535 must fail to compile, naming the limit"; exit 1; }
	@echo "check-compile: C99, C11, C17, C2x and C++11, 14, 17, 20 clean with gcc and clang"

CPUBINS := $(foreach t,$(CPUTESTS),$(B)/test_$(t) $(B)/test_$(t)_cpp)
test: check-compile $(CPUBINS) $(B)/test_autotune_nomemo $(B)/test_gpu $(B)/tbundle $(B)/tbundle_fake $(B)/mkprogram \
	  $(B)/libtriton_bundle.so $(B)/layout $(B)/launch $(B)/run_model $(B)/generate $(B)/run_model_fake
	tests/run.sh $(CPUBINS) $(B)/test_autotune_nomemo $(B)/test_gpu tests/test_tbundle.sh tests/format_rules.sh tests/no_build_paths.sh tests/toc.sh tests/style.sh \
	  "tests/python.sh $(B)/libtriton_bundle.so" "tests/python.sh tests/test_package.py $(B)/libtriton_bundle.so" \
	  "tests/python.sh tests/test_codes.py $(B)/libtriton_bundle.so" "tests/python.sh tests/test_layout.py $(B)/layout" \
	  "tests/python.sh tests/test_spec.py $(B)/libtriton_bundle.so" \
	  "tests/python.sh tests/test_model.py" \
	  tests/test_install.sh

# the layout of the structs the Python companion mirrors with ctypes, as JSON
# (tests/test_layout.py compares them)
$(B)/layout: tests/layout.c $(HDR) | $(B)
	$(CC) -std=c99 $(WARN) $(OPT) -o $@ $< $(LIBS)

# REQUIRE_GPU=1: fail when every test was skipped (no GPU or driver), for a
# CI runner that must have one; without it a machine with no GPU passes
test-gpu: $(B)/test_gpu $(B)/test_gpu_cpp $(B)/run_model
	TB_REQUIRE_RUN=$(if $(REQUIRE_GPU),1,0) tests/run.sh $(B)/test_gpu $(B)/test_gpu_cpp tests/run_model.sh

# The library as a shared object, for ctypes (the GPU corpus) and other
# languages' bindings.
lib: $(B)/libtriton_bundle.so
$(B)/libtriton_bundle.so: $(HDR) | $(B)
	printf '#define TRITON_BUNDLE_IMPLEMENTATION\n#include "../triton_bundle.h"\n' > $(B)/libtb.c
	$(CC) -std=c99 $(WARN) -O2 -fPIC -shared -o $@ $(B)/libtb.c $(LIBS)

# make install: the header (include/), tbundle (bin/), the shared object for
# ctypes (lib/), a pkg-config file (pkg-config --cflags --libs triton_bundle)
# and a CMake package (find_package(triton_bundle CONFIG), the target
# triton_bundle::triton_bundle). DESTDIR stages the files for packaging; the
# pkg-config and CMake files name the final PREFIX (the CMake one finds the
# header relative to itself). tests/test_install.sh builds against them.
PREFIX       ?= /usr/local
DESTDIR      ?=
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
CMAKEDIR     ?= $(LIBDIR)/cmake/triton_bundle
VERSION      := $(shell sed -n 's/^.define TB_VERSION_STRING "\(.*\)"$$/\1/p' $(HDR))
# pkg-config's paths under ${prefix} where they are, so --define-prefix works
PC_SUBST     := -e 's|@PREFIX@|$(PREFIX)|' \
  -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|' \
  -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' -e 's|@VERSION@|$(VERSION)|'

install: $(B)/tbundle $(B)/libtriton_bundle.so
	@for d in "$(PREFIX)" "$(BINDIR)" "$(LIBDIR)" "$(INCLUDEDIR)" "$(PKGCONFIGDIR)" "$(CMAKEDIR)"; do \
	  case "$$d" in /*) ;; *) echo "install: $$d: PREFIX and the directories must be absolute paths"; exit 1;; esac; done
	@case "$(VERSION)" in [0-9]*.[0-9]*.[0-9]*) ;; *) echo "install: no TB_VERSION_STRING in $(HDR)"; exit 1;; esac
	install -d "$(DESTDIR)$(INCLUDEDIR)" "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(LIBDIR)" \
	  "$(DESTDIR)$(PKGCONFIGDIR)" "$(DESTDIR)$(CMAKEDIR)"
	install -m 644 $(HDR) "$(DESTDIR)$(INCLUDEDIR)/triton_bundle.h"
	install -m 755 $(B)/tbundle "$(DESTDIR)$(BINDIR)/tbundle"
	install -m 755 $(B)/libtriton_bundle.so "$(DESTDIR)$(LIBDIR)/libtriton_bundle.so"
	sed $(PC_SUBST) packaging/triton_bundle.pc.in > $(B)/triton_bundle.pc
	install -m 644 $(B)/triton_bundle.pc "$(DESTDIR)$(PKGCONFIGDIR)/triton_bundle.pc"
	rel=$$(realpath -m --relative-to="$(CMAKEDIR)" "$(INCLUDEDIR)" 2>/dev/null) && \
	  inc='$${CMAKE_CURRENT_LIST_DIR}'/"$$rel" || inc="$(INCLUDEDIR)"; \
	  sed -e "s|@CMAKE_INCLUDEDIR@|$$inc|" packaging/triton_bundle-config.cmake.in > $(B)/triton_bundle-config.cmake
	sed -e 's|@VERSION@|$(VERSION)|' -e 's|@VERSION_MAJOR@|$(firstword $(subst ., ,$(VERSION)))|' \
	  packaging/triton_bundle-config-version.cmake.in > $(B)/triton_bundle-config-version.cmake
	install -m 644 $(B)/triton_bundle-config.cmake $(B)/triton_bundle-config-version.cmake "$(DESTDIR)$(CMAKEDIR)/"

uninstall:
	rm -f "$(DESTDIR)$(INCLUDEDIR)/triton_bundle.h" "$(DESTDIR)$(BINDIR)/tbundle" \
	  "$(DESTDIR)$(LIBDIR)/libtriton_bundle.so" "$(DESTDIR)$(PKGCONFIGDIR)/triton_bundle.pc" \
	  "$(DESTDIR)$(CMAKEDIR)/triton_bundle-config.cmake" "$(DESTDIR)$(CMAKEDIR)/triton_bundle-config-version.cmake"
	rmdir "$(DESTDIR)$(CMAKEDIR)" 2>/dev/null || true

# The GPU differential corpus: real Triton and Inductor kernels launched by
# Triton and by this library from identical memory, compared bit for bit.
# Needs a GPU, PyTorch and Triton; skips cleanly elsewhere. Writes the
# coverage table to docs/GPU_CORPUS.md.
PYTHON ?= python3
# The Python exporters end to end on a GPU: torch.compile'd models and
# Triton kernels exported, every launch replayed through the library.
test-gpu-export: $(B)/libtriton_bundle.so
	$(PYTHON) tests/export/gpu_export.py --lib $(B)/libtriton_bundle.so

# Whole models exported as programs (export_model): each bundle with its
# inputs and PyTorch's outputs, in MODEL_OUT, for the runner's tests.
MODEL_OUT ?= $(B)/models
test-gpu-models:
	$(PYTHON) tests/model/gpu_models.py export $(MODEL_OUT)

test-gpu-corpus: $(B)/libtriton_bundle.so
	$(PYTHON) tests/corpus/corpus.py --lib $(B)/libtriton_bundle.so --table docs/GPU_CORPUS.md

demo: $(B)/tbundle $(B)/launch $(B)/run_model
	@sh examples/demo.sh $(INPUT)

# AddressSanitizer + UndefinedBehaviorSanitizer over the CPU suite.
sanitize: $(B)/libfakecuda.so | $(B)
	for t in $(CPUTESTS); do \
	  $(CLANG) -std=c99 -D_GNU_SOURCE $(WARN) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
	    -fno-omit-frame-pointer -o $(B)/test_$${t}_asan tests/test_$$t.c $(LIBS) || exit 1; done
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 tests/run.sh $(foreach t,$(CPUTESTS),$(B)/test_$(t)_asan)

# ThreadSanitizer over the tests that run threads (collect/emit workers, the bundler, autotuning).
tsan: | $(B)
	$(CLANG) -std=c99 -D_GNU_SOURCE $(WARN) -O1 -g -fsanitize=thread -o $(B)/test_fs_tsan tests/test_fs.c $(LIBS)
	$(CLANG) -std=c99 -D_GNU_SOURCE $(WARN) -O1 -g -fsanitize=thread -o $(B)/test_format_tsan tests/test_format.c $(LIBS)
	$(MAKE) $(B)/libfakecuda.so
	$(CLANG) -std=c99 -D_GNU_SOURCE $(WARN) -O1 -g -fsanitize=thread -o $(B)/test_autotune_tsan tests/test_autotune.c $(LIBS)
	$(CLANG) -std=c99 -D_GNU_SOURCE $(WARN) -O1 -g -fsanitize=thread -o $(B)/test_runner_tsan tests/test_runner.c $(LIBS)
	$(CLANG) -std=c99 -D_GNU_SOURCE $(WARN) -O1 -g -fsanitize=thread -o $(B)/test_upload_tsan tests/test_upload.c $(LIBS)
	tests/run.sh "$(B)/test_fs_tsan thread" "$(B)/test_format_tsan thread" $(B)/test_autotune_tsan $(B)/test_runner_tsan \
	  $(B)/test_upload_tsan

# libFuzzer targets over the bundle reader, the text parsers and the grid
# expression compiler (fuzz_gridexpr).
$(B)/fuzz_%: fuzz/fuzz_%.c $(HDR) | $(B)
	$(CLANG) -std=c99 -D_GNU_SOURCE -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -o $@ $< $(LIBS)

corpus: $(B)/tbundle
	sh fuzz/make_corpus.sh

# fuzz_mutate drives the mutation API on read bundles, from the reader's seeds;
# fuzz_grid and fuzz_graph run the launcher against the stand-in driver
$(B)/fuzz_grid $(B)/fuzz_graph $(B)/fuzz_program: $(B)/libfakecuda.so tests/fake_client.h tests/fake_cuda.h
FUZZERS := read json ttfunc mutate choices grid graph gridexpr program weights
fuzz: $(foreach t,$(FUZZERS),$(B)/fuzz_$(t))
	@for t in $(FUZZERS); do mkdir -p $(B)/corpus_$$t; \
	  seeds=fuzz/corpus/$$t; [ -d $$seeds ] || seeds=fuzz/corpus/read; \
	  echo "fuzz_$$t for $(FUZZ_SECONDS)s"; \
	  if ! $(B)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=1 -artifact_prefix=$(B)/ \
	    $(B)/corpus_$$t $$seeds > $(B)/fuzz_$$t.log 2>&1; then \
	    tail -n 40 $(B)/fuzz_$$t.log; echo "fuzz_$$t FAILED"; exit 1; fi; \
	  grep -E 'stat::number_of_executed_units|stat::new_units_added' $(B)/fuzz_$$t.log; done

# a bundle past 4 GiB on disk (about 8.6 GiB written, in build/): CI runs it
$(B)/test_big: tests/test_big.c $(HDR) $(TESTHDR) | $(B)
	$(CC) -std=c99 -D_GNU_SOURCE $(WARN) -O2 -o $@ $< $(LIBS)
big: $(B)/test_big
	tests/run.sh $(B)/test_big

# concurrent writers, SIGKILL, a cleaner racing unpacks, a bundle file
# rewritten and truncated under emit
torture: $(B)/test_fs $(B)/test_hostile
	TB_TORTURE_ROUNDS=$(TORTURE_ROUNDS) tests/run.sh "$(B)/test_fs emit" "$(B)/test_hostile emit"

$(B)/bench_format: bench/bench_format.c bench/bench_util.h $(HDR) tests/util.h | $(B)
	$(CC) -std=c99 -D_GNU_SOURCE $(WARN) -O2 -o $@ $< $(LIBS)

$(B)/mkcache: bench/mkcache.c bench/bench_util.h $(HDR) tests/util.h | $(B)
	$(CC) -std=c99 -D_GNU_SOURCE $(WARN) -O2 -o $@ $< $(LIBS)

# -rdynamic: the counting malloc must also serve the driver loaded at run time
$(B)/bench_launch: bench/bench_launch.c bench/bench_util.h $(HDR) tests/util.h | $(B)
	$(CC) -std=c99 -D_GNU_SOURCE $(WARN) -O2 -rdynamic -o $@ $< $(LIBS)

# UPLOAD_DEFS: the upload's numbers to try (-DTB_UPLOAD_PIECE=4194304; rebuild with -B)
UPLOAD_DEFS ?=
$(B)/bench_upload: bench/bench_upload.c bench/bench_util.h $(HDR) tests/util.h | $(B)
	$(CC) -std=c99 -D_GNU_SOURCE $(WARN) -O2 $(UPLOAD_DEFS) -o $@ $< $(LIBS)

$(B)/bench_load: bench/bench_load.c bench/bench_util.h $(HDR) tests/util.h | $(B)
	$(CC) -std=c99 -D_GNU_SOURCE $(WARN) -O2 -o $@ $< $(LIBS)

bench: $(B)/tbundle $(B)/bench_format $(B)/mkcache $(B)/bench_launch $(B)/bench_upload $(B)/bench_load \
       $(B)/libtriton_bundle.so
	bench/run.sh

clean:
	rm -rf $(B)
