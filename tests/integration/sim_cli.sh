#!/bin/sh
# murmur sim as a user runs it: SEED= first and TRACE_HASH= last; the same
# seed twice gives the same hash; series.csv has the documented header and
# population rows; summary.json has every documented field; --sweep writes
# one sweep.csv row per combination; --plot writes PNG, SVG and PDF figures; bad scenario files,
# keys and values fail with a message naming them and exit status 2. SIGINT and SIGTERM write
# what was simulated (interrupted, exit 130); a diverging run is marked and exits 3 unless
# --allow-divergence; --seeds N runs in worker processes with the same hashes as one seed at a
# time and summarises mean, sd and the 95% interval; --trace writes the hash's event stream.
set -eu
build=${BUILD:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "sim_cli: $bin not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "sim_cli: FAIL $*" >&2; exit 1; }

cat >"$tmp/s.ini" <<'INI'
# 12 agents gossiping over a 50 Mb/s network with one crash
[run]
seed = 5
agents = 12
mode = timed
duration_s = 2
[model]
kind = quadratic
dim = 40
[network]
latency_ms = 2
bandwidth_mbps = 50
[faults]
event = 0.5 crash 3 restart_after=0.5
[output]
every_s = 0.5
INI

"$bin" sim --help | grep -q -- --sweep || fail "--help does not document --sweep"
timeout 60 "$bin" sim "$tmp/s.ini" --out "$tmp/a" >"$tmp/a.log"
timeout 60 "$bin" sim "$tmp/s.ini" --out "$tmp/b" --plot >"$tmp/b.log"
timeout 60 "$bin" sim "$tmp/s.ini" --out "$tmp/c" --set run.seed=6 >"$tmp/c.log"
head -n1 "$tmp/a.log" | grep -qx 'SEED=5' || fail "SEED= is not the first line"
tail -n1 "$tmp/a.log" | grep -qE '^TRACE_HASH=[0-9a-f]{16}$' || fail "TRACE_HASH= is not the last line"
cmp -s "$tmp/a.log" "$tmp/b.log" || fail "same seed, different trace hash"
[ "$(tail -n1 "$tmp/a.log")" != "$(tail -n1 "$tmp/c.log")" ] || fail "different seeds, same hash"

hdr=$(head -n1 "$tmp/a/series.csv")
[ "$hdr" = "time_s,round,agent,loss,accuracy,consensus_distance,bytes_sent,bytes_recv" ] ||
    fail "series.csv header: $hdr"
rows=$(grep -c ',all,' "$tmp/a/series.csv")
[ "$rows" -eq 5 ] || fail "want 5 population rows (t = 0, 0.5, 1, 1.5, 2), got $rows"
# every row has 8 fields; bytes grow
awk -F, 'NR > 1 && NF != 8 { exit 1 }' "$tmp/a/series.csv" || fail "a series row without 8 fields"
awk -F, 'NR > 2 && $7 < prev { exit 1 } NR > 1 { prev = $7 }' "$tmp/a/series.csv" ||
    fail "bytes_sent decreased"
for f in seed trace_hash events wall_s sim_time_s rounds steps_total bytes_total \
    bytes_per_agent_max final_accuracy time_to_target_s consensus_distance_final shards_lost; do
    grep -q "\"$f\":" "$tmp/a/summary.json" || fail "summary.json lacks $f"
done
grep -q '"crashes": 1' "$tmp/a/summary.json" || fail "the scheduled crash was not counted"
hash=$(tail -n1 "$tmp/a.log" | cut -d= -f2)
grep -q "\"trace_hash\": \"$hash\"" "$tmp/a/summary.json" || fail "summary hash differs from the printed one"
# quadratic: loss, consensus and bytes, no accuracy; each in three formats
for p in loss_vs_time consensus_vs_time bytes_vs_time; do
    for x in png svg pdf; do
        [ -s "$tmp/b/$p.$x" ] || fail "--plot did not write $p.$x"
    done
done
head -c 8 "$tmp/b/loss_vs_time.png" | od -An -c | grep -q 'P   N   G' || fail "loss_vs_time.png is not a PNG"
head -c 5 "$tmp/b/loss_vs_time.pdf" | grep -q '^%PDF-' || fail "loss_vs_time.pdf is not a PDF"
grep -q '<svg' "$tmp/b/loss_vs_time.svg" || fail "loss_vs_time.svg is not SVG"
[ ! -e "$tmp/b/accuracy_vs_time.png" ] || fail "an accuracy figure for a model without accuracy"

# a sweep: one row per combination, in order
timeout 60 "$bin" sim "$tmp/s.ini" --out "$tmp/sw" --quiet --set run.duration_s=0.5 \
    --sweep mixing.bits=8,32 --sweep network.latency_ms=1,10,100 >"$tmp/sw.log"
[ "$(grep -c '^TRACE_HASH=' "$tmp/sw.log")" -eq 6 ] || fail "sweep: want 6 runs"
[ "$(wc -l <"$tmp/sw/sweep.csv")" -eq 7 ] || fail "sweep.csv: want a header and 6 rows"
head -n1 "$tmp/sw/sweep.csv" | grep -q '^run,mixing.bits,network.latency_ms,seed,trace_hash' ||
    fail "sweep.csv header"
sed -n 2p "$tmp/sw/sweep.csv" | grep -q '^0,8,1,' || fail "sweep row 0 is not (8, 1)"
sed -n 7p "$tmp/sw/sweep.csv" | grep -q '^5,32,100,' || fail "sweep row 5 is not (32, 100)"
[ -s "$tmp/sw/run-0005/summary.json" ] || fail "no per-run summary"
# the sweep's runs compared on shared axes
"$bin" sim plot "$tmp/sw" --out "$tmp/cmp" >"$tmp/cmp.log" 2>&1 || { cat "$tmp/cmp.log"; fail "murmur sim plot"; }
for x in png svg pdf; do
    [ -s "$tmp/cmp/compare_consensus_vs_time.$x" ] || fail "sim plot did not write compare_consensus_vs_time.$x"
done
set +e
"$bin" sim plot "$tmp/cmp" >/dev/null 2>"$tmp/cmp.err"
rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "no series.csv, seed-S/ or run-RRRR/" "$tmp/cmp.err" ||
    fail "sim plot on a directory without runs: status $rc, $(cat "$tmp/cmp.err")"

# jget FILE KEY: a top-level value of summary.json
jget() { sed -n "s/^  \"$2\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" "$1" | head -n 1; }

# interrupted: SIGINT after some simulated time writes series and summary, exit 130
cat >"$tmp/long.ini" <<'INI'
[run]
seed = 3
agents = 64
mode = timed
duration_s = 100000
[model]
kind = quadratic
dim = 200
[network]
latency_ms = 2
bandwidth_mbps = 50
[output]
every_s = 0.5
INI
interrupt() { # signal, outdir, args...: start, wait for 3 samples, signal; sets rc
    sig=$1 o=$2
    shift 2
    "$bin" sim "$tmp/long.ini" --out "$o" "$@" >"$o.log" 2>"$o.err" &
    pid=$!
    i=0
    until [ "$(find "$o" -name series.csv -exec cat {} + 2>/dev/null | grep -c ',all,')" -ge 3 ]; do
        i=$((i + 1))
        [ $i -lt 600 ] || { kill -KILL $pid; fail "no samples from the long run after 60 s"; }
        sleep 0.1
    done
    kill -"$sig" $pid
    set +e
    wait $pid
    rc=$?
    set -e
}
interrupt INT "$tmp/int"
[ "$rc" -eq 130 ] || { cat "$tmp/int.err"; fail "SIGINT: exit status $rc, not 130"; }
[ "$(jget "$tmp/int/summary.json" interrupted)" = true ] || fail "SIGINT: summary not marked interrupted"
t=$(jget "$tmp/int/summary.json" sim_time_s)
awk -v t="$t" 'BEGIN { exit !(t > 0 && t < 100000) }' || fail "SIGINT: sim_time_s $t is not the time reached"
last=$(grep ',all,' "$tmp/int/series.csv" | tail -n1 | cut -d, -f1)
[ "$last" = "$t" ] || fail "SIGINT: last series row at $last, summary at $t"
grep -q "interrupted" "$tmp/int.err" || fail "SIGINT: no message on stderr"
# SIGTERM to the parent of workers: every seed writes its part, the summary of seeds too
interrupt TERM "$tmp/term" --seeds 2 --jobs 2 --quiet
[ "$rc" -eq 130 ] || { cat "$tmp/term.err"; fail "SIGTERM with workers: exit status $rc, not 130"; }
for sd in 3 4; do
    [ "$(jget "$tmp/term/seed-$sd/summary.json" interrupted)" = true ] || fail "SIGTERM: seed $sd not marked"
done
[ "$(jget "$tmp/term/summary.json" interrupted)" = true ] || fail "SIGTERM: seeds summary not marked"
# a second signal does not wait for the run to finish writing
"$bin" sim "$tmp/long.ini" --out "$tmp/int2" --quiet >/dev/null 2>&1 &
pid=$!
sleep 1
kill -INT $pid
kill -INT $pid 2>/dev/null || true
set +e
wait $pid
rc=$?
set -e
[ "$rc" -eq 130 ] || fail "two SIGINTs: exit status $rc, not 130"

# divergence: a quadratic objective with lr > 2 grows without bound
timeout 600 "$bin" sim "$tmp/s.ini" --out "$tmp/div" --quiet --set model.lr=5 >"$tmp/div.log" 2>"$tmp/div.err" && rc=0 || rc=$?
[ "$rc" -eq 3 ] || fail "diverging run: exit status $rc, not 3"
[ "$(jget "$tmp/div/summary.json" diverged)" = true ] || fail "diverging run not marked"
r=$(jget "$tmp/div/summary.json" diverged_round)
[ -n "$r" ] && [ "$r" != null ] || fail "diverging run: no diverged_round"
grep -q "diverged at round $r" "$tmp/div.err" || fail "diverging run: no message naming round $r"
[ "$(jget "$tmp/a/summary.json" diverged)" = false ] || fail "a converging run is marked diverged"
timeout 600 "$bin" sim "$tmp/s.ini" --out "$tmp/div2" --quiet --set model.lr=5 --allow-divergence \
    >/dev/null 2>&1 || fail "--allow-divergence: non-zero exit"
timeout 600 "$bin" sim "$tmp/s.ini" --out "$tmp/divsw" --quiet --allow-divergence --sweep model.lr=0.05,5 \
    >/dev/null 2>&1 || fail "sweep with a diverging point and --allow-divergence"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { d[NR - 1] = $c["diverged"] } END { exit !(d[1] == 0 && d[2] == 1) }' "$tmp/divsw/sweep.csv" ||
    fail "sweep.csv does not show which point diverged"

# seeds: workers give the hashes of single runs; the summary holds mean, sd and interval
timeout 600 "$bin" sim "$tmp/s.ini" --out "$tmp/seeds" --seeds 3 --jobs 2 --plot >"$tmp/seeds.log" 2>&1 ||
    { cat "$tmp/seeds.log"; fail "--seeds 3"; }
for sd in 5 6 7; do
    [ -s "$tmp/seeds/seed-$sd/series.csv" ] || fail "--seeds: no seed-$sd/series.csv"
done
h6=$(jget "$tmp/seeds/seed-6/summary.json" trace_hash)
[ "$h6" = "$(tail -n1 "$tmp/c.log" | cut -d= -f2)" ] || fail "--seeds: seed 6 in a worker differs from a run of seed 6"
grep -q '"metrics": {' "$tmp/seeds/summary.json" || fail "--seeds: no metrics in summary.json"
mean=$(sed -n '/"final_loss": {/,/}/s/^ *"mean": \([^,]*\),$/\1/p' "$tmp/seeds/summary.json")
want=$(for sd in 5 6 7; do jget "$tmp/seeds/seed-$sd/summary.json" final_loss; done |
    awk '{ s += $1; n++ } END { printf "%.10g", s / n }')
[ "$(printf '%.10g' "$mean")" = "$want" ] || fail "--seeds: mean final_loss $mean, want $want"
grep -q '"ci_low"' "$tmp/seeds/summary.json" || fail "--seeds: no interval"
[ -s "$tmp/seeds/loss_vs_time.png" ] || fail "--seeds --plot: no figure of the mean"
[ "$(grep -c '^TRACE_HASH=' "$tmp/seeds.log")" -eq 3 ] || fail "--seeds: want 3 TRACE_HASH lines"
timeout 600 "$bin" sim "$tmp/s.ini" --out "$tmp/seedsw" --seeds 2 --quiet --sweep mixing.bits=8,32 \
    >/dev/null 2>&1 || fail "--seeds with --sweep"
head -n1 "$tmp/seedsw/sweep.csv" | grep -q '^run,mixing.bits,seeds,runs_interrupted,runs_diverged,' ||
    fail "--seeds sweep.csv header"
grep -q ',final_loss_ci_low,' "$tmp/seedsw/sweep.csv" || fail "--seeds sweep.csv has no intervals"
[ -s "$tmp/seedsw/run-0001/seed-6/summary.json" ] || fail "--seeds sweep: no run-0001/seed-6"

# --trace: the stream of the hash, one event per line; same seed, same file
timeout 600 "$bin" sim "$tmp/s.ini" --out "$tmp/tr1" --trace "$tmp/t1.txt" --quiet >"$tmp/tr1.log"
timeout 600 "$bin" sim "$tmp/s.ini" --out "$tmp/tr2" --trace "$tmp/t2.txt" --quiet >/dev/null
timeout 600 "$bin" sim "$tmp/s.ini" --out "$tmp/tr3" --trace "$tmp/t3.txt" --quiet --set run.seed=6 >/dev/null
cmp -s "$tmp/t1.txt" "$tmp/t2.txt" || fail "--trace: same seed, different traces"
! cmp -s "$tmp/t1.txt" "$tmp/t3.txt" || fail "--trace: different seeds, same trace"
[ "$(tail -n1 "$tmp/t1.txt")" = "# trace_hash $hash" ] || fail "--trace does not end with the run's hash"
frames=$(grep -c ' frame ' "$tmp/t1.txt")
[ "$frames" -gt 0 ] && grep -q ' mark ' "$tmp/t1.txt" || fail "--trace: no frames or marks"
awk '!/^#/ && !(NF == 7 && $2 == "frame") && !(NF == 3 && $2 == "mark") { exit 1 }' "$tmp/t1.txt" ||
    fail "--trace: a line of neither form"
expect_err2() { pat=$1; shift; set +e; "$bin" sim "$@" >/dev/null 2>"$tmp/e.err"; rc=$?; set -e
    [ "$rc" -eq 2 ] && grep -q -- "$pat" "$tmp/e.err" || { cat "$tmp/e.err"; fail "want status 2 and '$pat' for: $*"; }; }
expect_err2 "--trace exports one run" "$tmp/s.ini" --out "$tmp/x" --trace "$tmp/t.txt" --seeds 2

# a relative path in a scenario is read from the scenario's directory
mkdir -p "$tmp/sub"
printf '0 5 5 5\n5 0 5 5\n5 5 0 5\n5 5 5 0\n' >"$tmp/sub/lat.txt"
printf '[run]\nagents = 4\nmode = timed\nduration_s = 1\n[model]\nkind = quadratic\ndim = 8\n[network]\nlatency_dist = matrix\nlatency_file = lat.txt\n[shards]\nreplication = 2\n' >"$tmp/sub/m.ini"
timeout 600 "$bin" sim "$tmp/sub/m.ini" --out "$tmp/m" --quiet >"$tmp/m.log" 2>&1 ||
    { cat "$tmp/m.log"; fail "a latency file beside its scenario is not found"; }

# errors: exit status 2 and a message naming the problem
expect_err() { # pattern, args...
    pat=$1
    shift
    set +e
    "$bin" sim "$@" >"$tmp/e.out" 2>"$tmp/e.err"
    rc=$?
    set -e
    [ "$rc" -eq 2 ] || fail "exit status $rc, not 2, for: $*"
    grep -q -- "$pat" "$tmp/e.err" || { cat "$tmp/e.err"; fail "no '$pat' in the error for: $*"; }
}
printf '[run]\nagnets = 3\n' >"$tmp/bad.ini"
expect_err "bad.ini:2: unknown key 'agnets' in section .run.; did you mean 'agents'" "$tmp/bad.ini" --out "$tmp/x"
printf '[netwrk]\n' >"$tmp/bad2.ini"
expect_err "unknown section" "$tmp/bad2.ini" --out "$tmp/x"
expect_err "mixing.bits: '3' is not one of" "$tmp/s.ini" --out "$tmp/x" --set mixing.bits=3
expect_err "network.loss" "$tmp/s.ini" --out "$tmp/x" --sweep network.loss=0.1,2
expect_err "cannot open" "$tmp/missing.ini" --out "$tmp/x"
expect_err "unknown flag .--bogus." "$tmp/s.ini" --bogus
expect_err "network.latency_file = .*lat.txt (.*m.ini:10) has no effect: it needs network.latency_dist = matrix" \
    "$tmp/sub/m.ini" --out "$tmp/x" --set network.latency_dist=const
expect_err "network.latency_ms = 2 (.*s.ini:11) has no effect: it needs run.mode = timed" \
    "$tmp/s.ini" --out "$tmp/x" --set run.mode=rounds
expect_err "unknown flag .--sweeep.; did you mean --sweep?" "$tmp/s.ini" --sweeep run.seed=1,2
[ ! -e "$tmp/x" ] || fail "an invalid scenario wrote output"
# the example scenario of docs/SIMULATOR.md runs as documented (shortened)
doc=$(dirname "$0")/../../docs/SIMULATOR.md
awk '/^```ini$/ { n++; on = (n == 1); next } /^```$/ { on = 0 } on' "$doc" >"$tmp/doc.ini"
grep -q '^\[run\]' "$tmp/doc.ini" || fail "no ini example found in $doc"
"$bin" sim "$tmp/doc.ini" --out "$tmp/doc" --quiet --set run.duration_s=5 \
    >"$tmp/doc.out" 2>&1 || { cat "$tmp/doc.out"; fail "the docs/SIMULATOR.md example does not run"; }
[ -s "$tmp/doc/summary.json" ] || fail "the docs/SIMULATOR.md example wrote no summary"
# every shipped example scenario runs (shortened)
for ex in "$(dirname "$0")"/../../sim/examples/*.ini; do
    "$bin" sim "$ex" --out "$tmp/ex" --quiet --set run.duration_s=1 >"$tmp/ex.out" 2>&1 ||
        { cat "$tmp/ex.out"; fail "example $ex does not run"; }
done
echo "sim_cli: ok"
