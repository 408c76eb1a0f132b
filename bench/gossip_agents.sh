#!/bin/sh
# Pairwise gossip's consensus contraction on real agents (issue 12 item 4):
# runs `build/bench/bench_gossip_agents N DIM 10 SEED` (N agents of the
# real runtime in one process on 127.0.0.1; method in
# tests/gossip_agents.h) for N = 4, 8, 16 and SEEDS seeds each, and records
# per N the variance factor per round over cluster rounds 2..10, as the
# ratio of the summed squared consensus distances over the seeds,
# (sum cd(10)^2 / sum cd(2)^2)^(1/8), beside the same figure for
# sequential random pairing (computed by the benchmark) and the largest
# drift of the mean, with the command, the date and the load average, in
# docs/BENCHMARKS.md between <!-- bench:gossip_agents begin --> and
# <!-- bench:gossip_agents end --> (appended when absent). RECORD= (empty)
# prints the table and writes nothing.
#   BUILD=build sh bench/gossip_agents.sh [SEEDS [DIM]]      (5 4096)
set -u
build=${BUILD:-build}
seeds=${1:-5}
dim=${2:-4096}
record=${RECORD-docs/BENCHMARKS.md}
b="$build/bench/bench_gossip_agents"
[ -x "$b" ] || { echo "gossip_agents: $b is missing; run make bench" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in 4 8 16; do
    s=1
    while [ "$s" -le "$seeds" ]; do
        "$b" "$n" "$dim" 10 "$s" 2>"$tmp/err" | tee -a "$tmp/out" | grep '^gossip_agents' ||
            { cat "$tmp/err" >&2; echo "gossip_agents: bench_gossip_agents $n failed" >&2; exit 1; }
        s=$((s + 1))
    done
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
    echo "<!-- bench:gossip_agents begin -->"
    echo ""
    echo "Produced by \`BUILD=$build sh bench/gossip_agents.sh $seeds $dim\` on $(date -u +%Y-%m-%d) at commit $commit, load average $load on $(nproc) cores; do not edit by hand. N agents of the real runtime (include/murmur.h) in one process on 127.0.0.1, pairwise gossip with random peers at 32 bits, mixing.robust = none, vectors of $dim values (a common model of N(0,1) values plus 0.1 N(0,1) per host) changed only by mixing; a cluster round = N rounds completed; $seeds seeds per N. Factor = (sum over seeds of cd(10)^2 / sum of cd(2)^2)^(1/8); sequential = the same for N members averaging with a uniform random peer one at a time (1/(2 sqrt e) = 0.303 for large N)."
    echo ""
    echo "| agents | variance factor per round (measured) | sequential random pairing | per seed | largest mean drift / initial spread | rounds aborted |"
    echo "|---:|---:|---:|---|---:|---:|"
    awk '/^cd / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            if (v["round"] == 2) lo = v["consensus_distance"]
            if (v["round"] == 10) hi = v["consensus_distance"] }
        /^gossip_agents / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            n = v["n"]; slo[n] += lo * lo; shi[n] += hi * hi; ref[n] = v["sequential"]
            per[n] = per[n] (per[n] == "" ? "" : ", ") v["variance_factor"]
            if (v["mean_drift"] + 0 > drift[n]) drift[n] = v["mean_drift"] + 0
            ab[n] += v["aborts"]; if (!(n in seen)) { seen[n] = 1; order[++m] = n } }
        END { for (j = 1; j <= m; j++) { n = order[j]
                printf "| %d | %.4f | %.4f | %s | %.2e | %d |\n", n, (shi[n] / slo[n]) ^ (1 / 8),
                    ref[n], per[n], drift[n], ab[n] } }' "$tmp/out"
    echo ""
    echo "<!-- bench:gossip_agents end -->"
} >"$tmp/table"
[ -n "$record" ] || { cat "$tmp/table"; exit 0; }
# shellcheck source=scripts/record.sh
. scripts/record.sh
record_block "$record" "bench:gossip_agents" "$tmp/table" || { echo "gossip_agents: cannot write $record" >&2; exit 1; }
echo "gossip_agents: recorded in $record"
