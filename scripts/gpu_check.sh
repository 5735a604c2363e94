#!/usr/bin/env bash
# Runs scripts/gpu_bundle.sh's bundle on a machine with a GPU and no Bazel, from the repository
# root (the bench scripts are read from the checkout):
#   OUT=dir scripts/gpu_check.sh [PART ...]
# PARTs (default: env tests memcheck racecheck cputests mpitests gpubench gpuddp):
#   env       CPU, GPU, driver, PyTorch, MPI
#   tests     every single-process GPU suite (gtest binaries)
#   memcheck  the same suites under compute-sanitizer --tool memcheck (out-of-bounds and misaligned
#             device accesses), skipped with a line saying so where compute-sanitizer is absent
#   racecheck the same under --tool racecheck (shared-memory hazards)
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
# Before anything runs it checks that nvidia-smi lists a GPU and that the driver supports the CUDA
# version the bundle was built with; if not it prints one line saying why and exits 1, because
# every GPU suite would skip. Each suite has a time limit, cut to what is left of its part's budget
# (BUDGET_<part>=seconds changes one) and of the run's (TIME_LIMIT_S, default 470: the default
# parts end within 8 minutes). At the end one table lists every suite and step: result,
# passed/failed/skipped tests, seconds. The exit status is 1 if any failed, timed out or did not
# run for lack of time, if a single-process GPU suite skipped all its tests, or if no GPU suite ran
# a test at all.
# Everything goes to $OUT (default /tmp/gpu_check): log.txt, and logs.tgz with one log per suite.
# BUNDLE=path (default .gpu/bundle.tar.xz), BUNDLE_DIR=where it is unpacked (default
# /tmp/ember_gpu_bundle), PYTHON=the Python holding PyTorch and pip-installed CUDA (default
# python3), REPS (3), STEPS/WARMUP (20/5) for the CPU benchmarks.
set -u
cd "$(dirname "$0")/.." || exit 1
out="${OUT:-/tmp/gpu_check}"
mkdir -p "$out"
t0=$(date +%s)
bundle="${BUNDLE:-.gpu/bundle.tar.xz}"
d="${BUNDLE_DIR:-/tmp/ember_gpu_bundle}"
tee_pid=""
# The reason the check cannot run, as one line on stderr and in the log.
die() {
  if [[ -n "$tee_pid" ]]; then
    echo "gpu_check: $*" >&2
  else
    echo "gpu_check: $*" | tee -a "$out/log.txt" >&2
  fi
  exit 1
}
version_older() { [[ "$1" != "$2" && "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" == "$1" ]]; }

# A GPU and a driver new enough, first: without them every GPU suite skips, which reads as a pass.
command -v nvidia-smi >/dev/null ||
  die "no CUDA device visible: nvidia-smi is not on PATH (no NVIDIA driver on this machine)"
smi=$(timeout 30 nvidia-smi 2>&1) ||
  die "no CUDA device visible: nvidia-smi failed: $(grep -m1 . <<<"$smi")"
gpus=$(timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]')
((gpus > 0)) || die "no CUDA device visible: nvidia-smi lists no GPU"
[[ -f "$bundle" ]] || die "no bundle at $bundle: build it with scripts/gpu_bundle.sh, or set BUNDLE"
rm -rf "$d" && mkdir -p "$d" && xz -dc "$bundle" | tar -C "$d" -xf - || die "cannot unpack $bundle"
built_cuda=$(cat "$d/cuda_version" 2>/dev/null) ||
  die "$bundle does not record the CUDA version it was built with: rebuild it with scripts/gpu_bundle.sh"
driver=$(timeout 30 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
# nvidia-smi's header names the newest CUDA the driver supports; else the driver's own version
# against the oldest driver of the build's CUDA major version.
driver_cuda=$(sed -n 's/.*CUDA Version: *\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' <<<"$smi" | head -1)
if [[ -n "$driver_cuda" ]]; then
  version_older "$driver_cuda" "$built_cuda" &&
    die "driver $driver supports CUDA $driver_cuda, older than the CUDA $built_cuda the bundle was built with: every GPU suite would skip"
else
  declare -A min_driver=([11]=450.80.02 [12]=525.60.13 [13]=580.65.06)
  need="${min_driver[${built_cuda%%.*}]:-}"
  [[ -n "$need" && -n "$driver" ]] ||
    die "cannot tell which CUDA driver $driver supports (no 'CUDA Version' from nvidia-smi) against the bundle's CUDA $built_cuda"
  version_older "$driver" "$need" &&
    die "driver $driver is older than $need, the oldest for the CUDA $built_cuda the bundle was built with: every GPU suite would skip"
fi

exec > >(tee -a "$out/log.txt") 2>&1
tee_pid=$!
# At exit, give tee the time to write the last lines before anyone reads the log.
trap 'exec >&- 2>&-; for _ in $(seq 50); do kill -0 "$tee_pid" 2>/dev/null || break; sleep 0.1; done' EXIT
parts=" ${*:-env tests memcheck racecheck cputests mpitests gpubench gpuddp} "
elapsed() { echo "[+$(($(date +%s) - t0))s]"; }
echo "gpu_check: $gpus GPU(s), driver $driver (CUDA ${driver_cuda:-?}), bundle built with CUDA $built_cuda $(elapsed)"

# pip-installed CUDA (its wheels, PyTorch's dependencies) keeps libraries and tools in
# <site-packages>/nvidia/<component>/: the site folders of $PYTHON and the system's Pythons.
export PYTHON="${PYTHON:-$(command -v python3)}"
nvidia_dirs=()
while read -r s; do
  [[ -d "$s/nvidia" ]] && nvidia_dirs+=("$s/nvidia")
done < <({
  [[ -n "$PYTHON" ]] && timeout 30 "$PYTHON" -c \
    'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null
  find /usr/local/lib/python3*/ /usr/lib/python3*/ -maxdepth 1 -name '*-packages' 2>/dev/null
} | sort -u)

# CUDA's libraries of the bundle's major version: ldconfig's cache, the toolkit, pip's folders, and
# a bounded search. Every GPU binary links all four.
cuda_dirs=""
cuda_root="${CUDA_PATH:-/usr/local/cuda}"
major="${built_cuda%%.*}"
for l in "libcudart.so.$major" "libcublas.so.$major" "libcublasLt.so.$major" libnccl.so.2; do
  p=$({ ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | awk -v l="$l" '$1 == l { print $NF; exit }')
  [[ -z "$p" ]] && p=$(ls "$cuda_root"/{lib64,lib,targets/x86_64-linux/lib}/"$l" 2>/dev/null | head -1)
  for n in "${nvidia_dirs[@]}"; do
    [[ -z "$p" ]] && p=$(ls "$n"/*/lib/"$l" 2>/dev/null | head -1)
  done
  [[ -z "$p" ]] && p=$(find /opt /usr/lib -maxdepth 8 -name "$l" 2>/dev/null | head -1)
  echo "   $l: ${p:-NOT FOUND}"
  [[ -n "$p" ]] || die "$l not found (ldconfig, $cuda_root, ${nvidia_dirs[*]:-no pip nvidia/ folder}, /opt, /usr/lib): no GPU binary can load"
  cuda_dirs="$cuda_dirs:$(dirname "$p")"
done
# Always the bundle's OpenMPI: a system OpenMPI's plugins need its own PMIx, not the bundle's.
export OPAL_PREFIX="$d/ompi" PATH="$d/ompi/bin:$PATH"
export PMIX_MCA_mca_base_component_path="$d/ompi/pmix/lib/pmix" PMIX_MCA_pcompress_base_silence_warning=1
export LD_LIBRARY_PATH="$d/lib:$d/ompi/pmix/lib$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx
summary() { grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$1" | tr '\n' ' '; }

# Time: each part has a budget (seconds; together the default parts stay within 8 minutes) and no
# suite runs past its part's end or the run's.
declare -A budget=([env]=15 [tests]=75 [memcheck]=105 [racecheck]=80 [cputests]=30 [mpitests]=45
  [gpubench]=60 [gpuddp]=45)
deadline=$((t0 + ${TIME_LIMIT_S:-470}))
part_end=$deadline
part_begin() {  # part_begin PART
  local b="BUDGET_$1"
  b="${!b:-${budget[$1]:-$((deadline - t0))}}"
  part_end=$(($(date +%s) + b))
  ((part_end > deadline)) && part_end=$deadline
  echo "== $1 (budget ${b}s) $(elapsed)"
}

# The summary table's rows, and what decides the exit status.
rows=()
bad=0 gpu_passed=0
row() {  # row LABEL RESULT PASSED FAILED SKIPPED SECONDS
  rows+=("$(printf '%-44s %-30s %7s %7s %7s %6s' "$@")")
  [[ "$2" == ok || "$2" == skipped* || "$2" == ran ]] || bad=$((bad + 1))
}
counts() {  # the PASSED FAILED SKIPPED test counts of a gtest log, summed over ranks
  awk '/^\[  PASSED  \] [0-9]+ test/ { p += $4 } /^\[  FAILED  \] [0-9]+ test/ { f += $4 }
       /^\[  SKIPPED \] [0-9]+ test/ { s += $4 } END { print p + 0, f + 0, s + 0 }' "$1"
}

# suite LABEL NAME LIMIT KIND COMMAND...: runs a gtest binary (COMMAND ends with it) into
# $out/t_NAME.log for at most LIMIT seconds (less if its part has less left) and prints its
# PASSED/SKIPPED/FAILED counts, with the lines that say why when it fails. KIND: gpu (a
# single-process GPU suite: skipping all its tests is a failure), gpu_mpi (counts as a GPU suite,
# may skip), cpu.
suite() {
  local label="$1" log="$out/t_$2.log" limit="$3" kind="$4"
  shift 4
  local left=$((part_end - $(date +%s)))
  ((left < limit)) && limit=$left
  if ((limit <= 0)); then
    echo "$label: not run, its part's time is spent"
    row "$label" "not run (no time left)" - - - 0
    return
  fi
  local start
  start=$(date +%s)
  timeout -k 10 "$limit" "$@" --gtest_brief=1 --gtest_color=no >"$log" 2>&1
  local rc=$? secs=$(($(date +%s) - start)) p f s result=ok
  read -r p f s < <(counts "$log")
  if ((rc == 124 || rc == 137)); then
    result="timeout (${limit}s)"
  elif ((rc != 0)); then
    result="FAILED (exit $rc)"
  elif ((p == 0 && s == 0)); then
    result="FAILED (no tests ran)"
  elif ((p == 0)); then
    [[ "$kind" == gpu ]] && result="FAILED (all skipped)" || result="skipped (all)"
  fi
  [[ "$kind" != cpu ]] && gpu_passed=$((gpu_passed + p))
  echo "$label rc=$rc $(summary "$log") $(elapsed)"
  [[ $rc != 0 ]] && grep -E "Failure|FAILED|rror|what\(\)|Signal|\] \[ *[0-9]+\]" "$log" | head -12
  [[ "$result" == *"all skipped"* ]] && grep -A1 ': Skipped$' "$log" | head -4
  row "$label" "$result" "$p" "$f" "$s" "$secs"
}

# step LABEL LIMIT COMMAND...: a command that is not a gtest suite (a benchmark), its output in the
# log; its row says whether it exited 0 within LIMIT (cut to what is left of its part).
step() {
  local label="$1" limit="$2"
  shift 2
  local left=$((part_end - $(date +%s)))
  ((left < limit)) && limit=$left
  if ((limit <= 0)); then
    row "$label" "not run (no time left)" - - - 0
    return
  fi
  local start rc result=ok
  start=$(date +%s)
  timeout -k 10 "$limit" "$@"
  rc=$?
  ((rc == 124 || rc == 137)) && result="timeout (${limit}s)"
  ((rc != 0 && rc != 124 && rc != 137)) && result="FAILED (exit $rc)"
  row "$label" "$result" - - - $(($(date +%s) - start))
}

gpu_suites=()
for t in "$d"/tests/*; do
  [[ -f "$t" && "$t" != *_bin ]] && gpu_suites+=("$t")
done

if [[ "$parts" == *" env "* ]]; then
  part_begin env
  start=$(date +%s)
  uptime
  lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node\(s\)"
  grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512[a-z_0-9]*)$' | tr '\n' ' '
  echo
  timeout 10 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "PyTorch: $(timeout 20 "$PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tail -1)"
  mpirun --version 2>&1 | head -1
  row env ran - - - $(($(date +%s) - start))
fi

if [[ "$parts" == *" tests "* ]]; then
  part_begin tests
  ((${#gpu_suites[@]} > 0)) || row "tests: the bundle's tests/" "FAILED (no GPU suites)" - - - 0
  for t in "${gpu_suites[@]}"; do
    n=$(basename "$t")
    suite "$n" "$n" 60 gpu "$t"
  done
fi

# compute-sanitizer: on PATH, in the toolkit, or from pip (nvidia/cuda_sanitizer_api/...).
sanitizer=$(command -v compute-sanitizer ||
  ls "$cuda_root/bin/compute-sanitizer" "$cuda_root/compute-sanitizer/compute-sanitizer" 2>/dev/null ||
  for n in "${nvidia_dirs[@]}"; do find "$n" -maxdepth 3 -name compute-sanitizer -type f -perm -u+x; done 2>/dev/null)
sanitizer=$(head -1 <<<"$sanitizer")
for tool in memcheck racecheck; do
  [[ "$parts" == *" $tool "* ]] || continue
  part_begin "$tool"
  if [[ -z "$sanitizer" ]]; then
    echo "compute-sanitizer not found (PATH, $cuda_root, ${nvidia_dirs[*]:-no pip nvidia/ folder}): $tool skipped"
    row "$tool" "skipped (no compute-sanitizer)" - - - 0
    continue
  fi
  echo "   $sanitizer"
  for t in "${gpu_suites[@]}"; do
    n=$(basename "$t")
    # --error-exitcode: a hazard or bad access fails the suite even when its tests pass.
    suite "$n $tool" "${n}_$tool" 90 gpu "$sanitizer" --tool "$tool" --error-exitcode 1 \
      --require-cuda-init no "$t"
  done
done

if [[ "$parts" == *" cputests "* ]]; then
  part_begin cputests
  for t in "$d"/cpu/*; do
    [[ -f "$t" ]] || continue
    n=$(basename "$t")
    for level in avx512 avx2 default; do
      suite "$n $level" "${n}_$level" 30 cpu env EMBER_CPU_CAPABILITY=$level "$t"
    done
  done
fi

if [[ "$parts" == *" mpitests "* ]]; then
  part_begin mpitests
  for t in "$d"/tests/*_bin; do
    [[ -f "$t" ]] || continue
    n=$(basename "$t")
    for np in 1 2; do
      suite "$n np$np" "${n}_np$np" 45 gpu_mpi mpirun --bind-to none -np $np "$t"
    done
  done
fi

if [[ "$parts" == *" gpubench "* ]]; then
  part_begin gpubench
  step gpubench 60 env BIN="$d/bench/gpu_bench" bench/gpu_bench.sh
fi

if [[ "$parts" == *" gpuddp "* ]]; then
  part_begin gpuddp
  step gpuddp 45 env BIN_DIR="$d/bench" STEPS=30 bench/gpu_bench.sh ddp
fi

if [[ "$parts" == *" profile "* ]]; then
  echo "== profile: ResNet-20 step, batch 256 $(elapsed)"
  start=$(date +%s)
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
  row profile ran - - - $(($(date +%s) - start))
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
  start=$(date +%s)
  for rep in $(seq "${REPS:-3}"); do
    NO_BUILD=1 LEVELS="avx512 avx2" THREADS="1 2" with_binary resnet_train_bench \
      timeout 200 bench/resnet_bench.sh "${STEPS:-20}" "${WARMUP:-5}" | sed -n '/== summary/,$p'
    echo "-- run $rep $(elapsed)"
  done
  for threads in 4 8 16; do
    EMBER_CPU_CAPABILITY=avx512 timeout 60 "$d/bench/resnet_train_bench" --steps="${STEPS:-20}" \
      --warmup="${WARMUP:-5}" --threads=$threads | grep RESULT
  done
  row cpubench ran - - - $(($(date +%s) - start))
fi

if [[ "$parts" == *" cpuprofile "* ]]; then
  echo "== CPU: where 2 threads wait (EMBER_PARALLEL_PROFILE) $(elapsed)"
  start=$(date +%s)
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
  row cpuprofile ran - - - $(($(date +%s) - start))
fi

if [[ "$parts" == *" ddpbench "* ]]; then
  echo "== CPU: bench/ddp_bench.sh scaling $(elapsed)"
  start=$(date +%s)
  for rep in $(seq "${REPS:-3}"); do
    NO_BUILD=1 with_binary ddp_bench timeout 300 bench/ddp_bench.sh scaling "${STEPS:-20}" "${WARMUP:-5}" 2>/dev/null |
      sed -n '/== scaling/,$p'
    echo "-- run $rep $(elapsed)"
  done
  row ddpbench ran - - - $(($(date +%s) - start))
fi

(cd "$out" && tar czf logs.tgz t_*.log 2>/dev/null && rm -f t_*.log)
ran_gpu=0
[[ "$parts" =~ \ (tests|memcheck|racecheck|mpitests)\  ]] && ran_gpu=1
echo "== summary $(elapsed)"
printf '%-44s %-30s %7s %7s %7s %6s\n' "part/suite" result passed failed skipped s
printf '%s\n' "${rows[@]}"
if ((bad > 0)); then
  echo "gpu_check: FAILED: $bad of ${#rows[@]} rows above did not pass $(elapsed)"
  exit 1
fi
if ((ran_gpu && gpu_passed == 0)); then
  echo "gpu_check: FAILED: every GPU suite skipped all its tests: nothing was tested on the GPU $(elapsed)"
  exit 1
fi
echo "gpu_check: passed $(elapsed)"
