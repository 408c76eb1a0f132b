#!/bin/sh
# deploy/grafana/murmur.json queries only what an agent exports: one agent
# is started as an operator would (murmur agent) and, before it has trained
# a step, its live /metrics already has every metric name the dashboard
# names (each family is present from the start), the process_* collectors,
# both histograms (round latency, consensus distance) and murmur_build_info.
# (tests/test_metrics.c checks the same names against the registry.)
NAME=deploy_grafana
command -v curl >/dev/null 2>&1 || { echo "skipped: $NAME: no curl"; exit 0; }
. tests/integration/lib/agent.sh
dash=deploy/grafana/murmur.json
[ -f "$dash" ] || fail "$dash not found (run from the repository root)"

cluster_init 21600 1 1
agent_start 1
wait_for 60 sh -c "curl -sf --max-time 5 http://127.0.0.1:$((base + 101))/metrics >'$tmp/metrics'" ||
    fail "no /metrics at 127.0.0.1:$((base + 101))"

for n in process_cpu_seconds_total process_resident_memory_bytes process_virtual_memory_bytes \
    process_open_fds process_max_fds process_start_time_seconds 'murmur_build_info{' \
    'murmur_round_duration_seconds_bucket{' 'murmur_round_duration_seconds_count' \
    'murmur_consensus_distance_bucket{' 'murmur_consensus_distance_count'; do
    grep -q "^$n" "$tmp/metrics" || fail "/metrics lacks $n"
done
names=$(grep -o '\(murmur\|process\)_[a-zA-Z0-9_]*' "$dash" | sort -u)
[ "$(echo "$names" | wc -l)" -ge 20 ] || fail "the dashboard names too few metrics: $names"
for n in $names; do
    grep -q "^$n[{ ]" "$tmp/metrics" ||
        fail "the dashboard queries $n, which a live agent's /metrics does not export"
done
# every family has HELP and TYPE
for n in $(sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' "$tmp/metrics"); do
    grep -q "^# HELP $n " "$tmp/metrics" || fail "$n has a TYPE but no HELP"
done
echo "$NAME: ok ($(echo "$names" | wc -l) dashboard names on a live /metrics)"
