#!/bin/sh
# The murmur command line as an operator meets it (no agent running):
# --version; an unknown command or flag of every subcommand names the
# nearest one and exits 2; `murmur status HOST` without a port is a usage
# error (2); `murmur keygen --out DIR` creates DIR; `murmur shard --out DIR`
# refuses to mix two splits in one directory and rewrites the same split.
set -eu
build=${BUILD:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "cli_tools: $bin not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "cli_tools: FAIL $*" >&2; exit 1; }
expect() { # status pattern command...
    want=$1 pat=$2
    shift 2
    set +e
    "$@" >"$tmp/out" 2>&1
    rc=$?
    set -e
    [ $rc -eq "$want" ] || fail "exit $rc (want $want): $* -> $(cat "$tmp/out")"
    grep -q -- "$pat" "$tmp/out" || fail "no '$pat' in: $(cat "$tmp/out")"
}

# --version and its spellings
expect 0 "^murmur [0-9][0-9.]* (commit " "$bin" --version
expect 0 "^libsodium " "$bin" version
expect 0 "^murmur [0-9]" "$bin" -V

# the nearest command, top-level flag, and flag of each subcommand
expect 2 "unknown command 'stauts'; did you mean 'status'?" "$bin" stauts
expect 2 "unknown option '--verison'; did you mean '--version'?" "$bin" --verison
expect 2 "unknown flag '--listn'; did you mean --listen?" "$bin" agent --listn 127.0.0.1:1
expect 2 "unknown flag '--jsn'; did you mean --json?" "$bin" status --jsn 127.0.0.1:1
expect 2 "unknown flag '--ot'; did you mean --out?" "$bin" keygen --ot "$tmp/k"
expect 2 "unknown flag '--shrads'; did you mean --shards?" "$bin" shard --shrads 4
expect 2 "unknown flag '--sweeep'; did you mean --sweep?" "$bin" sim x.ini --sweeep a.b=1
expect 2 "unknown flag '--epohcs'; did you mean --epochs?" "$bin" train --epohcs 3
expect 2 "unknown flag '--fromat'; did you mean --format?" "$bin" export x.ckpt --fromat npz
expect 2 "unknown flag '--agnets'; did you mean --agents?" "$bin" launch --agnets 2
expect 2 "unknown flag '--lgo-x'; did you mean --log-x?" "$bin" sim plot --lgo-x
expect 2 "unknown option 'mixing.bist'; did you mean 'mixing.bits'?" \
    "$bin" agent --set mixing.bist=4
expect 2 "--out needs a value" "$bin" keygen --out
expect 2 "--lr needs a value" "$bin" train --lr
# every subcommand's --help lists its flags from the one table it parses with
for cmd in agent train shard keygen status export launch sim; do
    "$bin" $cmd --help >"$tmp/help" 2>&1 || fail "murmur $cmd --help exited $?"
    grep -q -- "--help" "$tmp/help" || fail "murmur $cmd --help does not list --help"
done

# status: HOST without a port is a usage error, before any connection
expect 2 "'localhost' is not HOST:PORT" "$bin" status localhost
expect 2 "is not HOST:PORT" "$bin" status 127.0.0.1:
expect 2 "is not HOST:PORT" "$bin" status 127.0.0.1:70000
expect 2 "one HOST:PORT only" "$bin" status 127.0.0.1:1 127.0.0.1:2

# keygen --out creates the directory (and its parents), private
expect 0 "wrote $tmp/keys/a/b/murmur.key" "$bin" keygen --out "$tmp/keys/a/b"
[ -f "$tmp/keys/a/b/murmur.key" ] && [ -f "$tmp/keys/a/b/murmur.pub" ] || fail "no key files"
[ "$(stat -c %a "$tmp/keys/a/b")" = 700 ] || fail "key directory mode $(stat -c %a "$tmp/keys/a/b")"
expect 1 "refusing to overwrite" "$bin" keygen --out "$tmp/keys/a/b"

# shard: one split per directory
awk 'BEGIN { srand(3); for (i = 0; i < 300; i++) printf "%d,%.4f,%.4f\n", i % 3, i % 3 + rand(), rand() }' \
    >"$tmp/d.csv"
expect 0 "^catalog shards=4" "$bin" shard --data "$tmp/d.csv" --shards 4 --out "$tmp/s"
sum1=$(cat "$tmp"/s/* | cksum)
expect 0 "^catalog shards=4" "$bin" shard --data "$tmp/d.csv" --shards 4 --out "$tmp/s"
[ "$(cat "$tmp"/s/* | cksum)" = "$sum1" ] || fail "the same split rewrote different bytes"
expect 1 "holds another split" "$bin" shard --data "$tmp/d.csv" --shards 6 --out "$tmp/s"
expect 1 "holds another split" "$bin" shard --data "$tmp/d.csv" --shards 4 --seed 2 --out "$tmp/s"
[ "$(ls "$tmp"/s/*.msh | wc -l)" -eq 4 ] || fail "a refused split wrote files"
[ "$(cat "$tmp"/s/* | cksum)" = "$sum1" ] || fail "a refused split changed the directory"
mkdir "$tmp/t"
cp "$tmp/s/shard-000-of-004.msh" "$tmp/t/"
expect 1 "already holds shard files" "$bin" shard --data "$tmp/d.csv" --shards 2 --out "$tmp/t"
expect 0 "^catalog shards=2" "$bin" shard --data "$tmp/d.csv" --shards 2 --out "$tmp/new/deep"

# chaos: a random schedule printed without a cluster, for a member count
expect 0 "^members=4" "$bin" chaos --random 7 --print-schedule --members 4
"$bin" chaos --random 7 --print-schedule --members 4 >"$tmp/s7a"
"$bin" chaos --random 7 --print-schedule --members 4 >"$tmp/s7b"
cmp -s "$tmp/s7a" "$tmp/s7b" || fail "one seed printed two schedules"
grep -q " kill on=" "$tmp/s7a" || fail "the random schedule of seed 7 has no kill"
expect 2 "needs --seed HOST:PORT or --members N" "$bin" chaos --random 7 --print-schedule
expect 2 "is for --print-schedule" "$bin" chaos --random 7 --members 4
echo "cli_tools: ok"
