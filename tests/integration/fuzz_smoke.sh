#!/bin/sh
# fuzz_smoke: build every libFuzzer target (tests/fuzz/fuzz_*.c) with clang
# and run each for FUZZ_S seconds (default 3; two at a time, FUZZ_JOBS) from
# its committed seed corpus,
# so every seed and regression input is replayed and a few thousand new
# inputs are tried; any crash or broken property fails the test
# (docs/FUZZING.md). Prints one "fuzz_smoke: skipped: ..." line where clang
# or libFuzzer is missing. Long runs: make fuzz FUZZ_S=600.
set -u
cd "$(dirname "$0")/../.."
cc=${FUZZ_CC:-clang}
if ! sh tests/fuzz/have_libfuzzer.sh "$cc"; then
    echo "fuzz_smoke: skipped: $cc with libFuzzer not found (apt-get install clang libclang-rt-14-dev)"
    exit 0
fi
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
# A clean sub-make: the runner's MAKEFLAGS (and its jobserver) are not ours.
if ! MAKEFLAGS= make --no-print-directory -j2 fuzz-build FUZZ_CC="$cc" >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log"
    echo "fuzz_smoke: building the targets failed"
    exit 1
fi
echo "fuzz_smoke: targets built in $(($(date +%s) - start))s"
FUZZ_JOBS=${FUZZ_JOBS:-2} sh tests/fuzz/run.sh build/fuzz "${FUZZ_S:-3}" "$work/corpus"
