// distributed/'s headers do not hand <mpi.h> to their users: only the backend's own header
// (backends/mpi/process_group_mpi.h) includes it, and code that wants raw MPI includes that (or
// <mpi.h>) itself. This file stops compiling if any header below pulls <mpi.h> in again. MPI's
// include path is on the command line anyway (Bazel passes dependencies' include paths on), so the
// check is on the macro mpi.h defines, not on whether the header can be found.
#include "distributed/collective_helpers.h"
#include "distributed/ddp/bucketing.h"
#include "distributed/ddp/distributed_data_parallel.h"
#include "distributed/diagnostics/debug.h"
#include "distributed/distributed.h"
#include "distributed/hooks/comm_hook.h"
#include "distributed/hooks/default_hooks.h"
#include "distributed/hooks/powersgd_hook.h"
#include "distributed/hooks/powersgd_state.h"
#include "distributed/process_group.h"
#include "distributed/diagnostics/trace.h"
#include "distributed/utils.h"
#include "distributed/work.h"
#include "examples/common/comm_hook_by_name.h"
#include "gtest/gtest.h"

#if defined(MPI_VERSION) || defined(OMPI_MPI_H)
#error "a distributed/ header users include pulls in <mpi.h>; include backends/mpi/process_group_mpi.h explicitly where raw MPI is needed"
#endif

namespace ember::distributed {
namespace {

// The check above is the test; this only gives the binary something to run.
TEST(NoMpiHeader, DistributedHeadersCompileWithoutMpi) { SUCCEED(); }

}  // namespace
}  // namespace ember::distributed
