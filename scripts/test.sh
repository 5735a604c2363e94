#!/usr/bin/env bash
# Runs every ember test and ends with one line "N passed, N failed, N skipped" (counting GoogleTest
# cases; a test binary that crashes or fails to build counts as one failure).
#   1. bazel test //...            all GoogleTest suites, and the mpirun suites (sh_test wrappers)
#   2. bazel test --config=cudasim the CUDA suites (tag "cuda") with the CUDA backend's kernels
#                                  running on the CUDA simulator (tensor/cuda/sim/): no GPU needed
#   3. bazel test --config=asan    the single-process suites and the mpirun suites (one world size
#                                  each) again under AddressSanitizer + UBSan + LeakSanitizer
#   4. bazel test --config=tsan    ThreadSanitizer on the suites whose threads are ember's own
#                                  (tag "tsan": Work/Future, DataLoader, stall inspector) and on
#                                  the mpirun suites (one world size each)
# The cluster test (tag "cluster": network namespaces, scripts/cluster.sh) runs in step 1 only, as
# do tests tagged "sanitizer_slow": long trainings, Python drawing, or benchmark binaries whose C++
# paths other suites already run under the sanitizers (each BUILD entry says why).
# Suppressions: only Open MPI's own libraries, in tests/sanitizers/{lsan,tsan}.supp (each says why).
# Installs missing Debian packages first (scripts/bootstrap.sh). EMBER_SKIP_CUDASIM=1 skips step 2,
# EMBER_SKIP_ASAN=1 step 3, EMBER_SKIP_TSAN=1 step 4.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh || { echo "0 passed, 1 failed"; exit 1; }

passed=0 failed=0 skipped=0
failures=()  # "target: case, case" for the summary printed just before the closing line

# Counts the test cases in one JUnit XML file written by GoogleTest (or by Bazel for non-gtest tests).
count_xml() {
  awk '
    /<testcase /          { open = 1; bad = 0; skip = ($0 ~ /result="skipped"/); if ($0 ~ /\/>[[:space:]]*$/) close_case() }
    /<failure|<error/     { bad = 1 }
    /<skipped/            { skip = 1 }
    /<\/testcase>/        { close_case() }
    function close_case() { if (!open) return; if (bad) f++; else if (skip) s++; else p++; open = 0 }
    END { printf "%d %d %d\n", p, f, s }
  ' "$1"
}

# The names of the failing test cases in one JUnit XML file, comma-separated.
failed_cases() {
  awk '
    /<testcase / { match($0, /name="[^"]*"/); name = substr($0, RSTART + 6, RLENGTH - 7);
                   match($0, /classname="[^"]*"/); cls = substr($0, RSTART + 11, RLENGTH - 12) }
    /<failure|<error/ { if (!(cls "." name in seen)) { seen[cls "." name] = 1; out = out (out ? ", " : "") cls "." name } }
    END { print out }
  ' "$1"
}

# Runs `bazel test` with the given flags and adds its per-case results to the totals.
run_suite() {
  local label="$1"; shift
  local log
  log=$(mktemp)
  echo "== ${label}: bazel test $*" >&2
  bazel test --keep_going "$@" 2>&1 | tee "$log" >&2
  local testlogs
  testlogs=$(readlink -f bazel-testlogs)  # the symlink follows the last command's configuration
  while read -r target status; do
    local xml="${testlogs}/$(echo "${target#//}" | tr ':' '/')/test.xml"
    if [[ "$status" == PASSED || "$status" == FAILED || "$status" == FLAKY ]] && [[ -f "$xml" ]]; then
      read -r p f s < <(count_xml "$xml")
      if [[ "$status" != PASSED && "$f" -eq 0 ]]; then f=1; fi  # crashed before writing a failure
      if [[ "$f" -gt 0 ]]; then failures+=("${label}: ${target} ${status}: $(failed_cases "$xml")"); fi
      if [[ $((p + f + s)) -eq 0 ]]; then
        if [[ "$status" == PASSED ]]; then p=1; else f=1; fi
      fi
      passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    else
      echo "   ${target}: ${status}" >&2
      failures+=("${label}: ${target} ${status}")
      failed=$((failed + 1))
    fi
  done < <(awk '/^\/\/[^ ]+ +/ {
      s = "";
      if ($0 ~ /FAILED TO BUILD/) s = "FAILED_TO_BUILD"; else if ($0 ~ /NO STATUS/) s = "NO_STATUS";
      else if ($0 ~ /PASSED/) s = "PASSED"; else if ($0 ~ /FLAKY/) s = "FLAKY";
      else if ($0 ~ /TIMEOUT/) s = "TIMEOUT"; else if ($0 ~ /FAILED/) s = "FAILED";
      if (s != "") print $1, s }' "$log")
  if grep -qE '^(ERROR|FAILED): Build did NOT complete' "$log" && ! grep -qE '^//' "$log"; then
    echo "   ${label}: the build failed before any test ran" >&2
    failures+=("${label}: the build failed before any test ran")
    failed=$((failed + 1))
  fi
  rm -f "$log"
}

run_suite "all tests" //...
if [[ "${EMBER_SKIP_CUDASIM:-0}" != "1" ]]; then
  run_suite "cuda simulator" --config=cudasim --test_tag_filters=cuda //tests/...
fi
supp="$(pwd)/tests/sanitizers"
# On a CPU without x86-64-v4 the sanitizer builds leave out the AVX-512 kernels, which could not run
# (Note [Sanitizer builds compile the levels the CPU runs], tensor/cpu_kernels.bzl).
levels=() no_levels_tag=""
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo) "
for f in avx512f avx512bw avx512cd avx512dq avx512vl; do
  if [[ "$cpu_flags" != *" $f "* ]]; then
    levels=(--define=avx512_kernels=false) no_levels_tag=",-avx512_kernels"
  fi
done
# Open MPI unloads its components at finalize; kept loaded, their frames in reports have names.
mpi_env=(--test_env=OMPI_MCA_mca_base_component_disable_dlclose=1)
if [[ "${EMBER_SKIP_ASAN:-0}" != "1" ]]; then
  run_suite "asan" --config=asan --build_tests_only "${mpi_env[@]}" ${levels[@]+"${levels[@]}"} \
    --test_env=LSAN_OPTIONS=suppressions="$supp/lsan.supp":print_suppressions=0 \
    --test_tag_filters=-mpi_extra_ranks,-sanitizer_slow,-benchmark,-cluster"$no_levels_tag" //tests/...
fi
if [[ "${EMBER_SKIP_TSAN:-0}" != "1" ]]; then
  run_suite "tsan" --config=tsan --build_tests_only "${mpi_env[@]}" ${levels[@]+"${levels[@]}"} \
    --test_env=TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions="$supp/tsan.supp" \
    --test_tag_filters=tsan,mpi,-mpi_extra_ranks,-sanitizer_slow,-benchmark,-cluster"$no_levels_tag" //tests/...
fi

# CI keeps only the tail of the output: name what failed right above the closing line.
for f in "${failures[@]+"${failures[@]}"}"; do echo "FAILED ${f}"; done
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[[ "$failed" -eq 0 ]]
