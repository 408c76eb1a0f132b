#!/bin/sh
# murmur fault against two live agents (issue 20): the [faults] section is
# refused without faults.enable; a key outside faults.admin_keys_file is
# refused and counted; the admin's partition takes the peer out of the
# view and heal brings it back; pause stops the trainer's steps and resume
# restarts them; every fault applied and removed shows on /metrics and in
# /status; the metrics endpoint changes nothing.
NAME=chaos_fault
. "$(dirname "$0")/lib/agent.sh"

cluster_init 24600 2 2
"$bin" keygen --out "$tmp/admin" >/dev/null
"$bin" keygen --out "$tmp/stranger" >/dev/null
cp "$tmp/admin/murmur.pub" "$tmp/admins"
chmod 600 "$tmp/admins"

# refused without faults.enable (exit status 2, the message names the option)
if "$bin" agent --data-dir "$tmp/a1" --set faults.drop=0.5 --print-config >/dev/null 2>"$tmp/err"; then
    fail "faults.drop accepted without faults.enable"
fi
grep -q "faults.enable" "$tmp/err" || fail "refusal does not name faults.enable: $(cat "$tmp/err")"

FAULTS="--set faults.enable=true --set faults.admin_keys_file=$tmp/admins"
# shellcheck disable=SC2086
agent_start 1 $FAULTS
# shellcheck disable=SC2086
agent_start 2 $FAULTS
m1="127.0.0.1:$((base + 101))"
a1="127.0.0.1:$((base + 1))"
peers_of() { "$bin" status --json "127.0.0.1:$((base + 100 + $1))" 2>/dev/null | tr ',' '\n' | sed -n 's/^"peers"://p'; }
status_num() { "$bin" status --json "127.0.0.1:$((base + 100 + $1))" 2>/dev/null | tr ',{}' '\n\n\n' | sed -n "s/^\"$2\"://p"; }
has_peers() { [ "$(peers_of "$1")" = "$2" ]; }
wait_for 60 has_peers 1 1 || fail "agents did not meet"
id2=$("$bin" status --json "127.0.0.1:$((base + 102))" | tr ',' '\n' | sed -n 's/^{*"node_id":"\([0-9a-f]*\)"/\1/p')
[ -n "$id2" ] || fail "no node id for agent 2"

admin() { "$bin" fault "$a1" --key "$tmp/admin/murmur.key" --network-key "$tmp/net.key" "$@"; }

# a key not in the admin list is refused (and nothing changes)
if "$bin" fault "$a1" --key "$tmp/stranger/murmur.key" --network-key "$tmp/net.key" \
    --drop 1 >"$tmp/out" 2>&1; then
    fail "a stranger's request was obeyed"
fi
grep -q "not an admin key" "$tmp/out" || fail "stranger refusal: $(cat "$tmp/out")"
curl -s "http://$m1/metrics" | grep -q 'murmur_fault_requests_total{result="refused"} 1' ||
    fail "refusal not counted"
# the metrics endpoint is read-only
curl -s -X POST -d 'drop=1' "http://$m1/metrics" >/dev/null 2>&1 || true

# partition agent 1 from agent 2: agent 2 leaves agent 1's view
admin --partition "$id2" >"$tmp/out" || fail "partition refused: $(cat "$tmp/out")"
grep -q "^partition ids=$id2" "$tmp/out" || fail "reply: $(cat "$tmp/out")"
wait_for 60 has_peers 1 0 || fail "partition: agent 2 still in agent 1's view"
admin --heal >/dev/null || fail "heal refused"
wait_for 60 has_peers 1 1 || fail "heal: agent 2 did not come back"

# pause: agent 1's steps stop; resume: they go on
admin --pause >/dev/null || fail "pause refused"
sleep 1
s0=$(status_num 1 step)
sleep 2
s1=$(status_num 1 step)
[ "$s0" = "$s1" ] || fail "paused agent stepped ($s0 -> $s1)"
[ "$(status_num 1 training_paused)" = 1 ] || fail "/status does not say paused"
admin --resume >/dev/null || fail "resume refused"
steps_past() { ge "$(status_num 1 step)" "$1"; }
wait_for 20 steps_past $((s1 + 5)) || fail "resumed agent does not step"

# a link fault, then clear; the counts add up (partition, pause, link: 3
# applied, 3 removed)
admin --peer "$id2" --drop 0.5 --delay 20 >/dev/null || fail "link fault refused"
admin --show | grep -q "^link peer=$id2 drop=0.5 delay_ms=20" || fail "show: $(admin --show)"
admin --clear >/dev/null || fail "clear refused"
admin --show | grep -q "^link" && fail "clear left a link fault"
# /status is refreshed every 250 ms: give it a moment
counts_are() { [ "$(status_num 1 faults_applied)" = "$1" ] && [ "$(status_num 1 faults_removed)" = "$2" ] &&
    [ "$(status_num 1 faults_active)" = "$3" ]; }
wait_for 10 counts_are 3 3 0 ||
    fail "/status counts: applied $(status_num 1 faults_applied) removed $(status_num 1 faults_removed) active $(status_num 1 faults_active), want 3 3 0"
curl -s "http://$m1/metrics" >"$tmp/metrics"
grep -q 'murmur_faults_applied_total{kind="partition"} 1' "$tmp/metrics" || fail "metrics: partition"
grep -q 'murmur_faults_removed_total{kind="link"} 1' "$tmp/metrics" || fail "metrics: link"
grep -q 'murmur_fault_frames_total{kind="partition"}' "$tmp/metrics" || fail "metrics: frames"
grep -c 'event=fault_applied' "$tmp/a1.log" | grep -qx 3 || fail "log: fault_applied lines"
grep -c 'event=fault_removed' "$tmp/a1.log" | grep -qx 3 || fail "log: fault_removed lines"
echo "$NAME: PASS"
