#!/usr/bin/env bash
# End-to-end ResNet-20 training step (batch 64, 1x28x28, SGD momentum, cross-entropy, a fixed
# synthetic batch): ember (//bench:resnet_train_bench) then the same model in PyTorch
# (bench/resnet_train_torch.py, /usr/bin/python3) in one script, at 1 and 2 threads
# (THREADS="1 2 4" to change), at every CPU capability level this CPU has, PyTorch capped likewise.
#   bench/resnet_bench.sh [steps] [warmup]     ms/step (median), fwd/bwd/opt split, ratio, peak RSS
#   LEVELS="avx2" bench/resnet_bench.sh ...    only these levels (default: all the CPU supports)
#   bench/resnet_bench.sh profile [steps]      where ember's time goes: callgrind over a few steps,
#                                              top inclusive functions and an op-family summary,
#                                              then torch.profiler's per-op table for comparison
# ratio = ember throughput / torch throughput (higher is better; target >= 1.3).
# At N > 1 threads the script also runs N independent 1-thread ember processes side by side:
# copies = N x (1-thread ms/step) / (their mean ms/step) is what N of this host's cores give on
# work that shares nothing, the ceiling a shared-memory split can expect on this host (a 2-vCPU VM
# whose vCPUs share a core or memory bandwidth shows it below N).
# Peak RSS is getrusage's ru_maxrss of each process (the Python figure includes the interpreter and
# libtorch). Run on a quiet machine: the script prints `uptime` so a loaded run can be recognised.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bin=$(bench_binary bench:resnet_train_bench)  # NO_BUILD=1: use it as built

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
threads_list="${THREADS:-1 2}"
# Each ISA level ember's CPU has, highest first; PyTorch is held to the same level.
levels="${LEVELS:-$("$bin" --print_capabilities)}"
echo "== machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/')"
echo "   CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "   vector extensions: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(sse4_2|avx|avx2|fma|f16c|avx512[a-z_0-9]*)$' | tr '\n' ' ')"
if pgrep -f "train_resnet|ddp_resnet" >/dev/null; then echo "   (a train_resnet/ddp_resnet job is running: figures are not from a quiet machine)"; fi
summary=()
for level in $levels; do
  # oneDNN and ATen take their own names for the same ceilings.
  case "$level" in
    avx512) torch_env=(ONEDNN_MAX_CPU_ISA=AVX512_CORE ATEN_CPU_CAPABILITY=avx512) ;;
    avx2) torch_env=(ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2) ;;
    *) torch_env=(ONEDNN_MAX_CPU_ISA=SSE41 ATEN_CPU_CAPABILITY=default) ;;
  esac
  for threads in $threads_list; do
    echo
    echo "== level $level, $threads thread(s): ember (EMBER_CPU_CAPABILITY=$level), torch (${torch_env[*]})"
    e=$(EMBER_CPU_CAPABILITY=$level "$bin" --steps="$steps" --warmup="$warmup" --threads="$threads" | grep '^RESULT')
    t=$(env "${torch_env[@]}" "$py" bench/resnet_train_torch.py --steps "$steps" --warmup "$warmup" --threads "$threads" | grep '^RESULT')
    printf '%-8s %8s %10s %10s %9s %9s %9s %10s %13s\n' impl threads capability ms/step fwd_ms bwd_ms opt_ms img/s peak_RSS_MB
    for line in "$e" "$t"; do
      printf '%-8s %8s %10s %10s %9s %9s %9s %10s %13s\n' "$(field impl "$line")" "$(field threads "$line")" \
        "$(field capability "$line")" "$(field ms_per_step "$line")" "$(field fwd_ms "$line")" \
        "$(field bwd_ms "$line")" "$(field opt_ms "$line")" "$(field img_per_s "$line")" \
        "$(field peak_rss_mb "$line")"
    done
    copies_ms=-
    if ((threads > 1)); then
      dir=$(mktemp -d)
      for ((k = 0; k < threads; ++k)); do
        EMBER_CPU_CAPABILITY=$level "$bin" --steps="$steps" --warmup="$warmup" --threads=1 >"$dir/$k" &
      done
      wait
      copies_ms=$(cat "$dir"/* | grep '^RESULT' | tr ' ' '\n' | sed -n 's/^ms_per_step=//p' |
        awk '{ s += $1; n++ } END { printf "%.2f", s / n }')
      rm -rf "$dir"
      echo "ember x$threads processes of 1 thread, side by side: mean $copies_ms ms/step"
    fi
    summary+=("$level $threads $(field ms_per_step "$e") $(field ms_per_step "$t") $(field peak_rss_mb "$e") $(field peak_rss_mb "$t") $copies_ms")
  done
done
echo
echo "== summary: ratio = ember throughput / torch throughput (target >= 1.3); scaling = ember's"
echo "   1-thread ms/step / N-thread ms/step (target >= 1.8 at 2 threads); copies = the host's own"
echo "   ceiling, N independent 1-thread processes (see the top of this script); memory = ember / torch peak RSS"
printf '%-8s %8s %12s %12s %8s %8s %8s %8s\n' level threads ember_ms torch_ms ratio scaling copies memory
declare -A one_thread
for row in "${summary[@]}"; do
  read -r level threads e t em tm copies <<<"$row"
  [[ "$threads" == 1 ]] && one_thread[$level]=$e
  awk -v l="$level" -v n="$threads" -v e="$e" -v t="$t" -v b="${one_thread[$level]:-}" -v em="$em" -v tm="$tm" -v c="$copies" \
    'BEGIN { printf "%-8s %8s %12.2f %12.2f %8.3f %8s %8s %8.3f\n", l, n, e, t, t / e,
             (b == "" ? "-" : sprintf("%.3f", b / e)), (b == "" || c == "-" ? "-" : sprintf("%.3f", n * b / c)), em / tm }'
done
echo "== load after: $(uptime | sed 's/.*load average/load average/')"
