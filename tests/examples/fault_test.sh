#!/usr/bin/env bash
# Faults seen from the trainer: a rank that stalls -- asleep, or frozen by SIGSTOP --
# makes every other rank and mpirun exit non-zero within --timeout plus a few seconds, with one line
# naming the collective, its sequence number and the rank that did not arrive; a desynchronised job
# (ranks building different models) fails with both sides shown at EMBER_DISTRIBUTED_DEBUG=DETAIL.
# usage: fault_test.sh TRAIN_RESNET DDP_RESNET (the first is unused)
source "$(dirname "$0")/lib.sh"
ddp="$(realpath "$2")"
small=(--depth=8 --width=4 --train_limit=960 --batch=16 --epochs=1 --timeout=5)
# Cleanup of a frozen rank, should mpirun leave one behind: the runs below get their own session.
trap 'pkill -KILL -f "ddp_resnet.*--train_limit=960" 2>/dev/null; rm -rf "$session"' EXIT

for mode in sleep sigstop; do
  echo "== rank 1 of 3 stalls ($mode) before collective #20 of the default group" >&2
  EMBER_FAULT_STALL_RANK=1 EMBER_FAULT_STALL_AT=20 EMBER_FAULT_STALL_MODE=$mode \
    run "stall_$mode" 60 "${MPIRUN[@]}" -np 3 "$ddp" "${small[@]}"
  # Ranks 0 and 2 time out on the first collective rank 1 must join from #20 on.
  expect_error "stall_$mode" "^\[rank [02]\] ddp_resnet: .*bucket 0 of 1 .*allreduce #2[01] .*timed out after 5000 ms.*rank 1 did not arrive"
  awk -v s="$secs" 'BEGIN { exit !(s < 30) }'
  check "stall_$mode: the job ended ${secs}s after its start (timeout 5 s; limit 30 s)" $?
  case $mode in
    sleep) pattern="rank 1 has not arrived: its last collective is .* #19 " ;;
    sigstop) pattern="rank 1 did not respond" ;;
  esac
  grep -q -E -- "$pattern" "$work/stall_$mode.err"
  check "stall_$mode: the line says why ($pattern)" $?
done

echo "== desync: rank 1 builds a wider model; both sides are named" >&2
EMBER_DISTRIBUTED_DEBUG=DETAIL run desync 60 "${MPIRUN[@]}" -np 1 "$ddp" "${small[@]}" : -np 1 "$ddp" "${small[@]}" --width=8
expect_error desync "^\[rank 1\] ddp_resnet: verify_params_across_processes: parameter 0 \('conv1.weight'\) on rank 1 has shape float32\[8, 1, 3, 3\], but on rank 0 it has shape float32\[4, 1, 3, 3\]"
finish
