#!/bin/sh
# Two agents with one key (issue 13 item 9): agents 1-3 run; a fourth is
# started on another host with agent 3's key, then a fifth with that key on
# agent 3's own host (same IP, another port), then a sixth with agent 1's
# key on agent 1's host (the seed, which the others dialed). Each newcomer
# must be refused
# with a clear error and exit non-zero; the incumbent (agent 3) stays and
# keeps mixing; the others' views settle (no flapping epochs). Before
# detection both were accepted and the view flapped; before the by-address
# answers (docs/MEMBERSHIP.md, "Duplicate identity") the same-host newcomer
# ran on unrefused: every transport saw both from one IP and handed the id's
# frames to the incumbent. (The incumbent reports the duplicate too when the
# newcomer's claim reaches it before the newcomer yields; the newcomer often
# yields first.)
NAME=fault_duplicate
. tests/integration/lib/fault.sh

fault_init 4 8
fault_start 1
fault_start 2
fault_start 3
settled() {
    [ "$(fnum 1 peers)" -eq 2 ] && [ "$(fnum 3 peers)" -eq 2 ] && [ "$(fnum 3 mixing_rounds)" -ge 20 ]
}
wait_for 40 settled || fail "agents 1-3 did not settle in 40 s"
# The incumbent must be past its newcomer window (30 probe periods).
sleep $((30 * PROBE_MS / 1000 + 2))

# twin J NS I WHERE: start agent I with agent J's key in namespace NS;
# assert it is refused and exits, and that the cluster settles on J.
twin() {
    j=$1 ns=$2 k=$3 where=$4
    mkdir -p "$tmp/a$k/shards"
    cp "$tmp/all/catalog" "$tmp/a$k/shards/"
    cp "$tmp/a$j/murmur.key" "$tmp/a$j/murmur.pub" "$tmp/a$k/"
    from=$(fault_lines "$j")
    fault_start_in "$ns" "$k"
    fault_wait_exit "$k" 30
    [ "$fault_rc" -ne 124 ] || fail "the duplicate $where still runs after 30 s"
    [ "$fault_rc" -ne 0 ] || fail "the duplicate $where exited with status 0"
    [ "$(grep -c 'level=error' "$tmp/a$k.log")" -eq 1 ] ||
        fail "agent $k: want one error line, got: $(grep 'level=error' "$tmp/a$k.log")"
    grep 'level=error' "$tmp/a$k.log" | grep 'event=refused' | grep 'cause=duplicate_id' |
        grep -q "addr=tcp://10.77.0.$j:$FAULT_PORT" || fail "agent $k: no clear refusal naming the incumbent"
    agent_alive "$j" || fail "the incumbent died ($where)"
    mine="tcp://10.77.0.$ns:$((FAULT_PORT + k - ns))"
    if sed -n "$((from + 1)),\$p" "$tmp/a$j.log" | grep 'level=error' | grep -q 'event=duplicate_identity'; then
        sed -n "$((from + 1)),\$p" "$tmp/a$j.log" | grep 'event=duplicate_identity' |
            grep -q "addr=$mine" || fail "agent $j reported the duplicate $where at the wrong address"
        reported="the incumbent reported it"
    else
        reported="no new duplicate_identity line from the incumbent"
    fi
    # Settled: the incumbent stays in every view, epochs stand still, mixing goes on.
    back() { [ "$(fnum 1 peers)" -eq 2 ] && [ "$(fnum 2 peers)" -eq 2 ] && [ "$(fnum 3 peers)" -eq 2 ]; }
    wait_for 20 back || fail "views did not settle on 3 members: $(fnum 1 peers) $(fnum 2 peers) $(fnum 3 peers)"
    sleep 2
    e1=$(fnum 1 epoch)
    e2=$(fnum 2 epoch)
    rj=$(fnum "$j" mixing_rounds)
    sleep 3
    [ "$(fnum 1 epoch)" -eq "$e1" ] || fail "agent 1's view still changes (epoch $e1 -> $(fnum 1 epoch))"
    [ "$(fnum 2 epoch)" -eq "$e2" ] || fail "agent 2's view still changes (epoch $e2 -> $(fnum 2 epoch))"
    [ "$(fnum "$j" mixing_rounds)" -gt "$rj" ] || fail "the incumbent stopped mixing ($where)"
    echo "$NAME: ok: $where: the duplicate exited $fault_rc ($reported), the incumbent stayed, agent 1 epoch steady at $e1"
}

twin 3 4 4 "on another host"
twin 3 3 5 "on the incumbent's host"
twin 1 1 6 "on the seed's host"
# Only now: fault_consume rewrites a log, and a running agent goes on
# writing to the file it opened.
fault_consume 1 'event=duplicate_identity'
fault_consume 3 'event=duplicate_identity'
for k in 4 5 6; do fault_consume "$k" 'event=refused'; done
