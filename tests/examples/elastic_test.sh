#!/usr/bin/env bash
# Automatic restarts through scripts/elastic_run.py at 2 ranks: a rank killed with
# SIGKILL at a random step, and a rank frozen with SIGSTOP (the timeout names it), each end with a final checkpoint
# byte-identical to an uninterrupted run's, one restart line naming the rank and the step resumed
# from, and the restart in the metrics file; a kill while a checkpoint is written resumes from the
# older one; a newest checkpoint cut short is passed over for the one kept before it; a fault in
# every attempt ends with one final line and a non-zero exit.
# usage: elastic_test.sh TRAIN_RESNET DDP_RESNET ELASTIC_RUN
source "$(dirname "$0")/lib.sh"
ddp="$(realpath "$2")"
launcher=(/usr/bin/python3 "$(realpath "$3")" --mpirun="${MPIRUN[*]}" --np=2)
# --train_limit=641: a marker for the leftover check below, and one image more than 40 steps use.
small=(--depth=8 --width=4 --train_limit=641 --epochs=2 --checkpoint_every=7 --batch=16 --timeout=5)
mkdir -p "$work"/{ref,ref_psgd,kill,stop,ckpt,trunc,gave_up}

# restart_line NAME PATTERN: exactly one restart line, matching PATTERN.
restart_line() {
  local n
  n=$(grep -c '^elastic_run: attempt ' "$work/$1.err")
  [[ $n -eq 1 ]]; check "$1: one restart line ($n)" $?
  expect_line "$1" "$2"
}
# no_leftovers NAME: no process of the run outlived it (mpirun ended every rank).
no_leftovers() {
  ! grep -q "outlived mpirun" "$work/$1.err" && ! pgrep -f "ddp_resnet.*--train_limit=641" >/dev/null
  check "$1: no rank outlived mpirun" $?
}

echo "== the uninterrupted runs" >&2
run ref 120 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --checkpoint=ref/c.ckpt
expect_success ref
psgd=(--comm_hook=powersgd --powersgd_start_iter=2)
run ref_psgd 120 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" "${psgd[@]}" --checkpoint=ref_psgd/c.ckpt
expect_success ref_psgd

# A random step of the 40 (8..38), printed so that a failure can be rerun with EMBER_TEST_KILL_STEP.
# Checkpoints are at steps 7, 14, 21, 28, 35 and the epoch end (20, after that epoch's step 20). A
# kill after step k finds the newest before k; after a checkpoint step k itself, k's own write ran
# beside the next step and may not have finished (Note [Checkpoints off the training thread]).
k=${EMBER_TEST_KILL_STEP:-$((8 + RANDOM % 31))}
resume=() last=7
for c in 7 14 20 21 28 35; do
  if (( c == k && c != 20 )); then resume=("$last" "$c"); fi
  if (( c < k )); then last=$c; fi
done
(( ${#resume[@]} )) || resume=("$last")
alternatives=$(IFS='|'; echo "${resume[*]}")
echo "== rank 1 killed (SIGKILL) after step $k: restarted from step ${resume[*]}" >&2
EMBER_FAULT_KILL_AT_STEP=$k EMBER_FAULT_KILL_RANK=1 \
  run kill 120 "${launcher[@]}" --max_restarts=2 -- "$ddp" "${small[@]}" --checkpoint=kill/c.ckpt --metrics=kill/m.csv
expect_success kill
restart_line kill "^elastic_run: attempt 2 of 3: attempt 1 ended \(exit 137\): rank 1 on host \S+ exited on signal 9 \(Killed\); resuming from global step ($alternatives) \(epoch [12], step [0-9]+\) of kill/c.ckpt$"
grep -q '^RESULT ' "$work/kill.out"; check "kill: the job printed its RESULT line" $?
no_leftovers kill
same_files ref/c.ckpt kill/c.ckpt
grep -Eq "^# event=\"restart\" attempt=2 attempts=3 exit=137 reason=\"rank 1 on host .* resume_step=($alternatives)\$" "$work/kill/m.csv"
check "kill: the restart is in the metrics file: $(grep '^#' "$work/kill/m.csv")" $?

echo "== rank 1 frozen (SIGSTOP) before collective #40: the timeout names it, restarted from step 7" >&2
EMBER_FAULT_STALL_RANK=1 EMBER_FAULT_STALL_AT=40 EMBER_FAULT_STALL_MODE=sigstop \
  run stop 120 "${launcher[@]}" -- "$ddp" "${small[@]}" --checkpoint=stop/c.ckpt --metrics=stop/m.jsonl
expect_success stop
restart_line stop "^elastic_run: attempt 2 of 4: attempt 1 ended \(exit 1\): rank 1 did not arrive at (allreduce|broadcast) #4[01] \(rank 0: timed out after 5000 ms\): rank 1 did not respond.*; resuming from global step 7 "
no_leftovers stop
same_files ref/c.ckpt stop/c.ckpt
grep -q '"event": "restart", "attempt": 2, "attempts": 4, "exit": 1, "reason": "rank 1 did not arrive' "$work/stop/m.jsonl"
check "stop: the restart is in the metrics file" $?

echo "== killed while writing the checkpoint of step 21 (PowerSGD: per-rank files first): step 20's is used" >&2
EMBER_FAULT_KILL_IN_CHECKPOINT=21 EMBER_FAULT_KILL_RANK=0 \
  run ckpt 120 "${launcher[@]}" --max_restarts=1 -- "$ddp" "${small[@]}" "${psgd[@]}" --checkpoint=ckpt/c.ckpt
expect_success ckpt
restart_line ckpt "^elastic_run: attempt 2 of 2: attempt 1 ended \(exit 137\): rank 0 on host \S+ exited on signal 9 \(Killed\); resuming from global step 20 \(epoch 1, step 20\) of ckpt/c.ckpt$"
same_files ref_psgd/c.ckpt ckpt/c.ckpt
same_files ref_psgd/c.ckpt.step40.rank1 ckpt/c.ckpt.step40.rank1
files=$(cd "$work/ckpt" && ls | tr '\n' ' ')
[[ "$files" == "c.ckpt c.ckpt.prev c.ckpt.step35.rank0 c.ckpt.step35.rank1 c.ckpt.step40.rank0 c.ckpt.step40.rank1 " ]]
check "ckpt: the last two checkpoints and their per-rank files are kept, nothing else: $files" $?

echo "== the newest checkpoint cut short: the one kept before it is resumed" >&2
cp "$work"/ref/c.ckpt* "$work/trunc/"
# ref's files hold steps 40 and 35: the newest is cut short, and the first attempt dies at step 1.
truncate -s 1000 "$work/trunc/c.ckpt"
EMBER_FAULT_KILL_AT_STEP=1 \
  run trunc 120 "${launcher[@]}" --max_restarts=1 -- "$ddp" "${small[@]}" --checkpoint=trunc/c.ckpt
restart_line trunc "resuming from global step 35 \(epoch 2, step 15\) of trunc/c.ckpt.prev$"
expect_success trunc
same_files ref/c.ckpt trunc/c.ckpt

echo "== a rank killed in every attempt: restarts run out" >&2
EMBER_FAULT_KILL_AT_STEP=3 EMBER_FAULT_KILL_RANK=1 EMBER_FAULT_ATTEMPTS=99 \
  run gave_up 120 "${launcher[@]}" --max_restarts=2 -- "$ddp" "${small[@]}" --checkpoint=gave_up/c.ckpt
[[ $rc -eq 1 ]]; check "gave_up: exit 1 ($rc)" $?
n=$(grep -c '^elastic_run: giving up' "$work/gave_up.err")
[[ $n -eq 1 ]]; check "gave_up: one final line ($n)" $?
[[ $(tail -1 "$work/gave_up.err") =~ ^elastic_run:\ giving\ up:\ attempt\ 3\ of\ 3\ ended\ \(exit\ 137\):\ rank\ 1\ on\ host\ .*no\ restarts\ left\ \(--max_restarts=2\)$ ]]
check "gave_up: the last line says so: $(tail -1 "$work/gave_up.err")" $?
no_leftovers gave_up
finish
