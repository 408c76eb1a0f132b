#!/bin/sh
# The Python binding (python/murmur) against this build's libmurmur:
# tests/python/test_binding.py. Skipped (one line) without python3, or in
# sanitizer builds (the library's objects need their runtime preloaded).
set -eu
NAME=python_binding
build=${BUILD:-build}
py=$(command -v python3 || true)
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
if [ -z "$py" ]; then
    echo "$NAME: skipped: python3 is not installed"
    exit 0
fi
case "$build" in
*san-*)
    echo "$NAME: skipped: the binding is checked against the plain build's libmurmur.so"
    exit 0
    ;;
esac
[ -f "$build/libmurmur.so" ] || make -s --no-print-directory BUILD="$build" "$build/libmurmur.so.$(sed -n 's/^#define MURMUR_VERSION_STRING "\(.*\)"/\1/p' include/murmur.h)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
MURMUR_LIB="$(pwd)/$build/libmurmur.so" MURMUR_BIN="$(pwd)/$build/murmur" \
    timeout 120 "$py" tests/python/test_binding.py "$tmp" 2>"$tmp/stderr.log" || {
    tail -n 20 "$tmp/stderr.log" >&2
    exit 1
}
