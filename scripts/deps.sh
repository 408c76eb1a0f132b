#!/bin/sh
# Install (as root) or name (otherwise) every Debian package murmur needs.
# Idempotent: does nothing when all are present. Used by `make test`,
# `make demo` and `make bench`.
set -u
# `deps.sh peers`: the peer systems of `make bench-peers` instead.
if [ "${1:-}" = peers ]; then
    PKGS="python3-torch python3-numpy openmpi-bin libopenmpi-dev"
else
PKGS="build-essential pkg-config libsodium-dev libnng-dev libopenblas-dev zlib1g-dev \
libcmocka-dev libpng-dev libcairo2-dev dataset-fashion-mnist nng-utils clang-format \
clang libclang-rt-14-dev shellcheck yamllint"
fi
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "murmur needs these Debian packages:$missing" >&2
    echo "run:  sudo apt-get install -y$missing" >&2
    exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# apt-get update first only when a package is unknown to the local lists.
for p in $missing; do
    if ! apt-cache show "$p" >/dev/null 2>&1; then
        apt-get update -qq || true
        break
    fi
done
if ! apt-get install -y -qq $missing; then
    apt-get update -qq && apt-get install -y -qq $missing || {
        echo "deps: apt-get install failed for:$missing" >&2
        exit 1
    }
fi
