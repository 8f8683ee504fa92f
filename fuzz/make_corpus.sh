#!/bin/sh
# Rebuilds fuzz/corpus/ from the fixture: small real bundles for the reader,
# the metadata JSON files, the tt.func lines of the IR files, and grid expressions.
set -e
FIX=tests/fixtures/triton-3.6-sm90/cache
T=build/tbundle
rm -rf fuzz/corpus && mkdir -p fuzz/corpus/read fuzz/corpus/json fuzz/corpus/ttfunc
for h in 72LBHDPVFLKOS26Q3453IVCTHETIPQ7OJOQE6IR3KYFIDK5O264A AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ; do
  $T pack -o fuzz/corpus/read/$h.tbundle --as /tmp/triton_cache $FIX $h >/dev/null
done
cp tests/fixtures/format-1.0.tbundle fuzz/corpus/read/format-1.0.tbundle  # written by the 1.0 writer
$T pack -o fuzz/corpus/read/norecords.tbundle --no-records --as /tmp/triton_cache $FIX 72LBHDPVFLKOS26Q3453IVCTHETIPQ7OJOQE6IR3KYFIDK5O264A >/dev/null
# a kernel that takes a tensor descriptor: section 3, tensordesc_meta, the IR's expanded descriptor
TMA=tests/fixtures/triton-3.6-sm90-tma/cache
$T pack -o fuzz/corpus/read/tma.tbundle --as /tmp/probe_cache $TMA >/dev/null
cp $TMA/*/k_desc.json fuzz/corpus/json/tma_k_desc.json
grep -m1 'tt.func public' $TMA/*/k_desc.source > fuzz/corpus/ttfunc/k_desc.source.txt
for f in $FIX/*/*.json; do cp "$f" fuzz/corpus/json/$(basename "$(dirname "$f")" | cut -c1-8)_$(basename "$f"); done
for f in $FIX/*/*.source; do grep -m1 'tt.func public' "$f" > fuzz/corpus/ttfunc/$(basename "$f").txt; done
# section 4 (grid rules, call info) and autotune choices, from the Python companion's sample
mkdir -p fuzz/corpus/choices
python3 -c 'import sys; sys.path[:0] = ["tests", "python"]; import test_python, triton_bundle as tb; tb.write_file(test_python.sample_bundle(), "fuzz/corpus/read/calls.tbundle")'
printf 'triton_bundle autotune 1\nK\tH1\t1\t1024\t0.25\nK\tH0\t0\t-3,7\t1.5\n' > fuzz/corpus/choices/two.txt
# programs (section 5): the model of tests/test_program.c, also a seed of the reader's
mkdir -p fuzz/corpus/program
make -s build/test_program build/test_upload build/test_symbols >/dev/null
TB_PROGRAM_SEED=fuzz/corpus/program/model.tbundle build/test_program test_program_round_trip >/dev/null
cp fuzz/corpus/program/model.tbundle fuzz/corpus/read/program.tbundle
# several programs (section 6): two over a shared state with launches, and
# a prefill and decode pair with properties (tests/mkprogram.c --generate)
TB_PROGRAMS_SEED=fuzz/corpus/program/programs.tbundle build/test_program test_programs_round_trip >/dev/null
make -s build/mkprogram >/dev/null
build/mkprogram --generate fuzz/corpus/program/generate.tbundle
cp fuzz/corpus/program/programs.tbundle fuzz/corpus/read/programs.tbundle
# external constants (2.5): a program whose weight is a tensor of a weights file
TB_EXTERNAL_SEED=fuzz/corpus/program/external.tbundle build/test_upload test_external_constants >/dev/null
# symbols and expressions (2.6): a program whose sizes vary
TB_DYNAMIC_SEED=fuzz/corpus/program/dynamic.tbundle build/test_symbols test_dynamic_roundtrip_and_specialize >/dev/null
cp fuzz/corpus/program/dynamic.tbundle fuzz/corpus/read/dynamic.tbundle
# weights files (safetensors): the Python companion's writer, metadata, several dtypes
mkdir -p fuzz/corpus/weights
python3 -c 'import sys; sys.path[:0] = ["python"]; from triton_bundle import weights as w
w.write_file("fuzz/corpus/weights/two.safetensors", [("a", "float32", [2, 3], bytes(range(24))), ("b.c", "bfloat16", [4], bytes(8))], {"format": "pt"})
w.write_file("fuzz/corpus/weights/scalar.safetensors", [("s", "int64", [], bytes(8)), ("e", "uint8", [0], b"")])'
# (2.6.0) keys written with escapes, as safetensors reads them: dtype spelled
# \u0064\u0074\u0079\u0070\u0065, and a key past 32 bytes the C reader once left undecoded
python3 -c 'import json, struct
h = "{\"t\": {\"\\u0064\\u0074\\u0079\\u0070\\u0065\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8], \"\\u0078" + "x" * 40 + "\": 1}}"
json.loads(h)
open("fuzz/corpus/weights/escaped.safetensors", "wb").write(struct.pack("<Q", len(h)) + h.encode() + bytes(8))'

# the launcher's fuzzers: grid programs and graph call sequences (their inputs are their own encodings)
mkdir -p fuzz/corpus/grid fuzz/corpus/graph
printf '\003\001\240\240\003\032\104\010\001\001\001\001\200\200\003\002' > fuzz/corpus/grid/cdiv.bin
printf '\010\000\024\002\004\005\026\007\005\011\003\001\006\010\011\012' > fuzz/corpus/graph/capture_free_update
printf '\000\002\004\005\006\007\003\001\010\011\012' > fuzz/corpus/graph/free_before_update
# grid expressions (tb_grid_parse, pack --grid): what Triton, Inductor and people write, and errors
mkdir -p fuzz/corpus/gridexpr
printf 'cdiv(n, 1024)' > fuzz/corpus/gridexpr/cdiv
printf 'triton.cdiv(x_numel, meta["XBLOCK"])' > fuzz/corpus/gridexpr/triton_cdiv_meta
printf -- '-((x_numel) // -(128))' > fuzz/corpus/gridexpr/inductor_ceil
printf '((x_numel + (XBLOCK - 1)) // (XBLOCK))' > fuzz/corpus/gridexpr/inductor_round_up
printf 'min(max(ceildiv(m, R0_BLOCK), 1), 65535, n, ks0)' > fuzz/corpus/gridexpr/min_max
printf 'int(n // 2) %% 3 * -ks0 - +m' > fuzz/corpus/gridexpr/operators
printf '0x7fff_ffff + 0o17 * 0b1010 - 1_000' > fuzz/corpus/gridexpr/literals
printf -- '-9223372036854775807 - 1 + (9223372036854775807 + 1) * 3037000500 * 3037000500' > fuzz/corpus/gridexpr/int64_edges
printf 'n + (m + (x_numel + (XBLOCK + (ks0 + (n + (m + (x_numel + (XBLOCK + (ks0 + (n + (m + (x_numel + (XBLOCK + (ks0 + (n + (m + 1))))))))))))))))' > fuzz/corpus/gridexpr/deep_stack
printf '((((((((-(-(-(-(n)))))))))))) * max(m, x_numel, n, ks0)' > fuzz/corpus/gridexpr/nested
printf 'cdiv(n, 1024' > fuzz/corpus/gridexpr/unclosed
printf 'n / 2 ** meta["nope"]' > fuzz/corpus/gridexpr/refused
ls fuzz/corpus/* | wc -l
