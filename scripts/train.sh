#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains ResNet-20 on Fashion-MNIST with
# DistributedDataParallel on 2 MPI ranks (5 epochs). Extra arguments go to the trainer
# (e.g. scripts/train.sh --epochs=1); EMBER_RANKS=N changes the number of ranks.
# --checkpoint or --max_restarts=N (default 3 with --checkpoint) runs the job through
# scripts/elastic_run.py, which restarts a failed attempt from its newest complete checkpoint;
# with a hostfile (--hostfile=F, or scripts/cluster.sh's) and --min_ranks=M it leaves out hosts
# that are gone and goes on with at least M ranks.
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
# With --checkpoint or a restart flag the job runs through the launcher, which takes its own flags
# out and sets --max_restarts's default; otherwise it is one mpirun.
restart_flags=()
trainer_args=()
with_checkpoint=0
for arg in "$@"; do
  case "$arg" in
    --max_restarts=* | --min_ranks=* | --hostfile=*) restart_flags+=("$arg") ;;
    --checkpoint | --checkpoint=*) with_checkpoint=1; trainer_args+=("$arg") ;;
    *) trainer_args+=("$arg") ;;
  esac
done
trainer=(bazel-bin/examples/ddp_resnet --epochs=5 ${trainer_args[@]+"${trainer_args[@]}"})
if [[ $with_checkpoint -eq 0 && ${#restart_flags[@]} -eq 0 ]]; then
  exec mpirun "${mpi_flags[@]}" -np "$ranks" "${trainer[@]}"
fi
exec /usr/bin/python3 scripts/elastic_run.py --np="$ranks" --mpirun="mpirun ${mpi_flags[*]}" \
  ${restart_flags[@]+"${restart_flags[@]}"} -- "${trainer[@]}"
