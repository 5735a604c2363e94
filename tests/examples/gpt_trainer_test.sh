#!/usr/bin/env bash
# The GPT trainer (examples/train_gpt), alone and under mpirun, end to end on a small corpus: the
# RESULT line and --sample; the loss falls; a 2-rank run killed with SIGKILL and resumed from its
# checkpoint ends bit-identical to an uninterrupted one; one clear line for bad flags and a bad
# corpus; the default corpus (the King James Bible) loads.
# usage: gpt_trainer_test.sh TRAIN_GPT
source "$(dirname "$0")/lib.sh"
train="$(realpath "$1")"
python3 - "$work/corpus.txt" <<'PY'
import sys
words = "in the beginning god created the heaven and the earth and the earth was without form".split()
text = "\n".join(" ".join(words[(i * 7 + j) % len(words)] for j in range(9)) for i in range(400))
open(sys.argv[1], "w").write(text + "\n")
PY
tiny=(--corpus=corpus.txt --n_layer=1 --n_head=2 --n_embd=16 --block_size=16 --eval_iters=2 --eval_interval=10
      --warmup_iters=2 --lr=3e-3)

echo "== one process: RESULT, samples, a falling loss" >&2
run single 120 "$train" "${tiny[@]}" --batch=8 --max_iters=60 --sample=40 --metrics=single.csv
expect_success single
head -1 "$work/single.csv" | grep -q "^step,epoch,loss,lr,tokens_per_s,ms_per_step," &&
  [[ $(($(wc -l <"$work/single.csv") - 1)) -eq 60 ]]
check "--metrics wrote a tokens_per_s column and one row per step" $?
result=$(grep '^RESULT' "$work/single.out" || true)
echo "  $result" >&2
[[ "$result" =~ ^RESULT\ val_loss=[0-9.]+\ train_loss=[0-9.]+\ tokens_per_s=[0-9.]+\ ms_per_step=[0-9.]+\ steps=60\ tokens_per_step=128$ ]]
check "the RESULT line has val_loss, train_loss, tokens_per_s, ms_per_step, steps, tokens_per_step" $?
sample=$(sed -n '/^--- sample ---$/,/^--- end of sample ---$/p' "$work/single.out" | sed '1d;$d')
[[ ${#sample} -ge 40 ]]
check "--sample=40 printed 40 characters (${#sample} with newlines): $(tr '\n' '|' <<<"$sample")" $?
first=$(grep -m1 -oE 'loss [0-9.]+' "$work/single.err" | cut -d' ' -f2)
val=$(sed -n 's/.*val_loss=\([0-9.]*\).*/\1/p' <<<"$result")
awk -v f="$first" -v v="$val" 'BEGIN { exit !(v < f - 0.5) }'
check "the validation loss ($val) is well below the first step's loss ($first)" $?

echo "== 2 ranks: killed after step 9 of 16, resumed from the checkpoint of step 8" >&2
d_args=("${tiny[@]}" --batch=4 --max_iters=16 --checkpoint_every=4 --timeout=20)
run d1 120 "${MPIRUN[@]}" -np 2 "$train" "${d_args[@]}" --checkpoint=d1.ckpt
expect_success d1
EMBER_FAULT_KILL_AT_STEP=9 run d2_killed 60 "${MPIRUN[@]}" -np 2 "$train" "${d_args[@]}" --checkpoint=d2.ckpt
[[ $rc -ne 0 ]]; check "the job died (exit $rc)" $?
run d2 120 "${MPIRUN[@]}" -np 2 "$train" "${d_args[@]}" --checkpoint=d2.ckpt --resume=d2.ckpt
expect_success d2
expect_line d2 "resumed from d2.ckpt at global step 8"
same_files d1.ckpt d2.ckpt
grep -q '^RESULT ' "$work/d2.out"; check "the resumed run prints its RESULT line" $?

echo "== bad input: one line each" >&2
run heads 30 "$train" "${tiny[@]}" --n_embd=10 --n_head=4
expect_error heads "^train_gpt: --n_embd=10 must be a multiple of --n_head=4$"
run missing 30 "$train" --corpus=/nonexistent/text.txt
expect_error missing "^train_gpt: .*/nonexistent/text.txt"
: > "$work/empty.txt"
run empty 30 "$train" --corpus=empty.txt
expect_error empty "^train_gpt: .*empty.txt.*empty"
run flag 30 "$train" --max_iters=abc
expect_error flag "--max_iters"
run ddp_flag 30 "${MPIRUN[@]}" -np 2 "$train" --block_size=0
expect_error ddp_flag "--block_size"

echo "== the default corpus: the King James Bible" >&2
run kjv 120 "$train" --n_layer=1 --n_head=2 --n_embd=16 --block_size=16 --batch=4 --max_iters=2 --eval_iters=1 --warmup_iters=0
expect_success kjv
expect_line kjv "^train_gpt: the King James Bible \(/usr/bin/bible Gen1:1-Rev22:21\) \([0-9]+ characters, vocabulary [0-9]+\)"
finish
