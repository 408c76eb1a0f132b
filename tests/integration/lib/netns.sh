# Network namespaces for real-process tests (sourced, not a test).
#
# A test sets NAME, sources this file and calls netns_init N: N network
# namespaces ("nodes" 1..N), each with one interface eth0 at 10.77.0.I/24,
# joined by veth pairs to a bridge that lives in a namespace of its own (the
# hub), so nothing is added to the host's own network namespace and two
# tests never see each other's addresses. Every namespace, veth, bridge,
# process and mount made through these functions is removed on exit, whether
# the test passed, failed or was interrupted.
#
# Without root, or where `ip netns` cannot create a namespace, netns_init
# prints one line "skipped: NAME: why" and exits 0; tests/run.sh counts
# such a script as skipped, not passed.
#
# Functions:
#   netns_init N              create nodes 1..N and the hub (or skip, see above)
#   netns_ip I                the address of node I (10.77.0.I)
#   netns_exec I CMD...       run CMD inside node I, in the foreground
#   netns_reach A B           0 if node A reaches node B now (TCP, 1 s)
#   netns_spawn I LOG CMD...  run CMD inside node I in the background, stdout
#                             and stderr appended to LOG; its pid is in
#                             $netns_pid and it is killed (SIGCONT, SIGKILL) on
#                             exit
#   netns_forget PID          stop tracking PID (the test reaped it itself)
#   netns_shape I RATE [BURST] [LATENCY]
#                             tc tbf on node I's link, both directions (egress
#                             of eth0 in the node, egress of its port in the
#                             hub): RATE as tc takes it ("10mbit"), BURST
#                             default 32kb, LATENCY (queueing bound) 50ms
#   netns_unshape I           remove the shaping of node I
#   netns_partition "I J.." "K L.." ...
#                             split the nodes into groups that hear only their
#                             own group (each group's ports on its own bridge);
#                             nodes in no group keep the first group's bridge
#   netns_heal                every node back on one bridge
#   netns_isolate I / netns_connect I
#                             take node I's link down / up (a cut cable)
#   netns_tmpfs DIR SIZE      mount a tmpfs of SIZE ("8m") on DIR (created if
#                             missing), unmounted on exit; visible inside the
#                             nodes for processes started after the mount
#   netns_at_exit CMD         run CMD (a string, eval'd) on exit, before the
#                             namespaces go (e.g. collect logs)
#   netns_cleanup             what exit does; safe to call twice
#
# The exit trap: netns.sh installs `trap netns_on_exit EXIT` (and turns INT
# and TERM into exit 130). A test that also sources lib/agent.sh sources it
# first and sets NETNS_CHAIN=cleanup_agents before sourcing this file: the
# netns cleanup then runs first and hands the exit status on to that
# function, which ends the script.
#
# Naming: namespaces are mm<pid>_<I> and mm<pid>_hub; inside them the names
# are fixed (eth0 in a node, br0.. and p<I> in the hub).

netns_n=0
netns_pfx=""
netns_pids=""
netns_mounts=""
netns_exit_cmds=""
netns_bridges="br0"
netns_done=0

netns_skip() {
    echo "skipped: ${NAME:-netns}: $*"
    netns_done=1
    exit 0
}

netns_cleanup() {
    [ "$netns_done" -eq 0 ] || return 0
    netns_done=1
    set +e
    if [ -n "$netns_exit_cmds" ]; then
        eval "$netns_exit_cmds"
    fi
    for p in $netns_pids; do
        kill -CONT "$p" 2>/dev/null
        kill -KILL "$p" 2>/dev/null
    done
    for p in $netns_pids; do wait "$p" 2>/dev/null; done
    if [ -n "$netns_pfx" ]; then
        # Anything else the test started inside its namespaces.
        i=1
        while [ "$i" -le "$netns_n" ]; do
            for p in $(ip netns pids "${netns_pfx}_$i" 2>/dev/null); do
                kill -KILL "$p" 2>/dev/null
            done
            i=$((i + 1))
        done
    fi
    for m in $netns_mounts; do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
    done
    if [ -n "$netns_pfx" ]; then
        i=1
        while [ "$i" -le "$netns_n" ]; do
            ip netns del "${netns_pfx}_$i" 2>/dev/null
            i=$((i + 1))
        done
        ip netns del "${netns_pfx}_hub" 2>/dev/null
        if ip netns list 2>/dev/null | grep -q "^${netns_pfx}_"; then
            echo "${NAME:-netns}: could not remove every namespace of ${netns_pfx}" >&2
        fi
    fi
    set -e
}

netns_on_exit() {
    netns_rc=$?
    netns_cleanup
    # netns_cleanup ends in set -e: a failed test's status, handed to the
    # chained handler as $? below, would end this handler there, and the
    # chained one (killing the agents, removing the directory, checking the
    # logs) would never run
    set +e
    if [ -n "${NETNS_CHAIN:-}" ]; then
        (exit "$netns_rc")
        "$NETNS_CHAIN"
    fi
    exit "$netns_rc"
}
trap netns_on_exit EXIT
trap 'exit 130' INT TERM HUP PIPE # PIPE: a reader of our output went away

netns_at_exit() {
    netns_exit_cmds="$netns_exit_cmds
$1"
}

netns_init() {
    n=$1
    [ "$(id -u)" -eq 0 ] || netns_skip "needs root for network namespaces"
    command -v ip >/dev/null 2>&1 || netns_skip "needs ip (iproute2)"
    command -v bash >/dev/null 2>&1 || netns_skip "needs bash (netns_reach uses /dev/tcp)"
    pfx="mm$$"
    while ip netns list 2>/dev/null | grep -q "^${pfx}_"; do
        pfx="mm$$x$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')"
    done
    ip netns add "${pfx}_hub" 2>/dev/null || netns_skip "ip netns add failed (no CAP_SYS_ADMIN?)"
    netns_pfx=$pfx
    hub="${pfx}_hub"
    ip -n "$hub" link set lo up
    ip -n "$hub" link add br0 type bridge
    ip -n "$hub" link set br0 up
    i=1
    while [ "$i" -le "$n" ]; do
        ns="${pfx}_$i"
        ip netns add "$ns"
        netns_n=$i
        ip -n "$ns" link set lo up
        ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$hub"
        ip -n "$hub" link set "p$i" master br0
        ip -n "$hub" link set "p$i" up
        ip -n "$ns" addr add "10.77.0.$i/24" dev eth0
        ip -n "$ns" link set eth0 up
        i=$((i + 1))
    done
    # Every node reaches every other before the test starts.
    i=2
    while [ "$i" -le "$n" ]; do
        netns_wait_link 1 "$i" || { echo "$NAME: namespaces up but 10.77.0.$i unreachable" >&2; exit 1; }
        i=$((i + 1))
    done
}

# 0 if node A reaches node B: a TCP connect from A to B's port 9 is
# answered (refused counts: the host is there) within 1 s. Uses bash's
# /dev/tcp, so no ping or nc is needed.
netns_reach() { # a b
    out=$(ip netns exec "${netns_pfx}_$1" timeout 1 bash -c "exec 3<>/dev/tcp/10.77.0.$2/9" 2>&1) && return 0
    case "$out" in *refused*) return 0 ;; esac
    return 1
}

# Wait (up to 5 s) until node A reaches node B.
netns_wait_link() { # a b
    k=0
    while [ $k -lt 25 ]; do
        netns_reach "$1" "$2" && return 0
        sleep 0.2
        k=$((k + 1))
    done
    return 1
}

netns_ip() {
    echo "10.77.0.$1"
}

netns_exec() {
    i=$1
    shift
    ip netns exec "${netns_pfx}_$i" "$@"
}

netns_spawn() {
    i=$1
    log=$2
    shift 2
    ip netns exec "${netns_pfx}_$i" "$@" >>"$log" 2>&1 &
    netns_pid=$!
    netns_pids="$netns_pids $netns_pid"
}

netns_forget() {
    rest=""
    for p in $netns_pids; do [ "$p" = "$1" ] || rest="$rest $p"; done
    netns_pids=$rest
}

netns_shape() { # i rate [burst] [latency]
    b=${3:-32kb}
    l=${4:-50ms}
    ip -n "${netns_pfx}_$1" link set eth0 txqueuelen 1000
    tc -n "${netns_pfx}_$1" qdisc replace dev eth0 root tbf rate "$2" burst "$b" latency "$l"
    tc -n "${netns_pfx}_hub" qdisc replace dev "p$1" root tbf rate "$2" burst "$b" latency "$l"
}

netns_unshape() {
    tc -n "${netns_pfx}_$1" qdisc del dev eth0 root 2>/dev/null || true
    tc -n "${netns_pfx}_hub" qdisc del dev "p$1" root 2>/dev/null || true
}

netns_bridge() { # k: make sure br<k> exists
    case " $netns_bridges " in *" br$1 "*) return 0 ;; esac
    ip -n "${netns_pfx}_hub" link add "br$1" type bridge
    ip -n "${netns_pfx}_hub" link set "br$1" up
    netns_bridges="$netns_bridges br$1"
}

netns_partition() {
    k=0
    for group in "$@"; do
        netns_bridge "$k"
        for i in $group; do
            ip -n "${netns_pfx}_hub" link set "p$i" master "br$k"
        done
        k=$((k + 1))
    done
}

netns_heal() {
    i=1
    while [ "$i" -le "$netns_n" ]; do
        ip -n "${netns_pfx}_hub" link set "p$i" master br0
        i=$((i + 1))
    done
}

netns_isolate() {
    ip -n "${netns_pfx}_hub" link set "p$1" down
}

netns_connect() {
    ip -n "${netns_pfx}_hub" link set "p$1" up
}

netns_tmpfs() { # dir size
    mkdir -p "$1"
    mount -t tmpfs -o "size=$2,mode=0755" tmpfs "$1" || {
        echo "$NAME: cannot mount a tmpfs on $1" >&2
        exit 1
    }
    netns_mounts="$1 $netns_mounts"
}
