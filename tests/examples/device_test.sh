#!/usr/bin/env bash
# The trainers on the GPU (--device=cuda): under --config=cudasim the CUDA simulator and the
# simulated NCCL, on a GPU machine the real ones. Each run must train to the same loss and test
# accuracy as the CPU run of the same command: one process (train_resnet), DDP over NCCL at 2
# ranks (where this host has a GPU per rank), and DDP at 2 ranks sharing the GPU over the MPI
# backend (ddp_resnet --backend=mpi).
# In a build without CUDA the trainer must say so, and the test skips.
# usage: device_test.sh TRAIN_RESNET DDP_RESNET
source "$(dirname "$0")/lib.sh"
single="$(realpath "$1")" ddp="$(realpath "$2")"
small=(--depth=8 --width=4 --train_limit=640 --test_limit=500 --batch=16 --epochs=1 --max_steps=5)

run probe 60 "$single" "${small[@]}" --max_steps=1 --device=cuda
if [[ $rc -ne 0 ]] && grep -q "built without CUDA" "$work/probe.err"; then
  echo "SKIPPED: $(cat "$work/probe.err")"
  exit 0
fi

# same_training A B: the "epoch 1: train loss L, test accuracy A" lines agree to 2e-3 in the loss
# and 0.004 in accuracy (2 of 500 images: the device's GEMMs sum in another order).
same_training() {
  local a b
  a=$(grep -m1 -E '^epoch 1: ' "$work/$1.out")
  b=$(grep -m1 -E '^epoch 1: ' "$work/$2.out")
  echo "  $1: $a" >&2
  echo "  $2: $b" >&2
  awk -v a="$a" -v b="$b" 'BEGIN {
    split(a, x, /[ ,()]+/); split(b, y, /[ ,()]+/);
    # fields: epoch 1: train loss L test accuracy A
    dl = x[5] - y[5]; da = x[8] - y[8];
    exit !(x[5] != "" && y[5] != "" && dl < 2e-3 && dl > -2e-3 && da < 0.004 && da > -0.004) }'
  check "$1 trains as $2 does" $?
}

run single_cpu 120 "$single" "${small[@]}"
expect_success single_cpu
run single_cuda 300 "$single" "${small[@]}" --device=cuda
expect_success single_cuda
same_training single_cuda single_cpu

run ddp_cpu 120 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}"
expect_success ddp_cpu
run ddp_nccl 300 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --device=cuda
if [[ $rc -ne 0 ]] && grep -q "NCCL needs a GPU per rank" "$work/ddp_nccl.err"; then
  echo "  skipped: $(grep -m1 "NCCL needs" "$work/ddp_nccl.err")" >&2
else
  expect_success ddp_nccl
  grep -q "over nccl" "$work/ddp_nccl.err"
  check "ddp_nccl ran over NCCL" $?
  same_training ddp_nccl ddp_cpu
fi
run ddp_mpi_staged 300 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --device=cuda --backend=mpi
expect_success ddp_mpi_staged
same_training ddp_mpi_staged ddp_cpu

echo "== bad combinations are one clear line" >&2
run nccl_on_cpu 60 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --backend=nccl
expect_error nccl_on_cpu "^\[rank 0\] ddp_resnet: --backend=nccl communicates GPU tensors: add --device=cuda"
run bad_device 60 "$single" "${small[@]}" --device=gpu
expect_error bad_device "^train_resnet: --device: 'gpu' is not cpu or cuda \(see --help\)$"
finish
