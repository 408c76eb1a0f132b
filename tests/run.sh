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
set -u
build=${1:-build}
only=${2:-}
passed=0
failed=0
skipped=0
timeout_s=${TEST_TIMEOUT_S:-900}
want() {
    [ -z "$only" ] && return 0
    case ",$only," in *",$1,"*) return 0 ;; esac
    return 1
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for bin in "$build"/tests/test_*; do
    [ -x "$bin" ] || continue
    case "$bin" in *.o|*.d) continue ;; esac
    name=$(basename "$bin")
    want "$name" || continue
    start=$(date +%s)
    CMOCKA_MESSAGE_OUTPUT=stdout timeout "$timeout_s" "$bin" >"$log" 2>&1
    rc=$?
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n1)
    p=${p:-0}
    f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "suite $name exited with status $rc" >>"$log"
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    secs=$(($(date +%s) - start))
    if [ "$f" -ne 0 ]; then
        cat "$log"
        echo "FAIL $name: $p passed, $f failed (${secs}s)"
    else
        echo "ok   $name: $p passed (${secs}s)"
    fi
done
for script in tests/integration/*.sh; do
    [ -f "$script" ] || continue
    name=$(basename "$script" .sh)
    want "$name" || continue
    start=$(date +%s)
    BUILD="$build" timeout "$timeout_s" sh "$script" >"$log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    if [ "$rc" -eq 0 ] && [ "$(wc -l <"$log")" -eq 1 ] &&
        grep -q '^\([A-Za-z0-9_.-]\{1,\}: \)\{0,1\}skipped: ' "$log"; then
        skipped=$((skipped + 1))
        # "skip NAME: why", whichever of the two forms the script printed
        echo "skip $name: $(sed 's/^\([A-Za-z0-9_.-]\{1,\}: \)\{0,1\}skipped: //; s/^'"$name"': //' "$log")"
    elif [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        echo "ok   $name (${secs}s)"
    else
        failed=$((failed + 1))
        tail -n 60 "$log"
        echo "FAIL $name: exit $rc (${secs}s)"
    fi
done
[ "$skipped" -eq 0 ] || echo "$skipped skipped (not counted as passed)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
