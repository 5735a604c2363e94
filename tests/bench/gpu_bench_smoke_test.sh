#!/usr/bin/env bash
# bench/gpu_bench's code path on the CUDA simulator (tiny sizes, one step): every RESULT line it
# prints on a GPU comes out, with numbers. Timings under the simulator mean nothing.
set -euo pipefail
out=$("$1" --smoke)
echo "$out"
if grep -q "built without CUDA" <<<"$out"; then
  echo "SKIPPED: built without the CUDA backend (run with --config=cudasim)"
  exit 0
fi
grep -qE '^RESULT gemm n=48 ember_tflops=[0-9.]+ cublas_tflops=[0-9.]+ ratio=[0-9.]+$' <<<"$out"
grep -qE '^RESULT resnet20 batch=4 ms_per_step=[0-9.]+ host_ms=[0-9.]+ peak_allocated_mb=[0-9.]+ peak_reserved_mb=[0-9.]+$' <<<"$out"
