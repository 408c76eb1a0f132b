#!/bin/sh
# PyTorch side by side with bench_train on a CNN: the same network (the
# default CNN unless SPEC is given; bench/torch_cnn.py builds it from the
# same spec and prints its parameter count, which must equal murmur's),
# batch 64, SGD momentum 0.9 and weight decay 5e-4, one thread each, in the
# same run. The machine is shared, so the two are interleaved: PAIRS times,
# bench_train (3 runs, median) then torch_cnn.py (3 runs, median); the ratio
# of each pair is taken and the median pair ratio reported (target >= 1.5),
# from wall time (samples_per_s) and from CPU time (cpu_samples_per_s, which
# other processes' time slices do not inflate).
# Then `perf record` of bench_train gives the share of its CPU time spent in
# OpenBLAS sgemm (kernel, packing and scaling routines, sgemm_*) and the
# profile's top entries; skipped with a message when perf is absent.
#   BUILD=build sh bench/extra_torch_cnn.sh [pairs] [steps] [spec]
# Uses Debian's python3-torch through /usr/bin/python3; skips with a message
# when torch is absent.
set -u
build=${BUILD:-build}
pairs=${1:-5}
steps=${2:-30}
spec=${3:-cnn}
py=/usr/bin/python3
here=$(dirname "$0")
if ! [ -x "$py" ] || ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "extra_torch_cnn: skipped: PyTorch is not importable by $py (apt-get install -y python3-torch)"
    exit 0
fi
if ! [ -x "$build/bench/bench_train" ]; then
    echo "extra_torch_cnn: $build/bench/bench_train is missing; run make bench" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fig() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$2"; }
ratio() { awk -v m="$1" -v t="$2" 'BEGIN { printf "%.3f", m / t }'; }
ms="" ts="" rs="" mc="" tc="" rc=""
i=0
while [ "$i" -lt "$pairs" ]; do
    "$build/bench/bench_train" 3 "$steps" "$spec" >"$tmp/m" 2>&1
    OMP_NUM_THREADS=1 "$py" "$here/torch_cnn.py" 3 "$steps" "$spec" >"$tmp/t" 2>&1
    m=$(fig samples_per_s "$tmp/m") t=$(fig samples_per_s "$tmp/t")
    m2=$(fig cpu_samples_per_s "$tmp/m") t2=$(fig cpu_samples_per_s "$tmp/t")
    pm=$(fig params "$tmp/m") pt=$(fig params "$tmp/t")
    if [ -z "$m" ] || [ -z "$t" ] || [ -z "$m2" ] || [ -z "$t2" ] || [ "$t" -eq 0 ] || [ "$t2" -eq 0 ]; then
        echo "extra_torch_cnn: a benchmark failed or printed no figure:" >&2
        cat "$tmp/m" "$tmp/t" >&2
        exit 1
    fi
    if [ "$pm" != "$pt" ]; then
        echo "extra_torch_cnn: not the same network: murmur $pm parameters, pytorch $pt" >&2
        exit 1
    fi
    r=$(ratio "$m" "$t") r2=$(ratio "$m2" "$t2")
    echo "  pair $((i + 1)): wall murmur $m pytorch $t samples/s ratio $r; cpu murmur $m2 pytorch $t2 ratio $r2"
    ms="$ms $m" ts="$ts $t" rs="$rs $r" mc="$mc $m2" tc="$tc $t2" rc="$rc $r2"
    i=$((i + 1))
done
median() { echo "$@" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
tv=$(OMP_NUM_THREADS=1 "$py" -c 'import torch; print(torch.__version__)')
echo "network: $spec, $pm parameters, batch 64, SGD momentum 0.9, 1 thread each"
echo "murmur (bench_train): median samples_per_s=$(median $ms) cpu_samples_per_s=$(median $mc)"
echo "pytorch $tv (torch_cnn.py): median samples_per_s=$(median $ts) cpu_samples_per_s=$(median $tc)"
echo "ratio murmur/pytorch: wall $(median $rs), cpu $(median $rc) (median of $pairs interleaved pairs; target >= 1.5)"
echo "command: BUILD=$build sh bench/extra_torch_cnn.sh $pairs $steps $spec"
if ! command -v perf >/dev/null 2>&1; then
    echo "extra_torch_cnn: sgemm share skipped: perf is not installed (apt-get install -y linux-perf)"
    exit 0
fi
if ! perf record -q -o "$tmp/perf.data" "$build/bench/bench_train" 1 "$((steps * 10))" "$spec" >/dev/null 2>"$tmp/perf.err"; then
    echo "extra_torch_cnn: sgemm share skipped: perf record failed: $(head -n 1 "$tmp/perf.err")"
    exit 0
fi
perf report -i "$tmp/perf.data" --no-children --sort sym --stdio 2>/dev/null |
    grep -E '^ +[0-9.]+%' >"$tmp/profile"
share=$(awk '$3 ~ /^sgemm_/ { s += $1 } END { printf "%.1f", s }' "$tmp/profile")
echo "perf profile of bench_train 1 $((steps * 10)) $spec: sgemm_* (OpenBLAS kernels, packing, scaling) ${share}% of samples; top entries:"
head -n 12 "$tmp/profile" | sed 's/^/  /'
echo "command: perf record -o perf.data $build/bench/bench_train 1 $((steps * 10)) $spec; perf report -i perf.data --no-children --sort sym"
