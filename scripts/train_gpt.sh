#!/usr/bin/env bash
# A small GPT in pure C++: installs what is missing, builds, and trains nanoGPT's character model
# (4 layers x 4 heads x 128 wide, block 64) on the King James Bible with DistributedDataParallel on
# 2 MPI ranks, 2000 steps of 12 windows per rank, then prints 500 sampled characters and the RESULT
# line. Extra arguments go to examples/train_gpt (--help lists them); EMBER_RANKS=N changes the
# number of ranks. bench/gpt_convergence.sh runs the same beside PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
source scripts/disk_cache.sh  # compiled outputs shared with every checkout here
cache_flags=()
ember_disk_cache_flags cache_flags
bazel build ${cache_flags[@]+"${cache_flags[@]}"} //examples:train_gpt
ember_prune_disk_cache
mpi_flags=(--oversubscribe --bind-to none)
if [[ "$(id -u)" == "0" ]]; then mpi_flags+=(--allow-run-as-root); fi
exec mpirun "${mpi_flags[@]}" -np "${EMBER_RANKS:-2}" bazel-bin/examples/train_gpt \
  --max_iters=2000 --batch=12 --block_size=64 --n_layer=4 --n_head=4 --n_embd=128 --eval_interval=500 \
  --eval_iters=50 --sample=500 "$@"
