# Shared helpers of the fault tests (sourced, not a test): agents of
# lib/agent.sh run one per network namespace of lib/netns.sh, agent I at
# 10.77.0.I:7000 (metrics on :7100), joining through agent 1 (and 2). A
# test sets NAME, sources this file, calls fault_init N SHARDS and starts
# agents with fault_start I [FLAGS]; field/fnum/wait_for/fail/agent_alive of
# lib/agent.sh work as usual. Without root the test is skipped (one line).
#
# lib/agent.sh fails a test whose agent logs hold an error-level line; a
# fault test that provokes one asserts it, then consumes it with
# fault_consume I PATTERN (the line is removed from the log), so only
# unexpected errors fail the test.
. tests/integration/lib/agent.sh
NETNS_CHAIN=cleanup_agents
. tests/integration/lib/netns.sh

FAULT_PORT=7000
FAULT_METRICS=7100

# fault_init N SHARDS: N namespaces, keys, a shard set held by agent 1.
fault_init() {
    netns_init "$1"
    cluster_init 0 "$1" "$2"
}

# fault_start I [FLAGS...]: agent I in namespace I (in the background).
fault_start() {
    i=$1
    shift
    fault_start_in "$i" "$i" "$@"
}

# fault_start_in NS I [FLAGS...]: agent I in namespace NS, a second agent on
# that host when I != NS (port 7000 + I - NS, metrics 7100 + I - NS).
fault_start_in() {
    ns=$1 i=$2
    agent=$2 # netns_spawn sets i
    shift 2
    seeds=""
    [ "$i" -eq 1 ] || seeds="--seed 10.77.0.1:$FAULT_PORT"
    [ "$i" -le 2 ] || seeds="$seeds --seed 10.77.0.2:$FAULT_PORT"
    n0=$(cat "$tmp/a$i.log" 2>/dev/null | wc -l)
    # shellcheck disable=SC2086
    netns_spawn "$ns" "$tmp/a$i.log" "$bin" agent --data-dir "$tmp/a$i" \
        --listen "10.77.0.$ns:$((FAULT_PORT + i - ns))" \
        --metrics "10.77.0.$ns:$((FAULT_METRICS + i - ns))" \
        --network-key-file "$tmp/net.key" $seeds \
        --set model.spec=mlp:64 --set model.eval_every_steps=100 --set model.eval_samples=1000 \
        --set membership.probe_interval_ms=$PROBE_MS \
        --set membership.probe_timeout_ms=$PROBE_TIMEOUT_MS \
        --set membership.suspicion_mult=$SUSPICION_MULT \
        --set log.progress_interval_ms=250 --set shards.replication=2 "$@"
    eval "pid$agent=$netns_pid"
    # The seed listens before the others start: a joiner that dials it
    # first is refused (nothing listens yet), backs off, and may pair up
    # with the other joiners without it for a long time (CI, fault_pause
    # under AddressSanitizer: agent 1, slow to load its checkpoint, stayed
    # alone for 40 s while 2 and 3 mixed).
    if [ "$i" -eq 1 ]; then
        started() { sed -n "$((n0 + 1)),\$p" "$tmp/a1.log" | grep -q 'event=agent_started'; }
        wait_for 30 started || fail "agent 1 did not start listening in 30 s"
    fi
}

# fault_wait_exit I SECONDS: wait for agent I to exit; its status in $fault_rc
# (124 if it was still running).
fault_wait_exit() {
    p=$(agent_pid "$1")
    if wait_for "$2" sh -c "! kill -0 $p 2>/dev/null"; then
        fault_rc=0
        wait "$p" || fault_rc=$?
        netns_forget "$p"
    else
        fault_rc=124
    fi
}

# The body of agent I's /metrics (empty if unreachable).
fault_metrics() {
    netns_exec "$1" bash -c "exec 3<>/dev/tcp/10.77.0.$1/$FAULT_METRICS; printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3; cat <&3" 2>/dev/null
}

# Value of one series of agent I's /metrics ("NAME" or 'NAME{label="v"}'); 0 if absent.
fault_metric() {
    fault_metrics "$1" | awk -v k="$2" '$1 == k { v = $2 } END { print (v == "" ? 0 : v) }'
}

# Progress lines of agent I after the line number FROM: "KEY" values.
fault_values() { # i from key
    sed -n "$(($2 + 1)),\$p" "$tmp/a$1.log" | sed -n "s/.* event=progress .* $3=\([^ ]*\).*/\1/p"
}

fault_lines() { wc -l <"$tmp/a$1.log"; }

# Remove the error lines matching PATTERN from agent I's log (after the test
# asserted them), so the final check sees only unexpected errors.
fault_consume() {
    sed -i "/level=error.*$2/d" "$tmp/a$1.log"
}
