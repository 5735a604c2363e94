// ember::distributed in one include: process groups (init_process_group, ProcessGroup, Work, Future),
// the MPI backend, debug levels, and the collective helpers DDP's constructor uses.
#pragma once

#include "distributed/backends/mpi/process_group_mpi.h"
#include "distributed/collective_helpers.h"
#include "distributed/debug.h"
#include "distributed/process_group.h"
#include "distributed/utils.h"
#include "distributed/work.h"
