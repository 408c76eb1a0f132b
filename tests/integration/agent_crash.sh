#!/bin/sh
# SIGKILL one of three agents while they train: the survivors notice it
# (peers 2 -> 1) within the worst-case failure-detection time of SWIM with
# these settings, keep training with no pause in their steps longer than
# twice the failure-detection time they showed,
# and re-replicate the dead agent's shards (r = 2 over two survivors: each
# holds all 12). Restart it on its data directory: it rejoins (peers back to
# 2 everywhere), resumes at or after its last checkpoint, and catches up
# (its accuracy within 0.05 of agent 1's).
NAME=agent_crash
. tests/integration/lib/agent.sh

cluster_init 18400 3 12
for i in 1 2 3; do
    agent_start $i --set checkpoint.every_steps=200
    [ $i -eq 1 ] && sleep 0.5
done
ready() {
    for i in 1 2 3; do
        [ "$(field $i peers)" = 2 ] || return 1
        [ "$(field $i step)" -ge 600 ] || return 1
    done
}
wait_for 90 ready || fail "cluster not training with 3 members within 90 s"
ckpt=$(sed -n 's/.*event=checkpoint_written .* step=\([0-9]*\) .*/\1/p' "$tmp/a3.log" | tail -n 1)
[ -n "$ckpt" ] || fail "agent 3 wrote no checkpoint"

t_kill=$(now_ms)
kill -9 "$pid3"
wait "$pid3" 2>/dev/null || true
noticed() { [ "$(field 1 peers)" = 1 ] && [ "$(field 2 peers)" = 1 ]; }
wait_for 10 noticed || fail "survivors did not notice the crash within 10 s"
t_seen=$(now_ms)
detect=$((t_seen - t_kill))
bound=$(($(detect_bound_ms 3) + 250))
[ $detect -le $bound ] || fail "crash noticed after ${detect} ms (worst case $bound ms)"
rereplicated() { [ "$(fnum 1 shards_held)" = 12 ] && [ "$(fnum 2 shards_held)" = 12 ]; }
wait_for 20 rereplicated || fail "shards not re-replicated: held $(fnum 1 shards_held) + $(fnum 2 shards_held)"
sleep 2
for i in 1 2; do
    stall=$(max_stall_ms $i "$t_kill")
    [ "$stall" -le $((2 * detect)) ] ||
        fail "agent $i stood still ${stall} ms after the crash (limit $((2 * detect)) ms)"
    echo "$NAME: agent $i longest pause after the crash: ${stall} ms"
done

step_before=$(fnum 3 step)
echo "restart" >>"$tmp/a3.log"
agent_start 3 --set checkpoint.every_steps=200
rejoined() {
    for i in 1 2 3; do [ "$(field $i peers)" = 2 ] || return 1; done
    [ "$(field 3 state)" = training ] || return 1
}
wait_for 30 rejoined || fail "agent 3 did not rejoin within 30 s"
first=$(sed -n '/^restart$/,$p' "$tmp/a3.log" | sed -n 's/.* event=progress step=\([0-9]*\) .*/\1/p' | head -n 1)
[ "${first:-0}" -ge "$ckpt" ] || fail "agent 3 restarted at step ${first:-?}, its checkpoint was at $ckpt"
caught_up() {
    a1=$(field 1 accuracy) a3=$(field 3 accuracy)
    awk -v a="${a1:-0}" -v b="${a3:-0}" 'BEGIN { exit !(b + 0 == b && b >= a - 0.05 && b > 0.7) }'
}
wait_for 30 caught_up || fail "agent 3 at accuracy $(field 3 accuracy), agent 1 at $(field 1 accuracy)"
echo "$NAME: ok: crash noticed in ${detect} ms, shards re-replicated, agent 3 resumed at step ${first} (checkpoint ${ckpt}, killed near ${step_before}), accuracy $(field 3 accuracy) vs $(field 1 accuracy)"
