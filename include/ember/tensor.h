// ember's tensor layer: Tensor, dtypes and devices, factories (zeros, randn, from_vector, ...),
// the operations, generators and formatting, errors (ember::Error), intra-op threads
// (set_num_threads) and the CPU capability in use (cpu_capability()). Part of <ember/ember.h>.
#pragma once

#include "tensor/all.h"
#include "tensor/cpu/capability.h"
#include "tensor/error.h"
#include "tensor/parallel.h"
