#!/usr/bin/env bash
# End-to-end ResNet-20 training step (batch 64, 1x28x28, one thread, SGD momentum, cross-entropy,
# a fixed synthetic batch): ember (//bench:resnet_train_bench) then the same model in PyTorch
# (bench/resnet_train_torch.py, /usr/bin/python3, torch.set_num_threads(1)) in one script.
#   bench/resnet_bench.sh [steps] [warmup]     ms/step (median), fwd/bwd/opt split, ratio, peak RSS
#   bench/resnet_bench.sh profile [steps]      where ember's time goes: callgrind over a few steps,
#                                              top inclusive functions and an op-family summary,
#                                              then torch.profiler's per-op table for comparison
# ratio = ember throughput / torch throughput (higher is better; target >= 1.0).
# Peak RSS is getrusage's ru_maxrss of each process (the Python figure includes the interpreter and
# libtorch). Run on a quiet machine: the script prints `uptime` so a loaded run can be recognised.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bin=$(bench_binary bench:resnet_train_bench)  # NO_BUILD=1: use it as built
py=/usr/bin/python3

if [[ "${1:-}" == "profile" ]]; then
  steps="${2:-2}"
  out="$(mktemp -d)"
  echo "== ember under callgrind: $steps steps after 1 warm-up step (output in $out)"
  valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
    "$bin" --steps="$steps" --warmup=1 2>"$out/valgrind.log"
  callgrind_annotate --inclusive=yes "$out/callgrind.out" >"$out/inclusive.txt"
  callgrind_annotate "$out/callgrind.out" >"$out/self.txt"
  echo "-- top inclusive ember functions (instructions, % of the whole run incl. setup)"
  grep -E '^ *[0-9,]+ .*ember::' "$out/inclusive.txt" | head -40 | sed 's|/proc/self/cwd/||' | cut -c1-170
  echo "-- top self-cost functions (GEMM kernels, im2col, memset of fresh outputs, ...)"
  grep -E '^ *[0-9,]+ ' "$out/self.txt" | grep -v 'PROGRAM TOTALS' | head -15 | sed 's|/proc/self/cwd/||' | cut -c1-170
  echo "== torch.profiler (3 steps, self CPU time per op)"
  "$py" bench/resnet_train_torch.py --steps 5 --warmup 2 --profile
  exit 0
fi

steps="${1:-30}"
warmup="${2:-5}"
echo "== machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/')"
if pgrep -f "train_resnet|ddp_resnet" >/dev/null; then echo "   (a train_resnet/ddp_resnet job is running: figures are not from a quiet machine)"; fi
echo "== ember: $bin --steps=$steps --warmup=$warmup"
e=$("$bin" --steps="$steps" --warmup="$warmup" | grep '^RESULT')
echo "$e"
echo "== torch: $py bench/resnet_train_torch.py --steps $steps --warmup $warmup"
t=$("$py" bench/resnet_train_torch.py --steps "$steps" --warmup "$warmup" | grep '^RESULT')
echo "$t"
echo
printf '%-8s %10s %9s %9s %9s %10s %13s\n' impl ms/step fwd_ms bwd_ms opt_ms img/s peak_RSS_MB
for line in "$e" "$t"; do
  printf '%-8s %10s %9s %9s %9s %10s %13s\n' "$(field impl "$line")" "$(field ms_per_step "$line")" \
    "$(field fwd_ms "$line")" "$(field bwd_ms "$line")" "$(field opt_ms "$line")" \
    "$(field img_per_s "$line")" "$(field peak_rss_mb "$line")"
done
awk -v e="$(field ms_per_step "$e")" -v t="$(field ms_per_step "$t")" \
  'BEGIN { printf "ratio (ember throughput / torch throughput) = %.3f   (target >= 1.0)\n", t / e }'
echo "== load after: $(uptime | sed 's/.*load average/load average/')"
