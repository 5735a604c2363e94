// How ember's dtypes and ReduceOps map onto MPI datatypes and operations, including float16 and
// bfloat16, which MPI lacks: see Note [Half precision over MPI] in mpi_types.cc.
#pragma once

#include <mpi.h>

#include <string>

#include "distributed/process_group.h"
#include "tensor/error.h"
#include "tensor/dtype.h"

namespace ember::distributed::mpi {

// Creates the custom datatypes and ops once, and selects libnbc's ring MPI_Iallreduce (Note
// [Allreduce algorithm] in mpi_types.cc); call after MPI is initialised.
void init_mpi_types();
// Frees them (before MPI_Finalize).
void free_mpi_types();
MPI_Datatype mpi_datatype(ScalarType dtype);
// AVG maps to SUM (the caller divides afterwards). Throws for ops a dtype does not support.
MPI_Op mpi_op(ReduceOp op, ScalarType dtype, const char* collective);
// The text of an MPI error code.
std::string mpi_error_string(int code);

}  // namespace ember::distributed::mpi

// Throws with the MPI call and its error text; the worker prefixes the collective's description.
#define EMBER_MPI_CALL(call)                                                              \
  do {                                                                                    \
    int rc_ = (call);                                                                     \
    if (rc_ != MPI_SUCCESS) {                                                             \
      EMBER_THROW(#call " failed: ", ::ember::distributed::mpi::mpi_error_string(rc_)); \
    }                                                                                     \
  } while (0)

