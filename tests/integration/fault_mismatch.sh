#!/bin/sh
# Mismatched peer (issue 13 item 8): two agents train and mix; a third with
# another model.spec joins through them. It must be refused on both sides:
# the newcomer exits non-zero with one error line naming the difference, the
# two keep it out of their view (peers stays 1), log one error line, count
# it in murmur_refusals_total{cause="manifest"}, and keep mixing. Before the
# manifest check the newcomer was admitted, took primary shards and cut the
# others' mixing to under 1 round/s.
NAME=fault_mismatch
. tests/integration/lib/fault.sh

fault_init 3 8
fault_start 1
fault_start 2
mixing() { [ "$(fnum 1 mixing_rounds)" -ge 20 ] && [ "$(fnum 2 mixing_rounds)" -ge 20 ]; }
wait_for 40 mixing || fail "agents 1 and 2 did not mix 20 rounds in 40 s"
from1=$(fault_lines 1)
from2=$(fault_lines 2)
r0=$(fnum 1 mixing_rounds)
t0=$(now_ms)
fault_start 3 --set model.spec=mlp:32
fault_wait_exit 3 20
[ "$fault_rc" -ne 124 ] || fail "the mismatched agent still runs after 20 s"
[ "$fault_rc" -ne 0 ] || fail "the mismatched agent exited with status 0"
[ "$(grep -c 'level=error' "$tmp/a3.log")" -eq 1 ] || fail "agent 3: want one error line, got: $(grep 'level=error' "$tmp/a3.log")"
grep 'level=error' "$tmp/a3.log" | grep 'event=refused' | grep 'cause=manifest' |
    grep -q 'model.spec mlp:32 here, mlp:64 at the peer' || fail "agent 3: no clear refusal line"
! grep -q 'event=leaving' "$tmp/a3.log" || fail "agent 3 left gracefully (a refused agent sends no LEAVE)"
for i in 1 2; do
    eval "from=\$from$i"
    sed -n "$((from + 1)),\$p" "$tmp/a$i.log" | grep 'level=error' | grep 'event=peer_refused' |
        grep -q 'model.spec mlp:64 here, mlp:32 at the peer' || fail "agent $i: no peer_refused line"
    for p in $(fault_values "$i" "$from" peers); do
        [ "$p" -le 1 ] || fail "agent $i admitted the mismatched agent (peers=$p)"
    done
    ! sed -n "$((from + 1)),\$p" "$tmp/a$i.log" | grep -q 'event=peer_joined' ||
        fail "agent $i logged the mismatched agent as joined"
done
n=$(fault_metric 1 'murmur_refusals_total{cause="manifest"}')
ge "$n" 1 || fail "agent 1: murmur_refusals_total{cause=\"manifest\"} is $n"
# The two keep mixing at their own pace.
sleep 3
r1=$(fnum 1 mixing_rounds)
secs=$((($(now_ms) - t0) / 1000))
ge "$((r1 - r0))" $((2 * secs)) || fail "agent 1 mixed $((r1 - r0)) rounds in ${secs} s after the refusal"
for i in 1 2; do fault_consume "$i" 'event=peer_refused'; done
fault_consume 3 'event=refused'
echo "$NAME: ok: refused (exit $fault_rc), agent 1 mixed $((r1 - r0)) rounds in ${secs} s meanwhile, $n refusals counted"
