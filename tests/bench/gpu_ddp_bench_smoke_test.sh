#!/usr/bin/env bash
# bench/gpu_bench.sh ddp's code path on the CUDA simulator, tiny and at 2 ranks: DDP steps on the
# device over the simulated NCCL, and ProcessGroupNCCL's allreduce against ncclAllReduce called
# directly; every RESULT line comes out with numbers. Timings under the simulator mean nothing.
# usage: gpu_ddp_bench_smoke_test.sh MPI_TEST_SH DDP_BENCH NCCL_ALLREDUCE_BENCH
set -euo pipefail
launch="$1" ddp_bench="$2" nccl_bench="$3"
# The probe is one small allreduce: the default sizes go up to 256 MB.
if "$nccl_bench" --max_mb=0.004 --iters=1 | grep -q "built without CUDA"; then
  echo "SKIPPED: built without the CUDA backend (run with --config=cudasim)"
  exit 0
fi
out=$("$launch" 2 "$ddp_bench" --device=cuda --model=mlp --mlp_sizes=16,32,10 --batch=8 --steps=2 --warmup=1)
echo "$out"
grep -qE '^RESULT impl=ember model=mlp mode=ddp world=2 .* ms_per_step=[0-9.]+ .* device=cuda backend=nccl peak_device_mb=[0-9.]+ other_threads_cpu_ms=[0-9.]+$' <<<"$out"
out=$("$launch" 2 "$nccl_bench" --max_mb=0.02 --iters=2)
echo "$out"
[[ $(grep -cE '^RESULT nccl_allreduce bytes=[0-9]+ world=2 ember_us=[0-9.]+ raw_us=[0-9.]+ .* ratio=[0-9.]+$' <<<"$out") -eq 2 ]]
