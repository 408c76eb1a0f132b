#!/bin/sh
# examples/torch_fashion_cnn.py (a PyTorch CNN in 2 processes mixing through
# murmur: gossip, 8 bits, every 4 steps) against PyTorch DDP (gloo) on the
# same CNN, recipe and processes: time until both processes reach 0.90 test
# accuracy, ROUNDS interleaved rounds, the ratio murmur/DDP of each round and
# its median; recorded into docs/BENCHMARKS.md (a generated section).
#   BUILD=build sh bench/peers/torch_cnn.sh [ROUNDS]
set -u
build=${BUILD:-build}
rounds=${1:-${CNN_ROUNDS:-3}}
py=/usr/bin/python3
if ! "$py" -c 'import torch, numpy' >/dev/null 2>&1; then
    echo "torch_cnn: skipped: PyTorch/NumPy are not importable by $py (apt-get install -y python3-torch)"
    exit 0
fi
[ -f "$build/libmurmur.so" ] || { echo "torch_cnn: $build/libmurmur.so is missing (make)" >&2; exit 1; }
t() { sed -n 's/^result .*time_to_target_s=\([0-9.]*\).*/\1/p'; }
ms="" ds="" rs=""
i=1
while [ "$i" -le "$rounds" ]; do
    m=$("$py" examples/torch_fashion_cnn.py --build "$build" --target 0.90 2>/dev/null | t)
    d=$("$py" examples/torch_fashion_cnn.py --build "$build" --target 0.90 --ddp 2>/dev/null | t)
    if [ -z "$m" ] || [ -z "$d" ]; then
        echo "torch_cnn: round $i: a run did not reach 0.90 (murmur '${m:-none}', ddp '${d:-none}')" >&2
        exit 1
    fi
    r=$(awk -v m="$m" -v d="$d" 'BEGIN { printf "%.3f", m / d }')
    m=$(printf '%.1f' "$m") d=$(printf '%.1f' "$d")
    echo "  round $i: murmur ${m} s, ddp ${d} s, ratio $r"
    ms="$ms $m" ds="$ds $d" rs="$rs $r"
    i=$((i + 1))
done
median() { echo "$@" | tr ' ' '\n' | sort -g | awk 'NF { v[++n] = $1 } END { print v[int((n + 1) / 2)] }'; }
mm=$(median $ms) dm=$(median $ds) rm=$(median $rs)
echo "torch_cnn: time to 0.90, 2 processes: murmur $mm s, DDP (gloo) $dm s, ratio murmur/DDP $rm (median of $rounds rounds)"
"$py" - "$mm" "$dm" "$rm" "$rounds" "$ms" "$ds" "$rs" <<'PY'
import sys, time
mm, dm, rm, rounds = sys.argv[1:5]
per = list(zip(sys.argv[5].split(), sys.argv[6].split(), sys.argv[7].split()))
rows = "".join(f"| round {k} | {m} | {d} | {r} |\n" for k, (m, d, r) in enumerate(per, 1))
path = "docs/BENCHMARKS.md"
begin, end = "<!-- bench-peers:torch_cnn begin -->", "<!-- bench-peers:torch_cnn end -->"
body = (f"{begin}\nMeasured {time.strftime('%Y-%m-%d')} with `BUILD=build sh bench/peers/torch_cnn.sh "
        f"{rounds}` (2 cores, shared machine): the PyTorch CNN of examples/torch_fashion_cnn.py in "
        f"2 processes, time until both reach 0.90 test accuracy, median of {rounds} interleaved rounds.\n\n"
        f"| round | murmur, gossip 8 bits (s) | PyTorch DDP, gloo (s) | ratio murmur / DDP |\n|---|---:|---:|---:|\n"
        f"{rows}| **median** | {mm} | {dm} | **{rm}** |\n{end}")
text = open(path).read()
if begin in text and end in text:
    i, j = text.index(begin), text.index(end) + len(end)
    text = text[:i] + body + text[j:]
else:
    text = text.rstrip("\n") + "\n\n" + body + "\n"
open(path, "w").write(text)
PY
