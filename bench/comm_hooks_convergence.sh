#!/usr/bin/env bash
# Convergence and compression of the DDP comm hooks: ResNet-20 on Fashion-MNIST, 2 ranks x 1 thread,
# examples/ddp_resnet with each hook in turn (same seed, lr, schedule), then one table:
#   hook  rank  test_acc  delta_vs_none  bytes_per_step  compression  ms_per_step
# bytes_per_step is the payload rank 0 handed to collectives per step in the last epoch (PowerSGD
# starts at 10% of the steps, so the last epoch is all PowerSGD); compression = the model's fp32
# gradient bytes / bytes_per_step. Target: PowerSGD rank 4 within 1 point of "none".
#   bench/comm_hooks_convergence.sh [epochs]        (default 5; time per hook: docs/measurements.md)
# Environment: HOOKS="none fp16 bf16 powersgd:1 powersgd:2 powersgd:4" (name[:rank]), NO_BUILD=1, BIN=path,
# LOGS=dir (default /tmp/ember_comm_hooks: one log per run, kept for the RESULT lines).
set -euo pipefail
cd "$(dirname "$0")/.."
epochs="${1:-5}"
hooks="${HOOKS:-none fp16 bf16 powersgd:1 powersgd:2 powersgd:4}"
logs="${LOGS:-/tmp/ember_comm_hooks}"
mkdir -p "$logs"
source bench/lib.sh
if [[ "${NO_BUILD:-0}" != 1 ]]; then scripts/bootstrap.sh >&2; fi
bin="${BIN:-$(bench_binary examples:ddp_resnet)}"

echo "== ResNet-20, Fashion-MNIST, 2 ranks, $epochs epochs, per comm hook ($(nproc) cores, $(uptime | sed 's/.*load/load/'))"
results=()
for h in $hooks; do
  name="${h%%:*}" rank=1
  [[ "$h" == *:* ]] && rank="${h#*:}"
  log="$logs/${name}_r${rank}_e${epochs}.log"
  echo "-- $name (rank $rank): $log" >&2
  OMPI_MCA_btl=self,vader mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$bin" \
    --epochs="$epochs" --comm_hook="$name" --powersgd_rank="$rank" >"$log" 2>&1 || echo "RESULT failed" >>"$log"
  grep '^epoch\|^RESULT' "$log" >&2
  results+=("$name:$rank:$(grep '^RESULT' "$log" | tail -1)")
done

printf '%-10s %5s %9s %14s %15s %12s %12s\n' hook rank test_acc delta_vs_none bytes_per_step compression ms_per_step
base=""
for r in "${results[@]}"; do
  name="${r%%:*}" rest="${r#*:}"; rank="${rest%%:*}" line="${rest#*:}"
  acc=$(field test_acc "$line")
  [[ "$name" == none && -z "$base" ]] && base="$acc"
  delta=$(awk -v a="$acc" -v b="${base:--}" 'BEGIN { if (a == "-" || b == "-") print "-"; else printf "%+.2f pt", 100 * (a - b) }')
  [[ "$name" == powersgd* ]] || rank="-"
  printf '%-10s %5s %9s %14s %15s %12s %12s\n' "$name" "$rank" "$acc" "$delta" \
    "$(field bytes_per_step "$line")" "$(field compression "$line")" "$(field ms_per_step "$line")"
done
