#!/bin/sh
# libmurmur as a user gets it: `make install PREFIX=DIR` puts the binary,
# include/murmur.h, the shared library (soname libmurmur.so.MAJOR, symlinks),
# the static library, the pkg-config file and the docs in place; the shared
# library exports only murmur_ symbols; examples/embed_average.c compiles
# against the installed files with pkg-config (shared and static), and two
# of its processes mix their models on 127.0.0.1: each ends nearer the true
# model than it started and the two agree.
set -eu
NAME=lib_install
build=${BUILD:-build}
case "$build" in
*san-*)
    echo "$NAME: skipped: packaging is checked in the plain build (sanitizer objects need their runtime)"
    exit 0
    ;;
esac
tmp=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "$NAME: FAIL $*" >&2; exit 1; }
prefix="$tmp/prefix"
make -s --no-print-directory install BUILD="$build" PREFIX="$prefix" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "make install"; }
ver=$(sed -n 's/^#define MURMUR_VERSION_STRING "\(.*\)"/\1/p' include/murmur.h)
major=${ver%%.*}
for f in bin/murmur include/murmur.h "lib/libmurmur.so.$ver" lib/libmurmur.a \
    lib/pkgconfig/murmur.pc share/doc/murmur/README.md share/doc/murmur/EMBEDDING.md; do
    [ -f "$prefix/$f" ] || fail "$f not installed"
done
[ "$(readlink "$prefix/lib/libmurmur.so.$major")" = "libmurmur.so.$ver" ] || fail "soname link"
[ "$(readlink "$prefix/lib/libmurmur.so")" = "libmurmur.so.$ver" ] || fail "dev link"
readelf -d "$prefix/lib/libmurmur.so.$ver" | grep -q "SONAME.*libmurmur.so.$major" || fail "soname"
bad=$(nm -D --defined-only "$prefix/lib/libmurmur.so.$ver" | awk '$2 ~ /[TDBR]/ && $3 !~ /^murmur_/ && $3 !~ /^_/ { print $3 }')
[ -z "$bad" ] || fail "symbols exported besides murmur_: $(echo "$bad" | head -n 5 | tr '\n' ' ')"
[ "$(nm -D --defined-only "$prefix/lib/libmurmur.so.$ver" | grep -c ' T murmur_')" -ge 15 ] ||
    fail "fewer than 15 murmur_ functions exported"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion murmur)" = "$ver" ] || fail "pkg-config version"
# shared
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -O2 -o "$tmp/embed" examples/embed_average.c \
    $(pkg-config --cflags --libs murmur) -Wl,-rpath,"$prefix/lib" -lm || fail "compile (shared)"
ldd "$tmp/embed" | grep -q "$prefix/lib/libmurmur.so.$major" || fail "not linked to the installed library"
# static
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -O2 -o "$tmp/embed_static" examples/embed_average.c \
    $(pkg-config --cflags murmur) "$prefix/lib/libmurmur.a" $(pkg-config --libs --static murmur | sed 's/-lmurmur//') -lm ||
    fail "compile (static)"
if ldd "$tmp/embed_static" | grep -q libmurmur; then fail "static build links libmurmur.so"; fi

# two processes mix
"$prefix/bin/murmur" keygen --network-key "$tmp/network.key" >/dev/null
for i in 1 2; do
    "$prefix/bin/murmur" keygen --out "$tmp/h$i" >/dev/null
    cp "$tmp/network.key" "$tmp/h$i/network.key"
done
port=$((24000 + $$ % 3000))
"$tmp/embed" "$tmp/h1" "127.0.0.1:$port" 3000 0 >"$tmp/h1.out" 2>"$tmp/h1.log" &
pids="$pids $!"
p1=$!
sleep 0.5
"$tmp/embed_static" "$tmp/h2" "127.0.0.1:$((port + 1))" "127.0.0.1:$port" 3000 1 >"$tmp/h2.out" 2>"$tmp/h2.log" &
pids="$pids $!"
p2=$!
wait "$p1" || { tail -n 5 "$tmp/h1.log" >&2; fail "host 1 exited non-zero"; }
wait "$p2" || { tail -n 5 "$tmp/h2.log" >&2; fail "host 2 exited non-zero"; }
pids=""
cat "$tmp/h1.out" "$tmp/h2.out"
f() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$tmp/$1.out"; }
# Both end near w*: within 5% of the distance of the initial model (zeros,
# host 1's start). Host 2 starts from host 1's model of the moment it
# joins (state transfer), so its own start says nothing about learning: the
# sooner host 1 has learned, the nearer it already is.
for h in h1 h2; do
    awk -v d0="$(f h1 dist0)" -v d="$(f $h dist)" 'BEGIN { exit !(d < 0.05 * d0) }' ||
        fail "$h did not learn: distance $(f $h dist) from the initial model's $(f h1 dist0)"
    [ "$(f $h rounds)" -ge 50 ] || fail "$h mixed only $(f $h rounds) rounds"
done
[ "$(f h2 source)" = 2 ] || fail "host 2 did not take the model by state transfer"
echo "$NAME: ok: installed files, soname, exports, pkg-config (shared and static), two hosts mixed"
