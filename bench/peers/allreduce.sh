#!/bin/sh
# Allreduce: `murmur bench allreduce` (32/8/4 bits, encrypted and auth-only)
# against Gloo (torch.distributed) and Open MPI's MPI_Allreduce over TCP, at
# N = 2 and 4 and 1/4/16/64 MiB, interleaved rounds, median ratios; the
# table is written into docs/BENCHMARKS.md (a generated section).
#   BUILD=build sh bench/peers/allreduce.sh [ROUNDS]
set -u
build=${BUILD:-build}
rounds=${1:-${ALLREDUCE_ROUNDS:-3}}
if command -v mpicc >/dev/null 2>&1; then
    mkdir -p "$build/bench"
    mpicc -O2 -o "$build/bench/allreduce_mpi" bench/peers/allreduce_mpi.c ||
        echo "allreduce: mpicc failed; Open MPI left out"
fi
/usr/bin/python3 bench/peers/allreduce.py "$build" --rounds "$rounds" --record docs/BENCHMARKS.md
