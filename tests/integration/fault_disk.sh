#!/bin/sh
# Full disk (issue 13 item 11) on real agents in namespaces. Agent 3's
# shards directory is a 4 MiB tmpfs, smaller than one shard; agent 1's
# checkpoint goes to a 64 KiB tmpfs, smaller than one checkpoint.
# - Agent 3 reports the failed writes (a rate-limited warn line, a
#   counter), stops fetching what it cannot store (a few MB at most in 15 s;
#   before, it fetched 953 MB in 44 s and said nothing), and stays a member.
# - Agent 3 hands its primaries to the next holders (FULL notices, see
#   gossip/shards.h): agents 1 and 2 train all 8 shards between them (their
#   primaries and train lists), agent 3 says so in /status and its progress
#   lines, and it keeps mixing. Before, its primaries were trained by nobody.
# - Agent 1 counts every failed checkpoint but warns once a minute, not at
#   every save, and keeps training.
NAME=fault_disk
. tests/integration/lib/fault.sh

fault_init 3 8
netns_tmpfs "$tmp/a3/shards" 4m
cp "$tmp/all/catalog" "$tmp/a3/shards/"
netns_tmpfs "$tmp/ck" 64k
fault_start 1 --set checkpoint.path="$tmp/ck/checkpoint.bin" --set checkpoint.every_steps=100
fault_start 2
fault_start 3
failed() { grep -q 'event=shard_store_failed' "$tmp/a3.log"; }
wait_for 40 failed || fail "agent 3 did not report its full shards directory in 40 s"
grep 'event=shard_store_failed' "$tmp/a3.log" | head -n 1 | grep -q 'no room left' ||
    fail "the first store failure does not say the disk is full"
chunks='murmur_bytes_received_total{type="shard_chunk"}'
b0=$(fault_metric 3 "$chunks")
sleep 15
b1=$(fault_metric 3 "$chunks")
got=$((b1 - b0))
[ "$got" -lt 8000000 ] || fail "agent 3 received $got shard bytes in 15 s with a full disk (fetching goes on)"
w=$(grep -c 'event=shard_store_failed' "$tmp/a3.log")
[ "$w" -le 2 ] || fail "agent 3 warned $w times about its store in ~20 s (want at most one per 30 s)"
e=$(fault_metric 3 murmur_store_errors_total)
ge "$e" 1 || fail "agent 3: murmur_store_errors_total is $e"
agent_alive 3 || fail "agent 3 died of a full disk"
for i in 1 2 3; do [ "$(fnum "$i" peers)" -eq 2 ] || fail "agent $i has $(fnum "$i" peers) peers"; done
# Agent 1: every save fails, one line says so.
f=$(fault_metric 1 murmur_checkpoint_failures_total)
ge "$f" 5 || fail "agent 1: only $f checkpoint failures counted (want every save)"
c=$(grep -c 'event=checkpoint_failed' "$tmp/a1.log")
[ "$c" -eq 1 ] || fail "agent 1: $c checkpoint_failed lines for $f failures (want one a minute)"
s0=$(fnum 1 step)
sleep 2
[ "$(fnum 1 step)" -gt "$s0" ] || fail "agent 1 stopped training"
# Agent 3's primaries are trained by agents 1 and 2.
handed() { [ "$(fnum 3 store_full)" -eq 1 ] && [ "$(fnum 3 shards_handed)" -ge 1 ]; }
wait_for 20 handed || fail "agent 3 does not report handing its primaries over (store_full=$(field 3 store_full) shards_handed=$(field 3 shards_handed))"
h=$(fnum 3 shards_handed)
all_trained() {
    [ $(($(fnum 1 shards_primary) + $(fnum 2 shards_primary))) -eq 8 ] &&
        [ $(($(fnum 1 shards_taken) + $(fnum 2 shards_taken))) -eq "$h" ] &&
        [ "$(field 1 train)" = primary ] && [ "$(field 2 train)" = primary ]
}
wait_for 20 all_trained || fail "agents 1 and 2 train $(fnum 1 shards_primary) + $(fnum 2 shards_primary) of 8 shards (took $(fnum 1 shards_taken) + $(fnum 2 shards_taken) of agent 3's $h)"
[ "$(fnum 3 shards_primary)" -eq 0 ] || fail "agent 3 still counts $(fnum 3 shards_primary) primaries"
grep -q 'event=primaries_moved .*store_full=1' "$tmp/a3.log" || fail "agent 3 did not log its primaries_moved line"
st=$(netns_exec 3 bash -c "exec 3<>/dev/tcp/10.77.0.3/$FAULT_METRICS; printf 'GET /status HTTP/1.0\r\nHost: x\r\n\r\n' >&3; cat <&3" 2>/dev/null)
echo "$st" | grep -q '"store_full":true' || fail "agent 3's /status does not say store_full: $st"
echo "$st" | grep -q "\"shards_handed\":$h" || fail "agent 3's /status does not count $h shards handed: $st"
# The shards agent 3 handed over are trained: agents 1 and 2 step; agent 3 mixes.
s1=$(fnum 1 step)
s2=$(fnum 2 step)
m3=$(fnum 3 mixing_rounds)
mixes() { [ "$(fnum 3 mixing_rounds)" -gt "$m3" ]; }
wait_for 15 mixes || fail "agent 3 stopped mixing ($m3 rounds, then $(fnum 3 mixing_rounds) in 15 s)"
[ "$(fnum 1 step)" -gt "$s1" ] && [ "$(fnum 2 step)" -gt "$s2" ] || fail "agents 1 and 2 stopped training"
[ "$(fnum 3 step)" -eq 0 ] || fail "agent 3 counts $(fnum 3 step) local steps without data"
echo "$NAME: ok: agent 3 fetched $got shard bytes in 15 s after its disk filled ($e store errors, $w warn lines), handed $h primaries to agents 1 and 2 and kept mixing; agent 1: $f failed checkpoints, $c line"
