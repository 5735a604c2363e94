// ember's tensor layer: Tensor, dtypes and devices, factories (zeros, randn, from_vector, ...),
// the operations, generators and formatting. Part of <ember/ember.h>.
#pragma once

#include "tensor/all.h"
