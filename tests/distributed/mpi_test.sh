#!/usr/bin/env bash
# Runs a GoogleTest binary under mpirun with N ranks (usage: mpi_test.sh N BINARY [ARGS...]).
# Rank 0 writes the JUnit XML to $XML_OUTPUT_FILE; every rank prints its own failures, tagged with
# its rank. The test fails if any rank fails, and `timeout` turns a hang into a failure.
set -uo pipefail
np="$1"
binary="$2"
shift 2
# OpenMPI refuses to run as root without these (CI runs as root in a container).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Bazel runs tests in PID namespaces, so two concurrent mpiruns can both be pid 2; OpenMPI names its
# session directory and shared-memory segments after the pid, so each run gets private ones. Short
# paths, because OpenMPI puts unix sockets there (108-byte limit) -- not Bazel's deep TEST_TMPDIR.
session="$(mktemp -d /tmp/ember_mpi.XXXXXX)"
trap 'rm -rf "$session"' EXIT
export TMPDIR="$session"
export OMPI_MCA_orte_tmpdir_base="$session"
export OMPI_MCA_btl_vader_backing_directory="$session"
export HOME="${HOME:-$session}"
# Shared memory only: no network interfaces needed, and no warnings about them.
export OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none
limit="${EMBER_MPI_TEST_TIMEOUT:-280}"
timeout --signal=TERM --kill-after=10 "$limit" \
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" "$binary" "$@"
rc=$?
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
  echo "mpi_test.sh: '$binary' with $np ranks did not finish within ${limit}s (killed)" >&2
fi
exit $rc
