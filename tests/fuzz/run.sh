#!/bin/sh
# Run the libFuzzer targets one after the other (docs/FUZZING.md).
#   tests/fuzz/run.sh FUZZ_BUILD SECONDS WORK_DIR [name1,name2,...]
# Each target FUZZ_BUILD/fuzz_NAME runs for SECONDS on WORK_DIR/fuzz_NAME
# (new inputs are written there) plus its committed seeds
# tests/fuzz/corpus/fuzz_NAME (read only), so every committed seed and
# regression input is replayed first. One line per target: executions,
# libFuzzer's final coverage figures (cov = edges, ft = features) and the
# corpus size; on a crash, the end of the log and the saved input
# (FUZZ_BUILD/artifacts/), and the exit status is 1.
# FUZZ_NICE=N runs the targets under nice -n N.
set -u
build=$1
secs=$2
work=$3
only=${4:-}
status=0
mkdir -p "$build/artifacts" "$work"
for src in tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    case ",$only," in ,, | *",$name,"*) ;; *) continue ;; esac
    bin=$build/$name
    if [ ! -x "$bin" ]; then
        echo "FAIL $name: $bin not built"
        status=1
        continue
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
    if [ "$rc" -ne 0 ]; then
        tail -n 40 "$log"
        echo "FAIL $name: exit $rc after ${took}s; input saved as $(ls -t "$build"/artifacts/"$name"-* 2>/dev/null | head -n 1)"
        status=1
    else
        echo "ok   $name: ${execs:-?} execs in ${took}s, cov ${cov:-?} ft ${ft:-?}, corpus ${corp:-?}"
    fi
done
exit $status
