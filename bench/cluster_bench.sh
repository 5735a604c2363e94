#!/usr/bin/env bash
# DDP across hosts (scripts/cluster.sh: network namespaces, TCP only, each link capped): ember
# (//bench:ddp_bench under mpirun) and PyTorch DDP over gloo (bench/ddp_bench_torch.py, one process
# per host) side by side, per-rank batch 64, one thread per rank, one rank per host.
#   bench/cluster_bench.sh [steps] [warmup]
# Environment: EXPERIMENT=scaling|buckets|hooks, LINKS, HOSTS, TORCH=0 skips PyTorch, MODEL.
#   scaling (LINKS="10gbit 1gbit", HOSTS="1 2 4", MODEL=resnet20): per link and host count, the
#     slowest rank's median step time and img/s; efficiency = img/s at N hosts / (N x img/s of one
#     process alone, no DDP).
#   buckets (LINKS=1gbit, HOSTS=2, MODEL=mlp: 200 layers of 64x64, many small gradients; CAPS="0.05
#     0.25 1 5 25" MB, the first bucket the same): the paper's bucket-size sweep on the slow link.
#   hooks (LINKS=1gbit, HOSTS=2, the wide MLP 784-4096-4096-10, 80 MB of gradients; HOOKS="none noop
#     fp16 bf16 powersgd"): where compression pays; bytes per step and step time per hook.
# All hosts share this machine's cores: with more ranks than cores they are oversubscribed, and
# the table says so -- such a row measures the cores, not the link.
# The output is also saved as $RESULTS_DIR/<experiment>.txt (default docs/cluster_bench/), once the
# experiment completes; scripts/bench_plots.py (scripts/make_pictures.sh) plots it from there.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
steps="${1:-20}" warmup="${2:-3}"
experiment="${EXPERIMENT:-scaling}"
case "$experiment" in
  scaling) def_links="10gbit 1gbit" def_hosts="1 2 4" def_model=resnet20 ;;
  buckets) def_links=1gbit def_hosts=2 def_model=mlp ;;
  hooks) def_links=1gbit def_hosts=2 def_model=wide_mlp ;;
  *) echo "cluster_bench: EXPERIMENT=$experiment is not scaling, buckets or hooks" >&2; exit 2 ;;
esac
links="${LINKS:-$def_links}" hosts_list="${HOSTS:-$def_hosts}" torch="${TORCH:-1}" model="${MODEL:-$def_model}"
model_flags=(--model "$model")
[[ "$model" == wide_mlp ]] && model_flags=(--model mlp --mlp_sizes 784,4096,4096,10)
if ! "$py" -c "import torch.distributed" 2>/dev/null; then torch=0; fi
bin=$(bench_binary bench:ddp_bench)
cores=$(nproc)
results="${RESULTS_DIR:-docs/cluster_bench}"
mkdir -p "$results"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
{
echo "== $experiment; machine: $cores cores, $(uptime | sed 's/.*load average/load average/'); steps=$steps warmup=$warmup model=$model"
echo "   CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"

ember() {  # ember HOSTS LINK MODE [FLAG VALUE]...: ddp_bench's flags, as --flag=value
  local h="$1" link="$2" mode="$3" flags=()
  shift 3
  local all=("${model_flags[@]}" "$@")
  for ((i = 0; i < ${#all[@]}; i += 2)); do flags+=("${all[i]}=${all[i + 1]}"); done
  scripts/cluster.sh "$h" --link="$link" -- timeout 900 mpirun --allow-run-as-root --oversubscribe --bind-to none \
    -np "$h" "$bin" "${flags[@]}" --mode="$mode" --steps="$steps" --warmup="$warmup" 2>/dev/null |
    grep '^RESULT' || echo "RESULT failed"
}
# PyTorch: one process per host, started inside the host's namespace; rank 0's host is the master.
torch_run() {  # torch_run HOSTS LINK MODE [FLAG VALUE]...
  local n="$1" link="$2" mode="$3"
  shift 3
  scripts/cluster.sh "$n" --link="$link" -- bash -c '
    n="$1"; shift
    read -r -a addrs <<<"$EMBER_CLUSTER_HOSTS"
    for ((r = n - 1; r >= 0; r--)); do
      ip netns exec "${EMBER_CLUSTER_NS_PREFIX}$r" env GLOO_SOCKET_IFNAME=eth0 \
        timeout 900 '"$py"' bench/ddp_bench_torch.py --world "$n" --rank "$r" --master_addr "${addrs[0]}" \
        --master_port 29555 --timeout 600 "$@" &
    done
    wait' _ "$n" "${model_flags[@]}" "$@" --mode "$mode" --steps "$steps" --warmup "$warmup" 2>/dev/null |
    grep '^RESULT' || echo "RESULT failed"
}

runner() { [[ "$1" == torch ]] && echo torch_run || echo ember; }
impls=(ember)
[[ "$torch" == 1 ]] && impls+=(torch)

if [[ "$experiment" == scaling ]]; then
  printf '%-6s %-7s %5s %10s %10s %10s  %s\n' impl link hosts ms/step img/s efficiency note
  for impl in "${impls[@]}"; do
    run=$(runner "$impl")
    for link in $links; do
      base=$($run 1 "$link" single)
      for h in $hosts_list; do
        if [[ "$h" == 1 ]]; then line="$base"; else line=$($run "$h" "$link" ddp); fi
        note=""
        [[ "$h" -gt "$cores" ]] && note="oversubscribed: $h ranks on $cores cores"
        [[ "$h" == 1 ]] && note="one process, no DDP (the baseline)"
        eff=$(awk -v d="$(field img_per_s "$line")" -v s="$(field img_per_s "$base")" -v h="$h" \
          'BEGIN { if (d == "-" || s == "-") print "-"; else printf "%.3f", d / (h * s) }')
        printf '%-6s %-7s %5s %10s %10s %10s  %s\n' "$impl" "$link" "$h" "$(field ms_per_step "$line")" \
          "$(field img_per_s "$line")" "$eff" "$note"
      done
    done
  done
elif [[ "$experiment" == buckets ]]; then
  printf '%-6s %-7s %5s %7s %8s %10s %8s\n' impl link hosts cap_MB buckets ms/step overlap
  for impl in "${impls[@]}"; do
    run=$(runner "$impl")
    for link in $links; do
      for h in $hosts_list; do
        for cap in ${CAPS:-0.05 0.25 1 5 25}; do
          line=$($run "$h" "$link" ddp --bucket_cap_mb "$cap" --first_bucket_mb "$cap")
          printf '%-6s %-7s %5s %7s %8s %10s %8s\n' "$impl" "$link" "$h" "$cap" "$(field buckets "$line")" \
            "$(field ms_per_step "$line")" "$(field overlap "$line")"
        done
      done
    done
  done
else
  printf '%-6s %-7s %5s %-17s %10s %14s %12s\n' impl link hosts hook ms/step bytes/step vs_none
  for impl in "${impls[@]}"; do
    run=$(runner "$impl")
    for link in $links; do
      for h in $hosts_list; do
        none=""
        for hook in ${HOOKS:-none noop fp16 bf16 powersgd}; do
          line=$($run "$h" "$link" ddp --comm_hook "$hook")
          ms=$(field ms_per_step "$line")
          [[ "$hook" == none ]] && none="$ms"
          ratio=$(awk -v a="$ms" -v b="$none" 'BEGIN { if (a == "-" || b == "") print "-"; else printf "%.3f", a / b }')
          printf '%-6s %-7s %5s %-17s %10s %14s %12s\n' "$impl" "$link" "$h" "$hook" "$ms" \
            "$(field bytes_per_step "$line")" "$ratio"
        done
      done
    done
  done
fi
echo "== after: $(uptime | sed 's/.*load average/load average/')"
} | tee "$results/$experiment.txt.tmp"
# Only a finished experiment replaces the saved table.
mv "$results/$experiment.txt.tmp" "$results/$experiment.txt"
