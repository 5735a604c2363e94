#include "distributed/backends/mpi/mpi_backend.h"

#include <mpi.h>

#include "tensor/error.h"

namespace ember::distributed {
namespace {

// Calls on an uninitialised MPI abort the process; a thrown error says what to do instead.
void check_initialized(const char* op) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  EMBER_CHECK(initialized && !finalized, op, ": MPI is not running (call init_mpi or init_process_group first)");
}

}  // namespace

void init_mpi(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  EMBER_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS,
              "init_mpi: MPI_Init_thread failed");
}

void finalize_mpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

int mpi_world_rank() {
  check_initialized("mpi_world_rank");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

bool mpi_any_rank(bool flag) {
  check_initialized("mpi_any_rank");
  int mine = flag ? 1 : 0, any = 0;
  EMBER_CHECK(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS,
              "mpi_any_rank: MPI_Allreduce over MPI_COMM_WORLD failed");
  return any != 0;
}

}  // namespace ember::distributed
