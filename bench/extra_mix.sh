#!/bin/sh
# The mixer's CPU cost per round and its exact bytes (build/bench/bench_mix:
# 8 members of gossip_mix on the sim driver in one process, a 1 MiB vector,
# every mixing rule, and gossip with the agent's defaults, also through
# gossip/sched with its outer step). Prints the table and writes it into
# RECORD (default docs/BENCHMARKS.md, between the
# lines <!-- bench:mix begin --> and <!-- bench:mix end -->, appended when
# they are absent) with the command, the date and the load average;
# RECORD= (empty) writes nothing.
#   BUILD=build sh bench/extra_mix.sh [DIM] [ROUNDS]
set -u
build=${BUILD:-build}
dim=${1:-262144}
rounds=${2:-21}
record=${RECORD-docs/BENCHMARKS.md}
bin="$build/bench/bench_mix"
[ -x "$bin" ] || { echo "extra_mix: $bin is missing; run make bench" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$bin" "$dim" "$rounds" >"$tmp/out"; then
    echo "extra_mix: bench_mix failed" >&2
    exit 1
fi
cat "$tmp/out"
[ -n "$record" ] || exit 0
if [ ! -f "$record" ]; then
    echo "extra_mix: not recorded: $record does not exist (run from the source tree, or RECORD=FILE)" >&2
    exit 0
fi
{
    echo "<!-- bench:mix begin -->"
    echo "Produced by \`BUILD=$build sh bench/extra_mix.sh $dim $rounds\` (run by \`make bench\`) on $(date -u +%Y-%m-%d), load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; do not edit by hand."
    echo ""
    grep '^|' "$tmp/out"
    echo "<!-- bench:mix end -->"
} >"$tmp/block"
# shellcheck source=scripts/record.sh
. scripts/record.sh
record_block "$record" "bench:mix" "$tmp/block" && echo "extra_mix: recorded in $record"
