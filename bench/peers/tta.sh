#!/bin/sh
# Time to 0.88 test accuracy: murmur agents (defaults) against one `murmur
# train` process, PyTorch alone and PyTorch DDP (gloo), interleaved rounds,
# median ratios; then the throughput of 2 mixing agents against a lone one.
# Both tables are written into docs/BENCHMARKS.md (generated sections).
#   BUILD=build sh bench/peers/tta.sh [ROUNDS]
set -u
build=${BUILD:-build}
reps=${1:-${TTA_ROUNDS:-3}}
py=/usr/bin/python3
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "tta: skipped: PyTorch is not importable by $py (apt-get install -y python3-torch)"
    exit 0
fi
"$py" bench/peers/tta.py "$build" --reps "$reps" --record docs/BENCHMARKS.md || exit 1
"$py" bench/peers/tta.py "$build" --reps "$reps" --throughput --record docs/BENCHMARKS.md
