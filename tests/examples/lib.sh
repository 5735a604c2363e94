# Helpers for the trainer tests (sourced): a private Open MPI session, a run that records exit code,
# stderr and seconds, and checks that print what they compared. Each test script sets `fail` on
# a failed check and ends with `finish`.
set -uo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Short private paths: Open MPI names sockets and shared memory after them (tests/distributed/mpi_test.sh).
session="$(mktemp -d /tmp/ember_ex.XXXXXX)"
trap 'rm -rf "$session"' EXIT
export TMPDIR="$session" OMPI_MCA_orte_tmpdir_base="$session" OMPI_MCA_btl_vader_backing_directory="$session"
export HOME="${HOME:-$session}"
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
work="$session/work"
mkdir -p "$work"
fail=0

# run NAME LIMIT_S CMD...: runs CMD in $work under a hard time limit; sets rc, secs, and the files
# $work/NAME.out and $work/NAME.err.
run() {
  local name="$1" limit="$2"
  shift 2
  local start end
  start=$(date +%s.%N)
  (cd "$work" && timeout --signal=KILL "$limit" "$@" >"$work/$name.out" 2>"$work/$name.err")
  rc=$?
  end=$(date +%s.%N)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  echo "[$name] exit $rc after ${secs}s: $*" >&2
}

check() {  # check CONDITION_TEXT STATUS
  if [[ "$2" -eq 0 ]]; then echo "  ok: $1" >&2; else echo "  FAILED: $1" >&2; fail=1; fi
}

# expect_error NAME PATTERN: the run failed cleanly (non-zero, not killed by a signal or the time
# limit) and its stderr has a line matching PATTERN, which is printed.
expect_error() {
  local name="$1" pattern="$2"
  [[ $rc -ne 0 && $rc -lt 124 ]]
  check "$name exits non-zero without a crash or hang (exit $rc)" $?
  expect_line "$name" "$pattern"
}

# expect_line NAME PATTERN: the run's stderr has a line matching PATTERN, which is printed.
expect_line() {
  local name="$1" pattern="$2"
  local line
  line=$(grep -E -m1 -- "$pattern" "$work/$name.err")
  [[ -n "$line" ]]
  check "$name says /$pattern/" $?
  echo "  message: $line" >&2
  [[ -n "$line" ]] || sed 's/^/  stderr: /' "$work/$name.err" | tail -20 >&2
}

expect_success() {
  [[ $rc -eq 0 ]]
  check "$1 succeeds" $?
  [[ $rc -eq 0 ]] || sed 's/^/  stderr: /' "$work/$1.err" | tail -20 >&2
}

# same_files A B: byte-identical (checkpoints hold their own checksum, so equal bytes = equal state).
same_files() {
  cmp "$work/$1" "$work/$2" >/dev/null
  check "$1 and $2 are bit-identical" $?
}

# expect_my_trainer_trained NAME CHECKPOINT WHAT: examples/out_of_tree's my_trainer, run as NAME,
# succeeded, printed RESULT with world=2 and its loss fallen tenfold, and wrote CHECKPOINT.
expect_my_trainer_trained() {
  local name="$1" checkpoint="$2" what="$3" result
  expect_success "$name"
  result=$(grep '^RESULT' "$work/$name.out" || true)
  echo "  $result" >&2
  python3 - "$result" <<'PY'
import sys
f = dict(kv.split("=", 1) for kv in sys.argv[1].split()[1:])
assert f["world"] == "2", f
assert float(f["final_loss"]) < 0.1 * float(f["first_loss"]), f
PY
  check "$what trains at 2 ranks: its loss falls tenfold" $?
  [[ -s "$checkpoint" ]]
  check "$what wrote its checkpoint" $?
}

finish() {
  if [[ $fail -ne 0 ]]; then echo "FAILED" >&2; exit 1; fi
  echo "PASSED" >&2
  exit 0
}
