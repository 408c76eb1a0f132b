#!/bin/sh
# murmur agent's start-up errors: a taken port, a missing network key, a
# missing or bad config file, a bad value: one clear line naming the
# problem and a non-zero exit, nothing left running; murmur status on an
# agent that is not there fails with exit 1.
NAME=agent_cli
. tests/integration/lib/agent.sh

cluster_init 20000 2 2
agent_start 1
wait_for 20 sh -c "grep -q 'event=progress step=[1-9]' '$tmp/a1.log'" || fail "agent 1 does not train"
expect() { # status pattern command...
    want=$1 pat=$2
    shift 2
    set +e
    "$@" >"$tmp/out" 2>&1
    rc=$?
    set -e
    [ $rc -eq "$want" ] || fail "exit $rc (want $want): $*"
    grep -q "$pat" "$tmp/out" || fail "no '$pat' in: $(cat "$tmp/out")"
}
expect 1 "is the port taken" "$bin" agent --data-dir "$tmp/a2" --listen "127.0.0.1:$((base + 1))" \
    --network-key-file "$tmp/net.key"
expect 2 "cannot read '/nonexistent/net.key'" "$bin" agent --data-dir "$tmp/a2" \
    --network-key-file /nonexistent/net.key
expect 2 "cannot open config file" "$bin" agent --config "$tmp/none.conf"
printf '[mixing]\nbits = 3\n' >"$tmp/bad.conf"
expect 2 "bad.conf:2: mixing.bits" "$bin" agent --config "$tmp/bad.conf"
expect 2 "unknown option 'mixing.colour'" "$bin" agent --set mixing.colour=red
expect 1 "" "$bin" status --timeout-ms 500 "127.0.0.1:$((base + 150))"
"$bin" status "127.0.0.1:$((base + 101))" >"$tmp/st" || fail "murmur status failed on a live agent"
grep -q '^step: [0-9]' "$tmp/st" || fail "status without step: $(cat "$tmp/st")"
agent_alive 1 || fail "agent 1 died"
echo "$NAME: ok"
