// ember::distributed in one include: process groups (init_process_group, ProcessGroup, Work, Future),
// the MPI backend (registered as "mpi"; init_mpi/finalize_mpi), debug levels, stall reports, and the collective
// helpers DDP's constructor uses, Join. Not <mpi.h>: code that needs raw MPI or ProcessGroupMPI includes
// distributed/backends/mpi/process_group_mpi.h itself (tests/distributed/no_mpi_header_test.cc).
#pragma once

#include "distributed/backends/mpi/mpi_backend.h"
#include "distributed/collective_helpers.h"
#include "distributed/diagnostics/debug.h"
#include "distributed/join.h"
#include "distributed/process_group.h"
#include "distributed/process_group_wrapper.h"
#include "distributed/diagnostics/stall_inspector.h"
#include "distributed/utils.h"
#include "distributed/work.h"
