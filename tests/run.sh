#!/bin/sh
# Run every test suite and print one closing line: "N passed, N failed".
#   tests/run.sh BUILD_DIR [suite1,suite2,...]
# Suites: each cmocka binary $BUILD/tests/test_* (its own pass/fail counts) and
# each tests/integration/*.sh script (one test each; it gets BUILD and
# must exit 0). A suite that crashes or times out counts as one failure more.
# A script that cannot run here (e.g. network namespaces without root, or no
# python3) prints exactly one line and exits 0, the line starting with
# "skipped: " or with "NAME: skipped: " (NAME one word, as the scripts name
# themselves): it is listed as "skip" and counted as skipped, neither passed
# nor failed. Any other output with status 0 is a pass.
#
# PARALLEL_SUITES (cmocka) and PARALLEL_SCRIPTS (integration) run
# TEST_JOBS at a time (default 2), before the others: they open no socket,
# start no agent and hold no wall-clock bound (the simulator's and the
# models' suites, murmur sim / train / export as commands), so a second
# suite on the other core only makes them take longer. Every other suite
# runs alone: it starts real agents, sockets or timeouts that a neighbour
# would stretch. A suite not listed runs alone.
set -u
timeout_s=${TEST_TIMEOUT_S:-900}
# run.sh --cmocka-one DIR BIN: run one cmocka binary; its output goes to
# DIR/NAME, "STATUS SECONDS" to DIR/NAME.rc (the parallel lane's worker)
if [ "${1:-}" = "--cmocka-one" ]; then
    out="$2/$(basename "$3")"
    start=$(date +%s)
    CMOCKA_MESSAGE_OUTPUT=stdout timeout "$timeout_s" "$3" >"$out" 2>&1
    echo "$? $(($(date +%s) - start))" >"$out.rc"
    exit 0
fi
# run.sh --script-one DIR BUILD SCRIPT: the same for an integration script
if [ "${1:-}" = "--script-one" ]; then
    out="$2/$(basename "$4" .sh).script"
    start=$(date +%s)
    BUILD="$3" timeout "$timeout_s" sh "$4" >"$out" 2>&1
    echo "$? $(($(date +%s) - start))" >"$out.rc"
    exit 0
fi
PARALLEL_SUITES=" test_sim_primaries test_simrun test_swim_net test_shards test_mix test_simlink
test_sim_engine test_model_train test_model_cnn "
PARALLEL_SCRIPTS=" sim_soak sim_experiments experiments_subset export train_cli train_fashion
deploy_systemd sim_cli "
jobs=${TEST_JOBS:-2}
build=${1:-build}
only=${2:-}
passed=0
failed=0
skipped=0
want() {
    [ -z "$only" ] && return 0
    case ",$only," in *",$1,"*) return 0 ;; esac
    return 1
}
dir=$(mktemp -d)
log="$dir/integration.log"
trap 'rm -rf "$dir"' EXIT
# count and print the result of cmocka suite NAME from DIR/NAME{,.rc}
cmocka_report() { # name
    [ -f "$dir/$1.rc" ] || { echo "1 0" >"$dir/$1.rc" && echo "suite $1 left no status" >>"$dir/$1"; }
    read -r rc secs <"$dir/$1.rc"
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$dir/$1" | tail -n1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$dir/$1" | tail -n1)
    p=${p:-0}
    f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "suite $1 exited with status $rc" >>"$dir/$1"
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$f" -ne 0 ]; then
        cat "$dir/$1"
        echo "FAIL $1: $p passed, $f failed (${secs}s)"
    else
        echo "ok   $1: $p passed (${secs}s)"
    fi
}
par=""
ser=""
for bin in "$build"/tests/test_*; do
    [ -x "$bin" ] || continue
    case "$bin" in *.o|*.d) continue ;; esac
    name=$(basename "$bin")
    want "$name" || continue
    case "$PARALLEL_SUITES" in
    *[[:space:]]"$name"[[:space:]]*) par="$par $bin" ;;
    *) ser="$ser $bin" ;;
    esac
done
if [ -n "$par" ]; then
    printf '%s\n' $par | xargs -n 1 -P "$jobs" sh "$0" --cmocka-one "$dir"
    for bin in $par; do cmocka_report "$(basename "$bin")"; done
fi
for bin in $ser; do
    sh "$0" --cmocka-one "$dir" "$bin"
    cmocka_report "$(basename "$bin")"
done
# count and print the result of script NAME: RC SECS, its output in FILE
script_report() { # name rc secs file
    if [ "$2" -eq 0 ] && [ "$(wc -l <"$4")" -eq 1 ] &&
        grep -q '^\([A-Za-z0-9_.-]\{1,\}: \)\{0,1\}skipped: ' "$4"; then
        skipped=$((skipped + 1))
        # "skip NAME: why", whichever of the two forms the script printed
        echo "skip $1: $(sed 's/^\([A-Za-z0-9_.-]\{1,\}: \)\{0,1\}skipped: //; s/^'"$1"': //' "$4")"
    elif [ "$2" -eq 0 ]; then
        passed=$((passed + 1))
        echo "ok   $1 (${3}s)"
    else
        failed=$((failed + 1))
        tail -n 60 "$4"
        echo "FAIL $1: exit $2 (${3}s)"
    fi
}
par=""
ser=""
for script in tests/integration/*.sh; do
    [ -f "$script" ] || continue
    name=$(basename "$script" .sh)
    want "$name" || continue
    case "$PARALLEL_SCRIPTS" in
    *[[:space:]]"$name"[[:space:]]*) par="$par $script" ;;
    *) ser="$ser $script" ;;
    esac
done
if [ -n "$par" ]; then
    printf '%s\n' $par | xargs -n 1 -P "$jobs" sh "$0" --script-one "$dir" "$build"
    for script in $par; do
        name=$(basename "$script" .sh)
        out="$dir/$name.script"
        [ -f "$out.rc" ] || { echo "1 0" >"$out.rc" && echo "suite $name left no status" >>"$out"; }
        read -r rc secs <"$out.rc"
        script_report "$name" "$rc" "$secs" "$out"
    done
fi
for script in $ser; do
    name=$(basename "$script" .sh)
    start=$(date +%s)
    BUILD="$build" timeout "$timeout_s" sh "$script" >"$log" 2>&1
    rc=$?
    script_report "$name" "$rc" "$(($(date +%s) - start))" "$log"
done
[ "$skipped" -eq 0 ] || echo "$skipped skipped (not counted as passed)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
