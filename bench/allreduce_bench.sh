#!/usr/bin/env bash
# Allreduce benchmark: ember's ProcessGroupMPI vs raw MPI_Allreduce (same binary, 2 ranks), then
# torch.distributed gloo on the same sizes for comparison (skipped if torch is not importable).
#   bench/allreduce_bench.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
source bench/lib.sh
bin=$(bench_binary bench:allreduce_bench)
echo "== ember vs raw MPI (mpirun -np 2)"
OMPI_MCA_btl=self,vader mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
  "$bin" --rounds="$rounds"
if "$py" -c "import torch.distributed" 2>/dev/null; then
  echo "== torch.distributed gloo (2 processes)"
  "$py" bench/allreduce_bench_gloo.py "$rounds"
else
  echo "== torch.distributed not importable from $py: gloo comparison skipped"
fi
