#!/usr/bin/env bash
# Tokens per second of ember's GPT (examples/train_gpt alone and under mpirun) against PyTorch's
# (bench/torch_gpt.py, Debian's python3-torch): the same model (nanoGPT's, 4 layers x 4 heads x 128
# wide by default), the same character corpus, batch and block, AdamW with clipping; one process of
# one thread, and 2-rank DDP (ember over MPI, PyTorch over gloo, one thread per rank).
#   bench/gpt_bench.sh [steps] [rounds]
# Each round runs the four configurations one after another, in an order reversed every round;
# the table gives each one's median tokens/s over the rounds and ember / PyTorch.
# Environment: BATCH (12, per process), BLOCK (64), N_LAYER (4), N_HEAD (4), N_EMBD (128).
# Training steps are timed without evaluation; ember's first 3 steps are warm-up (its RESULT
# counts every step, so the run is 3 steps longer and the ratio is conservative).
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-20}"
rounds="${2:-3}"
source bench/lib.sh
batch="${BATCH:-12}" block="${BLOCK:-64}"
model=(--n_layer="${N_LAYER:-4}" --n_head="${N_HEAD:-4}" --n_embd="${N_EMBD:-128}" --block_size="$block")
torch_model=(--n_layer "${N_LAYER:-4}" --n_head "${N_HEAD:-4}" --n_embd "${N_EMBD:-128}" --block_size "$block")
train=$(bench_binary examples:train_gpt)
export OMPI_MCA_btl=self,vader
print_machine
echo "   model: ${model[*]}, batch $batch per process, $steps timed steps, $rounds rounds"

run() {  # run CONFIG -> tokens_per_s
  local line
  case "$1" in
    ember1) line=$(timeout 900 "$train" "${model[@]}" --batch="$batch" --max_iters=$((steps + 3)) \
                     --warmup_iters=1 --eval_iters=1 --threads=1 2>/dev/null | grep '^RESULT') ;;
    ember2) line=$(timeout 900 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$train" "${model[@]}" \
                     --batch="$batch" --max_iters=$((steps + 3)) --warmup_iters=1 --eval_iters=1 --threads=1 \
                     2>/dev/null | grep '^RESULT') ;;
    torch1) line=$(timeout 900 "$py" bench/torch_gpt.py "${torch_model[@]}" --batch "$batch" \
                     --bench_steps "$steps" 2>/dev/null | grep '^RESULT') ;;
    torch2) line=$(timeout 900 "$py" bench/torch_gpt.py "${torch_model[@]}" --batch "$batch" --world 2 \
                     --bench_steps "$steps" 2>/dev/null | grep '^RESULT') ;;
  esac
  field tokens_per_s "${line:-}"
}

declare -A results
order=(ember1 torch1 ember2 torch2)
for ((r = 0; r < rounds; r++)); do
  if ((r % 2)); then configs=(torch2 ember2 torch1 ember1); else configs=("${order[@]}"); fi
  for c in "${configs[@]}"; do
    v=$(run "$c")
    results[$c]="${results[$c]:-} $v"
    echo "round $((r + 1)) $c: $v tokens/s"
  done
done
echo "== $(uptime | sed 's/.*load average/load average/')"
printf '%-22s %14s %14s %8s\n' "configuration" "ember tok/s" "torch tok/s" "ratio"
for pair in "1 process, 1 thread:1" "2-rank DDP:2"; do
  name="${pair%%:*}" n="${pair##*:}"
  e=$(median ${results[ember$n]}) t=$(median ${results[torch$n]})
  printf '%-22s %14.1f %14.1f %8.2f\n' "$name" "$e" "$t" "$(awk -v a="$e" -v b="$t" 'BEGIN { print (b > 0 ? a / b : 0) }')"
done
