#!/bin/sh
# make soak: `murmur sim --soak SEEDS` (sim/soak.h: random faults, the
# safety checks after every round, sample and fault, the liveness checks
# after healing), then its figures recorded in RECORD (default
# docs/BENCHMARKS.md) between the lines <!-- soak begin --> and
# <!-- soak end -->: the command, the date, the machine's cores and load,
# and the soak's closing line (seeds, passed, failed, crashes, shards lost,
# events, wall time). RECORD= (empty) records nothing. Exit status: the
# soak's (1 if any seed failed; each failure prints the command that
# reproduces it alone: keep it in tests/integration/sim_soak.sh).
#   sh sim/soak.sh BUILD_DIR [SEEDS [FIRST_SEED]]
set -u
build=${1:-build}
seeds=${2:-10000}
first=${3:-1}
record=${RECORD-docs/BENCHMARKS.md}
bin="$build/murmur"
[ -x "$bin" ] || { echo "soak: $bin not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmd="$bin sim --soak $seeds --soak-seed $first"
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
load0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
$cmd | tee "$tmp/out"
rc=$(tail -n 1 "$tmp/out" | sed -n 's/^soak: [0-9]* seeds, [0-9]* passed, \([0-9]*\) failed;.*/\1/p')
[ -n "$rc" ] || { echo "soak: no summary line (the run did not finish)" >&2; exit 1; }
[ -n "$record" ] || exit "$([ "$rc" -eq 0 ] && echo 0 || echo 1)"
if [ ! -f "$record" ]; then
    echo "soak: not recorded: $record does not exist (run from the source tree, or RECORD=FILE)" >&2
else
    {
        echo "Recorded by \`make soak\` (\`sh sim/soak.sh $build $seeds $first\`), $(date -u +%Y-%m-%d),"
        echo "commit $commit, $(nproc 2>/dev/null || echo "?") cores,"
        echo "load average $load0 at the start and $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?") at the end:"
        echo ""
        echo '```'
        echo "\$ $cmd"
        grep '^soak: seed .* FAILED' "$tmp/out" | head -n 20
        tail -n 1 "$tmp/out"
        echo '```'
        echo ""
    } >"$tmp/section"
    { echo "<!-- soak begin -->"; echo ""; cat "$tmp/section"; echo "<!-- soak end -->"; } >"$tmp/block"
    # shellcheck source=scripts/record.sh
    . scripts/record.sh
    record_block "$record" "soak" "$tmp/block" && echo "soak: recorded in $record"
fi
[ "$rc" -eq 0 ]
