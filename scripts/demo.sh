#!/bin/sh
# make demo: four `murmur agent` processes on 127.0.0.1 train the
# Fashion-MNIST MLP together, with no coordinator, started and watched by
# `murmur launch` (docs/DEPLOY.md).
#
#   sh scripts/demo.sh [BUILD]        (make demo; DEMO_PORT=N moves the ports,
#                                      MODEL=SPEC picks another model.spec)
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
#   every agent alive at the end reached 0.87.
# Nothing is left running: the launcher stops every agent, whatever happens.
# Data, keys and logs stay in BUILD/demo for inspection.
set -eu
build=${1:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "demo: $bin is not built (run make)" >&2; exit 1; }

TARGET=0.87
MODEL=${MODEL:-mlp:256,128}
KILL_AT=${DEMO_KILL_AT:-45}       # seconds after start: SIGKILL agent 3
RESTART_AT=${DEMO_RESTART_AT:-65} # ... restart it
END_AT=${DEMO_END_AT:-115}        # ... stop everyone
port=${DEMO_PORT:-17420}
dir="$build/demo"

rm -rf "$dir" "$dir.status"
echo "demo: 4 agents on 127.0.0.1, Fashion-MNIST $MODEL, 32 shards (r = 2), gossip at 8 bits"
{
"$bin" launch -n 4 --dir "$dir" --data fashion-mnist --shards 32 --port "$port" \
    --interval 5 --duration "$END_AT" --fault "$KILL_AT:kill:3" --fault "$RESTART_AT:restart:3" \
    --set mixing.algorithm=gossip --set mixing.bits=8 --set shards.replication=2 \
    --set model.spec="$MODEL" --set model.eval_every_steps=500 --set model.eval_samples=0 \
    --set membership.probe_interval_ms=200 --set membership.probe_timeout_ms=100 \
    --set checkpoint.every_steps=500 --set log.progress_interval_ms=1000 || echo $? >"$dir.status"
} | tee "$dir.out"
status=$(cat "$dir.status" 2>/dev/null || echo 0)
rm -f "$dir.status"
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
