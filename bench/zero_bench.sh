#!/usr/bin/env bash
# ZeRO stage 1 (//bench:zero_bench under mpirun) against DDP with the unsharded optimizer.
#   bench/zero_bench.sh memory   optimizer state (the largest rank's) and peak RSS per rank, AdamW,
#                                ResNet-20 and the 25.2 M-parameter MLP, at 1-4 ranks (RANKS="1 2 3 4")
#   bench/zero_bench.sh time     step time at 2 ranks: ddp, zero, zero_overlap (STEPS=20, ROUNDS=3;
#                                the rounds alternate the modes so a slow phase of the host hits all)
#   bench/zero_bench.sh paired   the same three inside one mpirun per model, as alternating blocks
#                                of STEPS steps (10), ROUNDS rounds (7): per-round ratios, and their
#                                medians (overlap_vs_ddp: the 1.05 target)
# Environment: EXCHANGE=allgather: ZeRO's parameters by allgather instead of broadcasts (paired);
# MLP_SIZES=1448,...: the MLP's widths (default: 13 x 1448, twelve equal 2.1 M layers,
# 25.2 M parameters, which 2, 3 and 4 ranks share evenly; 1024,4096,4096,1024 is as large with one
# layer of 16.8 M, the granularity's worst case); NO_BUILD=1 uses the binary already built; MPIRUN_ARGS adds mpirun flags (for
# scripts/cluster.sh, its host list). Prints the machine's load and CPU first: the figures in
# docs/zero.md quote them.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
what="${1:-memory}"
bin=$(bench_binary bench:zero_bench)
mlp="--mlp_sizes=${MLP_SIZES:-1448,1448,1448,1448,1448,1448,1448,1448,1448,1448,1448,1448,1448}"
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none ${MPIRUN_ARGS:-})
print_machine
case "$what" in
  memory)
    printf '%-9s %-6s %-5s %10s %12s %18s\n' model world mode state_mb peak_rss_mb state_mb_per_rank
    for model in ${MODELS:-resnet20 mlp}; do
      for world in ${RANKS:-1 2 3 4}; do
        for mode in ddp zero; do
          line=$("${mpi[@]}" -np "$world" "$bin" --model="$model" "$mlp" --mode="$mode" --optimizer=adamw --steps=2 \
                   --warmup=1 | grep '^RESULT')
          printf '%-9s %-6s %-5s %10s %12s %18s\n' "$model" "$world" "$mode" "$(field state_mb "$line")" \
            "$(field peak_rss_mb "$line")" "$(field state_mb_per_rank "$line")"
        done
      done
    done
    ;;
  time)
    printf '%-6s %-9s %-13s %12s\n' round model mode ms_per_step
    for round in $(seq "${ROUNDS:-3}"); do
      modes="ddp zero zero_overlap"
      ((round % 2 == 0)) && modes="zero_overlap zero ddp"
      for model in ${MODELS:-mlp resnet20}; do
        for mode in $modes; do
          line=$("${mpi[@]}" -np 2 "$bin" --model="$model" "$mlp" --mode="$mode" --optimizer=adamw --steps="${STEPS:-20}" \
                   --warmup=3 | grep '^RESULT')
          printf '%-6s %-9s %-13s %12s\n' "$round" "$model" "$mode" "$(field ms_per_step "$line")"
        done
      done
    done
    ;;
  paired)
    for model in ${MODELS:-resnet20 mlp}; do
      "${mpi[@]}" -np 2 "$bin" --model="$model" "$mlp" --mode=paired --optimizer=adamw --steps="${STEPS:-10}" \
        --exchange="${EXCHANGE:-broadcast}" \
        --rounds="${ROUNDS:-7}" --warmup=3 | grep -E '^(PAIRED|RESULT)'
    done
    ;;
  *) echo "usage: bench/zero_bench.sh memory|time|paired" >&2; exit 2 ;;
esac
