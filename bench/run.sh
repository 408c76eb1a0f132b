#!/bin/sh
# Run every benchmark: each build/bench/bench_* binary, then each
# bench/extra_*.sh script (peers such as PyTorch, when installed).
# Every benchmark prints its own figures and the command that produced them.
set -u
build=${1:-build}
status=0
for b in "$build"/bench/bench_*; do
    [ -x "$b" ] || continue
    case "$b" in *.o|*.d) continue ;; esac
    # run and recorded by bench/extra_mix.sh below
    [ "$(basename "$b")" = bench_mix ] && continue
    echo "== $(basename "$b")"
    "$b" || status=1
done
for s in bench/extra_*.sh; do
    [ -f "$s" ] || continue
    echo "== $(basename "$s" .sh)"
    BUILD="$build" sh "$s" || status=1
done
exit $status
