#!/usr/bin/env bash
# ddp_resnet --zero=1: ZeRO's sharded optimizer writes the same checkpoint, byte for byte,
# as the unsharded one (the state is consolidated on rank 0 and the updates are the same bits),
# with and without --zero_overlap, with SGD-momentum and AdamW; a run killed mid-epoch resumes
# exactly; and a checkpoint written by 2 ranks resumes at 3.
# usage: zero_test.sh TRAIN_RESNET DDP_RESNET
source "$(dirname "$0")/lib.sh"
ddp="$(realpath "$2")"
small=(--depth=8 --width=4 --train_limit=640 --epochs=2 --checkpoint_every=7 --batch=16 --timeout=20)
mkdir -p "$work"/{ddp,zero,overlap,k,w3}

for opt in sgd adamw; do
  echo "== $opt: plain DDP, --zero=1 and --zero=1 --zero_overlap=1 write the same checkpoint" >&2
  run "ddp_$opt" 120 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --optimizer=$opt --checkpoint=ddp/$opt.ckpt
  expect_success "ddp_$opt"
  run "zero_$opt" 120 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --optimizer=$opt --zero=1 --checkpoint=zero/$opt.ckpt
  expect_success "zero_$opt"
  run "overlap_$opt" 120 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --optimizer=$opt --zero=1 --zero_overlap=1 \
    --checkpoint=overlap/$opt.ckpt
  expect_success "overlap_$opt"
  same_files "ddp/$opt.ckpt" "zero/$opt.ckpt"
  same_files "ddp/$opt.ckpt" "overlap/$opt.ckpt"
done

echo "== --zero=1: killed after step 17, resumed from the checkpoint of step 14" >&2
EMBER_FAULT_KILL_AT_STEP=17 run k_killed 60 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --zero=1 --checkpoint=k/sgd.ckpt
[[ $rc -ne 0 ]]; check "the job died (exit $rc)" $?
cp "$work"/k/sgd.ckpt "$work/w3/"
run k 120 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --zero=1 --checkpoint=k/sgd.ckpt --resume=k/sgd.ckpt
expect_success k
same_files zero/sgd.ckpt k/sgd.ckpt

echo "== a 2-rank --zero=1 checkpoint resumed by 3 ranks" >&2
run w3 120 "${MPIRUN[@]}" -np 3 "$ddp" "${small[@]}" --zero=1 --checkpoint=w3/sgd.ckpt --resume=w3/sgd.ckpt
expect_success w3
grep -q "written with 2 rank(s) x batch 16 (20 steps/epoch); this run has 3 x 16 (13 steps/epoch)" "$work/w3.err"
check "the world-size change is reported" $?
grep -q "sgd (ZeRO-1)" "$work/w3.err"
check "the run says it shards the optimizer" $?
finish
