#!/bin/sh
# The stalled-loop report (event=loop_stalled, docs/OPERATIONS.md, Logs) on
# real agents: agent 1 holds every shard, agent 2 joins and fetches them
# (replication 2 of 2 agents: it holds them all), and in agent 2 only an
# LD_PRELOAD shim (lib/slow_store.c) makes fsync() of a shard being
# committed (<id>.msh.part) sleep SLOW_FSYNC_MS (3 s), on the event loop's
# thread. Within 20 s agent 2's training thread logs one loop_stalled line:
# ms >= 2000, a documented phase, the loop thread's state letter first in
# thread=. Then the loop goes on: agent 2 logs progress lines again, holds
# every shard and the two agents see each other; agent 1 never logs
# loop_stalled. The shards are 3 of a 640-way split (74 KB each), so the
# transfers take no time and the test measures the stall, not the copy.
NAME=agent_loop_stall
. tests/integration/lib/agent.sh

store_shim

SHARDS=3
DELAY_MS=3000
cluster_subset 22400 2 $SHARDS
ids=$(grep -v '^#' "$tmp/catalog" | awk '{print $1}')

agent_start 1
trains() { grep -q 'event=progress step=[1-9]' "$tmp/a1.log" 2>/dev/null; }
wait_for 20 trains || fail "agent 1 does not train"
start=$(now_ms)
# the shim for agent 2 only (agent_start runs the binary in the background:
# the assignments reach that process and no other)
SLOW_FSYNC_MS=$DELAY_MS SLOW_STORE_LOG="$tmp/slow_store.log" LD_PRELOAD="$preload" agent_start 2
p1=$(agent_pid 1)
p2=$(agent_pid 2)
# (until the background shell has exec'd the agent, /proc shows the shell)
shimmed() {
    tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep -qx "LD_PRELOAD=$preload" &&
        grep -q '/slow_store\.so$' "/proc/$1/maps" 2>/dev/null
}
wait_for 5 shimmed "$p2" || fail "agent 2 (pid $p2) did not start with the shim loaded"
tr '\0' '\n' <"/proc/$p1/environ" | grep -q '^LD_PRELOAD=' && fail "agent 1 has LD_PRELOAD"
grep -q '/slow_store\.so$' "/proc/$p1/maps" && fail "agent 1 has the shim loaded"
delayed() { if [ -f "$tmp/slow_store.log" ]; then wc -l <"$tmp/slow_store.log" | tr -d ' '; else echo 0; fi; }

stalled() { grep -q 'event=loop_stalled' "$tmp/a2.log" 2>/dev/null; }
wait_for 20 stalled || fail "agent 2 logged no loop_stalled in 20 s (the shim delayed $(delayed) shard commits)"
took=$(($(now_ms) - start))
grep -q "path=.*\.msh\.part$" "$tmp/slow_store.log" || fail "the shim delayed no shard commit"
line=$(grep 'event=loop_stalled' "$tmp/a2.log" | head -n 1)
case "$line" in *'level=warn '*) ;; *) fail "loop_stalled is not a warn line: $line" ;; esac
ms=$(echo "$line" | sed -n 's/.* ms=\([0-9]*\) .*/\1/p')
phase=$(echo "$line" | sed -n 's/.* phase=\([a-z]*\) .*/\1/p')
thread=$(echo "$line" | sed -n 's/.* thread="\([^"]*\)".*/\1/p')
ge "$ms" 2000 || fail "loop_stalled ms=${ms:-none}, want >= 2000: $line"
case "$phase" in
recv | frame | flush | tick | view | mixing | status | cadence | progress | wait) ;;
*) fail "loop_stalled phase=${phase:-none} is not a documented phase: $line" ;;
esac
case "$thread" in
[RSDZTtXxKWPI]" "*) ;;
*) fail "loop_stalled thread=\"$thread\" does not start with a process state: $line" ;;
esac

# after the stall: progress lines again, every shard held, the agents in
# each other's view
n=$(grep -n 'event=loop_stalled' "$tmp/a2.log" | head -n 1 | cut -d: -f1)
after() { [ "$(sed -n "$((n + 1)),\$p" "$tmp/a2.log" | grep -c ' event=progress ')" -ge 4 ]; }
wait_for 20 after || fail "agent 2 logged no progress lines after the stall"
holds() {
    for c in $ids; do [ -f "$tmp/a2/shards/$c.msh" ] || return 1; done
    [ "$(fnum 2 shards_held)" -eq $SHARDS ]
}
wait_for 20 holds || fail "agent 2 holds $(fnum 2 shards_held) of $SHARDS shards after the stall"
for f in "$tmp"/a2/shards/*.part; do [ ! -e "$f" ] || fail "agent 2 left $(basename "$f") behind"; done
met() { [ "$(fnum 1 peers)" -eq 1 ] && [ "$(fnum 2 peers)" -eq 1 ]; }
wait_for 20 met || fail "the agents do not see each other after the stall (peers $(fnum 1 peers), $(fnum 2 peers))"
agent_alive 1 || fail "agent 1 exited"
agent_alive 2 || fail "agent 2 exited"
grep -q 'event=loop_stalled' "$tmp/a1.log" && fail "agent 1 (no shim) logged loop_stalled: $(grep 'event=loop_stalled' "$tmp/a1.log")"
echo "$NAME: ok: agent 2 logged loop_stalled ms=$ms phase=$phase thread=\"$thread\" ${took} ms after it started ($(delayed) delayed commits), then held all $SHARDS shards; agent 1 none"
