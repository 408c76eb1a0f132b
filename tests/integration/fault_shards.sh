#!/bin/sh
# Shard faults (issue 13 items 12, 13) on real agents in namespaces.
# 1. Corrupt shard: a replica damaged at rest on agent 2 is found when agent
#    2 restarts (every stored shard is verified against its id), set aside as
#    <id>.msh.bad, counted, fetched again from a good copy and held again
#    only once verified. Before, it was kept and counted as held.
# 2. Lost shards: both holders of a shard are killed; shards held by neither
#    survivor are reported by each survivor that should hold them: one shard_lost
#    warn line per shard, murmur_shards_missing and shards_missing in
#    /status and the progress line. Before, only pending=N said anything.
NAME=fault_shards
. tests/integration/lib/fault.sh

fault_init 4 16
for i in 1 2 3 4; do fault_start "$i"; done
spread() { for i in 1 2 3 4; do [ "$(fnum "$i" shards_held)" -ge 4 ] || return 1; done; }
wait_for 60 spread || fail "shards did not spread to every agent in 60 s"

# 1. Damage one replica of agent 2 at rest, restart it.
f=$(ls "$tmp/a2/shards/"*.msh | grep -E '/[0-9a-f]{64}\.msh$' | head -n 1)
[ -n "$f" ] || fail "agent 2 holds no shard file"
cp "$f" "$tmp/good.msh"
size=$(wc -c <"$f")
printf '\377\377\377\377' | dd of="$f" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
kill -TERM "$pid2"
wait "$pid2" 2>/dev/null || true
netns_forget "$pid2"
from2=$(fault_lines 2)
fault_start 2
back() { [ -f "$f" ] && cmp -s "$f" "$tmp/good.msh"; }
wait_for 30 back || fail "the damaged shard was not fetched again"
[ -f "$f.bad" ] || fail "the damaged copy was not set aside as $(basename "$f").bad"
cmp -s "$f.bad" "$tmp/good.msh" && fail "the set-aside copy is not the damaged one"
q=$(fault_metric 2 murmur_shards_quarantined_total)
ge "$q" 1 || fail "agent 2: murmur_shards_quarantined_total is $q"

# 2. Kill both holders of some shard; the two survivors report what nobody
#    of them holds.
holders() { for i in 1 2 3 4; do [ -f "$tmp/a$i/shards/$1.msh" ] && printf '%s ' "$i"; done; return 0; }
ids=$(awk '{print $1}' "$tmp/all/catalog" | grep -E '^[0-9a-f]{64}$')
victims=""
for c in $ids; do
    h=$(holders "$c")
    [ "$(echo $h | wc -w)" -eq 2 ] && { victims=$h; break; }
done
[ -n "$victims" ] || fail "no shard with exactly two holders"
survivors=""
for i in 1 2 3 4; do case " $victims " in *" $i "*) ;; *) survivors="$survivors $i" ;; esac; done
set -- $survivors
s1=$1
s2=$2
from_s1=$(fault_lines "$s1")
from_s2=$(fault_lines "$s2")
for v in $victims; do kill -KILL "$(agent_pid "$v")"; done
gone() { [ "$(fnum "$s1" peers)" -eq 1 ] && [ "$(fnum "$s2" peers)" -eq 1 ]; }
wait_for 30 gone || fail "survivors $s1, $s2 did not see the deaths"
lost=0
for c in $ids; do
    [ -f "$tmp/a$s1/shards/$c.msh" ] || [ -f "$tmp/a$s2/shards/$c.msh" ] || lost=$((lost + 1))
done
[ "$lost" -ge 1 ] || fail "no shard lost (test needs a loss)"
settled() { [ $(($(fnum "$s1" shards_missing) + $(fnum "$s2" shards_missing))) -eq $((2 * lost)) ]; }
wait_for 40 settled ||
    fail "want $lost lost shards on each survivor, got $(fnum "$s1" shards_missing) and $(fnum "$s2" shards_missing)"
for i in $s1 $s2; do
    eval "from=\$from_s$([ "$i" = "$s1" ] && echo 1 || echo 2)"
    w=$(sed -n "$((from + 1)),\$p" "$tmp/a$i.log" | grep -c 'level=warn event=shard_lost')
    [ "$w" -eq "$lost" ] || { grep -h "event=shard_lost\|event=shard_found\|event=agent_started" "$tmp/a$i.log" | cut -c1-100 >&2; fail "agent $i: $w shard_lost lines for $lost lost shards"; }
    m=$(fault_metric "$i" murmur_shards_missing)
    [ "$m" = "$lost" ] || fail "agent $i: murmur_shards_missing $m, want $lost"
    s=$(netns_exec "$i" "$bin" status --json "10.77.0.$i:$FAULT_METRICS" | sed -n 's/.*"shards_missing":\([0-9]*\).*/\1/p')
    [ "$s" = "$lost" ] || fail "agent $i: /status shards_missing ${s:-absent}, want $lost"
done
echo "$NAME: ok: damaged replica set aside and fetched again ($q quarantined); $lost lost shards reported on both survivors"
