#!/bin/sh
# An agent serving shards from a slow disk keeps its event loop turning:
# agent 1 holds every shard, agents 2-4 join together and fetch their
# share from it (replication 2), and in agent 1 only an LD_PRELOAD shim
# (lib/slow_store.c) makes each pread() of a stored shard sleep
# SLOW_PREAD_MS (60 ms) once the joiners start, so every manifest and chunk
# it serves costs its loop that long. A loop pass takes frames for at most
# 50 ms before it runs its timers and writes its progress line, so while
# it serves: agent 1's progress lines (every 250 ms; 0.4 s apart at most
# here) are never more than 2 s apart (a margin for sanitizer builds on a
# loaded host), it logs no loop_stalled, and no joiner declares it dead;
# every shard ends up on two agents. Before the pass budget (bd408f7) a
# pass took up to 256 frames, each answered at once: its progress lines
# stopped for 7.6-8.6 s here. The shards are 24 of a 640-way split (74 KB,
# two chunks each). Membership runs at its default timing (a 500 ms probe
# timeout): at the tests' usual 100 ms, a loop that spends 60 ms on each
# frame it serves misses probes whatever the pass budget, and the joiners
# declare it dead and alive again by the dozen (the store's reads are on
# the loop's thread).
NAME=agent_serve_slow
. tests/integration/lib/agent.sh

store_shim

SHARDS=24
DELAY_MS=60
GAP_MAX_MS=2000
cluster_subset 22600 4 $SHARDS
# the shim for agent 1 only, its reads slowed from the moment $tmp/slow exists
SLOW_PREAD_MS=$DELAY_MS SLOW_PREAD_IF="$tmp/slow" SLOW_STORE_LOG="$tmp/slow_store.log" \
    LD_PRELOAD="$preload" agent_start 1 --set membership.probe_interval_ms=1000 \
    --set membership.probe_timeout_ms=500
trains() { grep -q 'event=progress step=[1-9]' "$tmp/a1.log" 2>/dev/null; }
wait_for 20 trains || fail "agent 1 does not train"
grep -q '/slow_store\.so$' "/proc/$(agent_pid 1)/maps" || fail "agent 1 does not have the shim loaded"
id1=$(sed -n 's/.* event=agent_started node=\([0-9a-f]*\) .*/\1/p' "$tmp/a1.log" | head -n 1)
touch "$tmp/slow"
start=$(now_ms)
for i in 2 3 4; do
    agent_start $i --set membership.probe_interval_ms=1000 --set membership.probe_timeout_ms=500
done
placed() {
    held=0
    for i in 1 2 3 4; do
        [ "$(fnum $i peers)" -eq 3 ] || return 1
        held=$((held + $(fnum $i shards_held)))
    done
    [ $held -eq $((2 * SHARDS)) ]
}
wait_for 90 placed || fail "after 90 s: shard copies held $(for i in 1 2 3 4; do printf '%s ' "$(fnum $i shards_held)"; done)(want $((2 * SHARDS)) in all), peers $(for i in 1 2 3 4; do printf '%s ' "$(fnum $i peers)"; done)"
took=$(($(now_ms) - start))
reads=$(grep -c '^slow_pread ' "$tmp/slow_store.log" 2>/dev/null || true)
[ "${reads:-0}" -ge "$SHARDS" ] || fail "the shim delayed ${reads:-0} reads of agent 1 (want >= $SHARDS): the disk was not slow"
gap=$(max_progress_gap_ms 1 "$start")
[ "$gap" -le $GAP_MAX_MS ] || fail "agent 1's progress lines stopped for $gap ms while it served $reads slow reads (want <= $GAP_MAX_MS)"
grep -q 'event=loop_stalled' "$tmp/a1.log" && fail "agent 1 logged loop_stalled: $(grep 'event=loop_stalled' "$tmp/a1.log")"
for i in 2 3 4; do
    if grep -q "event=peer_left peer=$id1 " "$tmp/a$i.log"; then
        fail "agent $i declared agent 1 dead while it served: $(grep "event=peer_left peer=$id1 " "$tmp/a$i.log" | head -n 1)"
    fi
done
echo "$NAME: ok: $SHARDS shards placed on 2 of 4 agents in $took ms, agent 1 served from $reads reads of $DELAY_MS ms each, its progress lines at most $gap ms apart"
