#!/usr/bin/env bash
# Runs ember's tests and ends with one line "N passed, N failed, N skipped" (counting GoogleTest
# cases; a test binary that crashes or fails to build counts as one failure).
#
#   scripts/test.sh                   the plain tier: every suite once, in the default configuration
#   scripts/test.sh --all             every tier, as .ci/run does
#   scripts/test.sh PATTERN...        only these targets (e.g. //tests/distributed/...), same counting
#   scripts/test.sh --changed[=REV]   only the tests whose dependencies changed since REV (default
#                                     HEAD, i.e. the uncommitted change; untracked files count)
#
# The tiers, in the order of scripts/test_budgets.txt (--all runs them all; without it, plain and
# workspace):
#   plain       bazel test //...: every GoogleTest and mpirun suite (sh_test wrappers) but the
#               cluster ones; the op suites at each CPU capability level, levels this CPU lacks
#               skipping
#   workspace   examples/out_of_tree built as a Bazel workspace of its own on this checkout's ember
#               (its CPU kernels at one level, the highest this CPU runs) and run at 2 ranks, and
#               ember's visibility seen from there (tests/scripts/external_workspace_test.sh; each of
#               its checks counts as a test); only when no PATTERN or --changed narrows the run
#   cluster     the suites tagged "cluster": several hosts in network namespaces (root), each run
#               alone ("exclusive"), so they add their whole length to a tier's wall time; a run
#               narrowed by PATTERN or --changed has them in its plain tier instead
#   cuda_build  bazel build --config=cuda //...: the CUDA backend compiles and links (no GPU needed;
#               skipped without /usr/local/cuda/bin/nvcc); counts as one test
#   cudasim     the CUDA suites (tag "cuda") with the CUDA backend's kernels running on the CUDA
#               simulator (sim/cuda/)
#   asan        the single-process suites and the mpirun suites (one world size each) again under
#               AddressSanitizer + UBSan + LeakSanitizer
#   tsan        ThreadSanitizer on the suites whose threads are ember's own (tag "tsan": Work/Future,
#               DataLoader, stall inspector) and on the mpirun suites (one world size each), the CPU
#               kernels compiled at one level, the highest this CPU runs (it runs no per-level suite)
# The cluster suites run in no sanitizer tier, nor do tests tagged "sanitizer_slow": long trainings,
# Python drawing, or benchmark binaries whose C++ paths other suites already run under the
# sanitizers (each BUILD entry says why). scripts/test_budgets.txt names what each tier leaves out.
#
# Each tier's wall time is printed against its budget in scripts/test_budgets.txt, with a WARNING
# line for a tier over it. EMBER_PROFILE=DIR writes each tier's Bazel profile to
# DIR/<tier>.profile.gz (scripts/top_actions.py lists its most expensive actions). Compiled outputs
# are shared across checkouts through the disk cache of scripts/disk_cache.sh; tests always run
# (--nocache_test_results).
# Suppressions: only Open MPI's own libraries, in tests/sanitizers/{lsan,tsan}.supp (each says why).
# Installs missing Debian packages first (scripts/bootstrap.sh).
set -uo pipefail
cd "$(dirname "$0")/.."

all=0 changed="" patterns=()
for arg in "$@"; do
  case "$arg" in
    --all) all=1 ;;
    --changed) changed=HEAD ;;
    --changed=*) changed="${arg#--changed=}" ;;
    -h|--help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "scripts/test.sh: unknown flag ${arg} (see --help)" >&2; exit 2 ;;
    *) patterns+=("$arg") ;;
  esac
done

scripts/bootstrap.sh || { echo "0 passed, 1 failed"; exit 1; }
source scripts/disk_cache.sh
cache_flags=()
ember_disk_cache_flags cache_flags
common=(--keep_going --nocache_test_results ${cache_flags[@]+"${cache_flags[@]}"})

passed=0 failed=0 skipped=0
failures=()  # "tier: target: case, case" for the summary printed just before the closing line
timings=()   # "tier seconds budget"

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

# --profile=DIR/<tier>.profile.gz where EMBER_PROFILE=DIR is set, into the array named $2.
profile_flags() {
  local -n out="$2"
  out=()
  if [[ -n "${EMBER_PROFILE:-}" ]]; then mkdir -p "$EMBER_PROFILE" && out=(--profile="${EMBER_PROFILE}/$1.profile.gz"); fi
}

# Runs `bazel test` with the given flags and adds its per-case results to the totals.
run_suite() {
  local label="$1"; shift
  local log profile
  log=$(mktemp)
  profile_flags "$label" profile
  echo "== ${label}: bazel test $*" >&2
  bazel test "${common[@]}" ${profile[@]+"${profile[@]}"} "$@" 2>&1 | tee "$log" >&2
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

# The test targets whose dependencies changed since $1 (files in git's diff, and untracked ones).
# A changed BUILD file selects the tests depending on any target of its package; a change to Bazel's
# own configuration (WORKSPACE, .bazelrc, *.bzl, third_party/) selects every test. A file no rule
# names (a README) selects nothing.
changed_tests() {
  local rev="$1" files=() labels=() f dir pkg
  mapfile -t files < <({ git diff --name-only "$rev" -- && git ls-files --others --exclude-standard; } | sort -u)
  for f in "${files[@]+"${files[@]}"}"; do
    case "$f" in
      WORKSPACE|.bazelrc|*.bzl|third_party/*) echo "//..."; return ;;
      BUILD) labels+=("//:*"); continue ;;
      */BUILD) labels+=("//${f%/BUILD}:*"); continue ;;
    esac
    [[ -e "$f" ]] || continue  # deleted: whatever named it changed too
    dir="$f" pkg=""
    while [[ "$dir" == */* ]]; do  # the nearest folder with a BUILD file owns the file
      dir="${dir%/*}"
      if [[ -f "$dir/BUILD" ]]; then pkg="$dir"; break; fi
    done
    if [[ -n "$pkg" ]]; then labels+=("//${pkg}:${f#"$pkg"/}"); else labels+=("//:${f}"); fi
  done
  [[ ${#labels[@]} -gt 0 ]] || return 0
  # --keep_going: labels of files that no rule names are not targets, and are passed over.
  bazel query --keep_going --noshow_progress "kind('.*_test rule', rdeps(//..., set(${labels[*]})))" \
    2>/dev/null | sort -u
}

if [[ -n "$changed" ]]; then
  mapfile -t patterns < <(changed_tests "$changed")
  if [[ ${#patterns[@]} -eq 0 ]]; then
    echo "scripts/test.sh: no test depends on what changed since ${changed}" >&2
    echo "0 passed, 0 failed, 0 skipped"
    exit 0
  fi
  echo "scripts/test.sh: ${#patterns[@]} test target(s) depend on what changed since ${changed}" >&2
fi
targets=(//...) test_targets=(//tests/...)
if [[ ${#patterns[@]} -gt 0 ]]; then targets=("${patterns[@]}") test_targets=("${patterns[@]}"); fi

# The highest CPU capability level this CPU runs, by the check tensor/cpu/capability.cc makes
# (libgcc's x86-64-v3/v4; /proc/cpuinfo leaves out some of their features on some machines), for
# the builds that compile fewer levels (Note [Builds that compile fewer capability levels],
# tensor/cpu_kernels.bzl): the TSan tier and the workspace tier's ember compile that level only; on
# a CPU without x86-64-v4 the ASan tier leaves out the AVX-512 kernels, which could not run (and the
# tests that look at them).
cpu_level_probe="$(mktemp -d)"
top_level=$(printf '%s\n' '#include <stdio.h>' 'int main(void) {' '  __builtin_cpu_init();' \
  '  puts(__builtin_cpu_supports("x86-64-v4") ? "avx512" : __builtin_cpu_supports("x86-64-v3") ? "avx2" : "default");' \
  '  return 0;' '}' | gcc -x c -o "$cpu_level_probe/level" - && "$cpu_level_probe/level")
rm -rf "$cpu_level_probe"
if [[ "$top_level" != avx512 && "$top_level" != avx2 ]]; then top_level=default; fi
one_level=(--define=cpu_kernel_levels="$top_level")
asan_levels=() no_levels_tag=""
if [[ "$top_level" != avx512 ]]; then
  asan_levels=(--define=cpu_kernel_levels=default_avx2) no_levels_tag=",-avx512_kernels"
fi

# Runs one tier, "tier_<name>", timed against its budget $2.
run_tier() {
  local name="$1" budget="$2" start
  start=$(date +%s)
  "tier_${name}"
  local took=$(($(date +%s) - start))
  timings+=("${name} ${took} ${budget}")
  echo "== tier ${name}: ${took} s (budget ${budget} s)" >&2
}

# Narrowed runs keep the cluster suites they name here; the cluster tier then has nothing to run.
tier_plain() {
  local filter=()
  if [[ ${#patterns[@]} -eq 0 ]]; then filter=(--test_tag_filters=-cluster); fi
  run_suite plain ${filter[@]+"${filter[@]}"} "${targets[@]}"
}

tier_cluster() {
  if [[ ${#patterns[@]} -gt 0 ]]; then
    echo "== cluster: in the plain tier (the run is narrowed to ${patterns[*]})" >&2
    return
  fi
  run_suite cluster --build_tests_only --test_tag_filters=cluster "${test_targets[@]}"
}

# Bazel inside `bazel test` would need its own server and the whole source tree in the sandbox, so
# this test runs beside the suites; its "ok:" and "FAILED:" lines are its cases.
tier_workspace() {
  if [[ ${#patterns[@]} -gt 0 ]]; then
    echo "== workspace: skipped (the run is narrowed to ${patterns[*]})" >&2
    return
  fi
  local log
  log=$(mktemp)
  echo "== workspace: tests/scripts/external_workspace_test.sh" >&2
  tests/scripts/external_workspace_test.sh ${cache_flags[@]+"${cache_flags[@]}"} "${one_level[@]}" 2>&1 |
    tee "$log" >&2
  local rc=${PIPESTATUS[0]} p f
  p=$(grep -c '^  ok: ' "$log") f=$(grep -c '^  FAILED: ' "$log")
  if [[ "$rc" -ne 0 && "$f" -eq 0 ]]; then f=1; fi
  if [[ "$f" -gt 0 ]]; then
    failures+=("workspace: $(grep '^  FAILED: ' "$log" | sed 's/^  FAILED: //' | paste -sd ';' -)")
  fi
  passed=$((passed + p)) failed=$((failed + f))
  rm -f "$log"
}

tier_cuda_build() {
  if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
    echo "== cuda_build: no CUDA toolkit at /usr/local/cuda: skipped" >&2
    skipped=$((skipped + 1))
    return
  fi
  local profile
  profile_flags cuda_build profile
  echo "== cuda_build: bazel build --config=cuda ${targets[*]} (compile and link only)" >&2
  if bazel build --keep_going ${cache_flags[@]+"${cache_flags[@]}"} ${profile[@]+"${profile[@]}"} --config=cuda \
      "${targets[@]}" >&2; then
    passed=$((passed + 1))
  else
    failures+=("cuda_build: bazel build --config=cuda failed")
    failed=$((failed + 1))
  fi
}

# --build_tests_only: the tag filter chooses what runs, not what builds; without it every target
# under the patterns would be built (and relinked against the simulated backend) for nothing.
tier_cudasim() { run_suite cudasim --config=cudasim --build_tests_only --test_tag_filters=cuda "${test_targets[@]}"; }

supp="$(pwd)/tests/sanitizers"
# Open MPI unloads its components at finalize; kept loaded, their frames in reports have names.
# EMBER_TEST_WORLD_SIZES: the sanitizer tiers run one world size of the scripts that loop over
# several (tests/examples/ddp_from_scratch_test.sh, ddp_walkthrough_test.sh), as they take one per
# mpirun suite.
mpi_env=(--test_env=OMPI_MCA_mca_base_component_disable_dlclose=1 --test_env=EMBER_TEST_WORLD_SIZES=2)

tier_asan() {
  run_suite asan --config=asan --build_tests_only "${mpi_env[@]}" ${asan_levels[@]+"${asan_levels[@]}"} \
    --test_env=LSAN_OPTIONS=suppressions="$supp/lsan.supp":print_suppressions=0 \
    --test_tag_filters=-mpi_extra_ranks,-sanitizer_slow,-benchmark,-cluster"$no_levels_tag" "${test_targets[@]}"
}

tier_tsan() {
  run_suite tsan --config=tsan --build_tests_only "${mpi_env[@]}" "${one_level[@]}" \
    --test_env=TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions="$supp/tsan.supp" \
    --test_tag_filters=tsan,mpi,-mpi_extra_ranks,-sanitizer_slow,-benchmark,-cluster "${test_targets[@]}"
}

# The tiers, their order and budgets are scripts/test_budgets.txt's rows ("name seconds runs"):
# without --all, those whose runs is "always"; each is a function tier_<name> here.
mapfile -t tiers < <(awk -v all="$all" '!/^#/ && NF && (all == 1 || $3 == "always") { print $1, $2 }' \
  scripts/test_budgets.txt)
for row in "${tiers[@]}"; do
  read -r name budget <<<"$row"
  if ! declare -F "tier_${name}" >/dev/null; then
    failures+=("scripts/test_budgets.txt names a tier ${name} that scripts/test.sh does not define")
    failed=$((failed + 1))
    continue
  fi
  run_tier "$name" "$budget"
done
ember_prune_disk_cache

# CI keeps only the tail of the output: the tiers' times, then what failed, right above the closing line.
total=0
for row in "${timings[@]}"; do
  read -r name took budget <<<"$row"
  total=$((total + took))
  printf 'tier %-10s %5d s   budget %5s s\n' "$name" "$took" "$budget"
  if [[ "$took" -gt "$budget" ]]; then
    echo "WARNING: tier ${name} took ${took} s, over its budget of ${budget} s (scripts/test_budgets.txt)"
  fi
done
printf 'tier %-10s %5d s\n' total "$total"
for f in "${failures[@]+"${failures[@]}"}"; do echo "FAILED ${f}"; done
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[[ "$failed" -eq 0 ]]
