#!/bin/sh
# Where an agent's CPU goes while it trains and mixes: two `murmur agent`s
# (murmur launch -n 2, the MLP of bench/peers/tta.py, the agent's defaults),
# `perf record` of agent 1 for 12 s after a 10 s warm-up, the share of each
# thread (the training thread, the event loop that mixes, NNG's threads) and
# the top symbols of the first two; then the same with an exchange every step
# (mixing.interval_steps=1, the default before local SGD) for comparison.
# perf report lists threads by their share, busiest first.
# Both are written into docs/BENCHMARKS.md (generated sections
# <!-- bench-peers:profile-LABEL begin/end -->) with the commands.
#   BUILD=build sh bench/peers/agent_profile.sh [RECORD]
set -u
build=${BUILD:-build}
record=${1-docs/BENCHMARKS.md}
bin="$build/murmur"
[ -x "$bin" ] || { echo "agent_profile: $bin not built" >&2; exit 1; }
if ! command -v perf >/dev/null 2>&1; then
    echo "agent_profile: skipped: perf is not installed (apt-get install -y linux-perf)"
    exit 0
fi
tmp=$(mktemp -d)
lpid=""
cleanup() {
    [ -n "$lpid" ] && kill -INT "$lpid" 2>/dev/null && wait "$lpid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# profile LABEL [--set K=V ...]
profile() {
    label=$1
    shift
    dir="$tmp/$label"
    "$bin" launch -n 2 --dir "$dir" --set model.spec=mlp:256,128,100 "$@" --duration 40 -q \
        >"$tmp/$label.launch" 2>&1 &
    lpid=$!
    sleep 10
    apid=$(pgrep -f -- "--data-dir $dir/a1 " | head -n 1)
    if [ -z "$apid" ]; then
        echo "agent_profile: agent 1 of $label did not start" >&2
        return 1
    fi
    pcmd="perf record -F 999 -g -p PID -- sleep 12"
    perf record -q -F 999 -g -p "$apid" -o "$tmp/$label.data" -- sleep 12 >/dev/null 2>&1
    kill -INT "$lpid" 2>/dev/null
    wait "$lpid" 2>/dev/null
    lpid=""
    # per thread: "share tid:comm"
    perf report -i "$tmp/$label.data" --no-children --sort pid --stdio 2>/dev/null |
        grep -E '^ +[0-9.]+%' >"$tmp/$label.threads"
    # the training thread is named after the program and does the most
    # work; the event loop (mixing, membership, shards) is murmur-loop
    # (before it was named, the second thread called murmur)
    train_tid=$(awk '{ split($2, a, ":"); if (a[2] == "murmur") { print a[1]; exit } }' "$tmp/$label.threads")
    main_tid=$(awk '{ split($2, a, ":"); if (a[2] == "murmur-loop") { print a[1]; exit } }' "$tmp/$label.threads")
    [ -n "$main_tid" ] ||
        main_tid=$(awk '{ split($2, a, ":"); if (a[2] == "murmur" && ++n == 2) { print a[1]; exit } }' "$tmp/$label.threads")
    share() { awk -v t="$1" '{ split($2, a, ":"); if (a[1] == t) s += $1 } END { printf "%.1f", s }' "$tmp/$label.threads"; }
    nng=$(awk '{ split($2, a, ":"); if (a[2] ~ /^nng/) s += $1 } END { printf "%.1f", s }' "$tmp/$label.threads")
    ts=$(share "$train_tid")
    ls=$(share "$main_tid")
    echo "agent_profile $label: training thread ${ts}%, event loop ${ls}%, nng threads ${nng}%"
    top() {
        perf report -i "$tmp/$label.data" --no-children --tid "$1" --sort symbol --stdio 2>/dev/null |
            grep -E '^ +[0-9.]+%' | head -n 8 | awk '{ printf "%s `%s`; ", $1, $3 }'
    }
    tt=$(top "$train_tid")
    lt=$(top "$main_tid")
    echo "  training thread top: $tt"
    echo "  event loop top: $lt"
    if [ -n "$record" ]; then
        settings="the defaults"
        [ $# -gt 0 ] && settings="the defaults and \`$*\`"
        rows="$tmp/$label.rows"
        {
            echo "Two agents (\`murmur launch -n 2 --set model.spec=mlp:256,128,100 $*\`), $settings; \`$pcmd\` of agent 1 after 10 s, \`perf report --no-children --sort pid\` (samples per thread; shares of the whole process):"
            echo ""
            echo "| thread | share of samples | top symbols (share of the whole process) |"
            echo "|---|---:|---|"
            echo "| training | ${ts}% | ${tt} |"
            echo "| event loop (mixing, membership, shards) | ${ls}% | ${lt} |"
            echo "| NNG (I/O, sealing) | ${nng}% | |"
        } >"$rows"
        /usr/bin/python3 - "$record" "profile-$label" "BUILD=$build sh bench/peers/agent_profile.sh" "$rows" <<'PY'
import sys, time
path, key, cmd, rows = sys.argv[1:5]
begin, end = f"<!-- bench-peers:{key} begin -->", f"<!-- bench-peers:{key} end -->"
text = open(path).read()
body = (f"{begin}\nMeasured {time.strftime('%Y-%m-%d')} with `{cmd}` (2 cores, shared machine):\n\n"
        + open(rows).read().rstrip("\n") + f"\n{end}")
if begin in text and end in text:
    i, j = text.index(begin), text.index(end) + len(end)
    text = text[:i] + body + text[j:]
else:
    text = text.rstrip("\n") + "\n\n" + body + "\n"
open(path, "w").write(text)
PY
    fi
}
profile defaults || exit 1
profile every-step --set mixing.interval_steps=1 || exit 1
