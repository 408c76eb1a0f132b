#!/bin/sh
# Time to 0.88 test accuracy: murmur agents (defaults) against one `murmur
# train` process, PyTorch alone and PyTorch DDP (gloo), interleaved rounds,
# median ratios; then the throughput of 2 mixing agents against a lone one.
# Then the alternatives the defaults were chosen against (every-step
# exchanges, a clock of the cluster's samples, exact averaging by allreduce,
# the adaptive cadence, the interval of 16 steps that 24 replaced), each
# against one `murmur train` process in the same rounds, and the throughput
# with the adaptive cadence, with 16 steps and with mixing practically off
# (the ceiling two agents on these cores can reach).
# Every table is written into docs/BENCHMARKS.md (generated sections).
#   BUILD=build sh bench/peers/tta.sh [ROUNDS]
# The defaults' throughput takes TTA_THROUGHPUT_ROUNDS rounds (9): a
# 10-second window's samples/s moves by 10-25% from one window to the next
# on this shared VM, and the target (0.85) lies inside that spread.
set -u
build=${BUILD:-build}
reps=${1:-${TTA_ROUNDS:-3}}
treps=${TTA_THROUGHPUT_ROUNDS:-9}
py=/usr/bin/python3
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "tta: skipped: PyTorch is not importable by $py (apt-get install -y python3-torch)"
    exit 0
fi
"$py" bench/peers/tta.py "$build" --reps "$reps" --record docs/BENCHMARKS.md || exit 1
"$py" bench/peers/tta.py "$build" --reps "$treps" --throughput --record docs/BENCHMARKS.md || exit 1
alt() {
    "$py" bench/peers/tta.py "$build" --reps "$reps" --configs train1,agents2,agents4 \
        "$@" --record docs/BENCHMARKS.md || exit 1
}
alt --agent-set mixing.interval_steps=1
alt --agent-set model.schedule_unit=cluster-epochs --agent-set model.schedule=cosine:8
alt --agent-set mixing.algorithm=allreduce
# the adaptive cadence (mixing.cost_share, off by default): time to 0.88 and
# the throughput of two agents with it on
alt --agent-set mixing.cost_share=0.1
thr() {
    "$py" bench/peers/tta.py "$build" --reps "$reps" --throughput "$@" \
        --record docs/BENCHMARKS.md || exit 1
}
thr --agent-set mixing.cost_share=0.1
# the interval before 24 (the default since it was measured against 16)
alt --agent-set mixing.interval_steps=16
thr --agent-set mixing.interval_steps=16
# the ceiling: mixing practically off (no round in the window)
thr --agent-set mixing.interval_steps=1000000
