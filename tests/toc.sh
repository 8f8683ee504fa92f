#!/bin/sh
# The header's navigation is true: every section banner carries a >>tag
# (declarations: "   >>tag  Title", implementation: "/* >>tag  Title */"),
# a tag found in both halves has the same title in both, the table of
# contents at the top lists exactly the tags of the banners, and the top
# doc names every public (TBDEF) function. One check per rule.
cd "$(dirname "$0")/.." || exit 1
H=triton_bundle.h
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
top=$(awk '/^\*\//{exit} {print}' $H)
decl=$(grep -E '^   >>[a-z]+  ' $H | sed 's/^   //')
impl=$(grep -E '^/\* >>[a-z]+  .* \*/$' $H | sed 's|^/\* ||; s| \*/$||')
toc=$(echo "$top" | sed -n '/CONTENTS/,/API AT A GLANCE/p' | grep -oE '^     >>[a-z]+' | sed 's/ //g' | sort -u)
tags=$( (echo "$decl"; echo "$impl") | grep -oE '^>>[a-z]+' | sort -u)
[ -n "$tags" ] && [ "$toc" = "$tags" ] && ok "the contents list the banners' tags ($(echo $tags | wc -w))" ||
  bad "contents and banners differ: contents [$(echo $toc)] banners [$(echo $tags)]"
mism=""
for t in $(echo "$decl" | grep -oE '^>>[a-z]+'); do
  d=$(echo "$decl" | grep -E "^$t  " | head -1); i=$(echo "$impl" | grep -E "^$t  " | head -1)
  [ -z "$i" ] || [ "$d" = "$i" ] || mism="$mism $t"
done
[ -z "$mism" ] && ok "a section's title is the same in both halves" || bad "titles differ between the halves:$mism"
dup=$( (echo "$decl" | grep -oE '^>>[a-z]+' | sort | uniq -d; echo "$impl" | grep -oE '^>>[a-z]+' | sort | uniq -d) | tr '\n' ' ')
[ -z "$dup" ] && ok "each tag is one banner per half" || bad "tags repeated within a half: $dup"
missing=""
for f in $(grep -oE '^TBDEF [^(]*\(' $H | sed 's/.*[ *]\([a-z_0-9]*\)($/\1/' | sort -u); do
  echo "$top" | grep -qw "$f" || missing="$missing $f"
done
[ -z "$missing" ] && ok "the top doc names every public function" || bad "the top doc does not name:$missing"
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
