// One step of torch.optim.SGD over a list of dense parameters in a single pass over each, as
// PyTorch's _fused_sgd_ (the op behind SGD(fused=True)): optim::SGD's step for dense parameters.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ember {

// One parameter's tensors. momentum_buffer is undefined when momentum is 0; first_step sets it to
// the (decayed) gradient instead of blending, as SGD's first step clones the gradient into it.
struct SgdParameter {
  Tensor param, grad, momentum_buffer;
  bool first_step = false;
};

// torch.optim.SGD's settings for one fused_sgd_ call, the same for every parameter in it (one
// parameter group's).
struct SgdHyperparameters {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};

// For each parameter, element by element (torch.optim.SGD's single-tensor rule):
//   g = grad + weight_decay * param                 (when weight_decay != 0)
//   buf = first_step ? g : momentum * buf + (1 - dampening) * g, g = nesterov ? g + momentum * buf
//                                                                  : buf   (when momentum != 0)
//   param = param - lr * g
// with the same roundings as those tensor ops, so the result has their bits (Note [Fused SGD]).
// Every tensor dense, contiguous, of one floating dtype (float32 or float64), shape and device, and
// no two of a parameter's tensors sharing storage; param and momentum_buffer are updated in place
// (their versions bump once). Not differentiable: call it with grad mode off, as SGD::step does.
void fused_sgd_(const std::vector<SgdParameter>& params, const SgdHyperparameters& h);

// Whether fused_sgd_ takes these tensors (an undefined momentum_buffer: none yet, or no momentum),
// for a caller that falls back to tensor ops where it does not.
bool fused_sgd_takes(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer);

}  // namespace ember
