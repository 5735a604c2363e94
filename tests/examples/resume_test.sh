#!/usr/bin/env bash
# Exact resume: a run killed with SIGKILL mid-epoch and restarted with --resume ends with
# checkpoints bit-identical to an uninterrupted run -- one process, 2 ranks (one rank killed), and
# 2 ranks with PowerSGD (the whole job killed). Then a resume at another world size (warned, per-rank
# state reset), and checkpoints that must be refused: another model, a flipped bit, another seed.
# usage: resume_test.sh TRAIN_RESNET DDP_RESNET
source "$(dirname "$0")/lib.sh"
train="$(realpath "$1")"
ddp="$(realpath "$2")"
small=(--depth=8 --width=4 --train_limit=640 --epochs=2 --checkpoint_every=7)
mkdir -p "$work"/{s1,s2,d1,d2,p1,p2,w3}

echo "== one process: killed after step 17 of 40, resumed from the checkpoint of step 14" >&2
run s1 120 "$train" "${small[@]}" --batch=32 --checkpoint=s1/c.ckpt
expect_success s1
EMBER_FAULT_KILL_AT_STEP=17 run s2_killed 120 "$train" "${small[@]}" --batch=32 --checkpoint=s2/c.ckpt
[[ $rc -eq 137 ]]; check "the SIGKILL ended the run (exit $rc)" $?
run s2 120 "$train" "${small[@]}" --batch=32 --checkpoint=s2/c.ckpt --resume=s2/c.ckpt
expect_success s2
grep -q "resumed from s2/c.ckpt at global step 14: epoch 1, step 14 of 20" "$work/s2.err"
check "resumed at step 14 of epoch 1" $?
same_files s1/c.ckpt s2/c.ckpt

echo "== 2 ranks: rank 1 killed after step 17; rank 0 and mpirun must exit within the timeout" >&2
ddp_args=("${small[@]}" --batch=16 --timeout=10)
run d1 120 "${MPIRUN[@]}" -np 2 "$ddp" "${ddp_args[@]}" --checkpoint=d1/c.ckpt
expect_success d1
EMBER_FAULT_KILL_AT_STEP=17 EMBER_FAULT_KILL_RANK=1 \
  run d2_killed 60 "${MPIRUN[@]}" -np 2 "$ddp" "${ddp_args[@]}" --checkpoint=d2/c.ckpt
[[ $rc -ne 0 ]] && awk -v s="$secs" 'BEGIN { exit !(s < 25) }'
check "mpirun failed (exit $rc) within 25 s of the start, well before the 60 s limit (${secs}s)" $?
run d2 120 "${MPIRUN[@]}" -np 2 "$ddp" "${ddp_args[@]}" --checkpoint=d2/c.ckpt --resume=d2/c.ckpt
expect_success d2
same_files d1/c.ckpt d2/c.ckpt

echo "== 2 ranks with PowerSGD (per-rank error feedback, bucket layout): the whole job killed" >&2
p_args=("${ddp_args[@]}" --comm_hook=powersgd --powersgd_start_iter=2)
run p1 120 "${MPIRUN[@]}" -np 2 "$ddp" "${p_args[@]}" --checkpoint=p1/c.ckpt
expect_success p1
EMBER_FAULT_KILL_AT_STEP=17 run p2_killed 60 "${MPIRUN[@]}" -np 2 "$ddp" "${p_args[@]}" --checkpoint=p2/c.ckpt
[[ $rc -ne 0 ]]; check "the job died (exit $rc)" $?
cp "$work"/p2/c.ckpt* "$work/w3/"  # for the world-size change below
run p2 120 "${MPIRUN[@]}" -np 2 "$ddp" "${p_args[@]}" --checkpoint=p2/c.ckpt --resume=p2/c.ckpt
expect_success p2
same_files p1/c.ckpt p2/c.ckpt
same_files p1/c.ckpt.step40.rank0 p2/c.ckpt.step40.rank0
same_files p1/c.ckpt.step40.rank1 p2/c.ckpt.step40.rank1
files=$(ls "$work/p2" | tr '\n' ' ')
[[ "$files" == "c.ckpt c.ckpt.prev c.ckpt.step35.rank0 c.ckpt.step35.rank1 c.ckpt.step40.rank0 c.ckpt.step40.rank1 " ]]
check "only the last two checkpoints' per-rank files are kept: $files" $?

echo "== a 2-rank checkpoint resumed by 3 ranks" >&2
run w3 120 "${MPIRUN[@]}" -np 3 "$ddp" "${p_args[@]}" --checkpoint=w3/c.ckpt --resume=w3/c.ckpt
expect_success w3
grep -q "written with 2 rank(s) x batch 16 (20 steps/epoch); this run has 3 x 16 (13 steps/epoch)" "$work/w3.err"
check "the world-size change is reported" $?
grep -q "per-rank state (PowerSGD error feedback and low-rank memories) was saved by 2 rank(s) .* it is reset" "$work/w3.err"
check "PowerSGD state is reset with a warning" $?
sed -n 's/^resume: warning: /  warning: /p' "$work/w3.err" | cut -c1-200 >&2

echo "== checkpoints that must be refused" >&2
small=(--depth=8 --width=4 --train_limit=640 --epochs=2)
run other_model 60 "$train" "${small[@]}" --batch=32 --width=8 --resume=s1/c.ckpt
expect_error other_model "^train_resnet: resume: 's1/c.ckpt' is from a different model: tensor 0 is 'conv1.weight' \[4, 1, 3, 3\] there but 'conv1.weight' \[8, 1, 3, 3\] here$"
cp "$work/s1/c.ckpt" "$work/flipped.ckpt"
size=$(stat -c %s "$work/flipped.ckpt")
printf '\x55' | dd of="$work/flipped.ckpt" bs=1 seek=$((size - 100)) conv=notrunc status=none
run flipped 60 "$train" "${small[@]}" --batch=32 --resume=flipped.ckpt
expect_error flipped "^train_resnet: load: 'flipped.ckpt' is corrupt: checksum mismatch"
run other_seed 60 "$train" "${small[@]}" --batch=32 --seed=5 --resume=s1/c.ckpt
expect_error other_seed "was trained with --seed=0 but this run has --seed=5"
run not_training 60 "$train" "${small[@]}" --batch=32 --resume=s1/c.ckpt.missing
expect_error not_training "^train_resnet: load: cannot open 's1/c.ckpt.missing': No such file or directory$"
finish
