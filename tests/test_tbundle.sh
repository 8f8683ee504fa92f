#!/usr/bin/env bash
# The tbundle command: exit statuses, messages, pack/unpack round trip.
# Run from the repository root after `make build/tbundle`.
set -u
T=build/tbundle
TA="$(cd "$(dirname "$T")" && pwd)/$(basename "$T")" # for commands run in another directory
FIX=tests/fixtures/triton-3.6-sm90/cache
W=$(mktemp -d "${TMPDIR:-/tmp}/tbcli-XXXXXX")
trap 'rm -rf "$W"' EXIT
pass=0 fail=0 skip=0
check() { # name, then a command that must succeed
  local name=$1; shift
  if "$@" >/dev/null 2>&1; then pass=$((pass + 1)); echo "ok   $name"
  else fail=$((fail + 1)); echo "FAIL $name"; fi
}
status_is() { # expected status, command...
  local want=$1; shift
  "$@" >"$W/out" 2>"$W/err"; [ $? -eq "$want" ]
}
err_has() { grep -q -- "$1" "$W/err"; }
out_has() { grep -q -- "$1" "$W/out"; }

check "no arguments is a usage error (2)" status_is 2 $T
check "unknown command is a usage error" status_is 2 $T frobnicate
check "--help exits 0" status_is 0 $T --help
for c in pack list unpack verify clean; do
  check "$c --help exits 0" status_is 0 $T $c --help
  check "$c without arguments exits 2" status_is 2 $T $c
done
# usage errors name the option or value at fault, then print the usage
for c in pack list unpack verify clean; do
  check "$c --frobnicate is a usage error (2)" status_is 2 $T $c --frobnicate x
  check "... naming the option and the command" err_has "^tbundle: unknown option '--frobnicate' for $c\$"
  check "... then the usage" err_has "^usage: tbundle $c"
done
check "pack --threads x is a usage error (2)" status_is 2 $T pack --threads x $FIX
check "... naming the value" err_has "^tbundle: --threads needs a positive integer, got 'x'\$"
check "unpack --threads 0 is a usage error (2)" status_is 2 $T unpack --threads 0 a b
check "... naming the value" err_has "^tbundle: --threads needs a positive integer, got '0'"
check "pack --threads 65 is a usage error (2)" status_is 2 $T pack --threads 65 $FIX
check "... saying the limit" err_has "at most 64, got '65'"
check "pack -o without a value is a usage error (2)" status_is 2 $T pack $FIX -o
check "... naming the option" err_has "^tbundle: option '-o' needs a value"
check "clean --age soon is a usage error (2)" status_is 2 $T clean --age soon x
check "... naming the value" err_has "^tbundle: --age needs a number of seconds, 0 or more, got 'soon'"
check "list FILE FILE is a usage error (2)" status_is 2 $T list a b
check "... naming the extra argument" err_has "^tbundle: unexpected argument 'b' for list"
check "unpack FILE is a usage error (2)" status_is 2 $T unpack a
check "... saying what is missing" err_has "^tbundle: unpack needs CACHE_DIR after FILE"
check "verify without FILE says what is missing" sh -c "$T verify 2>&1 | grep -q '^tbundle: verify needs FILE'"
check "a bad option holding ESC is a usage error (2)" status_is 2 $T list "$(printf -- '--x\033[31m')" f
check "... printed escaped" grep -qF -- "unknown option '--x\x1b[31m' for list" "$W/err"
check "an unknown command holding ESC is a usage error (2)" status_is 2 $T "$(printf 'fro\033b')"
check "... printed escaped" grep -qF "unknown command 'fro\x1bb'" "$W/err"
check "pack the fixture" status_is 0 $T pack -o "$W/f.tbundle" --as /tmp/triton_cache $FIX
check "pack reports 8 kernels" out_has "packed 8 kernels, 8 launch records"
check "verify ok" status_is 0 $T verify "$W/f.tbundle"
check "list shows tb_matmul's shared memory" sh -c "$T list '$W/f.tbundle' | grep -q 'tb_matmul.*shared 131072'"
check "list shows the totals" sh -c "$T list '$W/f.tbundle' | tail -n 1 | grep -q '8 kernels, 64 files'"
check "pack named hashes only" status_is 0 $T pack -o "$W/two.tbundle" $FIX \
  AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ 72LBHDPVFLKOS26Q3453IVCTHETIPQ7OJOQE6IR3KYFIDK5O264A
check "... holds two kernels" sh -c "$T list '$W/two.tbundle' | tail -n 1 | grep -q '^2 kernels'"
check "pack a missing hash fails (1) naming it" status_is 1 $T pack -o "$W/x.tbundle" $FIX NOSUCHHASH
check "... message names the hash" err_has NOSUCHHASH
check "pack a missing cache fails (1)" status_is 1 $T pack -o "$W/x.tbundle" "$W/nonexistent"
check "... message names the directory" err_has "$W/nonexistent"
# a directory that is no Triton cache: refused, saying what was expected
K1=AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ
mkdir -p "$W/nocache" && cp "$W/f.tbundle" "$W/kept.tbundle"
check "pack an empty directory fails (1)" status_is 1 $T pack -o "$W/kept.tbundle" "$W/nocache"
check "... saying what a cache holds" err_has "nocache holds no Triton kernel directories: .*CACHE_DIR/<hash>/, each with a __grp__NAME.json file"
check "... naming --allow-empty" err_has "allow-empty"
check "... and leaves the output as it was" cmp -s "$W/f.tbundle" "$W/kept.tbundle"
mkdir -p "$W/dottriton/dump" && cp -r $FIX "$W/dottriton/cache"
check "pack ~/.triton instead of ~/.triton/cache fails (1)" status_is 1 $T pack -o "$W/e.tbundle" "$W/dottriton"
check "... suggesting its cache/ subdirectory" err_has "$W/dottriton/cache is a Triton cache (8 kernel directories): tbundle pack $W/dottriton/cache\$"
check "... and writes nothing" test ! -e "$W/e.tbundle"
check "pack of one kernel directory fails (1)" status_is 1 $T pack -o "$W/e.tbundle" "$W/dottriton/cache/$K1"
check "... suggesting its parent and the hash" err_has "is itself a kernel directory: tbundle pack $W/dottriton/cache $K1\$"
mkdir -p "$W/nokernels/LAUNCHER" "$W/nokernels/tmp.x" && echo x > "$W/nokernels/LAUNCHER/__triton_launcher.so"
echo '{}' > "$W/nokernels/tmp.x/__grp__x.json" && echo '{}' > "$W/nokernels/__grp__y.json"
ln -s "$(cd $FIX && pwd)/$K1" "$W/nokernels/$K1"
check "entries that are no kernel directories (no __grp__, tmp.*, a link) do not count (1)" status_is 1 $T pack -o "$W/e.tbundle" "$W/nokernels"
check "--allow-empty packs an empty directory (0)" status_is 0 $T pack --allow-empty -o "$W/e.tbundle" "$W/nocache"
check "... into a bundle of no kernels" sh -c "$T list '$W/e.tbundle' | tail -n 1 | grep -q '^0 kernels'"
# a moved cache packed without --as: the .json files still name where
# Triton wrote it (/tmp/triton_cache, the fixture's README)
cp -r $FIX "$W/moved"
check "pack a moved cache without --as (0)" status_is 0 $T pack -o "$W/m.tbundle" "$W/moved"
check "... warns, naming the directory the .json files name" err_has "warning: 8 .json file(s) name paths under /tmp/triton_cache/<hash>/, not under $W/moved/<hash>/"
check "... and gives the fix once" sh -c "[ \$(grep -c -- 'pack it with --as /tmp/triton_cache\$' '$W/err') -eq 1 ] && [ \$(wc -l < '$W/err') -eq 2 ]"
check "... does not take libdevice's path for a cache" sh -c "! grep -q 'site-packages' '$W/err'"
check "the same with --as: no warning" status_is 0 $T pack -o "$W/m.tbundle" --as /tmp/triton_cache "$W/moved"
check "... (stderr empty, though every NAME.json names libdevice)" sh -c "[ ! -s '$W/err' ] && grep -q libdevice '$W/moved/$K1/tb_add.json'"
check "a wrong --as warns, naming the right one" status_is 0 $T pack -o "$W/m.tbundle" --as /tmp/elsewhere "$W/moved"
check "... once" sh -c "grep -q 'not under /tmp/elsewhere/<hash>/ (the --as directory)' '$W/err' && [ \$(grep -c -- '--as /tmp/triton_cache\$' '$W/err') -eq 1 ]"
check "named hashes of a moved cache: warns too" status_is 0 $T pack -o "$W/m.tbundle" "$W/moved" $K1
check "... 1 file" err_has "warning: 1 .json file(s) name paths under /tmp/triton_cache/<hash>/"
mkdir -p "$W/ext/KERNEL"
printf '{"extern_libs": [["libdevice", "/opt/venv/lib/python3.12/site-packages/triton/backends/nvidia/lib/libdevice.10.bc"]], "x": "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}' > "$W/ext/KERNEL/k.json"
printf '{"child_paths": {"k.json": "/old/place/KERNEL/k.json"}}' > "$W/ext/KERNEL/__grp__k.json"
check "a kernel named other than by Triton's hash: its directory is recognised (0)" status_is 0 $T pack --no-records -o "$W/m.tbundle" "$W/ext"
check "... as a cache path (/old/place), unlike extern libraries" sh -c "grep -q 'under /old/place/<hash>/' '$W/err' && grep -q -- '--as /old/place\$' '$W/err' && ! grep -q 'site-packages\|x86_64' '$W/err'"
check "unpack into a fresh cache" status_is 0 $T unpack "$W/f.tbundle" "$W/cache"
check "... emitted 8" out_has "emitted 8, present 0, failed 0"
check "unpack again: all present" status_is 0 $T unpack "$W/f.tbundle" "$W/cache"
check "... present 8" out_has "emitted 0, present 8, failed 0"
check "unpacked files equal the fixture's" diff -r -q -x '*.json' $FIX "$W/cache"
check "JSON paths name the new cache" grep -q "$W/cache/AMSG" "$W/cache/AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ/__grp__tb_add.json"
check "no temporary directory left" sh -c "! ls -d '$W'/cache/tmp.* 2>/dev/null"
# damaged and hostile files
head -c 1000 "$W/f.tbundle" > "$W/trunc.tbundle"
check "verify a truncated file fails (1)" status_is 1 $T verify "$W/trunc.tbundle"
check "... says truncated, names the file" sh -c "grep -q 'truncated' '$W/err' && grep -q 'trunc.tbundle' '$W/err'"
cp "$W/f.tbundle" "$W/flip.tbundle"
printf '\x55' | dd of="$W/flip.tbundle" bs=1 seek=5000 conv=notrunc 2>/dev/null
check "verify a flipped byte fails (1): checksum" status_is 1 $T verify "$W/flip.tbundle"
check "... says checksum" err_has checksum
echo "not a bundle" > "$W/text.tbundle"
# The trailer recomputed by another implementation, the xxHash project's
# xxhsum: XXH3-64 of each 1 MiB block, the values packed little-endian,
# hashed again (docs/FORMAT.md). Skipped where xxhsum is missing.
xxh_trailer_matches() { # file
  local f=$1 n d
  n=$(( $(stat -c %s "$f") - 8 ))
  rm -rf "$W/blk" && mkdir "$W/blk"
  head -c "$n" "$f" | (cd "$W/blk" && split -b 1048576 -a 4 - b.)
  : > "$W/digests"
  for b in "$W"/blk/b.*; do
    d=$(xxhsum -H3 "$b" | grep -o '[0-9a-f]\{16\}' | head -n 1)
    perl -e 'print pack("Q<", hex($ARGV[0]))' "$d" >> "$W/digests" 2>/dev/null
  done
  d=$(xxhsum -H3 "$W/digests" | grep -o '[0-9a-f]\{16\}' | head -n 1)
  [ "$(od -An -tx8 -j "$n" "$f" | tr -d ' \n')" = "$d" ]
}
if command -v xxhsum >/dev/null && command -v perl >/dev/null; then
  check "the trailer equals xxhsum's XXH3 of the blocks' XXH3s" xxh_trailer_matches "$W/f.tbundle"
  head -c 3000000 /dev/urandom > "$W/big.bin"
  mkdir -p "$W/bigcache/BIGKERNEL" && cp "$W/big.bin" "$W/bigcache/BIGKERNEL/k.cubin" && echo '{}' > "$W/bigcache/BIGKERNEL/__grp__k.json"
  check "... and for a 3-block bundle" sh -c "$T pack --no-records -o '$W/big.tbundle' '$W/bigcache' >/dev/null"
  check "... which matches too" xxh_trailer_matches "$W/big.tbundle"
else
  skip=$((skip + 3)); echo "skip the trailer against xxhsum (xxhsum or perl missing)"
fi
check "list a text file fails (1): bad magic" status_is 1 $T list "$W/text.tbundle"
check "... says magic" err_has magic
check "unpack a damaged bundle writes nothing" sh -c "! $T unpack '$W/flip.tbundle' '$W/c2' 2>/dev/null && [ ! -e '$W/c2' ]"
check "unpack into an impossible path fails (1)" status_is 1 $T unpack "$W/f.tbundle" "$W/f.tbundle/sub"
check "clean removes stale temporaries" sh -c "mkdir -p '$W/cache/tmp.stale' && touch -d '3 hours ago' '$W/cache/tmp.stale' && $T clean '$W/cache' | grep -q 'removed 1' && [ ! -e '$W/cache/tmp.stale' ]"
check "clean --age validates" status_is 2 $T clean --age soon "$W/cache"
# options anywhere, "--", and a failing command never replaces its output
check "an option after CACHE_DIR is an option (-v)" status_is 0 $T pack -o "$W/v.tbundle" --as /tmp/triton_cache $FIX -v
check "... and packs all 8" out_has "packed 8 kernels"
check "... -v printed its timings" err_has "ms"
cp "$W/f.tbundle" "$W/keep.tbundle"
check "a pack that fails (missing hash) exits 1" status_is 1 $T pack -o "$W/keep.tbundle" $FIX NOSUCHHASH
check "... and leaves the existing output as it was" cmp -s "$W/f.tbundle" "$W/keep.tbundle"
check "an unknown option after CACHE_DIR is a usage error" status_is 2 $T pack -o "$W/keep.tbundle" $FIX --frobnicate
check "... and leaves the output as it was" cmp -s "$W/f.tbundle" "$W/keep.tbundle"
mkdir -p "$W/-dash" && cp -r $FIX/AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ "$W/-dash/"
check "-- ends the options: a cache named -dash" sh -c "cd '$W' && $TA pack -o dash.tbundle -- -dash | grep -q 'packed 1 kernels'"
check "... and list -- FILE" sh -c "$T list -- '$W/dash.tbundle' | tail -n 1 | grep -q '^1 kernels'"
cp -r $FIX "$W/badcache"
printf '{"x": "[REPLACE]"}' > "$W/badcache/AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ/tb_add.json"
check "a cache with a refused kernel fails the pack (1)" status_is 1 $T pack -o "$W/keep.tbundle" "$W/badcache"
check "... names the cause" err_has "sentinel"
check "... and leaves the output as it was" cmp -s "$W/f.tbundle" "$W/keep.tbundle"
check "--keep-going packs the other 7 (0) with a warning" status_is 0 $T pack --keep-going -o "$W/keep.tbundle" "$W/badcache"
check "... packed 7" out_has "packed 7 kernels"
check "... warned" err_has "warning: 1 kernel"
# the cache directory named through a symlink
ln -s "$(cd $FIX && pwd)" "$W/linked-cache"
check "pack follows a symlinked CACHE_DIR" status_is 0 $T pack -o "$W/l.tbundle" --as /tmp/triton_cache "$W/linked-cache"
check "... packs all 8" out_has "packed 8 kernels"
check "... the same bytes as the real path" cmp -s "$W/f.tbundle" "$W/l.tbundle"
# grid rules: pack --grid KERNEL=EXPR[,EXPR[,EXPR]], by kernel name or cache
# key, over the names the kernel's IR gives its arguments; tb_add has two
# records (K1 and K3)
K3=JHIE2WWBT63JNC3MNKM4MXLWCU2GE3PH4XRUCMZMHZGOHBAFJKTA
KM=FICZDYIEHYTLJCYVG6Q353UAVW2KLMS5O63E5EBZEJQ6G6KKXVQQ # tb_matmul
grid_of() { # FILE KEY: the grid list prints for record KEY's config 0, or "none"
  $T list "$1" | awk -v k="$2" '$1 == "record" { on = ($2 == k) }
    on && / config 0: / { if (match($0, /  grid \(.*\)$/)) print substr($0, RSTART + 7); else print "none" }'
}
grids() { # FILE KEY TEXT [KEY TEXT]...: each record's grid is TEXT
  local f=$1; shift
  while [ $# -ge 2 ]; do [ "$(grid_of "$f" "$1")" = "$2" ] || return 1; shift 2; done
}
grid_count() { [ "$($T list "$1" | grep -c '  grid (')" -eq "$2" ]; } # FILE N: N records have a grid
same_but_grids() { # FILE: list prints what it prints for f.tbundle (packed without --grid), grids aside
  [ "$($T list "$1" | sed 's/  grid (.*)$//')" = "$($T list "$W/f.tbundle")" ]
}
errs() { local p; for p in "$@"; do grep -q -- "$p" "$W/err" || return 1; done; } # every pattern on stderr
kept() { cmp -s "$W/f.tbundle" "$W/keep.tbundle"; }
grid_fails() { # STATUS RULE [HASH...]: pack --grid RULE into keep.tbundle exits STATUS, prints nothing on stdout, keeps it
  local want=$1 rule=$2; shift 2
  cp "$W/f.tbundle" "$W/keep.tbundle" &&
    status_is "$want" $T pack -o "$W/keep.tbundle" --as /tmp/triton_cache --grid "$rule" $FIX "$@" &&
    [ ! -s "$W/out" ] && kept
}
check "pack --grid 'tb_add=cdiv(n, 1024)' (0)" status_is 0 $T pack -o "$W/g.tbundle" --as /tmp/triton_cache \
  --grid 'tb_add=cdiv(n, 1024)' $FIX
check "... packs all 8" out_has "packed 8 kernels, 8 launch records"
check "... both tb_add records get the grid, n as argument 3" \
  grids "$W/g.tbundle" $K1 '(cdiv(arg3, 1024), 1, 1)' $K3 '(cdiv(arg3, 1024), 1, 1)'
check "... no other record has one" grid_count "$W/g.tbundle" 2
check "... and nothing else differs from the pack without --grid" same_but_grids "$W/g.tbundle"
check "... verify ok" status_is 0 $T verify "$W/g.tbundle"
check "a second dimension: 'tb_add=cdiv(n, 1024),2' (0)" status_is 0 $T pack -o "$W/g2.tbundle" --as /tmp/triton_cache \
  --grid 'tb_add=cdiv(n, 1024),2' $FIX
check "... (cdiv(arg3, 1024), 2, 1) on both tb_add records" \
  grids "$W/g2.tbundle" $K1 '(cdiv(arg3, 1024), 2, 1)' $K3 '(cdiv(arg3, 1024), 2, 1)'
check "... and on no other" grid_count "$W/g2.tbundle" 2
check "three dimensions, and a rule for another kernel by its own names (0)" status_is 0 $T pack -o "$W/g3.tbundle" \
  --as /tmp/triton_cache --grid 'tb_add=n, 2, -(-n // 65536) % 3' --grid 'tb_matmul=cdiv(M, 128) * cdiv(N, 128)' $FIX
check "... tb_add's z as written, tb_matmul's over M and N (arguments 3 and 4)" \
  grids "$W/g3.tbundle" $K1 '(arg3, 2, (-((-(arg3) // 65536)) % 3))' $KM '((cdiv(arg3, 128) * cdiv(arg4, 128)), 1, 1)'
check "... three records with a grid" grid_count "$W/g3.tbundle" 3
check "a rule by cache key, one of tb_add's two (0)" status_is 0 $T pack -o "$W/gk.tbundle" --as /tmp/triton_cache \
  --grid "$K3=cdiv(n, 512)" $FIX
check "... that record has the grid, the other tb_add record none" \
  grids "$W/gk.tbundle" $K3 '(cdiv(arg3, 512), 1, 1)' $K1 none
check "... and no other record" grid_count "$W/gk.tbundle" 1
check "rules apply in order: by name, then by key (0)" status_is 0 $T pack -o "$W/go.tbundle" --as /tmp/triton_cache \
  --grid 'tb_add=1' --grid "$K1=2" $FIX
check "... the key's rule replaced the name's on its record only" grids "$W/go.tbundle" $K1 '(2, 1, 1)' $K3 '(1, 1, 1)'
# refused rules: exit 1 (a rule that cannot apply) or 2 (the command line),
# a message that says where, and the output file as it was
cp "$W/f.tbundle" "$W/keep.tbundle"
check "an unknown name in a rule fails (1), the output kept" grid_fails 1 'tb_add=cdiv(nn, 1024)'
check "... naming the name, its column and the dimension" errs '"nn" is no argument' 'column 6' 'dimension x'
check "an unknown name in the y expression fails (1)" grid_fails 1 'tb_add=n, cdiv(n, XBLOCK)'
check "... its column in that expression (its leading space counts), dimension y" \
  errs '"XBLOCK" is no argument' 'column 10' 'dimension y'
check "a syntax error fails (1), the output kept" grid_fails 1 'tb_add=cdiv(n, 1024'
check "... saying the column" errs 'column 13' "')' expected"
check "'/' fails (1)" grid_fails 1 'tb_add=n / 1024'
check "... column 3, suggesting //" errs 'column 3' 'use //'
check "a rule for an unknown kernel fails (1), the output kept" grid_fails 1 'nosuch=1'
check "... the rule names no kernel" errs 'names no kernel' 'nosuch'
check "a pointer argument in a rule fails (1)" grid_fails 1 'tb_add=x_ptr'
check "... not an integer argument" errs 'not an integer argument'
check "four dimensions fail (1)" grid_fails 1 'tb_add=n,1,1,1'
check "... more than three" errs 'more than three grid dimensions'
check "an empty expression fails (1)" grid_fails 1 'tb_add='
check "... column 1, too soon" errs 'column 1' 'ends too soon'
check "one bad rule of two fails the pack (1), the output kept" status_is 1 $T pack -o "$W/keep.tbundle" \
  --as /tmp/triton_cache --grid 'tb_add=n' --grid 'tb_matmul=n' $FIX
check "... tb_matmul has no n" sh -c "grep -q '\"n\" is no argument' '$W/err' && cmp -s '$W/f.tbundle' '$W/keep.tbundle'"
check "a rule without '=' is a usage error (2), the output kept" grid_fails 2 'tb_add'
check "... naming the value" errs "^tbundle: --grid needs KERNEL=EXPR\[,EXPR\[,EXPR\]\], got 'tb_add'\$"
check "--grid with --no-records is a usage error (2)" status_is 2 $T pack --no-records -o "$W/keep.tbundle" \
  --grid 'tb_add=n' $FIX
check "... saying why, the output kept" sh -c "grep -q '^tbundle: --grid needs launch records: drop --no-records' '$W/err' &&
  cmp -s '$W/f.tbundle' '$W/keep.tbundle'"
check "--grid without a value is a usage error (2)" status_is 2 $T pack -o "$W/keep.tbundle" $FIX --grid
check "... naming the option, the output kept" sh -c "grep -q \"^tbundle: option '--grid' needs a value\" '$W/err' &&
  cmp -s '$W/f.tbundle' '$W/keep.tbundle'"
# the same through named hashes: collected, records derived, rules applied
check "named hashes with --grid 'tb_add=cdiv(n, 1024)' (0)" status_is 0 $T pack -o "$W/gn.tbundle" --as /tmp/triton_cache \
  $FIX $K1 $K3 $KM --grid 'tb_add=cdiv(n, 1024)'
check "... packs 3" out_has "packed 3 kernels, 3 launch records"
check "... both tb_add records get the grid, tb_matmul none" \
  grids "$W/gn.tbundle" $K1 '(cdiv(arg3, 1024), 1, 1)' $K3 '(cdiv(arg3, 1024), 1, 1)' $KM none
check "named hashes, a rule by cache key with a second dimension (0)" status_is 0 $T pack -o "$W/gnk.tbundle" \
  --as /tmp/triton_cache $FIX $K1 $K3 --grid "$K1=cdiv(n, 1024),2"
check "... on that record only" grids "$W/gnk.tbundle" $K1 '(cdiv(arg3, 1024), 2, 1)' $K3 none
check "named hashes, an unknown name fails (1), the output kept" grid_fails 1 'tb_add=cdiv(nn, 1024)' $K1 $K3
check "... naming the name and its column" errs '"nn" is no argument' 'column 6'
check "named hashes, a syntax error fails (1), the output kept" grid_fails 1 'tb_add=cdiv(n, 1024' $K1 $K3
check "... saying the column" errs 'column 13'
check "named hashes, a rule for a kernel not packed fails (1), the output kept" grid_fails 1 'tb_matmul=M' $K1 $K3
check "... the rule names no kernel, as without hashes" errs 'names no kernel' 'tb_matmul'
check "named hashes, a rule without '=' is a usage error (2)" grid_fails 2 'tb_add' $K1
check "named hashes, --grid with --no-records is a usage error (2)" status_is 2 $T pack --no-records \
  -o "$W/keep.tbundle" --grid 'tb_add=n' $FIX $K1
# FIFOs and empty paths
mkfifo "$W/pipe.tbundle"
for c in verify list; do
  check "$c of a FIFO fails at once (1), no hang" status_is 1 timeout 20 $T $c "$W/pipe.tbundle"
done
check "unpack of a FIFO fails at once (1), no hang" status_is 1 timeout 20 $T unpack "$W/pipe.tbundle" "$W/cf"
check "... says it is not a regular file" err_has "regular file"
mkdir -p "$W/empty"
check "unpack FILE \"\" fails (1) as pack \"\" does" sh -c "cd '$W/empty' && ! $TA unpack '$W/f.tbundle' '' 2>/dev/null && [ -z \"\$(ls -A)\" ]"
check "pack \"\" fails (1)" status_is 1 $T pack -o "$W/e.tbundle" ""
# names print escaped
mkdir -p "$W/esccache/$(printf 'EVIL\nFORGED\033[31m')" && echo '{}' > "$W/esccache/$(printf 'EVIL\nFORGED\033[31m')/__grp__x.json"
check "pack a kernel whose hash holds a newline and ESC" status_is 0 $T pack --no-records -o "$W/esc.tbundle" "$W/esccache"
check "list prints it escaped on one line" sh -c "$T list '$W/esc.tbundle' > '$W/out' && grep -q 'EVIL\\\\x0aFORGED\\\\x1b' '$W/out' && ! grep -q '^FORGED' '$W/out' && ! grep -q \"\$(printf '\\033')\" '$W/out'"
# list --json: parsed by Python's json module, values checked against the
# fixture's own files and the plain list
json_ok() { # FILE PYTHON-EXPRESSION...: each must hold of d, the parsed JSON of list --json FILE
  local f=$1; shift
  $T list --json "$f" > "$W/json" 2>"$W/err" || return 1
  python3 -c 'import json, os, sys
raw = sys.stdin.buffer.read()
d = json.loads(raw.decode("utf-8"))  # strict UTF-8
kern = {k["hash"]: k for k in d["kernels"]}
rec = {r["cache_key"]: r for r in d["records"]}
named = lambda n: [r for r in d["records"] if r["kernel_name"] == n]
meta = lambda h, n: json.load(open(os.path.join(sys.argv[1], h, n + ".json")))
for e in sys.argv[2:]:
    if not eval(e):
        sys.exit("false: " + e)' "$FIX" "$@" < "$W/json"
}
if command -v python3 >/dev/null; then
  K2=FICZDYIEHYTLJCYVG6Q353UAVW2KLMS5O63E5EBZEJQ6G6KKXVQQ  # tb_matmul
  check "list --json of the fixture: valid JSON, format 2.2, the totals" json_ok "$W/f.tbundle" \
    'd["format"] == {"major": 2, "minor": 2}' \
    'd["totals"] == {"kernels": 8, "files": 64, "bytes": sum(k["bytes"] for k in d["kernels"]), "records": 8}' \
    'len(d["kernels"]) == 8 and len(d["records"]) == 8'
  check "... the totals line of the plain list" sh -c "$T list '$W/f.tbundle' | tail -n 1 | grep -q \"^8 kernels, 64 files, \$(python3 -c 'import json,sys; print(json.load(sys.stdin)[\"totals\"][\"bytes\"])' < '$W/json') bytes, 8 launch records\""
  check "... a kernel: hash, name, device, target, files with their sizes" json_ok "$W/f.tbundle" \
    "kern['$K1']['name'] == 'tb_add' and kern['$K1']['device'] == 0" \
    "kern['$K1']['target'] == {'backend': 'cuda', 'arch': 90, 'warp_size': 32}" \
    "[f['name'] for f in kern['$K1']['files']] == sorted(os.listdir(os.path.join(sys.argv[1], '$K1')))" \
    "all(f['size'] == os.path.getsize(os.path.join(sys.argv[1], '$K1', f['name'])) for f in kern['$K1']['files'] if not f['name'].endswith('.json'))" \
    "kern['$K1']['bytes'] == sum(f['size'] for f in kern['$K1']['files'])"
  check "... a record: key, name, argument types, no call info or grid" json_ok "$W/f.tbundle" \
    "rec['$K1']['kernel_name'] == 'tb_add' and rec['$K1']['call'] is None and len(rec['$K1']['configs']) == 1" \
    "rec['$K1']['configs'][0]['arg_types'] == 'OOOi' and rec['$K1']['configs'][0]['arg_divisibility'] == '1110'" \
    "rec['$K1']['configs'][0]['flags'] == ['types_from_ir'] and rec['$K1']['configs'][0]['grid'] is None" \
    "len(named('tb_add')) == 2"
  check "... tb_matmul's config as its NAME.json says (warps, stages, shared memory)" json_ok "$W/f.tbundle" \
    "rec['$K2']['configs'][0]['shared_mem'] == 131072 == meta('$K2', 'tb_matmul')['shared']" \
    "rec['$K2']['configs'][0]['num_warps'] == meta('$K2', 'tb_matmul')['num_warps'] == 8" \
    "rec['$K2']['configs'][0]['num_stages'] == meta('$K2', 'tb_matmul')['num_stages'] == 4" \
    "rec['$K2']['configs'][0]['function_name'] == 'tb_matmul' and rec['$K2']['configs'][0]['binary_name'] == 'tb_matmul.cubin'" \
    "rec['$K2']['configs'][0]['global_scratch'] == {'size': 0, 'align': 1}"
  check "... --json may follow FILE" sh -c "$T list '$W/f.tbundle' --json | python3 -c 'import json,sys; json.load(sys.stdin)'"
  check "list --json of a format 1.0 bundle says 1.0" json_ok tests/fixtures/format-1.0.tbundle \
    'd["format"] == {"major": 1, "minor": 0}'
  check "list --json of a damaged bundle fails (1)" status_is 1 $T list --json "$W/flip.tbundle"
  check "... printing nothing on stdout, the cause on stderr" sh -c "[ ! -s '$W/out' ] && grep -q checksum '$W/err'"
  # records as the Python companion exports them: call info, params, grid
  # rules, tensor descriptors, scratch, flags
  python3 -c 'import sys; sys.path[:0] = ["tests", "python"]; import test_python, triton_bundle as tb
tb.write_file(test_python.sample_bundle(), sys.argv[1])' "$W/sample.tbundle"
  check "list --json of an exported bundle: call info (names, mutated, reset, key)" json_ok "$W/sample.tbundle" \
    "rec['inductor:k:1']['call'] == {'arg_names': ['in_out_ptr0', 'xnumel', 'flag', 'big'], 'mutated': [0], 'reset': [], 'key': [1]}" \
    "rec['triton:d']['call'] is None"
  check "... params and num_stages from them" json_ok "$W/sample.tbundle" \
    "rec['inductor:k:1']['configs'][0]['params'] == [{'name': 'XBLOCK', 'value': 256}, {'name': 'num_stages', 'value': 3}]" \
    "[c['num_stages'] for c in rec['inductor:k:1']['configs']] == [3, 2] and rec['triton:d']['configs'][0]['num_stages'] is None"
  check "... the grid rule as text and as its program" json_ok "$W/sample.tbundle" \
    "rec['inductor:k:1']['configs'][0]['grid']['text'] == '(cdiv(xnumel, XBLOCK), grid_args[1], 1)'" \
    "rec['inductor:k:1']['configs'][0]['grid']['ops'] == [[{'op': 'arg', 'index': 1}, {'op': 'param', 'index': 0}, {'op': 'cdiv'}], [{'op': 'extra', 'index': 1}], [{'op': 'const', 'value': 1}]]" \
    "rec['inductor:k:1']['configs'][1]['grid'] is None"
  check "... the same grid text as the plain list" sh -c "$T list '$W/sample.tbundle' | grep -qF 'grid (cdiv(xnumel, XBLOCK), grid_args[1], 1)'"
  check "... tensor descriptors, cluster, scratch and flags" json_ok "$W/sample.tbundle" \
    "rec['triton:d']['configs'][0]['tensordescs'] == [{'tma': 1, 'rank': 2, 'swizzle': 3, 'elem_size': 2, 'elem_type': 6, 'fp4_padded': 0, 'block': [64, 32]}]" \
    "rec['triton:d']['configs'][0]['cluster_dims'] == [2, 1, 1] and rec['triton:d']['configs'][0]['num_ctas'] == 2" \
    "rec['triton:d']['configs'][0]['flags'] == ['pdl'] and rec['triton:d']['configs'][0]['global_scratch'] == {'size': 1024, 'align': 128}" \
    "rec['inductor:k:1']['configs'][0]['global_scratch'] is None" \
    "kern['HASH2']['device'] == 3 and kern['HASH2']['target'] is None and kern['HASH1']['name'] == 'k'"
  # hostile names: a hash with a newline and ESC (above), and a bundle whose
  # every name holds quotes, backslashes, control bytes, C1 controls and
  # bytes that are not UTF-8
  check "list --json of the hash with a newline and ESC: escaped, exact" json_ok "$W/esc.tbundle" \
    "d['kernels'][0]['hash'] == 'EVIL\nFORGED\x1b[31m'" \
    "b'\\\\u000a' in raw and b'\\\\u001b' in raw and not any(c < 0x20 and c != 10 for c in raw)"
  python3 -c 'import sys; sys.path[:0] = ["python"]; import triton_bundle as tb
evil = (b"q\"b\\s\n\t\x1b[31m\x7f\xc2\x85\xc3\xa9\xf0\x9f\x98\x80 \xff\xe0\x80\x80\xed\xa0\x80\xe2\x82").decode("utf-8", "surrogateescape")
meta = b"{\"target\": {\"backend\": \"cu\\\"da\", \"arch\": \"gfx\x01\", \"warp_size\": 64}, \"num_stages\": 007}"
k = tb.Kernel("H\x01\"x", 0, [tb.Artifact("a\x1b\"b.cubin", b"x"), tb.Artifact("a\x1b\"b.json", meta)])
g = tb.GridRule([(tb.ARG, 1, 0), (tb.PARAM, 0, 0), (tb.CEILDIV, 0, 0)], [(tb.CONST, 0, 7)], [(tb.CONST, 0, 1)])
c = tb.Config(k.hash, "f" + evil, "a\x1b\"b.cubin", "Oi", "", 4, 1, 0, 0, params=[("B" + evil, 64)], grid=g)
r = tb.Record("key" + evil, "name" + evil, [c], tb.CallInfo(["p" + evil, "n" + evil], [0], [0], [1]))
tb.write_file(tb.Bundle([k], [r]), sys.argv[1])' "$W/hostile.tbundle"
  EVIL_PY='(b"q\"b\\s\n\t\x1b[31m\x7f\xc2\x85\xc3\xa9\xf0\x9f\x98\x80 \xff\xe0\x80\x80\xed\xa0\x80\xe2\x82").decode("utf-8", "replace")'
  check "list --json of hostile names: valid JSON, ASCII controls escaped, each name exact (bytes not UTF-8 as U+FFFD)" json_ok "$W/hostile.tbundle" \
    "not any(c < 0x20 and c != 10 for c in raw) and b'\\xc2\\x85' not in raw and b'\\\\u0085' in raw" \
    "d['records'][0]['cache_key'] == 'key' + $EVIL_PY and d['records'][0]['kernel_name'] == 'name' + $EVIL_PY" \
    "d['records'][0]['call']['arg_names'] == ['p' + $EVIL_PY, 'n' + $EVIL_PY]" \
    "d['records'][0]['configs'][0]['function_name'] == 'f' + $EVIL_PY" \
    "d['records'][0]['configs'][0]['params'] == [{'name': 'B' + $EVIL_PY, 'value': 64}]" \
    "d['records'][0]['configs'][0]['grid']['text'] == '(cdiv(n' + $EVIL_PY + ', B' + $EVIL_PY + '), 7, 1)'" \
    "d['kernels'][0]['hash'] == 'H\x01\"x' and d['kernels'][0]['files'][0]['name'] == 'a\x1b\"b.cubin'"
  check "... a NAME.json that is no clean JSON gives no target values and no num_stages" json_ok "$W/hostile.tbundle" \
    "d['kernels'][0]['target'] == {} and d['records'][0]['configs'][0]['num_stages'] is None"
else
  skip=$((skip + 17)); echo "skip list --json (no python3 to parse it)"
fi
# list --json of the --grid packs: the rule's program and text
if command -v python3 >/dev/null; then
  ADD_OPS="[[{'op': 'arg', 'index': 3}, {'op': 'const', 'value': 1024}, {'op': 'cdiv'}], [{'op': 'const', 'value': 1}], [{'op': 'const', 'value': 1}]]"
  check "list --json after --grid 'tb_add=cdiv(n, 1024)': the program of both tb_add records" json_ok "$W/g.tbundle" \
    "rec['$K1']['configs'][0]['grid']['ops'] == rec['$K3']['configs'][0]['grid']['ops'] == $ADD_OPS" \
    "rec['$K1']['configs'][0]['grid']['text'] == '(cdiv(arg3, 1024), 1, 1)'" \
    "all(r['configs'][0]['grid'] is None for r in d['records'] if r['kernel_name'] != 'tb_add')"
  check "... a second dimension: const 2" json_ok "$W/g2.tbundle" \
    "rec['$K3']['configs'][0]['grid']['ops'][1] == [{'op': 'const', 'value': 2}]"
  check "... folded as the Python companion folds: -(-n // 65536) % 3" json_ok "$W/g3.tbundle" \
    "rec['$K1']['configs'][0]['grid']['ops'][2] == [{'op': 'arg', 'index': 3}, {'op': 'neg'}, {'op': 'const', 'value': 65536}, {'op': 'floordiv'}, {'op': 'neg'}, {'op': 'const', 'value': 3}, {'op': 'mod'}]"
  check "... by cache key: that record alone" json_ok "$W/gk.tbundle" \
    "rec['$K3']['configs'][0]['grid']['ops'][0][1] == {'op': 'const', 'value': 512} and rec['$K1']['configs'][0]['grid'] is None"
  check "... through named hashes: both tb_add records, tb_matmul none" json_ok "$W/gn.tbundle" \
    "rec['$K1']['configs'][0]['grid']['ops'] == rec['$K3']['configs'][0]['grid']['ops'] == $ADD_OPS" \
    "rec['$KM']['configs'][0]['grid'] is None"
else
  skip=$((skip + 5)); echo "skip list --json of grid rules (no python3 to parse it)"
fi
# a live writer's temporary directory survives clean at any age
if command -v flock >/dev/null; then
  mkdir -p "$W/cache/tmp.live" && touch -d '3 hours ago' "$W/cache/tmp.live"
  flock "$W/cache/tmp.live" sleep 3 & holder=$!
  sleep 0.5
  check "clean --age 0 leaves a directory a writer holds locked" sh -c "$T clean --age 0 '$W/cache' | grep -q 'removed 0' && [ -d '$W/cache/tmp.live' ]"
  wait $holder
  check "... and removes it once released" sh -c "$T clean --age 0 '$W/cache' | grep -q 'removed 1' && [ ! -e '$W/cache/tmp.live' ]"
else
  skip=$((skip + 2)); echo "skip clean and a locked directory (no flock command)"
fi
# no /proc (a chroot, a small container): bundle files are still written
if unshare -rm true 2>/dev/null; then
  check "pack without /proc mounted (the unnamed temporary file falls back to a named one)" \
    unshare -rm sh -c "mount -t tmpfs none /proc && $TA pack -o '$W/noproc.tbundle' --as /tmp/triton_cache $FIX"
  check "... the same bytes" cmp -s "$W/f.tbundle" "$W/noproc.tbundle"
  check "... and nothing left beside it" sh -c "! ls '$W'/noproc.tbundle.tmp.* 2>/dev/null"
else
  skip=$((skip + 3)); echo "skip pack without /proc (no user namespaces here)"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
