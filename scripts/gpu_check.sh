#!/usr/bin/env bash
# Runs scripts/gpu_bundle.sh's bundle on a machine with a GPU and no Bazel, from the repository
# root (the bench scripts are read from the checkout):
#   scripts/gpu_check.sh [PART ...]
# PARTs (default: env tests cputests mpitests gpubench gpuddp):
#   env       CPU, GPU, driver, PyTorch, MPI
#   tests     every single-process GPU suite (gtest binaries, 90 s each)
#   cputests  the CPU op suites at every capability level (avx512, avx2, default; a level the CPU
#             lacks reports its tests skipped), the check a machine without AVX-512 cannot make
#   mpitests  ProcessGroupNCCL and DDP-on-CUDA suites under mpirun -np 1 and 2 (one GPU: NCCL at
#             world 1; two ranks run the MPI backend's staging tests and skip the NCCL ones)
#   gpubench  bench/gpu_bench.sh (GEMM vs cuBLAS, ResNet-20 step vs PyTorch)
#   gpuddp    bench/gpu_bench.sh ddp (DDP step vs PyTorch DDP, allreduce vs raw NCCL)
#   profile   where the GPU ResNet-20 step's time goes: host time to issue a step against the
#             step's time, ember's kernels by device time (Nsight Compute, 2 steps) and
#             PyTorch's (torch.profiler, 2 steps)
#   cpubench  bench/resnet_bench.sh at avx512/avx2 x 1/2 threads, REPS times, then 4, 8, 16 threads
#   ddpbench  bench/ddp_bench.sh scaling, REPS times (TORCH=0 skips PyTorch)
#   cpuprofile where a 2-thread CPU step waits: resnet_train_bench at 1 and 2 threads pinned to
#             CPUs 0,1 with EMBER_PARALLEL_PROFILE=1 (per call site), avx512 and avx2
# Logs go to $OUT (default /tmp/gpu_check): log.txt and logs.tgz with one log per suite.
# BUNDLE=path (default .gpu/bundle.tar.xz), PYTHON=the Python holding PyTorch (default python3),
# REPS (3), STEPS/WARMUP (20/5) for the CPU benchmarks.
set -u
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/gpu_check}"
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
parts=" ${*:-env tests cputests mpitests gpubench gpuddp} "
d=/tmp/ember_gpu_bundle
t0=$(date +%s)
elapsed() { echo "[+$(($(date +%s) - t0))s]"; }
rm -rf "$d" && mkdir -p "$d" && xz -dc "${BUNDLE:-.gpu/bundle.tar.xz}" | tar -C "$d" -xf - || {
  echo "gpu_check: cannot unpack ${BUNDLE:-.gpu/bundle.tar.xz}"
  exit 1
}

# CUDA's libraries from the machine: ldconfig's cache, else the toolkit's or the pip wheels' folders.
cuda_dirs=""
for l in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  p=$(ldconfig -p | awk -v l="$l" '$1 == l { print $NF; exit }')
  [[ -z "$p" ]] && p=$(find /usr/local/cuda/ /opt /usr/lib -maxdepth 8 -name "$l" 2>/dev/null | head -1)
  echo "   $l: ${p:-NOT FOUND}"
  [[ -n "$p" ]] && cuda_dirs="$cuda_dirs:$(dirname "$p")"
done
# Always the bundle's OpenMPI: a system OpenMPI's plugins need its own PMIx, not the bundle's.
export OPAL_PREFIX="$d/ompi" PATH="$d/ompi/bin:$PATH"
export PMIX_MCA_mca_base_component_path="$d/ompi/pmix/lib/pmix" PMIX_MCA_pcompress_base_silence_warning=1
export LD_LIBRARY_PATH="$d/lib:$d/ompi/pmix/lib$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx
export PYTHON="${PYTHON:-$(command -v python3)}"
summary() { grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$1" | tr '\n' ' '; }

if [[ "$parts" == *" env "* ]]; then
  echo "== env $(elapsed)"
  uptime
  lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node\(s\)"
  grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512[a-z_0-9]*)$' | tr '\n' ' '
  echo
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "PyTorch: $("$PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tail -1)"
  mpirun --version 2>&1 | head -1
fi

# suite LABEL NAME COMMAND...: runs a gtest binary (COMMAND ends with it) into $out/t_NAME.log and
# prints its PASSED/SKIPPED/FAILED counts, with the lines that say why when it fails.
suite() {
  local label="$1" log="$out/t_$2.log"
  shift 2
  "$@" --gtest_brief=1 --gtest_color=no >"$log" 2>&1
  local rc=$?
  echo "$label rc=$rc $(summary "$log") $(elapsed)"
  [[ $rc != 0 ]] && grep -E "Failure|FAILED|rror|what\(\)|Signal|\] \[ *[0-9]+\]" "$log" | head -12
}

if [[ "$parts" == *" tests "* ]]; then
  echo "== GPU suites $(elapsed)"
  for t in "$d"/tests/*; do
    n=$(basename "$t")
    [[ "$n" == *_bin ]] || suite "$n" "$n" timeout 90 "$t"
  done
fi

if [[ "$parts" == *" cputests "* ]]; then
  echo "== CPU op suites at every capability level $(elapsed)"
  for t in "$d"/cpu/*; do
    n=$(basename "$t")
    for level in avx512 avx2 default; do
      suite "$n $level" "${n}_$level" env EMBER_CPU_CAPABILITY=$level timeout 120 "$t"
    done
  done
fi

if [[ "$parts" == *" mpitests "* ]]; then
  echo "== GPU suites under mpirun $(elapsed)"
  for t in "$d"/tests/*_bin; do
    n=$(basename "$t")
    for np in 1 2; do
      suite "$n np$np" "${n}_np$np" timeout 90 mpirun --bind-to none -np $np "$t"
    done
  done
fi

if [[ "$parts" == *" gpubench "* ]]; then
  echo "== bench/gpu_bench.sh $(elapsed)"
  BIN="$d/bench/gpu_bench" timeout 150 bench/gpu_bench.sh
fi

if [[ "$parts" == *" gpuddp "* ]]; then
  echo "== bench/gpu_bench.sh ddp $(elapsed)"
  BIN_DIR="$d/bench" STEPS=30 timeout 120 bench/gpu_bench.sh ddp
fi

if [[ "$parts" == *" profile "* ]]; then
  echo "== profile: ResNet-20 step, batch 256 $(elapsed)"
  timeout 60 "$d/bench/gpu_bench" --no_gemm --steps=10 --warmup=3
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  if [[ -n "$ncu" ]]; then
    timeout 240 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
      "$d/bench/gpu_bench" --no_gemm --steps=1 --warmup=1 >"$out/ncu_ember.csv" 2>"$out/ncu_ember.err"
    echo "ncu rc=$? $(elapsed)"
    "$PYTHON" bench/kernel_time_summary.py "$out/ncu_ember.csv" --steps 2
    xz -f "$out/ncu_ember.csv"
  else
    echo "no ncu here"
  fi
  timeout 120 "$PYTHON" bench/gpu_bench_torch.py --profile
fi

# The CPU scripts take the binary at bench/NAME when NO_BUILD=1 finds one there (bench/lib.sh).
with_binary() {  # with_binary NAME COMMAND...
  local name="$1"
  shift
  cp "$d/bench/$name" "bench/$name"
  "$@"
  rm -f "bench/$name"
}
if [[ "$parts" == *" cpubench "* ]]; then
  echo "== CPU: bench/resnet_bench.sh $(elapsed)"
  for rep in $(seq "${REPS:-3}"); do
    NO_BUILD=1 LEVELS="avx512 avx2" THREADS="1 2" with_binary resnet_train_bench \
      timeout 200 bench/resnet_bench.sh "${STEPS:-20}" "${WARMUP:-5}" | sed -n '/== summary/,$p'
    echo "-- run $rep $(elapsed)"
  done
  for threads in 4 8 16; do
    EMBER_CPU_CAPABILITY=avx512 timeout 60 "$d/bench/resnet_train_bench" --steps="${STEPS:-20}" \
      --warmup="${WARMUP:-5}" --threads=$threads | grep RESULT
  done
fi

if [[ "$parts" == *" cpuprofile "* ]]; then
  echo "== CPU: where 2 threads wait (EMBER_PARALLEL_PROFILE) $(elapsed)"
  for level in avx512 avx2; do
    for threads in 1 2; do
      echo "-- $level, $threads thread(s), CPUs 0,1"
      # The report goes to stderr at exit, before stdout's RESULT line is flushed: read them apart.
      # The whole report (call sites are long template names) is kept in logs.tgz.
      report="$out/t_profile_${level}_$threads.log"
      EMBER_PARALLEL_PROFILE=1 EMBER_CPU_CAPABILITY=$level timeout 60 taskset -c 0,1 \
        "$d/bench/resnet_train_bench" --steps="${STEPS:-20}" --warmup=3 --threads=$threads \
        2>"$report" | grep RESULT
      grep -E 'parallel regions|^ ' "$report" | cut -c1-200 | awk 'NR <= 16'
    done
  done
fi

if [[ "$parts" == *" ddpbench "* ]]; then
  echo "== CPU: bench/ddp_bench.sh scaling $(elapsed)"
  for rep in $(seq "${REPS:-3}"); do
    NO_BUILD=1 with_binary ddp_bench timeout 300 bench/ddp_bench.sh scaling "${STEPS:-20}" "${WARMUP:-5}" 2>/dev/null |
      sed -n '/== scaling/,$p'
    echo "-- run $rep $(elapsed)"
  done
fi

(cd "$out" && tar czf logs.tgz t_*.log 2>/dev/null && rm -f t_*.log)
echo "== done $(elapsed)"
