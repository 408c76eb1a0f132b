#!/bin/sh
# Restart from checkpoint: an agent alone trains, is stopped with SIGTERM
# (graceful leave, final checkpoint at step N), and restarted on the same
# data directory: it loads the checkpoint, resumes at step N exactly, and
# keeps its accuracy. A corrupted checkpoint is refused with a warning and
# never crashes the agent (it starts from scratch).
NAME=agent_checkpoint
. tests/integration/lib/agent.sh

cluster_init 19200 1 4
agent_start 1
trained() { [ "$(fnum 1 step)" -ge 800 ] && ge "$(field 1 accuracy)" 0.75; }
wait_for 40 trained || fail "agent did not train to step 800 / accuracy 0.75 in 40 s"
acc=$(field 1 accuracy)
kill -TERM "$pid1"
wait "$pid1" 2>/dev/null || fail "agent exited with an error on SIGTERM"
saved=$(sed -n 's/.*event=checkpoint_written .* step=\([0-9]*\) .*reason=shutdown.*/\1/p' "$tmp/a1.log" | tail -n 1)
[ -n "$saved" ] || fail "no final checkpoint on SIGTERM"
grep -q 'event=agent_stopped' "$tmp/a1.log" || fail "no agent_stopped line"

echo "restart" >>"$tmp/a1.log"
agent_start 1
resumed() { sed -n '/^restart$/,$p' "$tmp/a1.log" | grep -q 'event=progress step=[1-9]'; }
wait_for 20 resumed || fail "restarted agent does not train"
loaded=$(sed -n '/^restart$/,$p' "$tmp/a1.log" | sed -n 's/.*event=checkpoint_loaded .* step=\([0-9]*\) .*/\1/p' | head -n 1)
[ "$loaded" = "$saved" ] || fail "checkpoint saved at step $saved, loaded at step ${loaded:-none}"
first=$(sed -n '/^restart$/,$p' "$tmp/a1.log" | sed -n 's/.* event=progress step=\([0-9]*\) .*/\1/p' | head -n 1)
[ "$first" = "$saved" ] || fail "restart resumed at step $first, saved at $saved"
evaluated() { sed -n '/^restart$/,$p' "$tmp/a1.log" | grep -q 'event=progress .* accuracy=0\.[0-9]'; }
wait_for 20 evaluated || fail "no evaluation after the restart"
acc2=$(field 1 accuracy)
awk -v a="$acc" -v b="$acc2" 'BEGIN { exit !(b >= a - 0.05) }' || fail "accuracy $acc before, $acc2 after the restart"
kill -TERM "$pid1"
wait "$pid1" 2>/dev/null || true

# A damaged checkpoint: warned about, never fatal.
printf 'garbage' | dd of="$tmp/a1/checkpoint.bin" bs=1 seek=100 conv=notrunc 2>/dev/null
echo "restart2" >>"$tmp/a1.log"
agent_start 1
wait_for 20 sh -c "sed -n '/^restart2\$/,\$p' '$tmp/a1.log' | grep -q 'event=checkpoint_unusable'" ||
    fail "a damaged checkpoint was not reported"
sleep 1
agent_alive 1 || fail "agent died on a damaged checkpoint"
echo "$NAME: ok: saved at step $saved, resumed at step $first, accuracy $acc -> $acc2; damaged checkpoint refused"
