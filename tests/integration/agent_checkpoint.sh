#!/bin/sh
# Restart from checkpoint: an agent alone trains, is stopped with SIGTERM
# (graceful leave, final checkpoint at step N), and restarted on the same
# data directory: it loads the checkpoint, resumes at step N exactly, and
# keeps its model: the restored model's first evaluation gives exactly the
# accuracy and test loss of the final evaluation before the stop (the same
# bytes on the same test samples), and it trains on from there. A corrupted
# checkpoint is refused with a warning and never crashes the agent (it
# starts from scratch).
NAME=agent_checkpoint
. tests/integration/lib/agent.sh

cluster_init 19200 1 4
agent_start 1
trained() { [ "$(fnum 1 step)" -ge 800 ] && ge "$(field 1 accuracy)" 0.75; }
wait_for 40 trained || fail "agent did not train to step 800 / accuracy 0.75 in 40 s"
kill -TERM "$pid1"
wait "$pid1" 2>/dev/null || fail "agent exited with an error on SIGTERM"
saved=$(sed -n 's/.*event=checkpoint_written .* step=\([0-9]*\) .*reason=shutdown.*/\1/p' "$tmp/a1.log" | tail -n 1)
[ -n "$saved" ] || fail "no final checkpoint on SIGTERM"
grep -q 'event=agent_stopped' "$tmp/a1.log" || fail "no agent_stopped line"
# evaluated: WHEN -> "step accuracy test_loss" of the last such line so far
evaluated() {
    sed -n "s/.*event=model_evaluated when=$1 step=\([0-9]*\) accuracy=\([^ ]*\) test_loss=\([^ ]*\).*/\1 \2 \3/p" "$tmp/a1.log" | tail -n 1
}
final=$(evaluated final)
[ -n "$final" ] || fail "no final evaluation on SIGTERM"
[ "${final%% *}" = "$saved" ] || fail "final evaluation at step ${final%% *}, checkpoint at $saved"
acc=$(echo "$final" | cut -d' ' -f2)

echo "restart" >>"$tmp/a1.log"
agent_start 1
resumed() { sed -n '/^restart$/,$p' "$tmp/a1.log" | grep -q 'event=progress step=[1-9]'; }
wait_for 20 resumed || fail "restarted agent does not train"
loaded=$(sed -n '/^restart$/,$p' "$tmp/a1.log" | sed -n 's/.*event=checkpoint_loaded .* step=\([0-9]*\) .*/\1/p' | head -n 1)
[ "$loaded" = "$saved" ] || fail "checkpoint saved at step $saved, loaded at step ${loaded:-none}"
first=$(sed -n '/^restart$/,$p' "$tmp/a1.log" | sed -n 's/.* event=progress step=\([0-9]*\) .*/\1/p' | head -n 1)
[ "$first" = "$saved" ] || fail "restart resumed at step $first, saved at $saved"
restored=$(sed -n '/^restart$/,$p' "$tmp/a1.log" | grep 'event=model_evaluated when=checkpoint' |
    sed -n 's/.* step=\([0-9]*\) accuracy=\([^ ]*\) test_loss=\([^ ]*\).*/\1 \2 \3/p' | head -n 1)
[ "$restored" = "$final" ] ||
    fail "the model before the stop evaluated as '$final' (step accuracy test_loss), the restored one as '${restored:-nothing}'"
acc2=$(echo "$restored" | cut -d' ' -f2)
trained_past() {
    sed -n '/^restart$/,$p' "$tmp/a1.log" | sed -n 's/.* event=progress step=\([0-9]*\) .*/\1/p' |
        awk -v s="$saved" '$1 >= s + 100 { f = 1 } END { exit !f }'
}
wait_for 20 trained_past || fail "the restarted agent did not train 100 steps past $saved"
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
