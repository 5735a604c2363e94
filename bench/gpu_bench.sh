#!/usr/bin/env bash
# GPU benchmark: ember on cuda:0 against cuBLAS called directly (GEMM) and PyTorch eager on the
# same GPU (ResNet-20 training step, batch 256), with peak device memory of both.
#   bench/gpu_bench.sh                     build (--config=cuda) and run here
#   BIN=path/to/gpu_bench bench/gpu_bench.sh   run a binary built elsewhere (the GPU machine has
#                                          no Bazel: build here, carry the binary and
#                                          /usr/local/cuda's libraries along)
#   bench/gpu_bench.sh ddp                 DDP on one GPU with NCCL (world 1): the ResNet-20 step
#                                          (batch 256) against PyTorch DDP with NCCL on the same
#                                          GPU, and allreduce bus bandwidth against ncclAllReduce
#                                          called directly (BIN_DIR=dir holding ddp_bench and
#                                          nccl_allreduce_bench built elsewhere)
# Targets on an H100: GEMM ratio (ember / raw cuBLAS) >= 0.95; training ember / torch >= 1.0
# (ratio = torch ms / ember ms, higher is better). Without a GPU it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
machine() {
  echo "== machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/')"
  echo "   CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  if command -v nvidia-smi >/dev/null; then
    echo "   GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
  else
    echo "   GPU: none visible (no nvidia-smi)"
  fi
}
torch_cuda() { "$py" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; }

if [[ "${1:-}" == ddp ]]; then
  shift
  if [[ -z "${BIN_DIR:-}" ]]; then
    bazel build --config=cuda //bench:ddp_bench //bench:nccl_allreduce_bench >&2
    BIN_DIR="$PWD/bazel-out/k8-fastbuild/bin/bench"
  fi
  machine
  # World 1 needs no launcher (MPI's singleton init); mpirun when there is one.
  launch=()
  if command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    launch=(mpirun --allow-run-as-root --bind-to none -np 1)
  fi
  steps="${STEPS:-30}" batch="${BATCH:-256}"
  ember_out=$("${launch[@]}" "$BIN_DIR/ddp_bench" --device=cuda --backend=nccl --batch="$batch" --steps="$steps" "$@")
  echo "$ember_out"
  nccl_out=$("${launch[@]}" "$BIN_DIR/nccl_allreduce_bench" --max_mb="${MAX_MB:-256}")
  echo "$nccl_out"
  torch_out=""
  if torch_cuda; then
    torch_out=$("$py" bench/ddp_bench_torch.py --world 1 --device cuda --backend nccl --batch "$batch" \
      --steps "$steps")
    echo "$torch_out"
  else
    echo "== PyTorch with CUDA not importable from $py: torch comparison skipped"
  fi
  echo "== summary"
  e=$(grep "RESULT impl=ember" <<<"$ember_out" || true)
  t=$(grep "RESULT impl=torch" <<<"$torch_out" || true)
  if [[ -n "$e" && -n "$t" ]]; then
    ratio=$(awk -v a="$(field ms_per_step "$t")" -v b="$(field ms_per_step "$e")" 'BEGIN { printf "%.3f", a / b }')
    echo "   DDP ResNet-20 batch $batch, world 1, NCCL: ember $(field ms_per_step "$e") ms/step, torch $(field ms_per_step "$t") ms/step, ratio $ratio (target >= 1.0); peak allocated ember $(field peak_device_mb "$e") MB, torch $(field peak_device_mb "$t") MB"
  fi
  while read -r line; do
    [[ "$line" == RESULT\ nccl_allreduce* ]] || continue
    echo "   allreduce $(field bytes "$line") B: ember $(field ember_us "$line") us ($(field ember_algbw_gbs "$line") GB/s alg, $(field ember_busbw_gbs "$line") bus), raw NCCL $(field raw_us "$line") us ($(field raw_algbw_gbs "$line") GB/s alg), ratio $(field ratio "$line")"
  done <<<"$nccl_out"
  exit 0
fi

if [[ -z "${BIN:-}" ]]; then
  bazel build --config=cuda //bench:gpu_bench >&2
  # The CUDA config shares the default output tree (.bazelrc): this is the binary just built.
  BIN="$PWD/bazel-out/k8-fastbuild/bin/bench/gpu_bench"
fi
machine
ember_out=$("$BIN" "$@")
echo "$ember_out"
torch_out=""
if torch_cuda; then
  torch_out=$("$py" bench/gpu_bench_torch.py "$@")
  echo "$torch_out"
else
  echo "== PyTorch with CUDA not importable from $py: torch comparison skipped"
fi
echo "== summary"
while read -r line; do
  [[ "$line" == RESULT\ gemm* ]] || continue
  n=$(field n "$line")
  t=$(grep "RESULT gemm n=$n " <<<"$torch_out" || true)
  echo "   GEMM ${n}^3: ember $(field ember_tflops "$line") TFLOP/s, cuBLAS $(field cublas_tflops "$line"), ratio $(field ratio "$line") (target >= 0.95); torch $(field torch_tflops "${t:-}")"
done <<<"$ember_out"
e=$(grep "RESULT resnet20" <<<"$ember_out" || true)
t=$(grep "RESULT resnet20" <<<"$torch_out" || true)
if [[ -n "$e" && -n "$t" ]]; then
  ratio=$(awk -v a="$(field torch_ms_per_step "$t")" -v b="$(field ms_per_step "$e")" 'BEGIN { printf "%.3f", a / b }')
  echo "   ResNet-20 batch $(field batch "$e"): ember $(field ms_per_step "$e") ms/step, torch $(field torch_ms_per_step "$t") ms/step, ratio $ratio (target >= 1.0); peak allocated ember $(field peak_allocated_mb "$e") MB, torch $(field torch_peak_allocated_mb "$t") MB"
fi
