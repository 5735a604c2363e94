#!/usr/bin/env bash
# The DDP step-time model, measured, validated and plotted (bench/step_model.py says how
# it predicts). On scripts/cluster.sh hosts (network namespaces, TCP only, each link capped):
#   1. a trace of one rank per model (compute profile: when each gradient is ready, its bytes);
#   2. ember's allreduce, 1 KiB .. 16 MiB, on 2 and 4 hosts per link (fits alpha and beta);
#   3. ddp_bench under no_sync (computation where the ranks run: they share this machine's cores)
#      and with DDP (what the model must predict), per link and host count; on the slow link also
#      the fp16 and PowerSGD hooks and a bucket-size sweep;
# then the report (fits, validation within the stated error, predictions to 256 ranks and the
# bucket-size curve); scripts/make_pictures.sh draws them (docs/pictures/step_model_*.svg).
#   bench/step_model.sh [OUT_DIR]          (default docs/step_model; measurements in OUT_DIR/data)
# Environment: LINKS="10gbit 1gbit", HOSTS="2 4", MODELS="resnet20 mlp", STEPS=12, WARMUP=3,
# QUICK=1 (CI: one link, 2 hosts, the MLP only, fewer steps), MAX_ERROR=0.15 (exit 1 above it),
# REPEATS=3 (the runs that are mostly computation -- no_sync, the 1-rank profiles, the hooks' DDP
# runs -- are measured this often and the median run is used: one short run on a shared machine
# has been 20% off, and those runs carry their error whole into a prediction or its measurement).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
out="${1:-docs/step_model}"
links="${LINKS:-10gbit 1gbit}" hosts_list="${HOSTS:-2 4}" models="${MODELS:-resnet20 mlp}"
steps="${STEPS:-12}" warmup="${WARMUP:-3}" max_error="${MAX_ERROR:-0.15}" repeats="${REPEATS:-3}"
if [[ "${QUICK:-0}" == 1 ]]; then links=1gbit hosts_list=2 models=mlp steps=10 warmup=3; fi
data="$out/data"
rm -rf "$data"
mkdir -p "$data"
bench_bin=$(bench_binary bench:ddp_bench)
allreduce_bin=$(bench_binary bench:allreduce_bench)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "== machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/')"
echo "   CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "   links: $links; hosts: $hosts_list; models: $models; steps $steps (+$warmup warm-up)"

model_flags() {  # the MLP is communication-bound (23 MB of gradients, ~50 ms of compute)
  case "$1" in
    resnet20) echo "--model=resnet20" ;;
    mlp) echo "--model=mlp --mlp_sizes=784,2048,2048,10" ;;
  esac
}
on_cluster() {  # on_cluster HOSTS LINK COMMAND...: mpirun -np HOSTS COMMAND across the hosts
  local h="$1" link="$2"
  shift 2
  scripts/cluster.sh "$h" --link="$link" -- timeout 900 mpirun --allow-run-as-root --oversubscribe \
    --bind-to none -np "$h" "$@" 2>/dev/null
}
bench() {  # bench FILE HOSTS LINK MODEL FLAGS...
  local file="$1" h="$2" link="$3" model="$4"
  shift 4
  # shellcheck disable=SC2046
  on_cluster "$h" "$link" "$bench_bin" $(model_flags "$model") --steps="$steps" --warmup="$warmup" "$@" |
    grep '^RESULT' >>"$data/$file" || { echo "step_model: $file failed" >&2; exit 1; }
  echo "   $file: $(tail -n 1 "$data/$file" | sed -E 's/.*ms_per_step=([0-9.]+).*overlap=([0-9.]+).*/\1 ms\/step, overlap \2/')"
}

profile() {  # profile NAME MODEL FLAGS...: one rank's trace, of the median of REPEATS runs
  local name="$1" model="$2" r median
  shift 2
  for r in $(seq "$repeats"); do
    # shellcheck disable=SC2046
    EMBER_DDP_TRACE="$data/trace_${name}_$r" OMPI_MCA_btl=self,vader mpirun --allow-run-as-root -np 1 \
      "$bench_bin" $(model_flags "$model") --mode=ddp --steps="$steps" --warmup="$warmup" "$@" 2>/dev/null |
      grep '^RESULT' | sed "s/^RESULT /RESULT run=$r /" >>"$data/profile_$name.result"
  done
  median=$(sed -E 's/^RESULT run=([0-9]+) .* ms_per_step=([0-9.]+) .*/\2 \1/' "$data/profile_$name.result" | sort -n |
    sed -n "$(((repeats + 1) / 2))p" | cut -d' ' -f2)
  mv "$data/trace_${name}_$median/ember_trace_rank0.json" "$data/profile_$name.json"
  rm -rf "$data/trace_${name}_"*
}
echo "== 1. compute profiles (one rank, traced)"
for model in $models; do
  profile "$model" "$model"
  for _ in $(seq "$repeats"); do
    # shellcheck disable=SC2046
    OMPI_MCA_btl=self,vader mpirun --allow-run-as-root -np 1 "$bench_bin" $(model_flags "$model") --mode=nosync \
      --steps="$steps" --warmup="$warmup" 2>/dev/null | grep '^RESULT' >>"$data/nosync_${model}_alone.txt"
  done
done
if [[ " $models " == *" mlp "* ]]; then
  profile mlp_fp16 mlp --comm_hook=fp16
  profile mlp_powersgd mlp --comm_hook=powersgd
fi

for link in $links; do
  echo "== 2-3. link $link"
  for h in $hosts_list; do
    on_cluster "$h" "$link" "$allreduce_bin" --rounds=1 --max_bytes=$((16 << 20)) --loop_bytes=$((64 << 10)) \
      >"$data/allreduce_${link}_$h.txt"
    for model in $models; do
      for _ in $(seq "$repeats"); do bench "nosync_${model}_${link}_$h.txt" "$h" "$link" "$model" --mode=nosync; done
      bench "ddp_${model}_${link}_${h}_none_cap25.txt" "$h" "$link" "$model" --mode=ddp
    done
  done
  # Where the link is slow and the gradients large: the fp16 hook and the bucket-size sweep.
  if [[ "$link" == 1gbit && " $models " == *" mlp "* ]]; then
    h=${hosts_list##* }
    on_cluster "$h" "$link" "$allreduce_bin" --rounds=1 --max_bytes=$((16 << 20)) --loop_bytes=$((64 << 10)) \
      --dtype=float16 >"$data/allreduce_${link}_${h}_float16.txt"
    for _ in $(seq "$repeats"); do
      bench "ddp_mlp_${link}_${h}_fp16_cap25.txt" "$h" "$link" mlp --mode=ddp --comm_hook=fp16
      bench "ddp_mlp_${link}_${h}_powersgd_cap25.txt" "$h" "$link" mlp --mode=ddp --comm_hook=powersgd
    done
    for cap in 0.25 2 8; do
      bench "ddp_mlp_${link}_${h}_none_cap$cap.txt" "$h" "$link" mlp --mode=ddp --bucket_cap_mb="$cap" \
        --first_bucket_mb="$cap"
    done
  fi
done

status=0
python3 bench/step_model.py report "$data" --out "$out" --max_error "$max_error" || status=$?
echo "== plots: scripts/make_pictures.sh --step_model $out (docs/pictures/step_model_*.svg)"
exit "$status"
