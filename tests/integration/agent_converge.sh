#!/bin/sh
# Three real agents (processes, loopback, encrypted links) train together
# and converge, once mixing by gossip and once by ring-allreduce: within
# 60 s each, every agent has mixed at least 50 rounds with both peers, its
# test accuracy reached 0.82 and its consensus distance (distance of its
# model from the mixed one, as the agent reports it) fell below 0.1; the
# 12 shards held by agent 1 alone at the start end up on two holders each;
# agent 1's share of them is cut from the data it had decoded, not read
# again.
NAME=agent_converge
. tests/integration/lib/agent.sh

for mix in gossip allreduce; do
    pids=""
    rm -rf "$tmp"/a* "$tmp"/all "$tmp"/net.key
    cluster_init 18000 3 12
    agent_start 1 --mixing "$mix"
    # agent 1 trains the 12 shards alone before the others join (under
    # ThreadSanitizer a fixed 0.5 s was not enough: its first load was
    # already its share of three, and the reuse check below had nothing
    # to check)
    alone() { grep 'event=training_data' "$tmp/a1.log" 2>/dev/null | grep -q ' shards=12 '; }
    wait_for 30 alone || fail "$mix: agent 1 did not load its 12 shards in 30 s"
    agent_start 2 --mixing "$mix"
    agent_start 3 --mixing "$mix"
    converged() {
        for i in 1 2 3; do
            agent_alive $i || fail "$mix: agent $i exited"
            ge "$(field $i accuracy)" 0.82 || return 1
            lt "$(field $i consensus)" 0.1 || return 1
            [ "$(field $i peers)" = 2 ] || return 1
            [ "$(field $i mixing_rounds)" -ge 50 ] || return 1
        done
    }
    # an upper limit for slow hosts (ThreadSanitizer on a loaded CI host), not
    # a convergence-speed claim
    wait_for 120 converged || fail "$mix: no convergence in 120 s"
    held=0
    for i in 1 2 3; do held=$((held + $(field $i shards_held))); done
    [ "$held" -ge 24 ] || fail "$mix: $held shard copies held, want 2 x 12"
    # agent 1 trained all 12 shards alone, then its share: the share is
    # taken from the shards it had decoded, not read again
    grep 'event=training_data' "$tmp/a1.log" | grep -q ' reused=[1-9]' ||
        fail "$mix: agent 1 read its shards again when its share shrank: $(grep 'event=training_data' "$tmp/a1.log" | tr '\n' ' ')"
    rounds=$(fnum 2 mixing_rounds)
    echo "$NAME: $mix ok: accuracy $(field 1 accuracy) $(field 2 accuracy) $(field 3 accuracy), consensus $(field 2 consensus), $rounds mixing rounds, $held shard copies"
    for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
done
