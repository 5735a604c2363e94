#!/usr/bin/env bash
# GPU benchmark: ember on cuda:0 against cuBLAS called directly (GEMM) and PyTorch eager on the
# same GPU (ResNet-20 training step, batch 256), with peak device memory of both.
#   bench/gpu_bench.sh                     build (--config=cuda) and run here
#   BIN=path/to/gpu_bench bench/gpu_bench.sh   run a binary built elsewhere (the GPU machine has
#                                          no Bazel: build here, carry the binary and
#                                          /usr/local/cuda's libraries along)
# Targets on an H100: GEMM ratio (ember / raw cuBLAS) >= 0.95; training ember / torch >= 1.0
# (ratio = torch ms / ember ms, higher is better). Without a GPU it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
if [[ -z "${BIN:-}" ]]; then
  bazel build --config=cuda //bench:gpu_bench >&2
  # The CUDA config shares the default output tree (.bazelrc): this is the binary just built.
  BIN="$PWD/bazel-out/k8-fastbuild/bin/bench/gpu_bench"
fi
echo "== machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/')"
echo "   CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
if command -v nvidia-smi >/dev/null; then
  echo "   GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
else
  echo "   GPU: none visible (no nvidia-smi)"
fi
ember_out=$("$BIN" "$@")
echo "$ember_out"
torch_out=""
if /usr/bin/python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  torch_out=$(/usr/bin/python3 bench/gpu_bench_torch.py "$@")
  echo "$torch_out"
else
  echo "== PyTorch with CUDA not importable from /usr/bin/python3: torch comparison skipped"
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
