#!/bin/sh
# make demo: four `murmur agent` processes on 127.0.0.1 train the
# Fashion-MNIST MLP together, with no coordinator.
#
#   sh scripts/demo.sh [BUILD]        (make demo; DEMO_PORT=N moves the ports)
#
# - `murmur shard` splits the training set into S = 32 content-addressed
#   shards; only agent 1 starts with them, the others fetch the shards that
#   placement gives them (replication r = 2) from their peers.
# - Agents mix by pairwise gossip of 8-bit quantized deltas, over encrypted
#   and authenticated links (a fresh cluster network key and one key pair
#   per agent).
# - A live table every few seconds: step, loss, test accuracy, peers, MB sent.
# - Midway agent 3 is SIGKILLed; the others detect it, re-replicate its
#   shards and keep training. Later it is restarted on its data directory:
#   it rejoins, resumes from its checkpoint and the current model, and
#   catches up.
# - At the end every agent is stopped gracefully (SIGTERM: leave, final
#   checkpoint) and a summary table lists accuracy (on the full 10,000-image
#   test set), bytes sent and time alive. Exit status 0 only if every agent
#   alive at the end reached 0.87.
# Nothing is left running: every agent is killed on exit, whatever happens.
# Data, keys and logs stay in BUILD/demo for inspection.
set -eu
build=${1:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "demo: $bin is not built (run make)" >&2; exit 1; }
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac

AGENTS=4
TARGET=0.87
KILL_AT=${DEMO_KILL_AT:-45}       # seconds after start: SIGKILL agent 3
RESTART_AT=${DEMO_RESTART_AT:-65} # ... restart it
END_AT=${DEMO_END_AT:-115}        # ... stop everyone
base=${DEMO_PORT:-17420}
dir="$build/demo"

pids=""
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
}
trap 'cleanup' EXIT
trap 'echo "demo: interrupted" >&2; exit 130' INT TERM

# A port is taken when /proc/net/tcp{,6} lists it in state LISTEN (0A).
port_free() {
    hex=$(printf '%04X' "$1")
    ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        awk -v h=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == h { f = 1 } END { exit !f }'
}
for i in 1 2 3 4; do
    for p in $((base + i)) $((base + 100 + i)); do
        port_free "$p" || { echo "demo: port $p is taken (set DEMO_PORT=N to use N+1.. N+104)" >&2; exit 1; }
    done
done

rm -rf "$dir"
mkdir -p "$dir"
echo "demo: $AGENTS agents on 127.0.0.1, Fashion-MNIST MLP 784-256-128-10, 32 shards (r = 2), gossip at 8 bits"
"$bin" keygen --network-key "$dir/network.key" >/dev/null
"$bin" shard --shards 32 --out "$dir/all" --seed 1 >/dev/null
for i in 1 2 3 4; do
    mkdir -p "$dir/a$i/shards"
    "$bin" keygen --out "$dir/a$i" >/dev/null
    cp "$dir/all/catalog" "$dir/a$i/shards/"
done
cp "$dir"/all/*.msh "$dir/a1/shards/"

started=$(date +%s)
now() { echo $(($(date +%s) - started)); }

start_agent() { # i
    i=$1
    seed=""
    [ "$i" -eq 1 ] || seed="--seed 127.0.0.1:$((base + 1))"
    [ "$i" -le 2 ] || seed="$seed --seed 127.0.0.1:$((base + 2))"
    # shellcheck disable=SC2086
    "$bin" agent --data-dir "$dir/a$i" --listen "127.0.0.1:$((base + i))" \
        --metrics "127.0.0.1:$((base + 100 + i))" --network-key-file "$dir/network.key" $seed \
        --mixing gossip --set mixing.bits=8 --set shards.replication=2 \
        --set model.spec=mlp:256,128 --set model.lr=0.05 --set model.schedule=cosine:12000 \
        --set model.min_lr=0.005 --set model.eval_every_steps=500 --set model.eval_samples=0 \
        --set membership.probe_interval_ms=200 --set membership.probe_timeout_ms=100 \
        --set checkpoint.every_steps=500 --set log.progress_interval_ms=1000 \
        2>>"$dir/a$i.log" &
    eval "pid$i=$!"
    pids="$pids $!"
    eval "since$i=$(now)"
}

# Field KEY of agent i's last progress line ("-" if none yet).
field() { # i key
    sed -n 's/.* event=progress //p' "$dir/a$1.log" 2>/dev/null | tail -n 1 |
        tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}
alive() { eval "p=\${pid$1:-}"; [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }

table() {
    printf '%-6s %-6s %8s %8s %9s %6s %9s\n' "t=$(now)s" agent step loss accuracy peers "MB sent"
    for i in 1 2 3 4; do
        if alive "$i"; then
            st=$(field "$i" step) lo=$(field "$i" loss) ac=$(field "$i" accuracy)
            pe=$(field "$i" peers) by=$(field "$i" bytes_sent)
            printf '%-6s %-6s %8s %8.4f %9.4f %6s %9.1f\n' "" "a$i" "${st:-0}" "${lo:-0}" \
                "${ac:-0}" "${pe:-0}" "$(awk -v b="${by:-0}" 'BEGIN { print b / 1e6 }')"
        else
            printf '%-6s %-6s %8s\n' "" "a$i" "(down)"
        fi
    done
}

start_agent 1
sleep 1
for i in 2 3 4; do start_agent "$i"; done
killed=0 restarted=0
while [ "$(now)" -lt "$END_AT" ]; do
    sleep 5
    for i in 1 2 3 4; do
        if [ "$i" -ne 3 ] || [ "$killed" -eq "$restarted" ]; then
            alive "$i" || { echo "demo: FAIL: agent $i exited; its log:" >&2; tail -n 5 "$dir/a$i.log" >&2; exit 1; }
        fi
    done
    if [ "$killed" -eq 0 ] && [ "$(now)" -ge "$KILL_AT" ]; then
        kill -9 "$pid3"
        wait "$pid3" 2>/dev/null || true
        killed=1
        alive3=$(($(now) - since3))
        echo "demo: t=$(now)s SIGKILL agent 3 (step $(field 3 step)); the others detect it and re-replicate its shards"
    fi
    if [ "$killed" -eq 1 ] && [ "$restarted" -eq 0 ] && [ "$(now)" -ge "$RESTART_AT" ]; then
        echo "restart" >>"$dir/a3.log"
        start_agent 3
        restarted=1
        echo "demo: t=$(now)s restart agent 3 on its data directory: it rejoins and catches up"
    fi
    table
done

# Graceful stop: leave, final checkpoint, final progress line.
for i in 1 2 3 4; do eval "kill -TERM \$pid$i" 2>/dev/null || true; done
for i in 1 2 3 4; do eval "wait \$pid$i" 2>/dev/null || true; done
pids=""
total=$(now)
echo
echo "demo: summary after ${total}s (accuracy on the 10,000 test images)"
printf '%-6s %9s %9s %8s %s\n' agent accuracy "MB sent" "alive s" notes
fail=0
for i in 1 2 3 4; do
    ac=$(field "$i" accuracy) by=$(field "$i" bytes_sent)
    eval "s=\$since$i"
    up=$((total - s))
    note=""
    if [ "$i" -eq 3 ]; then
        up=$((up + ${alive3:-0}))
        note="SIGKILLed at ${KILL_AT}s, restarted at ${RESTART_AT}s; $(grep -o 'event=model_ready source=[a-z_]*' "$dir/a3.log" | tail -n 1 | sed 's/event=model_ready //')"
    fi
    printf '%-6s %9s %9.1f %8s %s\n' "a$i" "${ac:-none}" "$(awk -v b="${by:-0}" 'BEGIN { print b / 1e6 }')" "$up" "$note"
    awk -v a="${ac:-0}" -v t="$TARGET" 'BEGIN { exit !(a >= t) }' || fail=1
done
grep -q 'event=checkpoint_written .*reason=shutdown' "$dir/a1.log" || { echo "demo: FAIL: no final checkpoint" >&2; fail=1; }
if [ "$fail" -eq 0 ]; then
    echo "demo: ok: every agent reached test accuracy >= $TARGET (logs, keys and data in $dir)"
else
    echo "demo: FAIL: an agent is below test accuracy $TARGET (logs in $dir)" >&2
    exit 1
fi
