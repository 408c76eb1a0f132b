#!/bin/sh
# make demo: the main job on the built-in default data set.
#
# Trains the Fashion-MNIST MLP 784-256-128-100-10 (Debian's
# dataset-fashion-mnist, found automatically) for 20 epochs with one process
# (`murmur train`), prints one progress line per epoch, and exits 0 only if
# the final test accuracy reaches 0.88 (the published single-machine result
# for this MLP is 0.883).
#
# This is the single-process baseline. Once `murmur agent` lands, this
# script runs the multi-agent demo instead (issue 6).
set -eu
build=${1:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "demo: $bin is not built (run make)" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT INT TERM
echo "demo: murmur train --model mlp:256,128,100 --epochs 20 --seed 1 (Fashion-MNIST)"
start=$(date +%s)
"$bin" train --model mlp:256,128,100 --epochs 20 --seed 1 | tee "$out"
acc=$(sed -n 's/^final .*test_accuracy=\([0-9.]*\).*/\1/p' "$out")
[ -n "$acc" ] || { echo "demo: FAIL: no final line" >&2; exit 1; }
secs=$(($(date +%s) - start))
if awk -v a="$acc" 'BEGIN { exit !(a >= 0.88) }'; then
    echo "demo: ok: test_accuracy=$acc (target 0.88) in ${secs} s"
else
    echo "demo: FAIL: test_accuracy=$acc < 0.88" >&2
    exit 1
fi
