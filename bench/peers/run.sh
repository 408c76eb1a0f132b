#!/bin/sh
# make bench-peers: run every bench/peers/*.sh comparison (each prints its
# figures, the ratios murmur/peer as medians of interleaved pairs, and the
# command that reproduces them). Exit status 1 if any script failed.
#   sh bench/peers/run.sh [BUILD]
set -u
build=${1:-build}
status=0
for s in bench/peers/*.sh; do
    [ "$(basename "$s")" = run.sh ] && continue
    echo "== $(basename "$s" .sh)"
    BUILD="$build" sh "$s" || status=1
done
exit $status
