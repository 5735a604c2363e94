// gradcheck: compares analytic gradients (backward, one output element at a time) with central
// finite differences, in float64. Inputs may be views (non-contiguous); they are perturbed in place.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ember::autograd {

// gradcheck()'s verdict, true when every analytic gradient entry matched the numeric one; otherwise
// `message` names the first entry that did not.
struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatching entry, when !ok
  explicit operator bool() const { return ok; }
};

// gradcheck()'s step and tolerances (torch.autograd.gradcheck's defaults): an entry matches when
// |analytic - numeric| <= atol + rtol * |numeric|, numeric from central differences of step eps.
struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

// `fn` maps the inputs (float64 tensors that require grad) to one output tensor.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, GradcheckOptions options = {});

}  // namespace ember::autograd
