#!/bin/sh
# Every agent trains (issue 19), with real agents on loopback, softmax model.
#
# 1. More agents than shards: 10 agents, 3 shards, r = 3 (9 replicas, at
#    most one per agent, so one agent holds nothing by placement). Once the
#    cluster has settled: 3 agents are primary for one shard each and train
#    it (train=primary), the 6 other holders train the replica they hold
#    (train=replicas, train_reason=no_primary), the agent with nothing
#    fetched a guest shard and trains it (train=guest); every agent's step
#    counter rises; /status says the same.
# 2. S = 64, N = 24, r = 3 (the numbers of the issue): once every agent
#    holds its assignment, each is primary for 2 or 3 shards (floor and
#    ceil of 64/24), the 24 counts add up to 64, and every agent's step
#    counter rises. The whole phase must finish within 90 s on this 2-core
#    machine (24 processes share it).
NAME=agent_primaries
. tests/integration/lib/agent.sh

# The 24 trainers keep both cores busy: use the default SWIM timing rather
# than the tests' short one, so that a slow scheduling round is not taken
# for a death.
SLOW="--set membership.probe_interval_ms=1000 --set membership.probe_timeout_ms=500"

# The lib's field() reads a whole log per value; 24 agents logging every
# 250 ms and a loaded machine make that (and the processes it spawns) the
# slowest part of the test. snapshot reads the tail of every log in one awk
# and prints one line per agent, read with the shell's own `read`:
#   I STEP PEERS STATE TRAIN TRAIN_REASON SHARDS_PRIMARY SHARDS_PENDING
snapshot() { # n
    k=1 files=""
    while [ $k -le "$1" ]; do
        files="$files $tmp/a$k.log"
        k=$((k + 1))
    done
    # shellcheck disable=SC2086
    tail -v -n 40 $files 2>/dev/null | awk '
        function s(x) { return x == "" ? "-" : x }
        /^==> / { f = $2; sub(/.*\/a/, "", f); sub(/\.log$/, "", f); next }
        /event=progress / { line[f] = $0 }
        END {
            for (i = 1; i <= '"$1"'; i++) {
                n = split(line[i], kv, " ")
                delete v
                for (k = 1; k <= n; k++) { e = index(kv[k], "="); if (e) v[substr(kv[k], 1, e - 1)] = substr(kv[k], e + 1) }
                printf "%d %d %s %s %s %s %d %d\n", i, v["step"], s(v["peers"]), s(v["state"]),
                       s(v["train"]), s(v["train_reason"]), v["shards_primary"], v["shards_pending"]
            }
        }'
}

start_all() { # n
    agent_start 1 --set model.spec=softmax --set shards.replication=3 $SLOW
    sleep 0.3
    k=2
    while [ $k -le "$1" ]; do
        agent_start $k --set model.spec=softmax --set shards.replication=3 $SLOW
        k=$((k + 1))
    done
}
stop_all() {
    for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
    pids=""
}
# Every agent's step counter now, then again after $2 s: all must have risen.
steps_rise() { # n seconds
    snapshot "$1" >"$tmp/steps0"
    sleep "$2"
    snapshot "$1" >"$tmp/steps1"
    while read -r i step0 _; do
        agent_alive "$i" || fail "agent $i exited"
        step1=$(sed -n "s/^$i \([0-9]*\) .*/\1/p" "$tmp/steps1")
        [ "$step1" -gt "$step0" ] || fail "agent $i did not train: step $step0 -> $step1 in $2 s"
    done <"$tmp/steps0"
}
status_field() { # i key: from /status, through murmur status --json
    "$bin" status --json "127.0.0.1:$((base + 100 + $1))" 2>/dev/null |
        tr ',{}' '\n\n\n' | sed -n "s/^\"$2\":\"\{0,1\}\([^\"]*\)\"\{0,1\}$/\1/p"
}

# ---- 1. more agents than shards -------------------------------------------
cluster_subset 18800 10 3
t0=$(date +%s)
start_all 10
settled_small() {
    p=0 r=0 g=0
    snapshot 10 >"$tmp/snap"
    while read -r i step peers state train reason prim pending; do
        agent_alive "$i" || fail "agent $i exited"
        [ "$peers" = 9 ] && [ "$state" = training ] && [ "$pending" = 0 ] || return 1
        case "$train" in
        primary) p=$((p + 1)) ;;
        replicas) [ "$reason" = no_primary ] || return 1; r=$((r + 1)) ;;
        guest) g=$((g + 1)) ;;
        *) return 1 ;;
        esac
        [ "$prim" -le 1 ] || fail "agent $i primary for $prim of 3 shards (N = 10)"
    done <"$tmp/snap"
    [ $p -eq 3 ] && [ $r -eq 6 ] && [ $g -eq 1 ]
}
wait_for 60 settled_small || fail "S = 3, N = 10: not settled within 60 s (want 3 primary, 6 replicas, 1 guest)"
steps_rise 10 2
snapshot 10 >"$tmp/snap"
while read -r i step peers state train reason prim pending; do
    src=$(status_field "$i" train_source)
    [ "$src" = "$train" ] || fail "agent $i: /status train_source $src, log $train"
    [ "$(status_field "$i" state)" = training ] || fail "agent $i: /status state $(status_field "$i" state)"
done <"$tmp/snap"
echo "$NAME: S = 3, N = 10 ok in $(($(date +%s) - t0)) s: 3 train their primary, 6 a replica (no_primary), 1 a guest shard; every step counter rose"
stop_all

# ---- 2. S = 64, N = 24 -------------------------------------------------------
rm -rf "$tmp"/a* "$tmp"/all "$tmp"/net.key "$tmp"/catalog
cluster_subset 19000 24 64
t0=$(date +%s)
start_all 24
settled_big() {
    sum=0
    snapshot 24 >"$tmp/snap"
    while read -r i step peers state train reason prim pending; do
        agent_alive "$i" || fail "agent $i exited"
        [ "$peers" = 23 ] && [ "$pending" = 0 ] && [ "$train" = primary ] || return 1
        sum=$((sum + prim))
    done <"$tmp/snap"
    [ $sum -eq 64 ]
}
wait_for 80 settled_big || fail "S = 64, N = 24: not settled within 80 s"
t_settled=$(($(date +%s) - t0))
lo=3 hi=0
while read -r i step peers state train reason c pending; do # the settled snapshot
    [ "$c" -ge 2 ] && [ "$c" -le 3 ] || fail "agent $i primary for $c shards, bounds 2..3"
    [ "$c" -lt $lo ] && lo=$c
    [ "$c" -gt $hi ] && hi=$c
done <"$tmp/snap"
steps_rise 24 3
elapsed=$(($(date +%s) - t0))
[ $elapsed -lt 90 ] || fail "S = 64, N = 24 took $elapsed s (limit 90 s)"
fallback=$(grep -l 'event=shards_assigned .* train=replicas' "$tmp"/a*.log | wc -l)
echo "$NAME: S = 64, N = 24 ok: settled in $t_settled s, primaries per agent $lo..$hi (sum 64), every step counter rose; $fallback agents trained on replicas while their primaries were fetched; $elapsed s"
stop_all
