#!/bin/sh
# tests/integration/lib/netns.sh itself: three namespaces reach each other,
# a partition cuts exactly the links it should and heals, a cut cable, tbf
# shaping installs and goes, a tmpfs mounts, a spawned process runs inside
# its namespace; and after the script ends (here: a child script that fails
# on purpose) no namespace, process or mount of it is left.
NAME=fault_netns
set -eu
lib=tests/integration/lib/netns.sh
if [ "${FAULT_NETNS_CHILD:-}" = 1 ]; then
    . "$lib"
    netns_init 3
    echo "prefix $netns_pfx"
    netns_tmpfs "$FAULT_NETNS_DIR/mnt" 1m
    netns_spawn 2 "$FAULT_NETNS_DIR/sleep.log" sleep 600
    echo "pid $netns_pid"
    netns_shape 3 1mbit
    exit 3 # fail on purpose: the trap must still clean up
fi
. "$lib"
fail() {
    echo "$NAME: FAIL $*" >&2
    exit 1
}
netns_init 3
for a in 1 2 3; do
    for b in 1 2 3; do
        [ "$a" = "$b" ] || netns_reach "$a" "$b" || fail "node $a does not reach node $b"
    done
done
[ "$(netns_exec 2 ip -o -4 addr show dev eth0 | awk '{print $4}')" = "10.77.0.2/24" ] ||
    fail "node 2 has not 10.77.0.2/24"
netns_partition "1 2" "3"
netns_reach 1 2 || fail "partition: 1 and 2 are in one group"
! netns_reach 1 3 || fail "partition: 1 still reaches 3"
! netns_reach 3 2 || fail "partition: 3 still reaches 2"
netns_heal
netns_wait_link 1 3 || fail "heal: 1 does not reach 3 again"
netns_isolate 2
! netns_reach 1 2 || fail "isolate: 1 still reaches 2"
netns_connect 2
netns_wait_link 1 2 || fail "connect: 1 does not reach 2 again"
netns_shape 1 10mbit
netns_exec 1 tc qdisc show dev eth0 | grep -q tbf || fail "no tbf on node 1"
netns_unshape 1
! netns_exec 1 tc qdisc show dev eth0 | grep -q tbf || fail "tbf still on node 1"

# A child that fails after making everything: nothing of it may remain.
dir=$(mktemp -d)
netns_at_exit "rm -rf '$dir'"
rc=0
FAULT_NETNS_CHILD=1 FAULT_NETNS_DIR=$dir sh "$0" >"$dir/child.out" 2>&1 || rc=$?
[ "$rc" -eq 3 ] || fail "the child exited $rc, not 3: $(cat "$dir/child.out")"
pfx=$(sed -n 's/^prefix //p' "$dir/child.out")
pid=$(sed -n 's/^pid //p' "$dir/child.out")
[ -n "$pfx" ] && [ -n "$pid" ] || fail "child output: $(cat "$dir/child.out")"
! ip netns list | grep -q "^${pfx}_" || fail "namespaces of $pfx left behind"
! kill -0 "$pid" 2>/dev/null || fail "process $pid left running"
! grep -q " $dir/mnt " /proc/mounts || fail "tmpfs on $dir/mnt left mounted"
echo "$NAME: ok"
