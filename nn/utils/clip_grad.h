// torch.nn.utils.clip_grad_norm_: scales the parameters' gradients in place so that their total
// norm is at most max_norm. Under DDP it runs after backward, on gradients the Reducer has
// already averaged -- the same on every rank -- so each rank's local clip is the global one.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ember::nn::utils {

struct ClipGradNormOptions {
  double norm_type = 2.0;           // p of the p-norm; infinity for the largest |g|
  bool error_if_nonfinite = false;  // throw when the total norm is nan or inf
};

// PyTorch's rule: total = the norm_type-norm of the gradients' norm_type-norms (parameters without
// a gradient are left out); every gradient is multiplied by min(1, max_norm / (total + 1e-6)).
// Returns total, a 0-dim tensor of the gradients' dtype (0 when no parameter has a gradient).
// Throws for a sparse gradient, gradients of different dtypes or devices, or max_norm < 0.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, const ClipGradNormOptions& options = {});

}  // namespace ember::nn::utils
