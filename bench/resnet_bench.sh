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
# Runs are pinned (taskset) to the first N CPUs the script may use; each 1-thread figure is measured
# on every one of them and averaged (see pin_cpus below). At N > 1 threads the script also runs N
# independent 1-thread ember processes side by side, one per CPU: copies = their summed throughput /
# the 1-thread throughput is what N of the host's CPUs give on work that shares nothing, the
# ceiling a shared-memory split can expect there (CPUs that share a core or memory bandwidth show
# it below N).
# Peak RSS is getrusage's ru_maxrss of each process (the Python figure includes the interpreter and
# libtorch). Run on a quiet machine: the script prints `uptime` so a loaded run can be recognised.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bin=$(bench_binary bench:resnet_train_bench)  # NO_BUILD=1: use it as built

if [[ "${1:-}" == "profile" ]]; then
  steps="${2:-2}"
  out="$(mktemp -d)"
  # valgrind runs each lane of an FMA instruction through a C helper (h_generic_calc_MAddF32): a
  # ResNet-20 step with the AVX2 kernels takes minutes under `valgrind --tool=none`, with the
  # baseline (SSE2) kernels seconds (bench/README.md). So the profile counts the baseline level
  # unless told otherwise.
  capability="${EMBER_CPU_CAPABILITY:-default}"
  echo "== ember under callgrind: $steps steps after 1 warm-up step, EMBER_CPU_CAPABILITY=$capability (output in $out)"
  EMBER_CPU_CAPABILITY="$capability" valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
    "$bin" --steps="$steps" --warmup=1 2>"$out/valgrind.log"
  callgrind_annotate --inclusive=yes "$out/callgrind.out" >"$out/inclusive.txt"
  callgrind_annotate "$out/callgrind.out" >"$out/self.txt"
  echo "-- top inclusive ember functions (instructions, % of the whole run incl. setup)"
  # awk, not head: head's early exit would kill grep with SIGPIPE, and pipefail the script.
  grep -E '^ *[0-9,]+ .*ember::' "$out/inclusive.txt" | awk 'NR <= 40' | sed 's|/proc/self/cwd/||' | cut -c1-170
  echo "-- top self-cost functions (GEMM kernels, im2col, memset of fresh outputs, ...)"
  grep -E '^ *[0-9,]+ ' "$out/self.txt" | grep -v 'PROGRAM TOTALS' | awk 'NR <= 15' | sed 's|/proc/self/cwd/||' | cut -c1-170
  echo "== torch.profiler (3 steps, self CPU time per op)"
  "$py" bench/resnet_train_torch.py --steps 5 --warmup 2 --profile
  exit 0
fi

steps="${1:-30}"
warmup="${2:-5}"
threads_list="${THREADS:-1 2}"
# Each ISA level ember's CPU has, highest first; PyTorch is held to the same level.
levels="${LEVELS:-$("$bin" --print_capabilities)}"
# The CPUs the runs are pinned to: the first (most threads asked) of those this process may use. A
# 1-thread figure is measured on each of them in turn, ember and PyTorch on the same CPU, because a
# virtual machine's CPUs need not be equally fast, and which one a lone process lands on would
# otherwise decide the ratio (docs/measurements.md, "Threads"); the 1-thread ms/step is then the
# mean over them (harmonic: the mean throughput), which is also what N threads on those N CPUs can
# at best sum to.
max_threads=$(tr ' ' '\n' <<<"$threads_list" | sort -n | tail -1)
pin_cpus=$("$py" -c 'import os, sys; print(*sorted(os.sched_getaffinity(0))[:int(sys.argv[1])])' "$max_threads")
echo "== machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/')"
echo "   CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "   vector extensions: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(sse4_2|avx|avx2|fma|f16c|avx512[a-z_0-9]*)$' | tr '\n' ' ')"
echo "   runs pinned to CPUs $(echo $pin_cpus | tr ' ' ','); 1-thread figures are the mean over those CPUs"
if pgrep -f "train_resnet|ddp_resnet" >/dev/null; then echo "   (a train_resnet/ddp_resnet job is running: figures are not from a quiet machine)"; fi

# mean_ms MS... -> the ms/step of the mean throughput
mean_ms() { tr ' ' '\n' <<<"$*" | awk 'NF { s += 1 / $1; n++ } END { printf "%.2f", n / s }'; }
print_row() {
  printf '%-8s %8s %4s %10s %10s %9s %9s %9s %10s %13s\n' "$(field impl "$1")" "$(field threads "$1")" "$2" \
    "$(field capability "$1")" "$(field ms_per_step "$1")" "$(field fwd_ms "$1")" \
    "$(field bwd_ms "$1")" "$(field opt_ms "$1")" "$(field img_per_s "$1")" "$(field peak_rss_mb "$1")"
}
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
    printf '%-8s %8s %4s %10s %10s %9s %9s %9s %10s %13s\n' impl threads cpus capability ms/step fwd_ms bwd_ms opt_ms img/s peak_RSS_MB
    cpus_used=$(tr ' ' '\n' <<<"$pin_cpus" | head -"$threads")  # one per line
    if ((threads == 1)); then runs=$pin_cpus; else runs=$(paste -sd, <<<"$cpus_used"); fi
    e_ms=() t_ms=()
    for cpus in $runs; do
      e=$(EMBER_CPU_CAPABILITY=$level taskset -c "$cpus" "$bin" --steps="$steps" --warmup="$warmup" --threads="$threads" | grep '^RESULT')
      t=$(env "${torch_env[@]}" taskset -c "$cpus" "$py" bench/resnet_train_torch.py --steps "$steps" --warmup "$warmup" --threads "$threads" | grep '^RESULT')
      print_row "$e" "$cpus"
      print_row "$t" "$cpus"
      e_ms+=("$(field ms_per_step "$e")") t_ms+=("$(field ms_per_step "$t")")
      e_rss=$(field peak_rss_mb "$e") t_rss=$(field peak_rss_mb "$t")
    done
    copies_ms=-
    if ((threads > 1)); then
      dir=$(mktemp -d)
      for k in $cpus_used; do
        EMBER_CPU_CAPABILITY=$level taskset -c "$k" "$bin" --steps="$steps" --warmup="$warmup" --threads=1 >"$dir/$k" &
      done
      wait
      # Their summed throughput, as the ms/step of one of N equal processes.
      copies_ms=$(mean_ms "$(cat "$dir"/* | grep '^RESULT' | tr ' ' '\n' | sed -n 's/^ms_per_step=//p')")
      rm -rf "$dir"
      echo "ember x$threads processes of 1 thread, side by side (one per CPU): mean throughput as $copies_ms ms/step"
    fi
    summary+=("$level $threads $(mean_ms "${e_ms[*]}") $(mean_ms "${t_ms[*]}") $e_rss $t_rss $copies_ms $(tr ' ' '\n' <<<"${e_ms[*]}" | sort -n | head -1)")
  done
done
echo
echo "== summary: ratio = ember throughput / torch throughput (target >= 1.3); scaling = ember's"
echo "   1-thread ms/step (mean over the CPUs) / N-thread ms/step (target >= 1.8 at 2 threads; the"
echo "   sum of the CPUs' own speeds gives exactly N); scaling_fast = the same against the fastest CPU"
echo "   alone; copies = the host's own ceiling, N independent 1-thread processes (see the top of this"
echo "   script), against the mean CPU; memory = ember / torch peak RSS"
printf '%-8s %8s %12s %12s %8s %8s %12s %8s %8s\n' level threads ember_ms torch_ms ratio scaling scaling_fast copies memory
declare -A one_thread one_thread_fast
for row in "${summary[@]}"; do
  read -r level threads e t em tm copies fastest <<<"$row"
  if [[ "$threads" == 1 ]]; then one_thread[$level]=$e one_thread_fast[$level]=$fastest; fi
  awk -v l="$level" -v n="$threads" -v e="$e" -v t="$t" -v b="${one_thread[$level]:-}" -v f="${one_thread_fast[$level]:-}" \
    -v em="$em" -v tm="$tm" -v c="$copies" \
    'BEGIN { printf "%-8s %8s %12.2f %12.2f %8.3f %8s %12s %8s %8.3f\n", l, n, e, t, t / e,
             (b == "" ? "-" : sprintf("%.3f", b / e)), (f == "" || n == 1 ? "-" : sprintf("%.3f", f / e)),
             (b == "" || c == "-" ? "-" : sprintf("%.3f", n * b / c)), em / tm }'
done
echo "== load after: $(uptime | sed 's/.*load average/load average/')"
