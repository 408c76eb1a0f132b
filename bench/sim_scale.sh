#!/bin/sh
# The simulator's growth with the number of agents: runs
# `build/bench/bench_sim --scale MAX ROUNDS` (ROUNDS rounds of the consensus model,
# pairwise gossip with random peers, 10^3, 10^4, ... agents up to MAX) and
# records its lines as a table, with the growth of each figure from one
# size to the next, the command, the date and the load average, in
# docs/BENCHMARKS.md between the lines <!-- bench:sim_scale begin --> and
# <!-- bench:sim_scale end --> (appended when absent). RECORD= (empty)
# prints the table and writes nothing. ROUNDS other than 100 (a short
# probe of the largest sizes: setup and a few rounds) is recorded in its
# own block, bench:sim_scale_probe.
#   BUILD=build [ROUNDS=100] sh bench/sim_scale.sh [MAX]      (MAX = 1000000 by default)
set -u
build=${BUILD:-build}
max=${1:-1000000}
rounds=${ROUNDS:-100}
tag=sim_scale
[ "$rounds" = 100 ] || tag=sim_scale_probe
env=""
[ "$rounds" = 100 ] || env="ROUNDS=$rounds "
record=${RECORD-docs/BENCHMARKS.md}
b="$build/bench/bench_sim"
[ -x "$b" ] || { echo "sim_scale: $b is missing; run make bench" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Not through a pipe: its status would be tee's, and a killed or failed
# bench_sim would record the sizes it finished as if it were done.
"$b" --scale "$max" "$rounds" >"$tmp/out" || { cat "$tmp/out"; echo "sim_scale: bench_sim failed" >&2; exit 1; }
cat "$tmp/out"
load=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "<!-- bench:$tag begin -->"
    echo ""
    echo "Produced by \`BUILD=$build ${env}sh bench/sim_scale.sh $max\` ($rounds rounds) on $(date -u +%Y-%m-%d), load average $load on $(nproc) cores; do not edit by hand. CPU seconds are the process's (the wall time on a loaded machine is mostly waiting); growth = this row / the row above."
    echo ""
    echo "| agents | events | CPU s | wall s | events per CPU s | growth | heap bytes per agent | growth | peak RSS (MiB) | first round CPU s (setup incl.) | CPU s per later round | 100 rounds: first + 99 later, CPU s |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    awk '/^scale / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        eg = pe ? sprintf("x%.2f", v["events_per_cpu_s"] / pe) : "-"
        hg = ph ? sprintf("x%.2f", v["heap_per_agent"] / ph) : "-"
        printf "| %d | %d | %.2f | %.2f | %.0f | %s | %.0f | %s | %.0f | %.2f | %.3f | %.0f |\n", v["agents"], v["events"],
            v["cpu_s"], v["wall_s"], v["events_per_cpu_s"], eg, v["heap_per_agent"], hg, v["maxrss_kb"] / 1024,
            v["first_round_cpu_s"], v["round_cpu_s"], v["first_round_cpu_s"] + 99 * v["round_cpu_s"]
        pe = v["events_per_cpu_s"]; ph = v["heap_per_agent"] }' "$tmp/out"
    echo ""
    echo "<!-- bench:$tag end -->"
} >"$tmp/table"
[ -n "$record" ] || { cat "$tmp/table"; exit 0; }
# shellcheck source=scripts/record.sh
. scripts/record.sh
record_block "$record" "bench:$tag" "$tmp/table" || { echo "sim_scale: cannot write $record" >&2; exit 1; }
echo "sim_scale: recorded in $record"
