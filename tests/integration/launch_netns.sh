#!/bin/sh
# Four hosts in four network namespaces (lib/netns.sh: their own addresses
# 10.77.0.1-4 on a bridge, links shaped with tc tbf), started with
# `murmur launch --hosts` through a remote shell that enters each host's
# namespace: they form one cluster and train; host 4 is killed (its agent
# SIGKILLed and its cable cut); the others detect it and keep training with
# every shard still held; the launcher stops them gracefully and exits 0;
# every namespace is removed. Without root: one "skipped:" line.
NAME=launch_netns
set -eu
build=${BUILD:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "$NAME: $bin not built" >&2; exit 1; }
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
. tests/integration/lib/netns.sh
tmp=$(mktemp -d)
netns_at_exit "rm -rf '$tmp'"
fail() {
    echo "$NAME: FAIL $*" >&2
    for f in "$tmp"/launch.out "$tmp"/c/a*.log; do
        [ -f "$f" ] && { echo "--- $f" >&2; tail -n 6 "$f" >&2; }
    done
    exit 1
}
netns_init 4
for i in 1 2 3 4; do netns_shape "$i" 100mbit; done
"$bin" shard --shards 8 --out "$tmp/split" >/dev/null
# the remote shell: `rsh HOST COMMAND` runs COMMAND in host HOST's namespace
cat >"$tmp/rsh" <<RSH
#!/bin/sh
host=\$1
shift
exec ip netns exec "${netns_pfx}_\${host##*.}" sh -c "\$*"
RSH
chmod +x "$tmp/rsh"
hosts="10.77.0.1:1,10.77.0.2:1,10.77.0.3:1,10.77.0.4:1"
# the launcher itself runs on host 1; r = 2, host 4 dies at 18 s
netns_spawn 1 "$tmp/launch.out" "$bin" launch --hosts "$hosts" --rsh "$tmp/rsh" --dir "$tmp/c" \
    --shard-dir "$tmp/split" --port 7000 --interval 5 --duration 34 --fault 18:kill:4 \
    --set model.spec=mlp:32 --set model.eval_samples=500 --set model.eval_every_steps=200 \
    --set shards.replication=2 --set membership.probe_interval_ms=200 \
    --set membership.probe_timeout_ms=100 --set log.progress_interval_ms=500
lpid=$netns_pid
# one cluster: every agent sees the 3 others and trains
limit=$(($(date +%s) + 30))
for i in 1 2 3 4; do
    until grep -q 'event=progress step=[1-9][0-9]* .* peers=3 ' "$tmp/c/a$i.log" 2>/dev/null; do
        [ "$(date +%s)" -lt "$limit" ] || fail "agent $i does not train with 3 peers"
        sleep 0.5
    done
done
grep -q 'tcp://10.77.0.3:7000' "$tmp/c/a3.log" || grep -q '10.77.0.3' "$tmp/launch.out" ||
    fail "agent 3 does not run on 10.77.0.3"
# host 4 dies: the launcher SIGKILLs its agent at 18 s; cut its cable too
until grep -q 'fault SIGKILL agent 4' "$tmp/launch.out"; do
    kill -0 "$lpid" 2>/dev/null || fail "the launcher ended before the fault"
    sleep 0.5
done
netns_isolate 4
s3=$(sed -n 's/.* event=progress step=\([0-9]*\) .*/\1/p' "$tmp/c/a3.log" | tail -n 1)
limit=$(($(date +%s) + 20))
for i in 1 2 3; do
    until sed -n 's/.* event=progress \(.*\)/\1/p' "$tmp/c/a$i.log" | tail -n 1 | grep -q ' peers=2 '; do
        [ "$(date +%s)" -lt "$limit" ] || fail "agent $i did not detect the death of host 4"
        sleep 0.5
    done
done
set +e
wait "$lpid"
rc=$?
set -e
netns_forget "$lpid"
[ "$rc" -eq 0 ] || fail "launch exited $rc"
grep -q '^launch: exit status 0' "$tmp/launch.out" || fail "no summary"
e3=$(sed -n 's/.* event=progress step=\([0-9]*\) .*/\1/p' "$tmp/c/a3.log" | tail -n 1)
[ "$e3" -gt "$((s3 + 200))" ] || fail "agent 3 stalled after the death of host 4 ($s3 -> $e3 steps)"
for i in 1 2 3; do
    grep -q 'event=checkpoint_written .*reason=shutdown' "$tmp/c/a$i.log" ||
        fail "agent $i left without its final checkpoint"
    last=$(sed -n 's/.* event=progress \(.*\)/\1/p' "$tmp/c/a$i.log" | tail -n 1)
    case "$last" in *" shards_missing=0 "*) ;; *) fail "agent $i lost shards: $last" ;; esac
done
awk '$1 == "a4" && /killed by --fault/ { f = 1 } END { exit !f }' "$tmp/launch.out" ||
    fail "the summary does not show agent 4 killed by --fault"
echo "$NAME: ok"
