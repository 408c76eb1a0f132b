#!/bin/sh
# Issue 13, item 14: with one of 4 agents behind a 10 Mb/s link (tc tbf in
# network namespaces), do the other three keep >= 0.8x their mixing
# rounds/s? Runs tests/integration/fault_slowlink.sh RUNS times (3 by
# default; it measures agents 1-3 for the same window before and while
# agent 4 is slow) on the agent's default model (SPEC, mlp:256,128: the
# model of the report), prints each ratio and their median, and
# records them
# with the command, the date and the load average in docs/BENCHMARKS.md
# between <!-- bench-peers:slowlink begin --> and
# <!-- bench-peers:slowlink end --> (appended when absent). RECORD= (empty)
# prints and writes nothing. Needs root (namespaces, tc): skipped with one
# line otherwise.
#   BUILD=build sh bench/peers/slowlink.sh [RUNS]
set -u
build=${BUILD:-build}
runs=${1:-3}
spec=${SPEC:-mlp:256,128}
record=${RECORD-docs/BENCHMARKS.md}
if [ "$(id -u)" -ne 0 ]; then
    echo "slowlink: skipped: needs root (network namespaces and tc)"
    exit 0
fi
[ -x "$build/murmur" ] || { echo "slowlink: $build/murmur is missing; run make" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
k=0
while [ $k -lt "$runs" ]; do
    k=$((k + 1))
    # measure only: no bound, the figure is the point
    if ! BUILD="$build" SLOWLINK_MIN_RATIO=0 SLOWLINK_SPEC="$spec" sh tests/integration/fault_slowlink.sh >"$tmp/run$k" 2>&1; then
        echo "slowlink: run $k failed:" >&2
        tail -n 20 "$tmp/run$k" >&2
        exit 1
    fi
    grep '^slowlink: ratio=' "$tmp/run$k" | tee -a "$tmp/lines"
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
sed 's/.*ratio=\([0-9.]*\) before=\([0-9.]*\) after=\([0-9.]*\).*/\1 \2 \3/' "$tmp/lines" |
    sort -n >"$tmp/sorted"
median=$(awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }' "$tmp/sorted")
echo "slowlink: median ratio $median over $runs runs (goal >= 0.8)"
{
    echo "<!-- bench-peers:slowlink begin -->"
    echo ""
    echo "Produced by \`BUILD=$build SPEC=$spec sh bench/peers/slowlink.sh $runs\` on $(date -u +%Y-%m-%d), load average $load on $(nproc) cores; do not edit by hand. Mixing rounds per second of agents 1-3 (summed) over equal windows before and while agent 4's link is shaped to 10 Mb/s (\`tests/integration/fault_slowlink.sh\`, gossip, model.spec=$spec); ratio = while / before; issue 13's goal is >= 0.8."
    echo ""
    echo "| run | rounds/s before | rounds/s while agent 4 is slow | ratio |"
    echo "|---:|---:|---:|---:|"
    awk '{ printf "| %d | %s | %s | %s |\n", NR, $2, $3, $1 }' "$tmp/sorted"
    echo ""
    echo "Median ratio: **$median** (runs sorted by ratio)."
    echo ""
    echo "<!-- bench-peers:slowlink end -->"
} >"$tmp/table"
[ -n "$record" ] || { cat "$tmp/table"; exit 0; }
# shellcheck source=scripts/record.sh
. scripts/record.sh
record_block "$record" "bench-peers:slowlink" "$tmp/table" || { echo "slowlink: cannot write $record" >&2; exit 1; }
echo "slowlink: recorded in $record"
