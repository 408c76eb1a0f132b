#!/bin/sh
# Models out of murmur (issue 15): `murmur train --save` (npz, checkpoint)
# and `murmur export` (safetensors, raw) of an MLP and a small CNN; NumPy
# alone (tests/python/test_export.py) loads them, runs them on the 10,000
# test images and gets the accuracy murmur printed; the formats agree bit
# for bit. A damaged checkpoint and an existing output file are refused
# with nothing written. Skipped (one line) without python3 and NumPy.
set -eu
NAME=export
build=${BUILD:-build}
bin="$build/murmur"
py=/usr/bin/python3
if ! [ -x "$py" ] || ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "$NAME: skipped: python3 with NumPy is not installed"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "$NAME: FAIL $*" >&2; exit 1; }
acc() { sed -n 's/^final .*test_accuracy=\([0-9.]*\).*/\1/p' "$1"; }
# the same seed twice: the checkpoint holds the same model as the npz
"$bin" train --model mlp:64,32 --epochs 2 --limit 20000 --seed 3 --save "$tmp/mlp.npz" >"$tmp/t1" ||
    fail "train --save npz"
"$bin" train --model mlp:64,32 --epochs 2 --limit 20000 --seed 3 --save "$tmp/mlp.ckpt" >"$tmp/t2" ||
    fail "train --save checkpoint"
[ "$(acc "$tmp/t1")" = "$(acc "$tmp/t2")" ] || fail "two runs of one seed differ"
"$bin" export "$tmp/mlp.ckpt" --out "$tmp/mlp.safetensors" >/dev/null || fail "export safetensors"
"$bin" export "$tmp/mlp.ckpt" --out "$tmp/mlp.raw" >/dev/null || fail "export raw"
"$bin" train --model cnn:c8k3,p2 --epochs 1 --limit 5000 --seed 3 --save "$tmp/cnn.npz" >"$tmp/t3" ||
    fail "train --save cnn"
"$py" tests/python/test_export.py "$tmp" "$(acc "$tmp/t1")" "$(acc "$tmp/t3")" || fail "NumPy check"

# refused: an existing output, a damaged checkpoint; nothing written
cp "$tmp/mlp.raw" "$tmp/keep.raw"
if "$bin" export "$tmp/mlp.ckpt" --out "$tmp/mlp.raw" 2>"$tmp/err"; then fail "an existing file was replaced"; fi
grep -q 'exists' "$tmp/err" || fail "no message for an existing file: $(cat "$tmp/err")"
cmp -s "$tmp/mlp.raw" "$tmp/keep.raw" || fail "the existing file changed"
cp "$tmp/mlp.ckpt" "$tmp/bad.ckpt"
printf '\377\377\377\377' | dd of="$tmp/bad.ckpt" bs=1 seek=200 conv=notrunc 2>/dev/null
if "$bin" export "$tmp/bad.ckpt" --out "$tmp/bad.npz" 2>"$tmp/err"; then fail "a damaged checkpoint was exported"; fi
[ ! -e "$tmp/bad.npz" ] && [ ! -e "$tmp/bad.npz.tmp" ] || fail "a file was written for a damaged checkpoint"
grep -q 'bad.ckpt' "$tmp/err" || fail "the message does not name the checkpoint: $(cat "$tmp/err")"
if "$bin" export "$tmp/mlp.ckpt" --out "$tmp/x.npz" --data /nonexistent 2>"$tmp/err"; then
    fail "a missing --data was accepted"
fi
echo "$NAME: ok"
