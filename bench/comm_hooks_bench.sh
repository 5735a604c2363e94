#!/usr/bin/env bash
# Step time per DDP comm hook on a communication-heavy model, ember and PyTorch side by side:
# a wide MLP 784-4096-4096-10 (20.0 M parameters, 80 MiB of fp32 gradients), 2 ranks x 1 thread,
# per-rank batch 32, ember (//bench:ddp_bench under mpirun) then PyTorch's own hooks
# (bench/ddp_bench_torch.py, Debian torch, gloo).
#   bench/comm_hooks_bench.sh [steps] [warmup]      (default 10 and 3)
# Debian's torch multiplies matrices with a reference BLAS, far slower than the Eigen ember uses
# (docs/measurements.md, "Micro-benchmarks"), so raw step times are not comparable; what is
# compared is the communication overhead of a hook:
#   comm_ms = step time with the hook - step time with noop_hook (no communication), same framework.
# vs_none = this hook's comm_ms / the default path's comm_ms (lower is cheaper). bytes/step is the
# payload each rank hands to collectives per step. PowerSGD starts at iteration 2, so every timed
# step compresses. Environment: HOOKS (name[:rank] list), TORCH=0 skips PyTorch, NO_BUILD=1, BIN=path
# (another ddp_bench binary, e.g. one built from an older commit),
# BUCKET_MB=100 puts the whole model in one bucket (bucket_cap_mb and first bucket, both
# frameworks): PyTorch 1.13's PowerSGD aborts in gloo with two or more buckets (its Q-round
# allreduces are issued from callbacks, so ranks can issue collectives in different orders).
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-10}"
warmup="${2:-3}"
hooks="${HOOKS:-none allreduce fp16 bf16 powersgd:1 powersgd:4 batched_powersgd:1 noop}"
torch="${TORCH:-1}"
source bench/lib.sh
if ! "$py" -c "import torch.distributed" 2>/dev/null; then torch=0; fi
bin="${BIN:-$(bench_binary bench:ddp_bench)}"
model=(--model=mlp --mlp_sizes=784,4096,4096,10 --batch=32 --steps="$steps" --warmup="$warmup")
if [[ -n "${BUCKET_MB:-}" ]]; then model+=(--bucket_cap_mb="$BUCKET_MB" --first_bucket_mb="$BUCKET_MB"); fi
export OMPI_MCA_btl=self,vader
run_ember() {  # run_ember NAME RANK
  timeout 900 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$bin" "${model[@]}" \
    --mode=ddp --comm_hook="$1" --powersgd_rank="$2" | grep '^RESULT' || echo "RESULT failed"
}
run_torch() {  # run_torch NAME RANK
  timeout 1800 "$py" bench/ddp_bench_torch.py --world 2 --mode ddp --timeout 1500 \
    "${model[@]}" --comm_hook "$1" --powersgd_rank "$2" |
    grep '^RESULT' || echo "RESULT failed"
}

echo "== wide MLP 784-4096-4096-10, 2 ranks x 1 thread, batch 32 per rank, buckets ${BUCKET_MB:-25 (default)} MB, steps=$steps warmup=$warmup ($(uptime | sed 's/.*load/load/'))"
declare -A ms bytes
impls=(ember)
[[ "$torch" == 1 ]] && impls+=(torch)
for impl in "${impls[@]}"; do
  for h in $hooks; do
    name="${h%%:*}" rank=1
    [[ "$h" == *:* ]] && rank="${h#*:}"
    if [[ "$impl" == ember ]]; then line=$(run_ember "$name" "$rank"); else line=$(run_torch "$name" "$rank"); fi
    echo "$line" >&2
    ms[$impl/$h]=$(field ms_per_step "$line")
    bytes[$impl/$h]=$(field bytes_per_step "$line")
  done
done

printf '%-6s %-19s %10s %10s %9s %14s\n' impl hook ms/step comm_ms vs_none bytes/step
for impl in "${impls[@]}"; do
  for h in $hooks; do
    awk -v i="$impl" -v h="$h" -v m="${ms[$impl/$h]}" -v n="${ms[$impl/noop]:--}" -v d="${ms[$impl/none]:--}" \
        -v b="${bytes[$impl/$h]}" 'BEGIN {
      c = (m == "-" || n == "-") ? "-" : sprintf("%.1f", m - n);
      r = (c == "-" || d == "-" || d - n <= 0) ? "-" : sprintf("%.2f", (m - n) / (d - n));
      printf "%-6s %-19s %10s %10s %9s %14s\n", i, h, m, c, r, b }'
  done
done
if [[ "$torch" == 1 ]]; then
  echo "== communication overhead side by side (comm_ms = step - noop step of the same framework)"
  printf '%-19s %12s %12s %12s\n' hook ember_comm torch_comm torch/ember
  for h in $hooks; do
    [[ "$h" == noop ]] && continue
    awk -v h="$h" -v e="${ms[ember/$h]}" -v en="${ms[ember/noop]:--}" -v t="${ms[torch/$h]}" -v tn="${ms[torch/noop]:--}" 'BEGIN {
      ec = (e == "-" || en == "-") ? "-" : e - en; tc = (t == "-" || tn == "-") ? "-" : t - tn;
      r = (ec == "-" || tc == "-" || ec <= 0) ? "-" : sprintf("%.2f", tc / ec);
      printf "%-19s %12s %12s %12s\n", h, (ec == "-" ? "-" : sprintf("%.1f", ec)), (tc == "-" ? "-" : sprintf("%.1f", tc)), r }'
  done
fi
echo "== load after: $(uptime | sed 's/.*load/load/')"
