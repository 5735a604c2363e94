// Small tensor helpers shared by the backends and the collective helpers: flattening a list of
// tensors into one contiguous buffer and back (PyTorch's flatten/unflatten_dense_tensors).
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ember::distributed {

// One contiguous 1-d tensor holding every tensor's elements in order; all must share dtype and device.
Tensor flatten_dense_tensors(const std::vector<Tensor>& tensors);
// Views of `flat` shaped like `like` (no copy).
std::vector<Tensor> unflatten_dense_tensors(const Tensor& flat, const std::vector<Tensor>& like);
// Copies each view of `flat` back into the matching tensor of `dst` (in place).
void copy_from_flat(const Tensor& flat, const std::vector<Tensor>& dst);
// Sum of numel; throws naming `op` when tensors differ in dtype or device.
int64_t check_same_dtype_device(const std::vector<Tensor>& tensors, const char* op);

}  // namespace ember::distributed
