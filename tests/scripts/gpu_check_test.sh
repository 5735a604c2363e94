#!/usr/bin/env bash
# scripts/gpu_check.sh without a GPU: where no device or too old a driver is visible it exits 1
# with one line saying why, and it cannot pass having tested nothing. A fake nvidia-smi stands in
# for the driver and a tiny bundle of fake gtest suites (shell scripts printing gtest's summary
# lines, run under a fake mpirun and a fake compute-sanitizer found in a fake pip site folder)
# stands in for scripts/gpu_bundle.sh's.
# usage: gpu_check_test.sh GPU_CHECK_SH
source "$(dirname "$0")/../examples/lib.sh"
script="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
fake="$session/fake"
site="$fake/site"
mkdir -p "$fake/bin" "$fake/minimal" "$fake/bundle/tests" "$fake/bundle/ompi/bin" \
  "$site/nvidia/cu13/lib" "$site/nvidia/nccl/lib" "$site/nvidia/cuda_sanitizer_api/compute-sanitizer"

# FAKE_SMI: ok, fail (no driver loaded) or nogpu; FAKE_CUDA: the header's CUDA version.
cat >"$fake/bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
if [[ "${FAKE_SMI:-ok}" == fail ]]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
  exit 9
fi
case "${1:-}" in
  -L) [[ "${FAKE_SMI:-ok}" == nogpu ]] || echo "GPU 0: NVIDIA H200 (UUID: GPU-0)" ;;
  --query-gpu=driver_version) echo "${FAKE_DRIVER:-580.65.06}" ;;
  --query-gpu=*) echo "NVIDIA H200, ${FAKE_DRIVER:-580.65.06}, 143771 MiB" ;;
  *) echo "| NVIDIA-SMI ${FAKE_DRIVER:-580.65.06}  Driver Version: ${FAKE_DRIVER:-580.65.06}  CUDA Version: ${FAKE_CUDA:-13.0} |" ;;
esac
EOF
# An empty loader cache, and a Python whose site folder holds pip's CUDA.
printf '#!/usr/bin/env bash\necho "0 libs found in cache"\n' >"$fake/bin/ldconfig"
printf '#!/usr/bin/env bash\necho %q\n' "$site" >"$fake/bin/python"
for l in cu13/lib/libcudart.so.13 cu13/lib/libcublas.so.13 cu13/lib/libcublasLt.so.13 nccl/lib/libnccl.so.2; do
  : >"$site/nvidia/$l"
done
cat >"$site/nvidia/cuda_sanitizer_api/compute-sanitizer/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
while [[ "$1" == --* ]]; do shift 2; done
echo "fake compute-sanitizer" >&2
exec "$@"
EOF
# FAKE_SUITE: pass, skip, fail or hang.
cat >"$fake/bundle/tests/fake_gpu_test" <<'EOF'
#!/usr/bin/env bash
echo "[==========] 2 tests from 1 test suite ran. (1 ms total)"
case "${FAKE_SUITE:-pass}" in
  pass) echo "[  PASSED  ] 2 tests." ;;
  skip) printf '[  PASSED  ] 0 tests.\n[  SKIPPED ] 2 tests, listed below:\n' ;;
  fail) printf '[  PASSED  ] 1 test.\n[  FAILED  ] 1 test, listed below:\n'; exit 1 ;;
  hang) exec sleep 60 ;;
esac
EOF
cp "$fake/bundle/tests/fake_gpu_test" "$fake/bundle/tests/fake_nccl_test_bin"
cat >"$fake/bundle/ompi/bin/mpirun" <<'EOF'
#!/usr/bin/env bash
# The ranks one after the other, their outputs together.
np=1
while [[ "$1" == -* ]]; do [[ "$1" == -np ]] && np="$2"; shift 2; done
for _ in $(seq "$np"); do "$@" || exit; done
EOF
echo 13.0 >"$fake/bundle/cuda_version"
chmod +x "$fake"/bin/* "$fake"/bundle/tests/* "$fake"/bundle/ompi/bin/* \
  "$site/nvidia/cuda_sanitizer_api/compute-sanitizer/compute-sanitizer"
tar -C "$fake/bundle" -cf - . | xz -1 >"$fake/bundle.tar.xz"
for tool in dirname mkdir date tee; do ln -s "$(command -v "$tool")" "$fake/minimal/$tool"; done

# check_run NAME [VAR=VALUE ...] [-- PART ...]: gpu_check.sh with the fakes, its logs in
# $work/NAME.logs; no loader cache and no toolkit at CUDA_PATH, so the libraries it finds are the
# fake pip site's.
check_run() {
  local name="$1" vars=()
  shift
  while [[ $# -gt 0 && "$1" != -- ]]; do vars+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  run "$name" 60 env PATH="$fake/bin:$PATH" PYTHON="$fake/bin/python" CUDA_PATH="$session/no_cuda" \
    BUNDLE="$fake/bundle.tar.xz" BUNDLE_DIR="$session/unpacked" OUT="$work/$name.logs" \
    ${vars[@]+"${vars[@]}"} "$BASH" "$script" "$@"
}

# expect_one_line NAME PATTERN: exit 1 and nothing printed but one line on stderr, matching
# PATTERN, which log.txt holds too.
expect_one_line() {
  local name="$1" pattern="$2"
  [[ $rc -eq 1 ]]
  check "$name exits 1 (exit $rc)" $?
  [[ ! -s "$work/$name.out" && $(wc -l <"$work/$name.err") -eq 1 ]]
  check "$name prints one line, on stderr" $?
  expect_line "$name" "^gpu_check: $pattern"
  cmp -s "$work/$name.err" "$work/$name.logs/log.txt"
  check "$name's line is $name.logs/log.txt" $?
}

# expect_failure NAME: a clean exit 1 (not a crash, nor the time limit).
expect_failure() {
  [[ $rc -eq 1 ]]
  check "$1 exits 1 (exit $rc)" $?
}

# expect_row NAME PATTERN: its output (the summary table) has a line matching PATTERN.
expect_row() {
  grep -E -q -- "$2" "$work/$1.out"
  check "$1's summary has /$2/" $?
}

run no_driver 30 env PATH="$fake/minimal" OUT="$work/no_driver.logs" "$BASH" "$script"
expect_one_line no_driver "no CUDA device visible: nvidia-smi is not on PATH"
check_run driver_fails FAKE_SMI=fail
expect_one_line driver_fails "no CUDA device visible: nvidia-smi failed: NVIDIA-SMI has failed"
check_run no_gpu FAKE_SMI=nogpu
expect_one_line no_gpu "no CUDA device visible: nvidia-smi lists no GPU"
check_run no_bundle BUNDLE="$session/none.tar.xz"
expect_one_line no_bundle "no bundle at .*none.tar.xz"
check_run old_driver FAKE_CUDA=12.4 FAKE_DRIVER=550.54.15
expect_one_line old_driver "driver 550.54.15 supports CUDA 12.4, older than the CUDA 13.0 the bundle was built with"
check_run old_driver_no_header FAKE_CUDA=N/A FAKE_DRIVER=550.54.15
expect_one_line old_driver_no_header "driver 550.54.15 is older than 580.65.06"

table='^part/suite +result +passed +failed +skipped +s$'
check_run passes FAKE_SUITE=pass -- tests memcheck racecheck mpitests
expect_success passes
expect_row passes "$table"
expect_row passes '^fake_gpu_test +ok +2 +0 +0 '
expect_row passes '^fake_gpu_test memcheck +ok +2 +0 +0 '
expect_row passes '^fake_gpu_test racecheck +ok +2 +0 +0 '
expect_row passes '^fake_nccl_test_bin np2 +ok +4 +0 +0 '
expect_row passes "^   libcublasLt\.so\.13: $site/nvidia/cu13/lib/libcublasLt\.so\.13\$"
expect_row passes "^   libnccl\.so\.2: $site/nvidia/nccl/lib/libnccl\.so\.2\$"
# pip's compute-sanitizer, unless one is on PATH.
san="$site/nvidia/cuda_sanitizer_api/compute-sanitizer/compute-sanitizer"
command -v compute-sanitizer >/dev/null && san=$(command -v compute-sanitizer)
expect_row passes "^   $san\$"
expect_row passes '^gpu_check: passed \[\+[0-9]+s\]$'
[[ -f "$work/passes.logs/logs.tgz" ]] && cmp -s "$work/passes.out" "$work/passes.logs/log.txt"
check "passes leaves its output in OUT/log.txt and the suites' logs in OUT/logs.tgz" $?

check_run all_skipped FAKE_SUITE=skip -- tests memcheck
expect_failure all_skipped
expect_row all_skipped '^fake_gpu_test +FAILED \(all skipped\) +0 +0 +2 '
expect_row all_skipped '^gpu_check: FAILED: 2 of 2 rows above did not pass'
# Under mpirun a suite may skip (NCCL needs a GPU per rank), but not every one.
check_run mpi_skipped FAKE_SUITE=skip -- mpitests
expect_failure mpi_skipped
expect_row mpi_skipped '^fake_nccl_test_bin np1 +skipped \(all\) +0 +0 +2 '
expect_row mpi_skipped '^gpu_check: FAILED: every GPU suite skipped all its tests'

check_run fails FAKE_SUITE=fail -- tests
expect_failure fails
expect_row fails '^fake_gpu_test +FAILED \(exit 1\) +1 +1 +0 '
check_run hangs FAKE_SUITE=hang BUDGET_tests=2 -- tests
expect_failure hangs
expect_row hangs '^fake_gpu_test +timeout \([12]s\) '
finish
