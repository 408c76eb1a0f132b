#!/bin/sh
# Ring-allreduce with a member SIGKILLed in the middle of its rounds: no
# survivor hangs. The survivors' training never pauses longer than the
# allreduce step deadline, the round in flight is aborted (round_aborts
# rises), and once membership drops the dead member the survivors complete
# allreduce rounds again on the smaller ring.
NAME=agent_allreduce_kill
. tests/integration/lib/agent.sh
# A trainer that waited for the dead member would pause for a whole step
# deadline at least; one that does not pauses only as long as the host's
# scheduler makes it (up to 1.4 s seen under ThreadSanitizer on a loaded
# 2-core host, where a 1 s deadline failed the test at commits before and
# after a transport change). 3 s keeps the two apart.
DEADLINE_MS=3000

cluster_init 18800 3 12
for i in 1 2 3; do
    agent_start $i --mixing allreduce --set mixing.allreduce_step_deadline_ms=$DEADLINE_MS
    [ $i -eq 1 ] && sleep 0.5
done
ready() {
    for i in 1 2 3; do
        [ "$(field $i peers)" = 2 ] || return 1
        [ "$(field $i mixing_rounds)" -ge 50 ] || return 1
    done
}
# The bounds of the waits for progress (here and below) are generous: under
# ThreadSanitizer on a loaded 2-core CI host a round takes ~0.8 s, and 40 s
# for 50 rounds failed there (47 reached). They are upper limits, not the
# behaviour checked; a healthy run passes them in a few seconds.
wait_for 120 ready || fail "allreduce cluster not mixing within 120 s"
aborts0=$(($(fnum 1 round_aborts) + $(fnum 2 round_aborts)))
t_kill=$(now_ms)
kill -9 "$pid3"
wait "$pid3" 2>/dev/null || true
noticed() { [ "$(field 1 peers)" = 1 ] && [ "$(field 2 peers)" = 1 ]; }
wait_for 15 noticed || fail "survivors did not drop the dead member within 15 s"
r1=$(fnum 1 mixing_rounds) r2=$(fnum 2 mixing_rounds)
again() { [ "$(fnum 1 mixing_rounds)" -ge $((r1 + 20)) ] && [ "$(fnum 2 mixing_rounds)" -ge $((r2 + 20)) ]; }
wait_for 60 again || fail "no allreduce rounds on the 2-member ring: rounds $(fnum 1 mixing_rounds) (was $r1), $(fnum 2 mixing_rounds) (was $r2)"
aborts=$(($(fnum 1 round_aborts) + $(fnum 2 round_aborts)))
[ "$aborts" -gt "$aborts0" ] || fail "no round aborted ($aborts0 -> $aborts)"
for i in 1 2; do
    agent_alive $i || fail "agent $i exited"
    stall=$(max_stall_ms $i "$t_kill")
    [ "$stall" -le "$DEADLINE_MS" ] || fail "agent $i training paused ${stall} ms (deadline $DEADLINE_MS ms)"
done
echo "$NAME: ok: $((aborts - aborts0)) round(s) aborted, survivors at $(fnum 1 mixing_rounds) / $(fnum 2 mixing_rounds) rounds, longest training pause $(max_stall_ms 1 "$t_kill") / $(max_stall_ms 2 "$t_kill") ms"
