#!/bin/sh
# make calibrate: the simulator against real agents (issue 14, item 4).
#
#   sh scripts/calibrate.sh [BUILD]            (make calibrate)
#
# One scenario, run twice for every mixing algorithm and link bandwidth:
#
#   real  CALIB_AGENTS `murmur agent` processes, each in a network namespace
#         this script creates (tests/integration/lib/netns.sh: veth pairs on
#         a bridge in a hub namespace, all removed on exit, even on failure),
#         every link shaped by tc tbf to the bandwidth, both directions.
#   sim   `murmur sim` with the same model, data, batch, learning rate and
#         mixing, its compute model fitted to this host and its network
#         model set to the shaped links (the fit is below).
#
# Per run it prints both sides' steps/s per agent, bytes sent per agent over
# the measured window and time to the target accuracy, and their ratio
# (sim / real), and records the table, the command and the date between
# <!-- calibrate begin --> and <!-- calibrate end --> of CALIB_RECORD
# (docs/SIMULATOR.md; empty = record nothing).
#
# The fit, per run, measured in it or just before it (this host is shared,
# so its speed drifts between runs), also sched_fit below:
#   compute.step_ms  the agents' own step time under the real contention,
#                    1000 / (steps/s per agent): CALIB_FIT=own (default) from
#                    the measured window of the real run itself (this shared
#                    host's speed moved 2-4x between runs minutes apart, so
#                    nothing measured earlier holds); CALIB_FIT=idle from the
#                    same agents run just before with mixing off
#                    (mixing.interval_steps = 10^6) for CALIB_FIT_S seconds, a
#                    prediction whose ratio then shows what mixing costs the
#                    trainers. Either holds the evaluations (CALIB_EVAL_SAMPLES
#                    test samples every CALIB_EVAL_EVERY steps) and the agents'
#                    sharing of the cores, which the simulator cannot know.
#   (links)          tbf with a bucket of 1 ms at the rate, at least 4 KB
#                    (the simulator's links are a plain rate, no bucket),
#                    and a queue of CALIB_QUEUE_MS (500) ms at the rate: the
#                    simulator's links lose nothing, and with tbf's 50 ms
#                    two 51 KB frames on one 10 Mb/s uplink overflowed it
#                    (3-4% of the packets dropped and sent again)
#   bandwidth_mbps   the tbf rate times the TCP goodput of a full Ethernet
#                    frame, 1448 / 1514 (tbf counts the whole frame: 14 B
#                    Ethernet, 20 B IP, 32 B TCP with timestamps, 1448 B of
#                    payload at MTU 1500); the simulator counts payload only.
#   latency_ms       half the median round trip between two namespaces
#                    (the time of a refused TCP connect).
#   output.every_s   step_ms x CALIB_EVAL_EVERY: the simulator samples the
#                    accuracy as often as the agents evaluate it.
# netem is not in every kernel (not in this one): without it latency and loss
# are not shaped, and the script says so in one line.
#
# Real-side figures, from the agents' progress lines (every 100 ms). The
# agents start paused and are resumed together (murmur fault --resume) once
# each holds the model and sees its peers. T0 = the time the last agent's
# step count moved after its resume; the window is [T0 + CALIB_WARMUP_S,
# + CALIB_DURATION_S]; steps/s = mean over agents of their steps in the
# window / its length; bytes per agent = mean of bytes_sent in the window
# (frame bytes, as the simulator counts them: no TCP or channel overhead);
# time to target = from the mean of the agents' first steps after the
# resume to the first progress line at which the mean of the agents' latest
# accuracies is >= target; mean round = the agents' /metrics histogram
# murmur_round_duration_seconds (sum / count).
# Simulator figures (it runs CALIB_DURATION_S + CALIB_WARMUP_S simulated
# seconds): steps_total / sim_time / agents, bytes_total / agents scaled to
# the window, time_to_target_s (first crossing of the population accuracy),
# mix_time_mean_s, each the mean over CALIB_SIM_SEEDS seeds.
#
# Knobs (environment):
#   CALIB_BANDWIDTHS "10 100"   link bandwidths in Mb/s
#   CALIB_ALGOS "gossip allreduce"
#   CALIB_AGENTS 4   CALIB_TARGET 0.78   CALIB_DURATION_S 15   CALIB_WARMUP_S 2
#   CALIB_FIT own|idle  CALIB_FIT_S 8 (idle)  CALIB_NICE -10 (agents, sim)
#   CALIB_QUEUE_MS 500 (tbf's queue bound)
#   CALIB_SCHED 1 (fit the step-time distribution, the loops' cost and the
#                    agents' speeds from the scheduler's statistics; 0: the
#                    mean step only)
#   CALIB_SLICE_MS   the time slice this host's scheduler gives a CPU-bound
#                    thread, which is how long a trainer that lost its core
#                    waits (see sched_fit); empty (default): measured before
#                    the runs (slice_probe, python3); 0: the fit of a wait
#                    per turn of the mean length instead (the fit before
#                    2026-11-29)
#   CALIB_HIDDEN 64 (model mlp:H)  CALIB_BATCH 64  CALIB_LR 0.005
#   CALIB_INTERVAL_STEPS 16  CALIB_BITS 8  CALIB_EVAL_EVERY 100
#   CALIB_EVAL_SAMPLES 2000  CALIB_SIM_SEEDS 2  CALIB_RECORD docs/SIMULATOR.md
#   CALIB_LOGS DIR   keep the agents' logs and the simulator's runs there
#   CALIB_REPS 2     real runs per row, each with its own fit and its own
#                    simulation; the row gives the means over them (time
#                    to target: over the runs in which both sides reached
#                    it), so one run's noise weighs 1/CALIB_REPS
#   CALIB_STEADY 0.85  CALIB_TRIES 3: a real run whose window's slower half
#                    stepped at less than CALIB_STEADY of its faster half
#                    (the host's load changed: a shared machine) is run
#                    again, up to CALIB_TRIES runs; the table gives the
#                    figure ("host steady") and marks a row that never
#                    held still ("host unsteady"): the simulator is fitted
#                    to the window's mean and cannot follow a change in it
#   CALIB_MEASURED FILE  your own hosts' figures instead of the namespaces
#                    (no root needed): one line per run,
#                    ALGO BANDWIDTH_MBPS STEP_MS RTT_MS STEPS_PER_S BYTES_PER_AGENT TTA_S
#                    (STEP_MS: an agent's step time with mixing off on your
#                    hosts; BANDWIDTH_MBPS: the payload rate the simulator
#                    gets; the last three: your real run of CALIB_DURATION_S
#                    seconds with the settings above; '#' comments). The
#                    simulator runs each line and the table compares.
# Without root (and without CALIB_MEASURED) it prints one line and exits 0.
NAME=calibrate
set -eu
build=${1:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "calibrate: $bin not built (make)" >&2; exit 1; }
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
bws=${CALIB_BANDWIDTHS:-10 100}
algos=${CALIB_ALGOS:-gossip allreduce}
n=${CALIB_AGENTS:-4}
target=${CALIB_TARGET:-0.78}
dur=${CALIB_DURATION_S:-15}
fit_s=${CALIB_FIT_S:-8}
hidden=${CALIB_HIDDEN:-64}
batch=${CALIB_BATCH:-64}
lr=${CALIB_LR:-0.005}
interval=${CALIB_INTERVAL_STEPS:-16}
bits=${CALIB_BITS:-8}
eval_every=${CALIB_EVAL_EVERY:-100}
eval_samples=${CALIB_EVAL_SAMPLES:-2000}
sim_seeds=${CALIB_SIM_SEEDS:-2}
warmup=${CALIB_WARMUP_S:-2}
fit=${CALIB_FIT:-own}
case "$fit" in own | idle) ;; *) echo "calibrate: CALIB_FIT=$fit: own or idle" >&2; exit 2 ;; esac
prio=${CALIB_NICE:--10}
record=${CALIB_RECORD-docs/SIMULATOR.md}
measured=${CALIB_MEASURED:-}
sched=${CALIB_SCHED:-1}
slice_ms=${CALIB_SLICE_MS:-}
case "$slice_ms" in *[!0-9.]* | .*) echo "calibrate: CALIB_SLICE_MS=$slice_ms: milliseconds, 0 or more" >&2; exit 2 ;; esac
qlat=${CALIB_QUEUE_MS:-500}ms
steady_min=${CALIB_STEADY:-0.85}
tries=${CALIB_TRIES:-3}
reps=${CALIB_REPS:-2}
case "$reps" in '' | *[!0-9]* | 0) echo "calibrate: CALIB_REPS=$reps: a count of runs, 1 or more" >&2; exit 2 ;; esac
fitsets=""
goodput=0.956407 # 1448 / 1514, see above
cmdline="sh scripts/calibrate.sh $build"
for v in CALIB_BANDWIDTHS CALIB_ALGOS CALIB_AGENTS CALIB_TARGET CALIB_DURATION_S CALIB_FIT_S \
    CALIB_HIDDEN CALIB_BATCH CALIB_LR CALIB_INTERVAL_STEPS CALIB_BITS CALIB_EVAL_EVERY \
    CALIB_EVAL_SAMPLES CALIB_SIM_SEEDS CALIB_WARMUP_S CALIB_NICE CALIB_FIT CALIB_MEASURED CALIB_SCHED \
    CALIB_QUEUE_MS CALIB_STEADY CALIB_TRIES CALIB_REPS CALIB_SLICE_MS; do
    eval "x=\${$v:-}"
    [ -z "$x" ] || cmdline="$v='$x' $cmdline"
done

if [ -n "$measured" ]; then
    [ -r "$measured" ] || { echo "calibrate: CALIB_MEASURED=$measured: cannot read it" >&2; exit 2; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    trap 'exit 130' INT TERM
else
    # netns.sh: the namespaces, their cleanup on exit (and the one-line skip
    # without root).
    . tests/integration/lib/netns.sh
    command -v tc >/dev/null 2>&1 || netns_skip "needs tc (iproute2) to shape the links"
    netns_init "$n"
    tmp=$(mktemp -d)
    # CALIB_LOGS=DIR keeps the agents' logs and the simulator's outputs
    [ -z "${CALIB_LOGS:-}" ] ||
        netns_at_exit "mkdir -p '$CALIB_LOGS' && cp -r '$tmp'/fit-* '$tmp'/real-* '$tmp'/sim-* '$CALIB_LOGS'/ 2>/dev/null"
    netns_at_exit "rm -rf '$tmp'"
fi
rows="$tmp/rows"
: >"$rows"

# ---- the simulator side ----------------------------------------------------
cat >"$tmp/scenario.ini" <<EOF
# make calibrate: the scenario of the real agents (scripts/calibrate.sh)
[run]
agents = $n
mode = timed
duration_s = $(awk -v d="$dur" -v w="$warmup" 'BEGIN { print d + w }')
target_accuracy = $target
[model]
kind = mlp
hidden = $hidden
# the agents' initial parameters (their model.init_seed, 1 by default)
init_seed = 1
lr = $lr
batch = $batch
data = fashion-mnist
[mixing]
bits = $bits
interval_steps = $interval
topology = random
[compute]
straggler_model = none
EOF

# sim_run ALG BW_PAYLOAD_MBPS STEP_MS RTT_MS OUT: prints "steps_per_s bytes tta":
# steps/s per agent, bytes per agent in CALIB_DURATION_S, first crossing of
# the target (means over the seeds; a time over the seeds that reached it)
sim_run() {
    every=$(awk -v s="$3" -v e="$eval_every" 'BEGIN { printf "%.6g", s * e / 1000 }')
    lat=$(awk -v r="$4" 'BEGIN { printf "%.6g", r / 2 }')
    # shellcheck disable=SC2086
    nice -n "$prio" "$bin" sim "$tmp/scenario.ini" --out "$5" --quiet --seeds "$sim_seeds" \
        --set mixing.algorithm="$1" --set network.bandwidth_mbps="$2" \
        --set network.latency_ms="$lat" --set compute.step_ms="$3" \
        --set output.every_s="$every" $fitsets >"$5.log" 2>&1 ||
        { cat "$5.log" >&2; echo "calibrate: murmur sim failed" >&2; exit 1; }
    for f in "$5"/seed-*/summary.json "$5"/summary.json; do
        [ -f "$f" ] || continue
        case "$f" in */seed-*) ;; *) [ "$sim_seeds" -eq 1 ] || continue ;; esac
        sed -n 's/^  "\(steps_total\|sim_time_s\|bytes_total\|time_to_target_s\|mix_time_mean_s\)": \([^,]*\),*$/\1 \2/p' "$f"
        echo end
    done | awk -v n="$n" -v dur="$dur" '
        $1 == "steps_total" { st = $2 } $1 == "sim_time_s" { t = $2 } $1 == "bytes_total" { b = $2 }
        $1 == "time_to_target_s" { tta = $2 } $1 == "mix_time_mean_s" { rt += $2 * 1000 }
        $1 == "end" { runs++; rate += st / t / n; bytes += b / n / t * dur
                      if (tta != "null") { tsum += tta; tn++ }; tta = "null" }
        END { printf "%.6g %.6g %s %.4g\n", rate / runs, bytes / runs, tn ? sprintf("%.6g", tsum / tn) : "none", rt / runs }'
}

# ---- the real side ---------------------------------------------------------
if [ -z "$measured" ]; then
    if ! ip netns exec "${netns_pfx}_1" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
        echo "calibrate: netem is not available in this kernel: latency and loss are not shaped (bandwidth only, tc tbf)"
    else
        ip netns exec "${netns_pfx}_1" tc qdisc del dev lo root 2>/dev/null || true
    fi
    "$bin" keygen --network-key "$tmp/net.key" >/dev/null
    "$bin" shard --shards 16 --out "$tmp/split" >/dev/null
    # the key that resumes the paused agents (murmur fault)
    "$bin" keygen --out "$tmp/admin" >/dev/null
    cp "$tmp/admin/murmur.pub" "$tmp/admins"
    chmod 600 "$tmp/admins"
fi

# rtt_ms: median of 9 TCP connects from node 1 to a closed port of node 2
# (refused: one round trip), timed with bash's EPOCHREALTIME (no fork).
rtt_ms() {
    netns_exec 1 bash -c 'for k in 1 2 3 4 5 6 7 8 9; do
        a=$EPOCHREALTIME; { : 3<>/dev/tcp/'"$(netns_ip 2)"'/9; } 2>/dev/null; b=$EPOCHREALTIME
        echo "$a $b"; done' | awk '{ print ($2 - $1) * 1000 }' | sort -n | sed -n 5p |
        awk '{ printf "%.3f\n", $1 }'
}

# wait_line FILE PATTERN WHAT: wait (60 s at most) for a line of FILE
wait_line() {
    limit=$(($(date +%s) + 60))
    until grep -q "$2" "$1" 2>/dev/null; do
        if [ "$(date +%s)" -ge "$limit" ]; then
            tail -n 5 "$1" >&2
            echo "calibrate: $3 after 60 s" >&2
            exit 1
        fi
        sleep 0.2
    done
}

# sched_sample PIDS (variables ss_*: sh has no locals): one line per agent,
# "RUN WAIT SLICES LRUN LWAIT LSLICES NRUN NWAIT NSLICES": the kernel's
# scheduler statistics (/proc/PID/task/TID/schedstat: ns on a CPU, ns
# waiting on a run queue, times run) of its trainer (the main thread), of
# its event loop (the thread named murmur-loop) and, summed, of the
# transport's I/O threads (NNG's poller and task threads, which move every
# frame between the socket and the loop).
sched_sample() {
    for ss_p in "$@"; do
        ss_t=$(cat "/proc/$ss_p/task/$ss_p/schedstat" 2>/dev/null) || ss_t="0 0 0"
        ss_l="0 0 0"
        ss_n=""
        for ss_d in /proc/"$ss_p"/task/*; do
            case "$(cat "$ss_d/comm" 2>/dev/null)" in
            murmur-loop) ss_l=$(cat "$ss_d/schedstat" 2>/dev/null) || ss_l="0 0 0" ;;
            nng:task | nng:poll:epoll) ss_n="$ss_n $(cat "$ss_d/schedstat" 2>/dev/null)" ;;
            esac
        done
        # shellcheck disable=SC2086
        echo "$ss_t $ss_l $(echo $ss_n | awk '{ for (i = 1; i <= NF; i++) s[(i - 1) % 3] += $i }
            END { printf "%.0f %.0f %.0f", s[0], s[1], s[2] }')"
    done
}

# cluster DIR ALG INTERVAL SECONDS: run the agents (fresh keys and data
# directories, every shard on every agent, r = N) until every agent has
# trained SECONDS past the moment the last one started; logs DIR/aI.log.
cluster() {
    d=$1 alg=$2 iv=$3 secs=$4
    mkdir -p "$d"
    i=1
    while [ "$i" -le "$n" ]; do
        mkdir -p "$d/a$i/shards"
        "$bin" keygen --out "$d/a$i" >/dev/null
        ln "$tmp"/split/*.msh "$tmp/split/catalog" "$d/a$i/shards/"
        i=$((i + 1))
    done
    cpids=""
    # Agent 1 first (the seed: it starts from its own model), then the
    # joiners (each fetches agent 1's model). Every agent starts paused
    # (faults.pause_training: one step, then it waits) and all are resumed
    # together once every one holds the model and sees every peer, so they
    # start training within a few tens of ms, as the simulated agents do.
    for i in $(seq 1 "$n"); do
        seeds=""
        [ "$i" -eq 1 ] || seeds="--seed $(netns_ip 1):7000"
        # shellcheck disable=SC2086
        netns_spawn "$i" "$d/a$i.log" nice -n "$prio" "$bin" agent --data-dir "$d/a$i" \
            --listen "$(netns_ip "$i"):7000" --metrics "$(netns_ip "$i"):7100" --network-key-file "$tmp/net.key" $seeds \
            --set model.spec="mlp:$hidden" --set model.batch="$batch" --set model.lr="$lr" \
            --set model.momentum=0 --set model.weight_decay=0 --set model.schedule=constant \
            --set mixing.outer_momentum=0 \
            --set model.init_seed=1 \
            --set model.warmup=0 --set model.lr_scaling=none --set model.min_lr=0 \
            --set model.eval_every_steps="$eval_every" --set model.eval_samples="$eval_samples" \
            --set mixing.algorithm="$alg" --set mixing.bits="$bits" --set mixing.topology=random \
            --set mixing.interval_steps="$iv" --set shards.replication="$n" \
            --set checkpoint.every_steps=0 --set log.progress_interval_ms=100 \
            --set faults.enable=true --set faults.pause_training=true \
            --set faults.admin_keys_file="$tmp/admins"
        cpids="$cpids $netns_pid"
        [ "$i" -gt 1 ] || wait_line "$d/a1.log" "event=agent_started" "agent 1 does not start"
    done
    i=1
    while [ "$i" -le "$n" ]; do
        wait_line "$d/a$i.log" "event=model_ready" "agent $i has no model"
        wait_line "$d/a$i.log" "event=progress .* peers=$((n - 1)) " "agent $i does not see $((n - 1)) peers"
        wait_line "$d/a$i.log" "event=training_data" "agent $i loads no data"
        i=$((i + 1))
    done
    sleep 0.5
    rpids=""
    i=1
    while [ "$i" -le "$n" ]; do
        netns_exec 1 nice -n "$prio" "$bin" fault "$(netns_ip "$i"):7000" --resume --data-dir "$tmp/admin" \
            --network-key "$tmp/net.key" >"$d/resume$i.log" 2>&1 &
        rpids="$rpids $!"
        i=$((i + 1))
    done
    for p in $rpids; do wait "$p" || { cat "$d"/resume*.log >&2; echo "calibrate: murmur fault --resume failed" >&2; exit 1; }; done
    # the scheduler's statistics over the measured window (the fit below)
    sleep "$warmup"
    # shellcheck disable=SC2086
    sched_sample $cpids >"$d/sched0"
    sleep "$secs"
    # shellcheck disable=SC2086
    sched_sample $cpids >"$d/sched1"
    sleep 1
    # every agent's /metrics (the mixing rounds' durations)
    i=1
    while [ "$i" -le "$n" ]; do
        netns_exec "$i" bash -c "exec 3<>/dev/tcp/$(netns_ip "$i")/7100; printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3; cat <&3" \
            >"$d/metrics$i" 2>/dev/null || true
        i=$((i + 1))
    done
    for p in $cpids; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $cpids; do
        wait "$p" 2>/dev/null || true
        netns_forget "$p"
    done
}

# real_figures DIR SECONDS: "steps_per_s bytes_per_agent tta_s start_lag
# speeds steady" of the logs; steady = the slower half of the window's mean
# step rate over the faster half (1: the host's load held still)
real_figures() {
    i=1
    while [ "$i" -le "$n" ]; do
        sed -n -e 's/^ts=\([^ ]*\) .* event=progress step=\([0-9]*\) .* accuracy=\([^ ]*\) .* bytes_sent=\([0-9]*\) .*/\1 \2 \3 \4/p' \
            -e 's/^ts=\([^ ]*\) .* event=fault_removed kind=pause .*/\1 resumed/p' "$1/a$i.log" | sed "s/^/$i /"
        i=$((i + 1))
    done | awk -v n="$n" -v dur="$2" -v warm="$warmup" -v target="$target" '
        function secs(ts,   d, t, ymd, y, m, dd, days) {
            split(ts, d, "T"); split(d[2], t, ":"); sub("Z", "", t[3])
            split(d[1], ymd, "-"); y = ymd[1]; m = ymd[2]; dd = ymd[3]
            if (m <= 2) { y--; m += 12 }
            days = 365 * y + int(y / 4) - int(y / 100) + int(y / 400) + int((153 * (m - 3) + 2) / 5) + dd - 719469
            return days * 86400 + t[1] * 3600 + t[2] * 60 + t[3] }
        # res[i]: when agent i was resumed (its own log); first[i]: its first
        # progress line after that whose step moved
        $3 == "resumed" { res[$1] = secs($2); next }
        { k++; a[k] = $1; ts[k] = secs($2); st[k] = $3; acc[k] = $4; by[k] = $5
          if (!(($1) in res)) paused[$1] = $3
          else if (!(($1) in first) && $3 > paused[$1] + 0) first[$1] = ts[k] }
        END {
            t0 = -1; tr = -1; tl = -1; tf = 0
            for (i = 1; i <= n; i++) { if (!(i in first) || !(i in res)) { print "none none none none - -"; exit }
                if (first[i] > t0) t0 = first[i]; tf += first[i] / n
                if (tr < 0 || res[i] < tr) tr = res[i]; if (res[i] > tl) tl = res[i] }
            # the window: from warm s after t0 (every agent past its start)
            w0 = t0 + warm; t1 = w0 + dur
            # each agent: its last line at or before w0 and t1
            for (j = 1; j <= k; j++) { i = a[j]
                if (ts[j] <= w0) { s0[i] = st[j]; b0[i] = by[j] }
                if (ts[j] <= t1) { s1[i] = st[j]; b1[i] = by[j]; last[i] = ts[j] } }
            # and at the middle of the window: the step rate of each half
            for (j = 1; j <= k; j++) if (ts[j] <= w0 + dur / 2) sm[a[j]] = st[j]
            for (i = 1; i <= n; i++) { if (last[i] < t1 - 0.5) { print "none none none none - -"; exit }
                steps += (s1[i] - s0[i]) / n; bytes += (b1[i] - b0[i]) / n
                h1 += (sm[i] - s0[i]) / n; h2 += (s1[i] - sm[i]) / n }
            steady = (h1 > 0 && h2 > 0) ? (h1 < h2 ? h1 / h2 : h2 / h1) : 0
            # each agent'"'"'s speed relative to the mean (compute.agent_speeds)
            sp = ""; for (i = 1; i <= n; i++) sp = sp (i > 1 ? "," : "") sprintf("%.4f", steps > 0 ? (s1[i] - s0[i]) / steps : 1)
            # time to target: lines are per agent in time order; merge by time
            m = 0; for (j = 1; j <= k; j++) ord[++m] = j
            for (x = 2; x <= m; x++) { v = ord[x]; y = x - 1
                while (y > 0 && ts[ord[y]] > ts[v]) { ord[y + 1] = ord[y]; y-- } ord[y + 1] = v }
            tta = "none"
            for (x = 1; x <= m; x++) { j = ord[x]; if (ts[j] > t1) break
                if (ts[j] <= tr) continue
                if (acc[j] != "nan") cur[a[j]] = acc[j]
                c = 0; sum = 0; for (i = 1; i <= n; i++) if (i in cur) { c++; sum += cur[i] }
                if (c == n && sum / n >= target) { tta = sprintf("%.3f", ts[j] - tf); break } }
            printf "%.6g %.6g %s %.3f %s %.3f\n", steps / dur, bytes, tta, t0 - tr, sp, steady }'
}

# round_ms DIR: the agents' mean mixing round (ms, start to result, the
# murmur_round_duration_seconds histogram of every agent; "-" if none)
round_ms() {
    cat "$1"/metrics* 2>/dev/null | tr -d '\r' | awk '
        $1 == "murmur_round_duration_seconds_sum" { s += $2 }
        $1 == "murmur_round_duration_seconds_count" { c += $2 }
        END { if (c > 0) printf "%.4g\n", s / c * 1000; else print "-" }'
}

# slice_probe: the time slice (ms) this host's scheduler gives each of two
# CPU-bound processes sharing one CPU: both spin on the monotonic clock for
# a second and the median gap in one's readings is the other's turn (4.02
# ms here: a tick at 250 Hz). Prints nothing without python3.
slice_probe() {
    command -v python3 >/dev/null 2>&1 || return 0
    nice -n "$prio" python3 - <<'PY' 2>/dev/null || true
import os, time
def spin(cpu):
    os.sched_setaffinity(0, {cpu})
    gaps, t = [], time.monotonic_ns()
    end = t + 1_000_000_000
    while t < end:
        u = time.monotonic_ns()
        if u - t > 200_000:
            gaps.append(u - t)
        t = u
    return gaps
cpu = min(os.sched_getaffinity(0))
pid = os.fork()
if pid == 0:
    spin(cpu)
    os._exit(0)
g = sorted(spin(cpu))
os.waitpid(pid, 0)
if len(g) >= 10:
    print("%.4g" % (g[len(g) // 2] / 1e6))
PY
}

# sched_fit DIR STEP_MS SPEEDS SLICE_MS: the simulator's settings from the
# scheduler's statistics of the window (sched0, sched1; see "The fit"
# above), as --set options: the trainers' time-slicing as the random
# straggler model, a step being c ms of CPU and the mean step m; the time a
# frame spends at each end between the wire and the protocol as
# compute.loop_frame_us: one turn of the event loop plus one of the
# transport's I/O threads (each turn: its mean time on a CPU and waiting
# for one); and the agents' relative speeds.
# The trainers' waits: with SLICE_MS T > 0, a step that loses its core
# waits T, the turn of the CPU-bound thread (another trainer) that took it,
# so a share (m - c) / T of the steps take c + T (slowdown 1 + T / c); that
# is what `perf sched timehist` shows of 4 trainers on 2 cores here (half
# of the waits under 0.25 ms, a quarter 3.75 ms or more, around the 4 ms
# slice). With T = 0, a share c / S of the steps (S the mean time on a CPU
# per turn) waits w (the mean wait per turn): the same mean step, and waits
# a few times shorter and more frequent, which made the simulated synchronous
# rounds (ring allreduce: each waits for the last of the 4 agents to start)
# shorter and more frequent than the real ones (docs/SIMULATOR.md).
sched_fit() {
    paste "$1/sched0" "$1/sched1" | awk -v m="$2" -v sp="$3" -v T="${4:-0}" '
        { R += $10 - $1; W += $11 - $2; P += $12 - $3; LR += $13 - $4; LW += $14 - $5; LP += $15 - $6
          NR_ += $16 - $7; NW += $17 - $8; NP += $18 - $9 }
        END {
            if (P <= 0 || R <= 0 || LP <= 0) { print ""; exit }
            c = m * R / (R + W); S = R / P / 1e6; w = W / P / 1e6
            if (T > 0) {
                mw = m - c; p = mw / T; x = 1 + T / c
                if (p > 1) { p = 1; x = 1 + mw / c }
            } else {
                p = c / S; if (p > 1) p = 1
                x = 1 + w / (S * p)
            }
            loop = (LR + LW) / LP / 1000 + (NP > 0 ? (NR_ + NW) / NP / 1000 : 0)
            printf "--set compute.straggler_model=random --set compute.step_ms=%.6g --set compute.slow_prob=%.6g --set compute.slowdown=%.6g --set compute.loop_frame_us=%.6g", c, p, x, loop
            if (sp != "-" && sp != "") printf " --set compute.agent_speeds=%s", sp
            printf "\n" }'
}

# ---- the runs --------------------------------------------------------------
run_case() { # alg bw step_ms rtt_ms real_steps real_bytes real_tta [start_lag real_round_ms steady]
    payload=$(awk -v b="$2" -v g="$goodput" 'BEGIN { printf "%.6g", b * g }')
    [ -z "$measured" ] || payload=$2
    s=$(sim_run "$1" "$payload" "$3" "$4" "$tmp/sim-$1-$2-r${rep:-1}")
    fitd=$(echo "$fitsets" | awk '{ for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) v[kv[1]] = kv[2] }
        END { if (!("compute.step_ms" in v)) print "-"
              else printf "%.3g,%.3g,%.3g,%.4g\n", v["compute.step_ms"], v["compute.slow_prob"], v["compute.slowdown"], v["compute.loop_frame_us"] }')
    echo "$1 $2 $3 $4 $5 $6 $7 $s ${9:--} $fitd ${10:--}" >>"$rows"
    echo "calibrate: $1 at $2 Mb/s (run ${rep:-1}): step ${3} ms, rtt ${4} ms; real: $5 steps/s, $6 B, tta $7, round ${9:--} ms (all training ${8:-?} s after the first resume); sim: $s"
}

if [ -n "$measured" ]; then
    grep -v '^[[:space:]]*\(#\|$\)' "$measured" | while read -r alg bw step rtt rs rb rt; do
        [ -n "$rt" ] || { echo "calibrate: $measured: a line needs 7 fields" >&2; exit 2; }
        run_case "$alg" "$bw" "$step" "$rtt" "$rs" "$rb" "$rt"
    done
else
    if [ "$sched" != 0 ] && [ -z "$slice_ms" ]; then
        slice_ms=$(slice_probe)
        if [ -n "$slice_ms" ]; then
            echo "calibrate: this host's scheduler slice: $slice_ms ms (two CPU-bound processes on one CPU; CALIB_SLICE_MS)"
        else
            slice_ms=0
            echo "calibrate: the scheduler's slice was not measured (no python3): the trainers' waits are fitted per turn (CALIB_SLICE_MS=0)"
        fi
    fi
    for bw in $bws; do
        # tbf's bucket: 1 ms at the rate, at least 4 KB (tbf's default here,
        # 32 KB, sends a 51 KB message after a pause 60% at line rate: the
        # simulator's links are a fluid rate, no bucket)
        burst=$(awk -v b="$bw" 'BEGIN { k = int(b * 1e6 / 8 / 1000 / 1024 + 0.999); print (k < 4 ? 4 : k) "kb" }')
        i=1
        while [ "$i" -le "$n" ]; do
            netns_shape "$i" "${bw}mbit" "$burst" "$qlat"
            i=$((i + 1))
        done
        rtt=$(rtt_ms)
        [ -n "$rtt" ] || rtt=0.1
        for alg in $algos; do
          rep=1
          while [ "$rep" -le "$reps" ]; do
            if [ "$fit" = idle ]; then
                echo "calibrate: $alg at $bw Mb/s: fitting the step time ($n agents, mixing off, ${fit_s} s)"
                cluster "$tmp/fit-$alg-$bw" "$alg" 1000000 "$fit_s"
                f=$(real_figures "$tmp/fit-$alg-$bw" "$fit_s")
            fi
            try=1
            while :; do
                echo "calibrate: $alg at $bw Mb/s: real run (${dur} s)"
                rm -rf "$tmp/real-$alg-$bw-r$rep"
                cluster "$tmp/real-$alg-$bw-r$rep" "$alg" "$interval" "$dur"
                r=$(real_figures "$tmp/real-$alg-$bw-r$rep" "$dur")
                steady=$(echo "$r" | cut -d' ' -f6)
                awk -v x="$steady" -v m="$steady_min" 'BEGIN { exit !(x == "-" || x + 0 < m + 0) }' || break
                [ "$try" -lt "$tries" ] || break
                echo "calibrate: $alg at $bw Mb/s: the host's load changed during the run (the slower half of the window stepped at $steady of the faster): running it again"
                try=$((try + 1))
            done
            [ "$fit" = idle ] || f=$r
            step=$(echo "$f" | awk '$1 > 0 { printf "%.4g", 1000 / $1 }')
            [ -n "$step" ] || { echo "calibrate: no step time measured ($f)" >&2; exit 1; }
            fitsets=""
            [ "$fit" = idle ] || fd="$tmp/real-$alg-$bw-r$rep"
            [ "$fit" = own ] || fd="$tmp/fit-$alg-$bw"
            [ "$sched" = 0 ] || fitsets=$(sched_fit "$fd" "$step" "$(echo "$f" | cut -d' ' -f5)" "${slice_ms:-0}")
            # shellcheck disable=SC2086
            run_case "$alg" "$bw" "$step" "$rtt" $(echo "$r" | cut -d' ' -f1-4) "$(round_ms "$tmp/real-$alg-$bw-r$rep")" "$steady"
            rep=$((rep + 1))
          done
        done
    done
fi

# ---- the table -------------------------------------------------------------
table() {
    echo "| mixing | link (Mb/s) | runs | fitted step (ms) | RTT (ms) | steps/s per agent: real / sim / ratio | bytes per agent: real / sim / ratio | time to $target (s): real / sim / ratio | within 15% | host steady | mean round (ms): real / sim | fit: step CPU (ms), slow p, slowdown, loop (us) |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|:---:|---:|---:|---|"
    # One row per mixing and bandwidth: the means over its runs (lines of
    # $rows); time to target over the runs in which both sides reached it;
    # host steady the least of the runs; the fit of each run, ";" apart.
    awk -v m="$steady_min" 'function ratio(s, r) { return (s == "none" || r == "none" || r == 0) ? "-" : sprintf("%.3f", s / r) }
        function ok(x) { return x != "-" && x >= 0.85 && x <= 1.15 }
        function mean(k, f) { return c[k, f] ? S[k, f] / c[k, f] : "-" }
        function add(k, f, v) { if (v != "-" && v != "" && v != "none") { S[k, f] += v; c[k, f]++ } }
        { k = $1 " " $2; if (!(k in runs)) { order[++nk] = k; steady[k] = "-" }; runs[k]++
          alg[k] = $1; bw[k] = $2
          for (f = 3; f <= 12; f++) if (f != 7 && f != 10) add(k, f, $f)
          if ($7 != "none" && $10 != "none") { add(k, 7, $7); add(k, 10, $10) }
          else { missed[k] = missed[k] ($7 == "none" ? " real" : "") ($10 == "none" ? " sim" : "") }
          fit[k] = fit[k] (runs[k] > 1 ? "; " : "") ($13 == "" ? "-" : $13)
          if ($14 != "-" && $14 != "" && (steady[k] == "-" || $14 + 0 < steady[k] + 0)) steady[k] = $14 }
        END { for (j = 1; j <= nk; j++) { k = order[j]
          s5 = mean(k, 5); s8 = mean(k, 8); s6 = mean(k, 6); s9 = mean(k, 9); s7 = mean(k, 7); s10 = mean(k, 10)
          r1 = s5 == "-" ? "-" : ratio(s8, s5); r2 = s6 == "-" ? "-" : ratio(s9, s6)
          r3 = (s7 == "-" || s10 == "-") ? "-" : ratio(s10, s7)
          v = (ok(r1) && ok(r2) && ok(r3)) ? "yes" : "NO"
          if (steady[k] != "-" && steady[k] + 0 < m + 0) v = v " (host unsteady)"
          t7 = s7 == "-" ? "none" : sprintf("%.3f", s7); t10 = s10 == "-" ? "none" : sprintf("%.3f", s10)
          if (missed[k] != "") { t7 = t7 " (not reached in a run:" missed[k] ")" }
          printf "| %s | %s | %d | %.4g | %.3g | %.1f / %.1f / %s | %.0f / %.0f / %s | %s / %s / %s | %s | %s | %s / %s | %s |\n",
              alg[k], bw[k], runs[k], mean(k, 3), mean(k, 4), s5, s8, r1, s6, s9, r2, t7, t10, r3,
              v, steady[k], mean(k, 12) == "-" ? "-" : sprintf("%.4g", mean(k, 12)),
              mean(k, 11) == "-" ? "-" : sprintf("%.4g", mean(k, 11)), fit[k] } }' "$rows"
}
table >"$tmp/table"
echo ""
cat "$tmp/table"
if [ -n "$record" ] && [ -z "$measured" ]; then
    if [ ! -f "$record" ]; then
        echo "calibrate: not recorded: $record does not exist (run from the source tree)" >&2
    else
        begin="<!-- calibrate begin -->" end="<!-- calibrate end -->"
        {
            echo "Recorded by \`make calibrate\` (\`$cmdline\`), $(date -u '+%Y-%m-%d %H:%M UTC'),"
            echo "commit $(git describe --always --dirty 2>/dev/null || echo unknown), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), scheduler slice ${slice_ms:-0} ms (0: waits fitted per turn):"
            echo ""
            cat "$tmp/table"
            echo ""
        } >"$tmp/section"
        if grep -qxF "$begin" "$record" && grep -qxF "$end" "$record"; then
            awk -v b="$begin" -v e="$end" -v sec="$tmp/section" '
                $0 == b { print; print ""; while ((getline l < sec) > 0) print l; skip = 1; next }
                $0 == e { skip = 0 }
                !skip { print }' "$record" >"$tmp/record"
            cat "$tmp/record" >"$record" && echo "calibrate: recorded in $record"
        else
            echo "calibrate: not recorded: $record has no '$begin' / '$end' lines" >&2
        fi
    fi
fi
