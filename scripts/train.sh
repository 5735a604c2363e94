#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains ResNet-20 on Fashion-MNIST with
# DistributedDataParallel on 2 MPI ranks (5 epochs). Extra arguments go to the trainer
# (e.g. scripts/train.sh --epochs=1); EMBER_RANKS=N changes the number of ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
source scripts/disk_cache.sh  # compiled outputs shared with every checkout here
cache_flags=()
ember_disk_cache_flags cache_flags
bazel build ${cache_flags[@]+"${cache_flags[@]}"} //examples:ddp_resnet
ember_prune_disk_cache
ranks="${EMBER_RANKS:-2}"
mpi_flags=(--oversubscribe --bind-to none)
if [[ "$(id -u)" == "0" ]]; then mpi_flags+=(--allow-run-as-root); fi
exec mpirun "${mpi_flags[@]}" -np "$ranks" bazel-bin/examples/ddp_resnet --epochs=5 "$@"
