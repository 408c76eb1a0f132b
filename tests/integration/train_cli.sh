#!/bin/sh
# murmur train / murmur shard as a user runs them: --help documents every
# flag; same seed -> identical output except the timing fields; shards are
# byte-identical for a seed, verified, tamper-detected and trainable; bad
# input gives a clear error and the right exit status; CSV data trains;
# the command line follows getopt_long (common/cli) and --help shows the
# defaults a run uses.
set -eu
build=${BUILD:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "train_cli: $bin not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "train_cli: FAIL $*" >&2; exit 1; }

# --help names every option the parser accepts
"$bin" train --help >"$tmp/help"
for f in --model --epochs --batch --lr --momentum --nesterov --weight-decay --schedule \
    --warmup-epochs --step-epochs --gamma --min-lr --seed --data --test --shards --norm \
    --limit --test-limit --test-every --blas-threads --help; do
    grep -q -- "$f" "$tmp/help" || fail "train --help does not document $f"
done
"$bin" shard --help >"$tmp/shelp"
for f in --data --shards --out --alpha --seed --verify --help; do
    grep -q -- "$f" "$tmp/shelp" || fail "shard --help does not document $f"
done

# determinism: same seed -> same lines once seconds= and samples_per_s= are cut
strip() { sed 's/ seconds=.*//' "$1"; }
small="--limit 6000 --test-limit 1000 --epochs 2"
"$bin" train $small --seed 7 >"$tmp/a"
"$bin" train $small --seed 7 >"$tmp/b"
"$bin" train $small --seed 8 >"$tmp/c"
strip "$tmp/a" >"$tmp/a.s"
strip "$tmp/b" >"$tmp/b.s"
strip "$tmp/c" >"$tmp/c.s"
cmp -s "$tmp/a.s" "$tmp/b.s" || { diff "$tmp/a.s" "$tmp/b.s"; fail "same seed, different output"; }
cmp -s "$tmp/a.s" "$tmp/c.s" && fail "different seeds, same output"
grep -q '^final .*param_hash=' "$tmp/a" || fail "no final line"
[ "$(grep -c '^epoch=' "$tmp/a")" -eq 2 ] || fail "want one line per epoch"
# the timing fields close every progress line
grep '^epoch=' "$tmp/a" | grep -qv 'seconds=[0-9.]* samples_per_s=[0-9]*$' && fail "timing fields not last"

# shards: deterministic, verified, tamper-detected, trainable
"$bin" shard --shards 4 --alpha 0.5 --seed 3 --out "$tmp/s1" >"$tmp/s1.out"
"$bin" shard --shards 4 --alpha 0.5 --seed 3 --out "$tmp/s2" >/dev/null
for f in "$tmp"/s1/*.msh; do
    cmp -s "$f" "$tmp/s2/$(basename "$f")" || fail "shard $(basename "$f") differs between runs"
done
[ "$(ls "$tmp"/s1/*.msh | wc -l)" -eq 4 ] || fail "want 4 shard files"
"$bin" shard --verify "$tmp"/s1/*.msh >"$tmp/v.out"
[ "$(grep -c '^ok ' "$tmp/v.out")" -eq 4 ] || fail "verify did not pass 4 shards"
# the printed hash is the one verify recomputes
h1=$(sed -n 's/^shard index=0 .* hash=\([0-9a-f]*\) .*/\1/p' "$tmp/s1.out")
grep -q "index=0 .*hash=$h1" "$tmp/v.out" || fail "hash printed by shard != hash verified"
cp "$tmp/s1/shard-001-of-004.msh" "$tmp/bad.msh"
printf '\377' | dd of="$tmp/bad.msh" bs=1 seek=5000 conv=notrunc 2>/dev/null
if "$bin" shard --verify "$tmp/bad.msh" 2>"$tmp/err" >/dev/null; then fail "tampered shard verified"; fi
grep -q "hash mismatch" "$tmp/err" || fail "tamper message: $(cat "$tmp/err")"
"$bin" train --shards "$tmp"/s1/*.msh --epochs 1 --test-limit 2000 --seed 2 >"$tmp/sh.out"
acc=$(sed -n 's/^final .*test_accuracy=\([0-9.]*\).*/\1/p' "$tmp/sh.out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.75) }' || fail "training on shards reached $acc"
grep -q 'train_samples=60000' "$tmp/sh.out" || fail "4 shards should hold 60000 samples"

# errors: status and a message naming the problem
set +e
"$bin" train --data /nonexistent/dir.csv 2>"$tmp/err" >/dev/null; st=$?
[ $st -eq 1 ] && grep -q '/nonexistent/dir.csv' "$tmp/err" || fail "missing data: status $st, $(cat "$tmp/err")"
"$bin" train --model cnn:3 --limit 100 2>"$tmp/err" >/dev/null; st=$?
[ $st -eq 2 ] && grep -q "cnn:3" "$tmp/err" || fail "bad spec: status $st, $(cat "$tmp/err")"
"$bin" train --epochs zero 2>"$tmp/err" >/dev/null; st=$?
[ $st -eq 2 ] || fail "bad --epochs: status $st"
"$bin" train --shards "$tmp/bad.msh" --epochs 1 2>"$tmp/err" >/dev/null; st=$?
[ $st -eq 1 ] && grep -q "bad.msh" "$tmp/err" || fail "tampered shard trained: status $st"
printf '1,2,3\n0,4,oops\n' >"$tmp/junk.csv"
"$bin" train --data "$tmp/junk.csv" 2>"$tmp/err" >/dev/null; st=$?
[ $st -eq 1 ] && grep -q "junk.csv:2: column 3" "$tmp/err" || fail "CSV junk: status $st, $(cat "$tmp/err")"
set -e

# a CSV data set of the user's own: two Gaussian classes in 4 features
awk 'BEGIN { srand(5); print "label,a,b,c,d";
  for (i = 0; i < 2000; i++) { y = i % 2; s = y ? 2 : -2;
    printf "%d,%.4f,%.4f,%.4f,%.4f\n", y, s + rand() - 0.5, -s + rand() - 0.5, rand(), 10 + rand() } }' >"$tmp/own.csv"
"$bin" train --data "$tmp/own.csv" --model mlp:8 --epochs 3 --seed 1 >"$tmp/csv.out"
acc=$(sed -n 's/^final .*test_accuracy=\([0-9.]*\).*/\1/p' "$tmp/csv.out")
grep -q 'norm=feature' "$tmp/csv.out" || fail "CSV default normalisation should be feature"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.99) }' || fail "separable CSV reached only $acc"

# the defaults --help shows are the ones a run uses (the header line)
"$bin" train --data "$tmp/own.csv" >"$tmp/def.out"
hdr=$(head -n 1 "$tmp/def.out")
for pair in epochs:epochs batch:batch lr:lr momentum:momentum weight-decay:weight_decay \
    warmup-epochs:warmup_epochs step-epochs: gamma: seed:seed model:model; do
    flag=${pair%%:*} key=${pair#*:}
    shown=$(grep -- "^  --$flag " "$tmp/help" | sed -n 's/.*\[\([^];]*\)[];].*/\1/p')
    [ -n "$shown" ] || shown=$(sed -n "/^  --$flag /,/^  --/p" "$tmp/help" | sed '$d' | tr -d '\n' |
        sed -n 's/.*\[\([^];]*\)[];].*/\1/p')
    [ -n "$shown" ] || fail "--help shows no default for --$flag"
    [ -n "$key" ] || continue
    used=$(echo "$hdr" | tr ' ' '\n' | sed -n "s/^$key=//p")
    if [ "$flag" = model ]; then
        [ "$shown" = "$used" ] || fail "--$flag: help says [$shown], a run uses $used"
    else
        awk -v a="$shown" -v b="$used" 'BEGIN { exit !(a + 0 == b + 0) }' ||
            fail "--$flag: help says [$shown], a run uses $used"
    fi
done

# the command line: getopt_long rules (--flag=VALUE, unique prefixes), and
# every mistake is a usage error (2) that names the flag or the nearest one
"$bin" train --data="$tmp/own.csv" --model=softmax --epo 1 --lr=0.1 | grep -q ' epochs=1 .* lr=0.1 ' ||
    fail "--flag=VALUE or a unique prefix not taken"
usage_err() { # want-text args...
    want=$1
    shift
    set +e
    "$bin" train "$@" >/dev/null 2>"$tmp/err"
    st=$?
    set -e
    [ $st -eq 2 ] && grep -q -- "$want" "$tmp/err" || fail "train $*: status $st, $(cat "$tmp/err")"
}
usage_err "unknown flag '--epohcs'; did you mean --epochs?" --epohcs 3
usage_err "unknown flag '--weightdecay'; did you mean --weight-decay?" --weightdecay 0
usage_err "--lr needs a value" --lr
usage_err "--nesterov takes no value" --nesterov=1
usage_err "ambiguous flag '--te'" --te x
usage_err "unexpected argument 'extra'" extra
usage_err "--shards wants at least one file" --shards --epochs 1
usage_err "--seed wants a non-negative integer" --seed -3

# cnn: the default CNN (and its default of 15 epochs), deterministic for a
# seed with dropout; spec errors name the item and the rule; a CSV whose
# features are not a square image needs its shape; a colour image input
cnn="--model cnn --limit 192 --test-limit 200 --seed 4"
"$bin" train $cnn >"$tmp/cnn1"
"$bin" train $cnn >"$tmp/cnn2"
strip "$tmp/cnn1" >"$tmp/cnn1.s"
strip "$tmp/cnn2" >"$tmp/cnn2.s"
cmp -s "$tmp/cnn1.s" "$tmp/cnn2.s" || { diff "$tmp/cnn1.s" "$tmp/cnn2.s"; fail "cnn: same seed, different output"; }
grep -q '^train model=cnn params=824554 .* epochs=15 ' "$tmp/cnn1" || fail "cnn default: $(head -n 1 "$tmp/cnn1")"
[ "$(grep -c '^epoch=' "$tmp/cnn1")" -eq 15 ] || fail "cnn: want 15 epochs by default"
"$bin" train --model cnn --epochs 1 --limit 64 --test-limit 64 | grep -q ' epochs=1 ' || fail "cnn: --epochs ignored"
set +e
"$bin" train --model cnn:c8k3g3,p2 --limit 100 2>"$tmp/err" >/dev/null; st=$?
[ $st -eq 2 ] && grep -q "at 'c8k3g3': 3 groups do not divide 8 filters" "$tmp/err" || fail "cnn bad groups: status $st, $(cat "$tmp/err")"
"$bin" train --model cnn:c8k3,p40 --limit 100 2>"$tmp/err" >/dev/null; st=$?
[ $st -eq 2 ] && grep -q "window 40 does not fit the 28x28 input" "$tmp/err" || fail "cnn window: status $st, $(cat "$tmp/err")"
set -e
# 2 x 2 x 3 "images" (channel-major): class = which channel is bright
awk 'BEGIN { srand(6); print "label,f1,f2,f3,f4,f5,f6,f7,f8,f9,f10,f11,f12";
  for (i = 0; i < 1500; i++) { y = i % 3; printf "%d", y;
    for (c = 0; c < 3; c++) for (p = 0; p < 4; p++) printf ",%.3f", (c == y) + 0.3 * rand();
    printf "\n" } }' >"$tmp/rgb.csv"
set +e
"$bin" train --data "$tmp/rgb.csv" --model cnn 2>"$tmp/err" >/dev/null; st=$?
[ $st -eq 2 ] && grep -q "12 input features are not a square image" "$tmp/err" || fail "cnn on 12 features: status $st, $(cat "$tmp/err")"
set -e
"$bin" train --data "$tmp/rgb.csv" --model cnn:i3x2x2,c4k1,f8 --epochs 3 --seed 1 >"$tmp/rgb.out"
acc=$(sed -n 's/^final .*test_accuracy=\([0-9.]*\).*/\1/p' "$tmp/rgb.out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.99) }' || fail "3-channel CSV through a cnn reached only $acc"
echo "train_cli: ok"
