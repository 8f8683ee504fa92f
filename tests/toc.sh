#!/bin/sh
# The header's navigation is true: every section banner carries a >>tag
# (declarations: "   >>tag  Title" between two rule lines, implementation:
# "/* >>tag  Title */" after a rule line), each tag of the declarations has
# an implementation banner with the same title, the sections come in one
# order in both halves and in the table of contents, which lists exactly
# the banners' tags, no line looks like a banner without being one, and
# API AT A GLANCE names every public (TBDEF) function under the tag of the
# section that declares it. One check per rule.
cd "$(dirname "$0")/.." || exit 1
H=triton_bundle.h
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
top=$(awk '/^\*\//{exit} {print}' $H)
decl=$(awk '/^   >>[a-z]+  [^ ]/ && prev ~ /^\/\* =====/ {sub(/^   /, ""); print} {prev = $0}' $H)
impl=$(awk '/^\/\* >>[a-z]+  [^ ].* \*\/$/ && prev ~ /^\/\* -----/ {sub(/^\/\* /, ""); sub(/ \*\/$/, ""); print} {prev = $0}' $H)
toc=$(echo "$top" | sed -n '/^   CONTENTS/,/^   API AT A GLANCE/p' | grep -oE '^     >>[a-z]+' | sed 's/ //g')
dtags=$(echo "$decl" | grep -oE '^>>[a-z]+'); itags=$(echo "$impl" | grep -oE '^>>[a-z]+')
# every banner-like line is a banner of one of the two forms
strays=$(grep -nE '^(/\* |   )>>[a-z]' $H | while IFS=: read -r n l; do
  prev=$(sed -n "$((n - 1))p" $H)
  case "$l" in
    "   >>"*) echo "$l" | grep -qE '^   >>[a-z]+  [^ ]' && echo "$prev" | grep -q '^/\* =====' || echo "$n";;
    *) echo "$l" | grep -qE '^/\* >>[a-z]+  [^ ].* \*/$' && echo "$prev" | grep -q '^/\* -----' || echo "$n";;
  esac; done | tr '\n' ' ')
[ -z "$strays" ] && ok "every banner-like line is a well-formed banner" || bad "malformed banners at lines: $strays"
[ -n "$itags" ] && [ "$(echo "$toc" | tr '\n' ' ')" = "$(echo "$itags" | tr '\n' ' ')" ] &&
  ok "the contents list the implementation's tags in its order ($(echo $itags | wc -w))" ||
  bad "contents [$(echo $toc)] and implementation banners [$(echo $itags)] differ"
order=$(echo "$itags" | grep -xF "$(echo "$dtags")")
[ -n "$dtags" ] && [ "$(echo "$dtags" | tr '\n' ' ')" = "$(echo "$order" | tr '\n' ' ')" ] &&
  ok "the declarations' sections come in the implementation's order, each with a banner there" ||
  bad "declaration banners [$(echo $dtags)] against the implementation's [$(echo $order)]"
mism=""
for t in $dtags; do
  d=$(echo "$decl" | grep -E "^$t  " | head -1); i=$(echo "$impl" | grep -E "^$t  " | head -1)
  [ "$d" = "$i" ] || mism="$mism $t"
done
[ -z "$mism" ] && ok "a section's title is the same in both halves" || bad "titles differ between the halves:$mism"
dup=$( (echo "$dtags" | sort | uniq -d; echo "$itags" | sort | uniq -d) | tr '\n' ' ')
[ -z "$dup" ] && ok "each tag is one banner per half" || bad "tags repeated within a half: $dup"
api=$(echo "$top" | sed -n '/^   API AT A GLANCE/,/^   EXAMPLE/p')
missing=$(awk '/IMPLEMENTATION +\*\/$/ {exit} /^   >>[a-z]+  [^ ]/ {tag = $1} /^TBDEF/ && tag { match($0, /[a-z_0-9]+\(/); print tag, substr($0, RSTART, RLENGTH - 1) }' $H |
  while read -r tag f; do
    echo "$api" | awk -v t="$tag" '/^     >>[a-z]+/ {cur = $1} cur == t' | grep -qw "$f" || echo "$f($tag)"
  done | tr '\n' ' ')
[ -z "$missing" ] && ok "API AT A GLANCE names every public function under its section's tag" ||
  bad "not named under their section's tag: $missing"
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
