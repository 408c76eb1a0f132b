#!/bin/sh
# make demo: four `murmur agent` processes on 127.0.0.1 train the
# Fashion-MNIST MLP together, with no coordinator, started and watched by
# `murmur launch` (docs/DEPLOY.md). `make demo MODEL=cnn` does the same with
# the default CNN (model/spec.h), for longer and to a higher bar.
#
#   sh scripts/demo.sh [BUILD]        (make demo; DEMO_PORT=N moves the ports,
#                                      MODEL=SPEC picks another model.spec)
#
#   model          bar    kill / restart agent 3   end                    schedule, decay
#   mlp (default)  0.87   45 / 65 s                at 115 s               cosine:4, 1e-4
#   cnn, cnn:...   0.90   60 / 90 s                once every agent is    cosine:16, 5e-4
#                                                  at the bar (after the
#                                                  restart), at most 1200 s
#   DEMO_KILL_AT, DEMO_RESTART_AT, DEMO_END_AT (seconds), DEMO_TARGET and
#   DEMO_UNTIL=1|0 (stop as soon as every agent is at the bar) override
#   them. The MLP's schedule and decay are the agent's defaults. A CNN step costs
#   several MLP steps and its time on a shared machine varies with the
#   load, hence the stop at the bar rather than at a fixed time. Its agents
#   took 3000-3500 steps each to be at 0.90 together: with cosine:8 (about
#   1900 steps, 8 passes over an agent's 15,000 primary samples) they
#   stalled at 0.89-0.91 once the rate had decayed, so the CNN decays over
#   16 passes and with murmur train's weight decay. Its evaluations (the
#   10,000 test images) come every 250 steps, the MLP's every 500.
#
# - `murmur launch` splits the training set into S = 32 content-addressed
#   shards (`murmur shard`), makes a cluster network key and one key pair
#   per agent, starts every shard on r = 2 agents (replication r = 2), and
#   starts the agents with agent 1 as the seed.
# - Agents mix by pairwise gossip of 8-bit quantized deltas, over encrypted
#   and authenticated links.
# - A live table every 5 s: state, step, loss, test accuracy, peers, MB sent.
# - Midway agent 3 is SIGKILLed (--fault); the others detect it,
#   re-replicate its shards and keep training. Later it is restarted on its
#   data directory: it rejoins, resumes from its checkpoint and the current
#   model, and catches up.
# - At the end every agent leaves gracefully (SIGTERM: leave, final
#   checkpoint) and the launcher's summary lists step, accuracy (on the full
#   10,000-image test set), MB sent and time alive. Exit status 0 only if
#   every agent alive at the end reached the bar (0.87; 0.90 for a CNN).
# Nothing is left running: the launcher stops every agent, whatever happens.
# Data, keys and logs stay in BUILD/demo for inspection.
set -eu
build=${1:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "demo: $bin is not built (run make)" >&2; exit 1; }

MODEL=${MODEL:-mlp:256,128}
case $MODEL in
cnn | cnn:*) target=0.90 kill_at=60 restart_at=90 end_at=1200 until=1 eval_every=250 schedule=cosine:16 decay=0.0005 ;;
*) target=0.87 kill_at=45 restart_at=65 end_at=115 until=0 eval_every=500 schedule=cosine:4 decay=0.0001 ;;
esac
TARGET=${DEMO_TARGET:-$target}
KILL_AT=${DEMO_KILL_AT:-$kill_at}          # seconds after start: SIGKILL agent 3
RESTART_AT=${DEMO_RESTART_AT:-$restart_at} # ... restart it
END_AT=${DEMO_END_AT:-$end_at}             # ... stop everyone (at the latest)
UNTIL=${DEMO_UNTIL:-$until}                # 1: stop once every agent is at TARGET
port=${DEMO_PORT:-17420}
dir="$build/demo"

# reached FILE: in the launcher's latest table, after the restart of agent
# 3, all four agents train and show a test accuracy >= TARGET
reached() {
    awk -v t="$TARGET" -v after="$RESTART_AT" '
        /^t=[0-9]+s$/ { now = substr($0, 3) + 0; n = 0; ok = 1; next }
        $1 ~ /^a[0-9]+$/ && $2 ~ /:[0-9]+$/ {
            n++
            if (!($3 == "training" && $6 + 0 == $6 && $6 >= t)) ok = 0
        }
        END { exit !(now > after && n == 4 && ok) }' "$1"
}

rm -rf "$dir" "$dir.out"
echo "demo: 4 agents on 127.0.0.1, Fashion-MNIST $MODEL, 32 shards (r = 2), gossip at 8 bits"
[ "$UNTIL" = 1 ] && echo "demo: stops once every agent is at test accuracy $TARGET (at most ${END_AT} s)"
"$bin" launch -n 4 --dir "$dir" --data fashion-mnist --shards 32 --port "$port" \
    --interval 5 --duration "$END_AT" --fault "$KILL_AT:kill:3" --fault "$RESTART_AT:restart:3" \
    --set mixing.algorithm=gossip --set mixing.bits=8 --set shards.replication=2 \
    --set model.spec="$MODEL" --set model.schedule="$schedule" --set model.weight_decay="$decay" \
    --set model.eval_every_steps="$eval_every" --set model.eval_samples=0 \
    --set membership.probe_interval_ms=200 --set membership.probe_timeout_ms=100 \
    --set checkpoint.every_steps=500 --set log.progress_interval_ms=1000 >"$dir.out" 2>&1 &
lpid=$!
# Ctrl-C or SIGTERM: the launcher's own graceful stop (every agent leaves)
trap 'kill -TERM "$lpid" 2>/dev/null || :' INT TERM
tail -n +1 -f --pid="$lpid" "$dir.out" &
tpid=$!
if [ "$UNTIL" = 1 ]; then
    while kill -0 "$lpid" 2>/dev/null; do
        sleep 1
        if reached "$dir.out"; then
            echo "demo: every agent is at test accuracy >= $TARGET: stopping the cluster"
            kill -TERM "$lpid" 2>/dev/null || :
            break
        fi
    done
fi
status=0
wait "$lpid" || status=$?
# a signal to this script interrupts wait (status > 128) while the launcher runs on
while kill -0 "$lpid" 2>/dev/null; do
    status=0
    wait "$lpid" || status=$?
done
wait "$tpid" 2>/dev/null || :
trap - INT TERM
# the launcher's status is the worst agent's; then every agent's accuracy
[ "$status" -eq 0 ] || { echo "demo: FAIL: murmur launch exited $status (logs in $dir)" >&2; exit 1; }
grep -q "model_ready" "$dir/a3.log" &&
    echo "demo: agent 3 after its restart: $(grep -o 'event=model_ready source=[a-z_]*' "$dir/a3.log" | tail -n 1 | sed 's/event=//')"
fail=0
for i in 1 2 3 4; do
    ac=$(awk -v a="a$i" '$1 == a && $3 != "" { v = $3 } END { print v }' "$dir.out")
    awk -v a="${ac:-0}" -v t="$TARGET" 'BEGIN { exit !(a + 0 == a && a >= t) }' || {
        echo "demo: agent $i ended at accuracy ${ac:-none}" >&2
        fail=1
    }
done
grep -q 'event=checkpoint_written .*reason=shutdown' "$dir/a1.log" || { echo "demo: FAIL: no final checkpoint" >&2; fail=1; }
if [ "$fail" -eq 0 ]; then
    echo "demo: ok: every agent reached test accuracy >= $TARGET (logs, keys and data in $dir)"
else
    echo "demo: FAIL: an agent is below test accuracy $TARGET (logs in $dir)" >&2
    exit 1
fi
