#!/bin/sh
# murmur launch on this host: three agents form one cluster and train
# (murmur status --cluster lists them from their own /status); a
# --fault kill and restart; --duration stops them gracefully (final
# checkpoints); Ctrl-C (SIGINT to the launcher) makes every agent leave;
# a second launch on the same directory reuses the keys; an agent that
# fails makes the launcher exit with its status; nothing is left running.
set -eu
build=${BUILD:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "launch_local: $bin not built" >&2; exit 1; }
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
tmp=$(mktemp -d)
lpid=""
cleanup() {
    rc=$?
    [ -z "$lpid" ] || kill -9 "$lpid" 2>/dev/null || true
    # agents of this test still running (their command line names $tmp)
    for p in $(ps -eo pid=,args= | awk -v d="$tmp/" '$2 ~ /murmur$/ && $3 == "agent" && index($0, d) { print $1 }'); do
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
    echo "launch_local: FAIL $*" >&2
    for f in "$tmp"/c*/a*.log; do
        [ -f "$f" ] && { echo "--- $f" >&2; tail -n 5 "$f" >&2; }
    done
    exit 1
}
left_running() { ps -eo args= | awk -v d="$tmp/" '$1 ~ /murmur$/ && $2 == "agent" && index($0, d) { n++ } END { print n + 0 }'; }
# fast membership and small models: the test is about the launcher
common="--set model.spec=mlp:32 --set model.eval_samples=500 --set model.eval_every_steps=200
        --set membership.probe_interval_ms=200 --set membership.probe_timeout_ms=100
        --set log.progress_interval_ms=500 --set checkpoint.every_steps=500"
"$bin" shard --shards 9 --out "$tmp/split" >/dev/null

# 1. duration, a fault, the summary
# shellcheck disable=SC2086
"$bin" launch -n 3 --dir "$tmp/c1" --shard-dir "$tmp/split" --port 23400 --interval 4 \
    --duration 22 --fault 9:kill:3 --fault 13:restart:3 $common >"$tmp/out1" 2>&1 ||
    { cat "$tmp/out1"; fail "launch exited $?"; }
grep -q '^launch: t=9s --fault SIGKILL agent 3' "$tmp/out1" || fail "no kill line"
grep -q '^launch: t=13s --fault restart agent 3' "$tmp/out1" || fail "no restart line"
grep -q 'a1 *127.0.0.1:23400 *training' "$tmp/out1" || { cat "$tmp/out1"; fail "no progress table"; }
grep -q '^launch: exit status 0' "$tmp/out1" || fail "exit status line"
for i in 1 2 3; do
    grep -q 'event=checkpoint_written .*reason=shutdown' "$tmp/c1/a$i.log" ||
        fail "agent $i left without its final checkpoint"
    steps=$(awk -v a="a$i" '$1 == a { print $2 }' "$tmp/out1" | tail -n 1)
    [ "${steps:-0}" -gt 100 ] || fail "agent $i trained ${steps:-0} steps"
done
# every shard started on r = 3 agents: each agent held all 9
[ "$(ls "$tmp"/c1/a2/shards/*.msh 2>/dev/null | wc -l)" -ge 9 ] || fail "agent 2 lacks shards"
# one cluster: agent 3 (restarted) saw two peers
grep -q 'event=progress .* peers=2 ' "$tmp/c1/a3.log" || fail "agent 3 never saw both peers"
[ "$(left_running)" -eq 0 ] || fail "agents left running"
pub=$(cat "$tmp/c1/a2/murmur.pub")

# 2. Ctrl-C: the launcher forwards it as a graceful leave
# shellcheck disable=SC2086
"$bin" launch -n 3 --dir "$tmp/c1" --shard-dir "$tmp/split" --port 23400 --interval 0 \
    $common >"$tmp/out2" 2>&1 &
lpid=$!
# wait for a few progress lines of the second run of every agent
limit=$(($(date +%s) + 40))
before=$(cat "$tmp"/c1/a*.log | grep -c 'event=progress step=[1-9]')
until [ "$(cat "$tmp"/c1/a*.log | grep -c 'event=progress step=[1-9]')" -ge $((before + 9)) ]; do
    [ "$(date +%s)" -lt "$limit" ] || fail "the second launch does not train"
    sleep 0.5
done
# murmur status --cluster: one row per member, from their own /status
"$bin" status --cluster 127.0.0.1:23403 >"$tmp/cluster" || { cat "$tmp/cluster"; fail "status --cluster"; }
[ "$(grep -c '^[0-9a-f]\{16\} 127.0.0.1:2340[0-2] *alive *training *[0-9]' "$tmp/cluster")" -eq 3 ] ||
    { cat "$tmp/cluster"; fail "status --cluster does not list the 3 agents training"; }
kill -INT "$lpid"
set +e
wait "$lpid"
rc=$?
set -e
lpid=""
[ "$rc" -eq 0 ] || { cat "$tmp/out2"; fail "launch after Ctrl-C exited $rc"; }
grep -q 'stopping: every agent leaves' "$tmp/out2" || fail "no stop line"
for i in 1 2 3; do
    [ "$(grep -c 'reason=shutdown' "$tmp/c1/a$i.log")" -ge 2 ] || fail "agent $i did not leave gracefully"
done
[ "$(cat "$tmp/c1/a2/murmur.pub")" = "$pub" ] || fail "a second launch changed agent 2's key"
[ "$(left_running)" -eq 0 ] || fail "agents left running after Ctrl-C"

# 3. the worst agent's status: agents that cannot start exit 2
set +e
"$bin" launch -n 2 --dir "$tmp/c3" --shard-dir "$tmp/split" --port 23400 --interval 0 \
    --set model.dataset=/nonexistent/data.csv >"$tmp/out3" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { cat "$tmp/out3"; fail "launch with failing agents exited $rc, not 2"; }
grep -q "cannot read '/nonexistent/data.csv'" "$tmp/c3/a1.log" || fail "agent error not in its log"

# 4. usage errors
set +e
"$bin" launch -n 2 --set seeds.seed=1.2.3.4:5 >"$tmp/out4" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "chooses seeds.seed itself" "$tmp/out4" || fail "an owned setting was accepted"
echo "launch_local: ok"
