#!/bin/sh
# SIGSTOP/SIGCONT (issue 13, real-process fault tests), in gossip and in
# allreduce mode: three agents in three namespaces; agent 3 is stopped for
# 8 s (longer than failure detection). The other two must declare it dead
# within the detection bound, keep training (no step stall longer than the
# detection bound plus the allreduce step deadline) and keep mixing between
# themselves; after SIGCONT agent 3 refutes its death, every view is whole
# again, and agent 3 trains and mixes again.
NAME=fault_pause
. tests/integration/lib/fault.sh

fault_init 3 8
run_mode() { # algorithm
    mode=$1
    for i in 1 2 3; do fault_start "$i" --set mixing.algorithm="$mode"; done
    all() { for i in 1 2 3; do [ "$(fnum "$i" peers)" -eq "$1" ] || return 1; done; }
    mixing() { for i in 1 2 3; do [ "$(fnum "$i" mixing_rounds)" -ge 10 ] || return 1; done; }
    wait_for 40 all 2 || fail "$mode: agents did not see each other in 40 s"
    wait_for 40 mixing || fail "$mode: agents did not mix 10 rounds in 40 s"
    t0=$(now_ms)
    kill -STOP "$pid3"
    bound=$(detect_bound_ms 3)
    gone() { [ "$(fnum 1 peers)" -eq 1 ] && [ "$(fnum 2 peers)" -eq 1 ]; }
    wait_for $((bound / 1000 + 5)) gone || { kill -CONT "$pid3"; fail "$mode: the stopped agent was not declared dead"; }
    r1=$(fnum 1 mixing_rounds)
    sleep $(((8000 - ($(now_ms) - t0)) / 1000 + 1))
    kill -CONT "$pid3"
    [ "$(fnum 1 mixing_rounds)" -gt "$r1" ] || fail "$mode: agents 1 and 2 stopped mixing while agent 3 was stopped"
    stall=$(max_stall_ms 1 "$t0")
    stall_max=$((bound + 3000))
    [ "$stall" -le "$stall_max" ] || fail "$mode: agent 1 steps stood still ${stall} ms (limit ${stall_max} ms)"
    wait_for 30 all 2 || fail "$mode: views not whole 30 s after SIGCONT"
    s3=$(fnum 3 step)
    r3=$(fnum 3 mixing_rounds)
    back() { [ "$(fnum 3 step)" -gt "$s3" ] && [ "$(fnum 3 mixing_rounds)" -gt "$r3" ]; }
    wait_for 20 back || fail "$mode: agent 3 does not train and mix after SIGCONT"
    echo "$mode: longest step stall of agent 1 ${stall} ms (limit ${stall_max} ms)"
    for i in 1 2 3; do
        kill -TERM "$(agent_pid "$i")"
        wait "$(agent_pid "$i")" 2>/dev/null || true
        netns_forget "$(agent_pid "$i")"
        echo "--- $mode done" >>"$tmp/a$i.log"
    done
}
run_mode gossip >"$tmp/gossip.out" || exit 1
run_mode allreduce >"$tmp/allreduce.out" || exit 1
echo "$NAME: ok: $(cat "$tmp/gossip.out"); $(cat "$tmp/allreduce.out")"
