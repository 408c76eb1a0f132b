#!/bin/sh
# Entry point of the murmur image: a key pair in the data directory on first
# start (kept afterwards), then `murmur ARGS` (default `murmur agent`).
# MURMUR_NODE_ADVERTISE defaults to this container's first address and the
# listen port, since a wildcard listen address cannot be advertised.
set -eu
dir=${MURMUR_NODE_DATA_DIR:-/var/lib/murmur}
if [ "${1:-agent}" = agent ]; then
    [ -f "$dir/murmur.key" ] || murmur keygen --out "$dir" >/dev/null
    if [ -z "${MURMUR_NODE_ADVERTISE:-}" ]; then
        ip=$(hostname -i 2>/dev/null | awk '{ print $1 }')
        port=${MURMUR_NODE_LISTEN##*:}
        [ -n "$ip" ] && export MURMUR_NODE_ADVERTISE="$ip:${port:-7000}"
    fi
fi
exec murmur "$@"
