#!/bin/sh
# deploy/systemd/murmur@.service: systemd-analyze verify finds nothing to
# say about it (paths pointed at this build), its hardening is what
# docs/DEPLOY.md promises, and its key step works: the ExecStartPre command
# makes a key pair once and leaves it alone afterwards.
set -eu
NAME=deploy_systemd
build=${BUILD:-build}
bin="$build/murmur"
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
unit=deploy/systemd/murmur@.service
command -v systemd-analyze >/dev/null 2>&1 || { echo "skipped: $NAME: no systemd-analyze"; exit 0; }
[ -x "$bin" ] || { echo "$NAME: $bin not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "$NAME: FAIL $*" >&2; exit 1; }
sed "s|/usr/local/bin/murmur|$bin|g" "$unit" >"$tmp/murmur@test.service"
(cd "$tmp" && systemd-analyze verify ./murmur@test.service) >"$tmp/verify" 2>&1 ||
    { cat "$tmp/verify"; fail "systemd-analyze verify failed"; }
[ ! -s "$tmp/verify" ] || { cat "$tmp/verify"; fail "systemd-analyze verify has warnings"; }
for want in DynamicUser=yes StateDirectory=murmur/%i ProtectSystem=strict NoNewPrivileges=yes \
    Restart=on-failure RestartPreventExitStatus=2 LoadCredential=network.key KillSignal=SIGTERM \
    CapabilityBoundingSet= MemoryDenyWriteExecute=yes; do
    grep -q "^$want" "$unit" || fail "the unit lacks $want"
done
# the exposure score systemd computes (lower is safer; 1.7 when written)
score=$(cd "$tmp" && systemd-analyze security --offline=yes ./murmur@test.service 2>/dev/null |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
awk -v s="${score:-99}" 'BEGIN { exit !(s <= 2.0) }' || fail "exposure level ${score:-?} above 2.0"
# ExecStartPre: a key pair on first start, untouched on the next
pre=$(sed -n 's/^ExecStartPre=//p' "$tmp/murmur@test.service")
pre=${pre#/bin/sh -c }
pre=$(eval "printf '%s' $pre") # drop the unit's quoting
mkdir "$tmp/state"
STATE_DIRECTORY="$tmp/state" /bin/sh -c "$pre" >/dev/null || fail "ExecStartPre failed on first start"
[ -f "$tmp/state/murmur.key" ] || fail "ExecStartPre made no key"
pub=$(cat "$tmp/state/murmur.pub")
STATE_DIRECTORY="$tmp/state" /bin/sh -c "$pre" >/dev/null || fail "ExecStartPre failed on second start"
[ "$(cat "$tmp/state/murmur.pub")" = "$pub" ] || fail "ExecStartPre replaced the key"
# the settings the unit passes through the environment reach the agent
"$bin" keygen --network-key "$tmp/net.key" >/dev/null
MURMUR_NODE_DATA_DIR="$tmp/state" MURMUR_NODE_NETWORK_KEY_FILE="$tmp/net.key" \
    "$bin" agent --print-config >"$tmp/cfg"
grep -q "^data_dir = $tmp/state   # env MURMUR_NODE_DATA_DIR" "$tmp/cfg" || fail "data_dir from env"
echo "$NAME: ok"
