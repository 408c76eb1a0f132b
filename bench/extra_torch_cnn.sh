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
# profile's top entries; skipped with a message when perf is absent. Last,
# one bench_train run forced onto OpenBLAS's SSE3 fallback kernels
# (OPENBLAS_CORETYPE=Prescott; model/blas.h says when OpenBLAS picks them).
# Everything printed is also written into RECORD (default
# docs/BENCHMARKS.md, between the lines <!-- bench:torch_cnn begin --> and
# <!-- bench:torch_cnn end -->, appended when they are absent) with the
# command, the date and the load average; RECORD= (empty) writes nothing.
#   BUILD=build sh bench/extra_torch_cnn.sh [pairs] [steps] [spec]
# Uses Debian's python3-torch through /usr/bin/python3; skips with a message
# when torch is absent.
set -u
build=${BUILD:-build}
pairs=${1:-5}
steps=${2:-30}
spec=${3:-cnn}
record=${RECORD-docs/BENCHMARKS.md}
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
    echo "| $((i + 1)) | $m | $t | $r | $m2 | $t2 | $r2 |" >>"$tmp/pairs"
    ms="$ms $m" ts="$ts $t" rs="$rs $r" mc="$mc $m2" tc="$tc $t2" rc="$rc $r2"
    i=$((i + 1))
done
median() { echo "$@" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
tv=$(OMP_NUM_THREADS=1 "$py" -c 'import torch; print(torch.__version__)')
cmd="BUILD=$build sh bench/extra_torch_cnn.sh $pairs $steps $spec"
core=$(sed -n 's/.* blas_core=\([^ ]*\).*/\1/p' "$tmp/m")
echo "network: $spec, $pm parameters, batch 64, SGD momentum 0.9, 1 thread each"
echo "murmur (bench_train): median samples_per_s=$(median $ms) cpu_samples_per_s=$(median $mc)"
echo "pytorch $tv (torch_cnn.py): median samples_per_s=$(median $ts) cpu_samples_per_s=$(median $tc)"
echo "ratio murmur/pytorch: wall $(median $rs), cpu $(median $rc) (median of $pairs interleaved pairs; target >= 1.5)"
echo "command: $cmd"
# The generated section of RECORD: the pairs, their medians, the profile.
load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
{
    echo "Produced by \`$cmd\` (run by \`make bench\`) on $(date -u +%Y-%m-%d), load average ${load:-unknown} on $(nproc 2>/dev/null || echo '?') cores; do not edit by hand."
    echo ""
    echo "Network \`$spec\`, $pm parameters, batch 64, SGD momentum 0.9 and weight decay 5e-4, one thread each: murmur's \`bench_train 3 $steps $spec\` (OpenBLAS ${core:-?} kernels, 1 thread) and PyTorch $tv's \`bench/torch_cnn.py 3 $steps $spec\` (\`torch.set_num_threads(1)\`), interleaved in $pairs pairs, each side the median of 3 runs of $steps steps. Samples/s by wall clock and by process CPU time."
    echo ""
    echo "| pair | murmur samples/s | PyTorch samples/s | ratio | murmur CPU samples/s | PyTorch CPU samples/s | CPU ratio |"
    echo "|---:|---:|---:|---:|---:|---:|---:|"
    cat "$tmp/pairs"
    echo "| **median** | $(median $ms) | $(median $ts) | **$(median $rs)** | $(median $mc) | $(median $tc) | **$(median $rc)** |"
    echo ""
} >"$tmp/section"
profile() {
    if ! command -v perf >/dev/null 2>&1; then
        echo "extra_torch_cnn: sgemm share skipped: perf is not installed (apt-get install -y linux-perf)"
        return
    fi
    if ! perf record -q -o "$tmp/perf.data" "$build/bench/bench_train" 1 "$((steps * 10))" "$spec" >/dev/null 2>"$tmp/perf.err"; then
        echo "extra_torch_cnn: sgemm share skipped: perf record failed: $(head -n 1 "$tmp/perf.err")"
        return
    fi
    perf report -i "$tmp/perf.data" --no-children --sort dso,sym --stdio 2>/dev/null |
        grep -E '^ +[0-9.]+%' >"$tmp/profile"
    # columns: share, object, [.], symbol
    share=$(awk '$4 ~ /^sgemm_/ { s += $1 } END { printf "%.1f", s }' "$tmp/profile")
    pcmd="perf record -o perf.data $build/bench/bench_train 1 $((steps * 10)) $spec; perf report -i perf.data --no-children --sort dso,sym"
    echo "perf profile of bench_train 1 $((steps * 10)) $spec: sgemm_* (OpenBLAS kernels, packing, scaling) ${share}% of samples; top entries:"
    head -n 15 "$tmp/profile" | sed 's/^/  /'
    echo "command: $pcmd"
    {
        echo "Profile: \`$pcmd\` (the same run): **${share}%** of the samples in OpenBLAS sgemm (\`sgemm_*\`: kernels, packing, scaling). Top entries:"
        echo ""
        echo "| share | object | symbol |"
        echo "|---:|---|---|"
        head -n 15 "$tmp/profile" | awk '{ printf "| %s | %s | `%s` |\n", $1, $2, $4 }'
        echo ""
    } >>"$tmp/section"
}
profile
# For comparison: murmur on OpenBLAS's SSE3 fallback kernels, which OpenBLAS
# 0.3.21 picks on CPUs it does not know (model/blas.h).
OPENBLAS_CORETYPE=Prescott "$build/bench/bench_train" 3 "$steps" "$spec" >"$tmp/p" 2>&1
pw=$(fig samples_per_s "$tmp/p") pc=$(fig cpu_samples_per_s "$tmp/p")
pcore=$(sed -n 's/.* blas_core=\([^ ]*\).*/\1/p' "$tmp/p")
if [ -n "$pc" ]; then
    echo "murmur on OpenBLAS core $pcore (OPENBLAS_CORETYPE=Prescott): samples_per_s=$pw cpu_samples_per_s=$pc"
    {
        echo "For comparison, \`OPENBLAS_CORETYPE=Prescott $build/bench/bench_train 3 $steps $spec\` (OpenBLAS core $pcore, its SSE3 fallback) after the pairs: $pw samples/s, $pc by CPU time."
        echo ""
    } >>"$tmp/section"
fi
[ -n "$record" ] || exit 0
if [ ! -f "$record" ]; then
    echo "extra_torch_cnn: not recorded: $record does not exist (run from the source tree, or RECORD=FILE)" >&2
    exit 0
fi
{ echo "<!-- bench:torch_cnn begin -->"; echo ""; cat "$tmp/section"; echo "<!-- bench:torch_cnn end -->"; } >"$tmp/block"
# shellcheck source=scripts/record.sh
. scripts/record.sh
record_block "$record" "bench:torch_cnn" "$tmp/block" && echo "extra_torch_cnn: recorded in $record"
