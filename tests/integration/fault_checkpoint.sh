#!/bin/sh
# Checkpoint clobbered (issue 13 item 10): an agent trains and writes its
# checkpoint; restarted with a mistyped --model it cannot use that file. It
# must move it aside (checkpoint.bin.unusable-<time>, bytes unchanged) and
# say so, then train and checkpoint the new model without touching the old
# file; restarted with the right model and the file moved back, it resumes
# from it. Before, the unusable checkpoint was overwritten within seconds.
NAME=fault_checkpoint
. tests/integration/lib/agent.sh

cluster_init 19800 1 4
agent_start 1 --set checkpoint.every_steps=200
wait_for 40 sh -c "grep -q 'event=checkpoint_written.*reason=periodic' '$tmp/a1.log'" ||
    fail "no periodic checkpoint in 40 s"
kill -TERM "$pid1"
wait "$pid1" 2>/dev/null || fail "agent exited with an error on SIGTERM"
saved=$(sed -n 's/.*event=checkpoint_written .* step=\([0-9]*\) .*reason=shutdown.*/\1/p' "$tmp/a1.log" | tail -n 1)
[ -n "$saved" ] || fail "no final checkpoint"
cp "$tmp/a1/checkpoint.bin" "$tmp/good.bin"

echo "restart" >>"$tmp/a1.log"
agent_start 1 --set checkpoint.every_steps=200 --set model.spec=mlp:32
after() { sed -n '/^restart$/,$p' "$tmp/a1.log"; }
wait_for 20 sh -c "sed -n '/^restart\$/,\$p' '$tmp/a1.log' | grep -q 'event=checkpoint_written'" ||
    fail "the restarted agent wrote no checkpoint"
line=$(after | grep 'event=checkpoint_unusable') || fail "no checkpoint_unusable line"
moved=$(echo "$line" | sed -n 's/.* moved_to=\([^ ]*\).*/\1/p')
case "$moved" in "$tmp/a1/checkpoint.bin.unusable-"*) ;; *) fail "not moved aside: $line" ;; esac
cmp -s "$moved" "$tmp/good.bin" || fail "the moved checkpoint differs from the one written"
kill -TERM "$pid1"
wait "$pid1" 2>/dev/null || true
cmp -s "$moved" "$tmp/good.bin" || fail "the moved checkpoint changed while the new model trained"

# The operator fixes the typo and puts the file back: it resumes.
mv "$moved" "$tmp/a1/checkpoint.bin"
echo "restart2" >>"$tmp/a1.log"
agent_start 1 --set checkpoint.every_steps=200
wait_for 20 sh -c "sed -n '/^restart2\$/,\$p' '$tmp/a1.log' | grep -q 'event=checkpoint_loaded .* step=$saved '" ||
    fail "the restored checkpoint (step $saved) was not loaded"
echo "$NAME: ok: step-$saved checkpoint moved to $(basename "$moved") and resumed from after the fix"
