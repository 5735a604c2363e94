#!/usr/bin/env bash
# The README's GPT run (scripts/train_gpt.sh: 2-rank DDP, 4 layers x 4 heads x 128 wide, block 64,
# batch 12 per rank, 2000 steps on the King James Bible) beside PyTorch's (bench/torch_gpt.py
# --world 2, gloo) with the same model, data, split, optimizer, schedule, clipping and number of
# steps; prints both validation losses and their difference in nats per character.
#   bench/gpt_convergence.sh [ember|torch|both]      (default both; PyTorch takes ~40 minutes here)
# Extra flags for both sides: STEPS (2000), BATCH (12), BLOCK (64).
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-both}"
source bench/lib.sh
steps="${STEPS:-2000}" batch="${BATCH:-12}" block="${BLOCK:-64}"
common=(--max_iters="$steps" --batch="$batch" --block_size="$block" --n_layer=4 --n_head=4 --n_embd=128
        --lr=1e-3 --warmup_iters=100 --min_lr_factor=0.1 --weight_decay=0.1 --beta2=0.99 --grad_clip=1.0
        --eval_iters=50)
print_machine
if [[ "$which" != torch ]]; then
  ddp=$(bench_binary examples:train_gpt)
  export OMPI_MCA_btl=self,vader
  ember=$(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$ddp" "${common[@]}" --eval_interval="$steps" \
          2>/dev/null | grep '^RESULT')
  echo "ember:   $ember"
fi
if [[ "$which" != ember ]]; then
  torch_args=()
  for f in "${common[@]}"; do torch_args+=("${f%%=*}" "${f#*=}"); done
  torch=$("$py" bench/torch_gpt.py --world 2 "${torch_args[@]}" 2>/dev/null | grep '^RESULT')
  echo "pytorch: $torch"
fi
if [[ "$which" == both ]]; then
  e=$(field val_loss "$ember") t=$(field val_loss "$torch")
  echo "val_loss ember $e, pytorch $t, difference $(awk -v a="$e" -v b="$t" 'BEGIN { printf "%+.4f", a - b }') nats/char"
fi
