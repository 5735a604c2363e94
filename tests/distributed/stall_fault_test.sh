#!/usr/bin/env bash
# Passes when, with rank 1 stalled before allreduce #3 (EMBER_FAULT_STALL_MODE=$2: sleep or
# sigstop), the job fails within the 3 s timeout plus 15 s and a surviving rank's stderr has one line
# naming the collective, "#3" and rank 1, as the stall inspector words it.
# usage: stall_fault_test.sh BINARY MODE
set -uo pipefail
binary="$1"
mode="$2"
session="$(mktemp -d /tmp/ember_mpi.XXXXXX)"
log="$session/stderr.log"
# A SIGSTOPped rank left behind would outlive the test. The job runs in a session of its own, so
# whatever is left of it is killed by session id -- never a concurrent test's processes (the sleep
# and sigstop tests run the same binary).
job=""
cleanup() {
  [[ -n "$job" ]] && pkill -KILL -s "$job" 2>/dev/null
  rm -rf "$session"
}
trap cleanup EXIT
export TMPDIR="$session" OMPI_MCA_orte_tmpdir_base="$session" OMPI_MCA_btl_vader_backing_directory="$session"
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export EMBER_FAULT_STALL_RANK=1 EMBER_FAULT_STALL_AT=3 EMBER_FAULT_STALL_MODE="$mode"
start=$(date +%s%N)
# No job control in a script, so setsid execs in place and $! is the new session's id.
setsid timeout --kill-after=5 60 \
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np 3 "$binary" 2> "$log" &
job=$!
wait "$job"
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$log" >&2
echo "stall_fault_test ($mode): mpirun exited with $rc after ${elapsed_ms} ms" >&2
fail() {
  echo "stall_fault_test ($mode): FAILED: $*" >&2
  exit 1
}
[[ $rc -eq 124 || $rc -eq 137 ]] && fail "the job hung (killed by timeout)"
[[ $rc -eq 0 ]] && fail "the job succeeded although rank 1 stalled"
(( elapsed_ms > (3 + 15) * 1000 )) && fail "took ${elapsed_ms} ms, more than the 3 s timeout + 15 s"
if [[ "$mode" == sigstop ]]; then
  expected="rank 1 did not respond, no answer within 2000 ms: pid "
else
  expected="rank 1 has not arrived: its last collective is allreduce #2 (SUM, float32 [16], 1 tensor, 16 elements), finished"
fi
line="$(grep -F "allreduce #3 (SUM, float32 [16], 1 tensor, 16 elements) on rank " "$log" |
        grep -F "timed out after 3000 ms" | grep -F "rank 1 did not arrive ($expected" | head -1)"
[[ -n "$line" ]] || fail "no line names allreduce #3 and says: rank 1 did not arrive ($expected..."
echo "stall_fault_test ($mode): PASSED: $line" >&2
exit 0
