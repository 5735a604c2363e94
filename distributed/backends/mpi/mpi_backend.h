// The MPI backend as programs and tests under mpirun see it, without <mpi.h>: the world group comes
// from init_process_group("mpi") (linking this library registers the backend); these functions
// cover what happens around the group (MPI's start and end, the world's rank, a job-wide flag).
// Code that needs raw MPI (communicators, MPI_Abort) includes process_group_mpi.h or <mpi.h> itself.
#pragma once

namespace ember::distributed {

// MPI_Init_thread(MPI_THREAD_MULTIPLE, the level ProcessGroupMPI needs) with main's arguments, unless
// MPI is already initialised. Optional: init_process_group("mpi") initialises MPI itself (and
// finalises it at exit); call this first where MPI is needed before any group exists.
void init_mpi(int* argc, char*** argv);
// MPI_Finalize, unless MPI was never initialised or is already finalised.
void finalize_mpi();
// This process's rank in MPI_COMM_WORLD (MPI must be initialised).
int mpi_world_rank();
// Whether `flag` is true on any rank: a blocking MAX-allreduce over MPI_COMM_WORLD itself, not over a
// process group, so that test harnesses still agree after a group broke (timed out).
bool mpi_any_rank(bool flag);

}  // namespace ember::distributed
