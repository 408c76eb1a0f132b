#!/bin/sh
# `murmur bench allreduce` (issue 12): N agents as processes on 127.0.0.1
# over the real transport and channel. Each timed round is one line ending
# in time_ms= and busbw_gbps=, with busbw = size / time x 2(N-1)/N (checked
# against the printed time, not against a speed); the closing '#' line
# gives the error of the mean (float32 rounding at 32 bits, the codec's at
# 8); --auth-only runs and says so; bad arguments exit 2 with a message.
set -eu
NAME=bench_allreduce
build=${BUILD:-build}
bin="$build/murmur"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "$NAME: FAIL $*" >&2; exit 1; }

# check FILE AGENTS SIZE BITS MODE ITERS
check() {
    awk -v n="$2" -v size="$3" -v bits="$4" -v mode="$5" -v iters="$6" '
    /^allreduce / {
        runs++
        if ($NF !~ /^busbw_gbps=/ || $(NF-1) !~ /^time_ms=/) { print "bad ending: " $0; exit 1 }
        if ($2 != "agents=" n || $3 != "size=" size || $4 != "bits=" bits || $5 != "mode=" mode ||
            $6 != "run=" runs || $7 !~ /^cpu_ms=[0-9.]+$/) { print "bad fields: " $0; exit 1 }
        t = substr($(NF-1), 9) + 0; b = substr($NF, 12) + 0; a = substr($(NF-2), 12) + 0
        if (t <= 0) { print "time not positive: " $0; exit 1 }
        want = size / (t / 1000) / 1e9
        if (a < want * 0.98 || a > want * 1.02) { print "algbw != size/time: " $0; exit 1 }
        ring = 2 * (n - 1) / n
        if (b < a * ring * 0.98 || b > a * ring * 1.02) { print "busbw != algbw x 2(N-1)/N: " $0; exit 1 }
        next
    }
    /^# allreduce / { summary++; for (i = 1; i <= NF; i++) if ($i ~ /^max_error=/) err = substr($i, 11) + 0; next }
    { print "unexpected line: " $0; exit 1 }
    END {
        if (runs != iters) { print "runs: " runs " want " iters; exit 1 }
        if (summary != 1) { print "no summary line"; exit 1 }
        if (bits == 32 && err > 1e-5) { print "32-bit mean off by " err; exit 1 }
        if (bits == 8 && err > 0.05) { print "8-bit mean off by " err; exit 1 }
    }' "$1" || fail "output of $*: $(cat "$1")"
}

"$bin" bench allreduce --agents 2 --size 1M --iters 3 --warmup 1 >"$tmp/a" || fail "2 agents"
check "$tmp/a" 2 1048576 32 encrypt 3
"$bin" bench allreduce --agents 3 --size 262148 --bits 8 --iters 2 >"$tmp/b" || fail "3 agents, 8 bits"
check "$tmp/b" 3 262148 8 encrypt 2
"$bin" bench allreduce --agents 2 --size 256K --auth-only --iters 2 --chunk 1000 >"$tmp/c" ||
    fail "auth-only"
check "$tmp/c" 2 262144 32 auth-only 2

for bad in "--agents 1 --size 1M" "--agents 2 --size 1001" "--agents 2 --size 1M --bits 7" \
    "--agents 2" "--agents 2 --size 128M" "--agents 2 --size 1M --iters 0"; do
    # shellcheck disable=SC2086
    if "$bin" bench allreduce $bad >"$tmp/o" 2>"$tmp/e"; then fail "accepted: $bad"; fi
    [ -s "$tmp/e" ] || fail "no message for: $bad"
done
"$bin" bench allreduce --agents 1 --size 1M 2>/dev/null && fail "1 agent accepted"
rc=0
"$bin" bench allreduce --agents 1 --size 1M 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "usage error exit status $rc, want 2"
"$bin" bench nosuch 2>/dev/null && fail "unknown benchmark accepted"
echo "$NAME: ok"
