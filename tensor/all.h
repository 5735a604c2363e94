// Umbrella header for the tensor library: Tensor, factories, ops, fmt support.
#pragma once

#include "tensor/device_backend.h"
#include "tensor/factories.h"
#include "tensor/format.h"
#include "tensor/fused_sgd.h"
#include "tensor/generator.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
