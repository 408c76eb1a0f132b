#!/bin/sh
# An agent serving shards from a slow disk keeps its event loop turning:
# agent 1 holds every shard, agents 2-4 join together and fetch their
# share from it (replication 2), and in agent 1 only an LD_PRELOAD shim
# (lib/slow_store.c) makes each pread() of a stored shard sleep
# SLOW_PREAD_MS (60 ms) once the joiners start, so every manifest and chunk
# it serves costs its loop that long. A loop pass takes frames for at most
# 50 ms before it runs its timers and writes its progress line, so while
# it serves: agent 1's progress lines (every 250 ms) are never more than
# 1 s apart, it logs no loop_stalled, and no joiner declares it dead;
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

command -v cc >/dev/null 2>&1 || { echo "$NAME: skipped: no C compiler (cc) for the store shim"; exit 0; }
cc -shared -fPIC -O2 -o "$tmp/slow_store.so" tests/integration/lib/slow_store.c -ldl ||
    fail "cannot build the store shim"
# ASan's runtime must come first in the list of libraries (agent_loop_stall.sh)
preload="$tmp/slow_store.so"
rt=$(ldd "$bin" 2>/dev/null | sed -n 's/^[[:space:]]*libasan\.so[^ ]* => \([^ ]*\) .*/\1/p' | head -n 1)
[ -z "$rt" ] || preload="$rt $preload"

SHARDS=24
DELAY_MS=60
GAP_MAX_MS=1000
base=$(pick_base 22600)
"$bin" keygen --network-key "$tmp/net.key" >/dev/null
"$bin" shard --shards 640 --out "$tmp/all" >/dev/null
{ grep '^#' "$tmp/all/catalog"; grep -v '^#' "$tmp/all/catalog" | head -n $SHARDS; } >"$tmp/catalog"
for i in 1 2 3 4; do
    mkdir -p "$tmp/a$i/shards"
    "$bin" keygen --out "$tmp/a$i" >/dev/null
    cp "$tmp/catalog" "$tmp/a$i/shards/catalog"
done
k=0
while [ $k -lt $SHARDS ]; do
    cp "$(printf '%s/all/shard-%03d-of-640.msh' "$tmp" $k)" "$tmp/a1/shards/"
    k=$((k + 1))
done

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
