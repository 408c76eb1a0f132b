# Shared helpers of the agent integration tests (sourced, not a test).
# A test sets NAME, sources this file, calls cluster_init, starts agents
# with agent_start, and reads their state from their logs (one progress line
# every 250 ms) or from /status. Everything runs on 127.0.0.1; every agent
# is killed and the temporary directory removed on exit.
set -eu
build=${BUILD:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "$NAME: $bin not built" >&2; exit 1; }
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
tmp=$(mktemp -d)
pids=""
# On exit: kill every agent; a test that passed still fails if any agent
# log holds a sanitizer report or an error-level line.
cleanup_agents() {
    rc=$?
    for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
    if [ "$rc" -eq 0 ] && grep -E 'Sanitizer|runtime error:|level=error' "$tmp"/a*.log >"$tmp/bad" 2>/dev/null; then
        echo "$NAME: FAIL agent logs report errors:" >&2
        head -n 20 "$tmp/bad" >&2
        rc=1
    fi
    # a failed test keeps its agents' whole logs (the failure message shows
    # their last lines only)
    if [ "$rc" -ne 0 ] && ls "$tmp"/a*.log >/dev/null 2>&1; then
        keep="$build/failed-logs/$NAME"
        rm -rf "$keep" && mkdir -p "$keep" && cp "$tmp"/a*.log "$keep/" 2>/dev/null &&
            echo "$NAME: agent logs kept in $keep" >&2
    fi
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup_agents EXIT
trap 'exit 130' INT TERM
fail() {
    echo "$NAME: FAIL $*" >&2
    for f in "$tmp"/a*.log; do
        [ -f "$f" ] || continue
        echo "--- $(basename "$f") (last lines)" >&2
        tail -n 8 "$f" >&2
    done
    exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Membership timing used by every test, and the worst-case failure-detection
# time it implies for N members (docs/MEMBERSHIP.md): a member is probed
# within N-1 periods (shuffled round robin), one more period for the direct
# and indirect probes, then the Lifeguard suspicion timeout, which starts at
# suspicion_max_mult (6) times the minimum suspicion_mult * max(1, log10 N)
# periods and only falls with independent confirmations.
PROBE_MS=200
PROBE_TIMEOUT_MS=100
SUSPICION_MULT=4
detect_bound_ms() { # n
    echo $(($1 * PROBE_MS + 6 * SUSPICION_MULT * PROBE_MS))
}

# A free base port: the test's own range, moved on while any port is taken.
port_taken() {
    hex=$(printf '%04X' "$1")
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        awk -v h=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == h { f = 1 } END { exit !f }'
}
pick_base() { # start
    b=$1
    while :; do
        ok=1
        for k in 1 2 3 4 5 101 102 103 104 105; do
            if port_taken $((b + k)); then ok=0; break; fi
        done
        [ $ok -eq 1 ] && break
        b=$((b + 200))
    done
    echo "$b"
}

# agent_dirs N CATALOG: keys and a shards directory holding CATALOG (as
# "catalog") for agents 1..N.
agent_dirs() {
    i=1
    while [ $i -le "$1" ]; do
        mkdir -p "$tmp/a$i/shards"
        "$bin" keygen --out "$tmp/a$i" >/dev/null
        cp "$2" "$tmp/a$i/shards/catalog"
        i=$((i + 1))
    done
}

# cluster_init BASE N SHARDS: keys, a shard set held by agent 1 only.
cluster_init() {
    base=$(pick_base "$1")
    n=$2
    "$bin" keygen --network-key "$tmp/net.key" >/dev/null
    "$bin" shard --shards "$3" --out "$tmp/all" >/dev/null
    agent_dirs "$n" "$tmp/all/catalog"
    cp "$tmp"/all/*.msh "$tmp/a1/shards/"
}

# cluster_subset BASE N KEEP: like cluster_init, but the catalog
# lists only the first KEEP shards of a 640-way split of Fashion-MNIST (about
# 94 samples, 74 KB each), so that filling 24 agents moves 15 MB instead of
# 140 MB: the time bound then measures placement, replication and training,
# not the loopback crypto of a large data set.
cluster_subset() {
    base=$(pick_base "$1")
    "$bin" keygen --network-key "$tmp/net.key" >/dev/null
    "$bin" shard --shards 640 --out "$tmp/all" >/dev/null
    { grep '^#' "$tmp/all/catalog"; grep -v '^#' "$tmp/all/catalog" | head -n "$3"; } >"$tmp/catalog"
    agent_dirs "$2" "$tmp/catalog"
    k=0
    while [ $k -lt "$3" ]; do
        cp "$(printf '%s/all/shard-%03d-of-640.msh' "$tmp" $k)" "$tmp/a1/shards/"
        k=$((k + 1))
    done
}

# store_shim: build the LD_PRELOAD shim lib/slow_store.c (a slow disk under
# the shard store) into $tmp and set $preload to what LD_PRELOAD needs: ASan's
# runtime first in an ASan build, which refuses to start otherwise. Without a
# C compiler the test prints its one skipped line and exits.
store_shim() {
    command -v cc >/dev/null 2>&1 || { echo "$NAME: skipped: no C compiler (cc) for the store shim"; exit 0; }
    cc -shared -fPIC -O2 -o "$tmp/slow_store.so" tests/integration/lib/slow_store.c -ldl ||
        fail "cannot build the store shim"
    preload="$tmp/slow_store.so"
    rt=$(ldd "$bin" 2>/dev/null | sed -n 's/^[[:space:]]*libasan\.so[^ ]* => \([^ ]*\) .*/\1/p' | head -n 1)
    [ -z "$rt" ] || preload="$rt $preload"
}

# agent_start I [FLAGS...]: agent I listens on base+I, metrics on base+100+I,
# joins through agent 1 (and 2).
agent_start() {
    i=$1
    shift
    seeds=""
    [ "$i" -eq 1 ] || seeds="--seed 127.0.0.1:$((base + 1))"
    [ "$i" -le 2 ] || seeds="$seeds --seed 127.0.0.1:$((base + 2))"
    # shellcheck disable=SC2086
    "$bin" agent --data-dir "$tmp/a$i" --listen "127.0.0.1:$((base + i))" \
        --metrics "127.0.0.1:$((base + 100 + i))" --network-key-file "$tmp/net.key" $seeds \
        --set model.spec=mlp:64 --set model.eval_every_steps=100 --set model.eval_samples=1000 \
        --set membership.probe_interval_ms=$PROBE_MS \
        --set membership.probe_timeout_ms=$PROBE_TIMEOUT_MS \
        --set membership.suspicion_mult=$SUSPICION_MULT \
        --set log.progress_interval_ms=250 --set shards.replication=2 "$@" \
        2>>"$tmp/a$i.log" &
    eval "pid$i=$!"
    pids="$pids $!"
}
agent_pid() { eval "echo \$pid$1"; }
agent_alive() { kill -0 "$(agent_pid "$1")" 2>/dev/null; }

# Last value of KEY in agent I's progress lines (empty if none yet).
field() { # i key
    sed -n 's/.* event=progress //p' "$tmp/a$1.log" 2>/dev/null | tail -n 1 |
        tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}
# 1 if a >= b (numbers, "nan" is never >=).
ge() { awk -v a="${1:-nan}" -v b="$2" 'BEGIN { exit !(a + 0 == a && a >= b) }'; }
lt() { awk -v a="${1:-nan}" -v b="$2" 'BEGIN { exit !(a + 0 == a && a < b) }'; }

# wait_for SECONDS CONDITION...: poll every 250 ms until the command succeeds.
wait_for() {
    limit=$(($(date +%s) + $1))
    shift
    while ! "$@"; do
        [ "$(date +%s)" -lt "$limit" ] || return 1
        sleep 0.25
    done
}

# awk function: epoch ms of a log line's timestamp (2026-11-22T05:44:29.123Z).
AWK_TS_MS='function ts_ms(ts,  d, t, ymd, y, m, dd, days) {
    split(ts, d, "T"); split(d[2], t, ":"); sub("Z", "", t[3])
    split(d[1], ymd, "-"); y = ymd[1]; m = ymd[2]; dd = ymd[3]
    if (m <= 2) { y--; m += 12 }
    days = 365 * y + int(y / 4) - int(y / 100) + int(y / 400) + int((153 * (m - 3) + 2) / 5) + dd - 719469
    return (days * 86400 + t[1] * 3600 + t[2] * 60 + t[3]) * 1000
}'

# Longest time (ms) agent I's step count stood still between its progress
# lines from FROM_MS (epoch ms) on.
max_stall_ms() { # i from_ms
    sed -n 's/^ts=\([^ ]*\) .* event=progress step=\([0-9]*\) .*/\1 \2/p' "$tmp/a$1.log" |
        awk -v from="$2" "$AWK_TS_MS"'{
            ms = ts_ms($1)
            if (ms < from) next
            if (n && $2 == last) { if (ms - since > worst) worst = ms - since }
            else { since = ms; last = $2 }
            n++
        } END { printf "%d\n", worst }'
}
# The longest time in ms between two progress lines of agent I from FROM_MS
# (epoch ms) on: the event loop writes them every 250 ms at the end of a
# pass, so a longer gap is a pass (or a wait) that held the loop that long.
max_progress_gap_ms() { # i from_ms
    sed -n 's/^ts=\([^ ]*\) .* event=progress .*/\1/p' "$tmp/a$1.log" |
        awk -v from="$2" "$AWK_TS_MS"'{
            ms = ts_ms($1)
            if (ms < from) next
            if (n && ms - prev > worst) worst = ms - prev
            prev = ms; n++
        } END { printf "%d\n", worst }'
}
# An integer field of agent I (0 while it has none).
fnum() { # i key
    v=$(field "$1" "$2")
    case "$v" in '' | *[!0-9]*) echo 0 ;; *) echo "$v" ;; esac
}
