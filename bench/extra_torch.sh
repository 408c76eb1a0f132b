#!/bin/sh
# PyTorch side by side with bench_train: the same MLP (784-256-128-100-10),
# batch 64, SGD momentum 0.9, one thread each, in the same run. The machine
# is shared, so the two are interleaved: PAIRS times, bench_train (3 runs,
# median) then torch_mlp.py (3 runs, median); the ratio of each pair is
# taken and the median pair ratio reported (target >= 1.5), along with the
# median figure of each side.
#   BUILD=build sh bench/extra_torch.sh [pairs] [steps]
# Uses Debian's python3-torch through /usr/bin/python3 (not a python3 that
# may come first on PATH); skips with a message when torch is absent.
set -u
build=${BUILD:-build}
pairs=${1:-5}
steps=${2:-300}
py=/usr/bin/python3
here=$(dirname "$0")
if ! [ -x "$py" ] || ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "extra_torch: skipped: PyTorch is not importable by $py (apt-get install -y python3-torch)"
    exit 0
fi
if ! [ -x "$build/bench/bench_train" ]; then
    echo "extra_torch: $build/bench/bench_train is missing; run make bench" >&2
    exit 1
fi
# PyTorch loads the same OpenBLAS: give it the core murmur runs on (murmur
# chooses again when the library fell back to its generic kernels:
# model/blas.h)
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x "$build/murmur" ]; then
    k=$("$build/murmur" version | sed -n 's/^openblas .*(core \([A-Za-z0-9]*\))$/\1/p')
    [ -n "$k" ] && export OPENBLAS_CORETYPE="$k"
fi
fig() { sed -n 's/.*samples_per_s=\([0-9]*\).*/\1/p'; }
ms="" ts="" rs=""
i=0
while [ "$i" -lt "$pairs" ]; do
    m=$("$build/bench/bench_train" 3 "$steps" | fig)
    t=$(OMP_NUM_THREADS=1 "$py" "$here/torch_mlp.py" 3 "$steps" | fig)
    if [ -z "$m" ] || [ -z "$t" ] || [ "$t" -eq 0 ]; then
        echo "extra_torch: a benchmark failed or printed no figure" >&2
        exit 1
    fi
    r=$(awk -v m="$m" -v t="$t" 'BEGIN { printf "%.3f", m / t }')
    echo "  pair $((i + 1)): murmur $m samples/s, pytorch $t samples/s, ratio $r"
    ms="$ms $m" ts="$ts $t" rs="$rs $r"
    i=$((i + 1))
done
median() { echo "$@" | tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
tv=$(OMP_NUM_THREADS=1 "$py" -c 'import torch; print(torch.__version__)')
echo "murmur (bench_train, OpenBLAS, 1 thread): median samples_per_s=$(median $ms)"
echo "pytorch $tv (torch_mlp.py, 1 thread): median samples_per_s=$(median $ts)"
echo "ratio murmur/pytorch = $(median $rs) (median of $pairs interleaved pairs; target >= 1.5)"
echo "command: BUILD=$build sh bench/extra_torch.sh $pairs $steps"
