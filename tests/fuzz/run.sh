#!/bin/sh
# Run the libFuzzer targets (docs/FUZZING.md).
#   tests/fuzz/run.sh FUZZ_BUILD SECONDS WORK_DIR [name1,name2,...]
# Each target FUZZ_BUILD/fuzz_NAME runs for SECONDS on WORK_DIR/fuzz_NAME
# (new inputs are written there) plus its committed seeds
# tests/fuzz/corpus/fuzz_NAME (read only), so every committed seed and
# regression input is replayed first. One line per target, in name order:
# executions, libFuzzer's final coverage figures (cov = edges covered, of
# the edges instrumented in the binary; ft = features) and the corpus size;
# on a crash or a broken property, the end of the log and the saved input
# (FUZZ_BUILD/artifacts/), and the exit status is 1.
# FUZZ_JOBS=N runs N targets at a time (default 1); FUZZ_NICE=N runs them
# under nice -n N. The full log of a target is FUZZ_BUILD/fuzz_NAME.log.
set -u
build=$1
secs=$2
work=$3
only=${4:-}
mkdir -p "$build/artifacts" "$work" || exit 1

# One target: run it, write WORK_DIR/NAME.report, exit 1 on failure.
if [ "$only" = --one ]; then
    name=$5
    bin=$build/$name
    report=$work/$name.report
    rm -f "$report"
    if [ ! -x "$bin" ]; then
        echo "FAIL $name: $bin not built" >"$report"
        exit 1
    fi
    mkdir -p "$work/$name"
    seeds=tests/fuzz/corpus/$name
    [ -d "$seeds" ] || seeds=
    log=$build/$name.log
    start=$(date +%s)
    nice -n "${FUZZ_NICE:-0}" "$bin" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$build/artifacts/$name-" \
        "$work/$name" $seeds >"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
    cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
    edges=$(sed -n 's/.*Loaded 1 modules *(\([0-9]*\) inline 8-bit counters).*/\1/p' "$log" | head -n 1)
    if [ "$rc" -ne 0 ]; then
        {
            tail -n 40 "$log"
            echo "FAIL $name: exit $rc after ${took}s; input saved as $(ls -t "$build"/artifacts/"$name"-* 2>/dev/null | head -n 1)"
        } >"$report"
        exit 1
    fi
    echo "ok   $name: ${execs:-?} execs in ${took}s, cov ${cov:-?} of ${edges:-?} edges, ft ${ft:-?}, corpus ${corp:-?}" >"$report"
    exit 0
fi

names=""
for src in tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    case ",$only," in ,, | *",$name,"*) names="$names $name" ;; esac
done
status=0
# xargs runs up to FUZZ_JOBS targets at once; its status is non-zero if any failed
printf '%s\n' $names | xargs -P "${FUZZ_JOBS:-1}" -I '{}' sh "$0" "$build" "$secs" "$work" --one '{}' ||
    status=1
for name in $names; do
    cat "$work/$name.report" 2>/dev/null || {
        echo "FAIL $name: no report"
        status=1
    }
done
exit $status
