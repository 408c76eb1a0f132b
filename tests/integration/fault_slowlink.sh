#!/bin/sh
# One slow peer (issue 13, item 14): four agents in four namespaces mix by
# gossip; agent 4's link is then shaped to 10 Mb/s (tc tbf, both ways).
# The mixing rounds per second of agents 1-3 are measured for the same
# window before and while agent 4 is slow; the test prints
#   slowlink: ratio=R before=B after=A (rounds/s of agents 1-3, summed)
# and asserts a behavioural bound: the other three keep mixing at a good
# part of their rate (ratio >= SLOWLINK_MIN_RATIO, 0.4 by default: below
# the issue's goal of 0.8, which bench/peers/slowlink.sh measures as the
# median of several runs and records in docs/BENCHMARKS.md, but far above
# what this model measured before gossip told the slow link apart (0.04 to
# 0.15 in six runs; 0.65 to 1.03 after, at load 5-25)), agent 4 mixes
# again once its link is restored and the views are whole. SLOWLINK_SPEC
# sets model.spec (mlp:256,128 by default, the agent's default model and
# the issue's: with mlp:64 a push is 50 KB and the slow link hurt less,
# 0.225-0.9 before the fix). Skipped (one line) without root.
NAME=fault_slowlink
. tests/integration/lib/fault.sh

window=${SLOWLINK_WINDOW_S:-10}
min_ratio=${SLOWLINK_MIN_RATIO:-0.4}
spec=${SLOWLINK_SPEC:-mlp:256,128}
rate=${SLOWLINK_RATE:-10mbit}
fault_init 4 8
for i in 1 2 3 4; do fault_start "$i" --set mixing.algorithm=gossip --set "model.spec=$spec"; done
all() { for i in 1 2 3 4; do [ "$(fnum "$i" peers)" -eq 3 ] || return 1; done; }
mixing() { for i in 1 2 3 4; do [ "$(fnum "$i" mixing_rounds)" -ge 10 ] || return 1; done; }
wait_for 60 all || fail "agents did not see each other in 60 s"
wait_for 60 mixing || fail "agents did not mix 10 rounds in 60 s"
rounds() { echo $(($(fnum 1 mixing_rounds) + $(fnum 2 mixing_rounds) + $(fnum 3 mixing_rounds))); }
# rounds/s of agents 1-3 (summed) over the window, as "ROUNDS MS"
measure() {
    r0=$(rounds)
    t0=$(now_ms)
    sleep "$window"
    echo "$(($(rounds) - r0)) $(($(now_ms) - t0))"
}
set -- $(measure)
before_r=$1 before_ms=$2
netns_shape 4 "$rate"
sleep 3 # the queues fill up to the new rate
set -- $(measure)
after_r=$1 after_ms=$2
r4=$(fnum 4 mixing_rounds)
peers_min=3
for i in 1 2 3; do
    p=$(fnum "$i" peers)
    [ "$p" -lt "$peers_min" ] && peers_min=$p
done
netns_unshape 4
line=$(awk -v br="$before_r" -v bm="$before_ms" -v ar="$after_r" -v am="$after_ms" 'BEGIN {
    b = br * 1000 / bm; a = ar * 1000 / am
    printf "ratio=%.3f before=%.1f after=%.1f", (b > 0 ? a / b : 0), b, a }')
echo "slowlink: $line (rounds/s of agents 1-3 summed, ${window} s windows, agent 4 at $rate, model.spec=$spec)"
ratio=${line#ratio=}
ratio=${ratio%% *}
[ "$before_r" -gt 0 ] || fail "no mixing round before the fault"
awk -v r="$ratio" -v m="$min_ratio" 'BEGIN { exit !(r >= m) }' ||
    fail "agents 1-3 nearly stopped mixing behind one slow peer: ratio $ratio < $min_ratio"
back() { [ "$(fnum 4 mixing_rounds)" -gt "$r4" ]; }
wait_for 30 back || fail "agent 4 does not mix again once its link is restored"
wait_for 30 all || fail "views not whole after the link was restored"
echo "$NAME: ok: $line; fewest peers of agents 1-3 while slow: $peers_min"
