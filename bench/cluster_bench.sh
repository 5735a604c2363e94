#!/usr/bin/env bash
# DDP across hosts (scripts/cluster.sh: network namespaces, TCP only, each link capped): ember
# (//bench:ddp_bench under mpirun) and PyTorch DDP over gloo (bench/ddp_bench_torch.py, one process
# per host) side by side, ResNet-20, per-rank batch 64, one thread per rank, one rank per host.
#   bench/cluster_bench.sh [steps] [warmup]
# Environment: LINKS="10gbit 1gbit", HOSTS="1 2 4", TORCH=0 skips PyTorch, MODEL=resnet20|mlp.
# Per link and host count, the slowest rank's median step time and img/s; efficiency = img/s at N
# hosts / (N x img/s of one process alone, no DDP). All hosts share this machine's cores: with more
# ranks than cores they are oversubscribed, and the table says so -- such a row measures the
# cores, not the link.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
steps="${1:-20}" warmup="${2:-3}"
links="${LINKS:-10gbit 1gbit}" hosts_list="${HOSTS:-1 2 4}" torch="${TORCH:-1}" model="${MODEL:-resnet20}"
py=/usr/bin/python3
if ! "$py" -c "import torch.distributed" 2>/dev/null; then torch=0; fi
bin=$(bench_binary bench:ddp_bench)
cores=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "== machine: $cores cores, $(uptime | sed 's/.*load average/load average/'); steps=$steps warmup=$warmup model=$model"
echo "   CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"

ember() {  # ember HOSTS LINK MODE
  scripts/cluster.sh "$1" --link="$2" -- timeout 900 mpirun --allow-run-as-root --oversubscribe --bind-to none \
    -np "$1" "$bin" --model="$model" --mode="$3" --steps="$steps" --warmup="$warmup" 2>/dev/null |
    grep '^RESULT' || echo "RESULT failed"
}
# PyTorch: one process per host, started inside the host's namespace; rank 0's host is the master.
torch_run() {  # torch_run HOSTS LINK MODE
  local n="$1"
  scripts/cluster.sh "$n" --link="$2" -- bash -c '
    n="$1"; shift
    read -r -a addrs <<<"$EMBER_CLUSTER_HOSTS"
    for ((r = n - 1; r >= 0; r--)); do
      ip netns exec "${EMBER_CLUSTER_NS_PREFIX}$r" env GLOO_SOCKET_IFNAME=eth0 \
        timeout 900 '"$py"' bench/ddp_bench_torch.py --world "$n" --rank "$r" --master_addr "${addrs[0]}" \
        --master_port 29555 --timeout 600 "$@" &
    done
    wait' _ "$n" --model "$model" --mode "$3" --steps "$steps" --warmup "$warmup" 2>/dev/null |
    grep '^RESULT' || echo "RESULT failed"
}

printf '%-6s %-7s %5s %10s %10s %10s  %s\n' impl link hosts ms/step img/s efficiency note
for impl in ember torch; do
  [[ "$impl" == torch && "$torch" == 0 ]] && continue
  run=ember
  [[ "$impl" == torch ]] && run=torch_run
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
echo "== after: $(uptime | sed 's/.*load average/load average/')"
