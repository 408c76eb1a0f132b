#!/bin/sh
# A subset run of sim/experiments/run.sh (issue 18: `run.sh BUILD 5 3` on a
# fresh build used to delete the other experiments' tables) rewrites only
# its own tables and keeps everything else of the page byte for byte.
#
# It runs the fastest experiment (6: push-pull at 10 000 agents, under a
# second of CPU; run.sh runs it under nice, so longer on a loaded host) on a scratch
# copy of docs/experiments.md (EXPERIMENTS_DOC) with a scratch output
# directory (EXPERIMENTS_OUT) that holds a stale results-1.md from an
# "earlier run", which must not replace the page's table 1. Every section
# of the copy carries a sentinel line: the sections not run keep theirs,
# the one run loses its sentinel and holds a freshly computed table.
set -eu
build=${BUILD:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "experiments_subset: $bin not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "experiments_subset: FAIL $*" >&2; exit 1; }
page=docs/experiments.md
grep -q '^<!-- results:begin -->$' "$page" || fail "$page has no results block"
page_sum=$(cksum <"$page")

# The scratch page: a sentinel after every "### K." heading of the results
# block, and one before the block.
awk '/^<!-- results:begin -->$/ { print "sentinel outside the block"; inb = 1 }
    /^<!-- results:end -->$/ { inb = 0 }
    { print }
    inb && /^### [0-9]\. / { k = substr($2, 1, 1); print ""; print "sentinel of experiment " k }' \
    "$page" >"$tmp/before.md"
# The experiments the page has (1..9 today), in order, as one string.
all=$(awk '/^<!-- results:begin -->$/ { inb = 1 } /^<!-- results:end -->$/ { inb = 0 }
    inb && /^### [0-9]\. / { printf "%s", substr($2, 1, 1) }' "$page")
case "$all" in 12345678*) ;; *) fail "$page's results block has sections $all, not 1..8 and more" ;; esac
kept=$(echo "$all" | sed 's/./& /g; s/6 //')
for k in $(echo "$all" | sed 's/./& /g'); do
    grep -q "^sentinel of experiment $k\$" "$tmp/before.md" || fail "$page has no section $k"
done
cp "$tmp/before.md" "$tmp/page.md"
mkdir -p "$tmp/out"
printf '### 1. STALE table of an earlier run\n\n| stale |\n\n' >"$tmp/out/results-1.md"

EXPERIMENTS_DOC="$tmp/page.md" EXPERIMENTS_OUT="$tmp/out" sh sim/experiments/run.sh "$build" 6 \
    >"$tmp/run.log" 2>&1 || { cat "$tmp/run.log" >&2; fail "run.sh $build 6 failed"; }
grep -q "tables written to $tmp/page.md" "$tmp/run.log" || fail "run.sh did not write the scratch page"
[ "$(cksum <"$page")" = "$page_sum" ] || fail "run.sh changed $page, not the scratch copy"

# section FILE K: experiment K's section of the results block
section() {
    awk -v k="$2" '/^<!-- results:begin -->$/ { inb = 1; next } /^<!-- results:end -->$/ { inb = 0 }
        inb && /^### / { on = index($0, "### " k ". ") == 1 }
        inb && on { print }' "$1"
}
# outside FILE: the page without its results block
outside() { awk '/^<!-- results:end -->$/ { inb = 0 } !inb { print } /^<!-- results:begin -->$/ { inb = 1 }' "$1"; }

outside "$tmp/before.md" >"$tmp/o1"
outside "$tmp/page.md" >"$tmp/o2"
cmp -s "$tmp/o1" "$tmp/o2" || { diff "$tmp/o1" "$tmp/o2" >&2 || true; fail "text outside the results block changed"; }
for k in $kept; do
    section "$tmp/before.md" $k >"$tmp/s1"
    section "$tmp/page.md" $k >"$tmp/s2"
    [ -s "$tmp/s1" ] || fail "section $k empty in the copy"
    cmp -s "$tmp/s1" "$tmp/s2" || { diff "$tmp/s1" "$tmp/s2" >&2 || true; fail "section $k (not run) changed"; }
done
! grep -q STALE "$tmp/page.md" || fail "a stale results-1.md of the output directory replaced table 1"
for k in 6; do
    section "$tmp/page.md" $k >"$tmp/s2"
    ! grep -q "^sentinel of experiment $k\$" "$tmp/s2" || fail "section $k was not rewritten"
    cmp -s "$tmp/s2" "$tmp/out/results-$k.md" || fail "section $k is not this run's table"
done
section "$tmp/page.md" 6 | grep -q '^| 10000 | 2\.\.12 | 0\.3033 | ' || fail "table 6 lacks its row"
# The sections stay in the page's order, each once.
order=$(awk '/^<!-- results:begin -->$/ { inb = 1 } /^<!-- results:end -->$/ { inb = 0 }
    inb && /^### [0-9]\. / { printf "%s", substr($2, 1, 1) }' "$tmp/page.md")
[ "$order" = "$all" ] || fail "sections in order $order, not $all"
echo "experiments_subset: ok (run.sh 6 rewrote table 6; the others ($kept) and the rest of the page kept)"
