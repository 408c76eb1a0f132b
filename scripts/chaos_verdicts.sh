#!/bin/sh
# Rewrite the block of docs/CHAOS.md between <!-- chaos:verdicts begin -->
# and <!-- chaos:verdicts end --> with the two verdicts of one schedule:
# `murmur chaos` on four local agents and `murmur sim --schedule` on four
# simulated ones, as tests/integration/chaos.sh runs them (random schedule
# of seed 7, 2 minutes, 4 faults a minute; the test must pass). Prints the
# block and writes nothing with RECORD= (empty).
#   BUILD=build sh scripts/chaos_verdicts.sh
set -u
build=${BUILD:-build}
record=${RECORD-docs/CHAOS.md}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
CHAOS_OUT_DIR=$out BUILD=$build sh tests/integration/chaos.sh "$build" >"$out/test.log" 2>&1 || {
    echo "chaos_verdicts: tests/integration/chaos.sh failed:" >&2
    tail -n 30 "$out/test.log" >&2
    exit 1
}
load=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "<!-- chaos:verdicts begin -->"
    echo ""
    echo "Produced by \`BUILD=$build sh scripts/chaos_verdicts.sh\` on $(date -u +%Y-%m-%d), load average $load on $(nproc) cores; do not edit by hand. The schedule (\`murmur chaos --random 7 --duration 120 --rate 4\` on four members):"
    echo ""
    echo '```'
    sed '/^#/d' "$out/schedule"
    echo '```'
    echo ""
    echo "\`murmur chaos\` on four local agents (\`--replication 2 --settle 120\`):"
    echo ""
    echo '```'
    grep -E '^(fault |check |VERDICT)' "$out/chaos.out"
    echo '```'
    echo ""
    echo "\`murmur sim sim/examples/fashion-gossip.ini --schedule FILE --set model.kind=quadratic --set run.agents=4 --set run.duration_s=130 --set faults.crash_rate_per_s=0 --set shards.replication=2 --set membership.mode=swim\`:"
    echo ""
    echo '```'
    grep -E '^murmur sim: --schedule' "$out/sim.err" | sed 's|--schedule [^:]*:|--schedule FILE:|'
    grep -E '^(fault |check |VERDICT)' "$out/sim.out"
    echo '```'
    echo ""
    echo "<!-- chaos:verdicts end -->"
} >"$out/block"
[ -n "$record" ] || { cat "$out/block"; exit 0; }
begin="<!-- chaos:verdicts begin -->" end="<!-- chaos:verdicts end -->"
grep -qF "$begin" "$record" || { echo "chaos_verdicts: no '$begin' line in $record" >&2; exit 1; }
awk -v t="$out/block" -v b="$begin" -v e="$end" '
    $0 == b { while ((getline l < t) > 0) print l; skip = 1; next }
    $0 == e { skip = 0; next }
    !skip { print }' "$record" >"$out/new" && cat "$out/new" >"$record"
echo "chaos_verdicts: recorded in $record"
