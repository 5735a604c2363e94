#include "tensor/fused_sgd.h"

#include "tensor/autograd_interface.h"
#include "tensor/kernels.h"

namespace ember {

// Note [Fused SGD]
// SGD's step as tensor ops (weight decay's add, the buffer's mul_ and add_, Nesterov's add, the
// parameter's add_) makes four or five passes over each parameter and as many dispatches and
// allocations; on ResNet-20 (65 small parameters) that was ~0.8 ms a step, all of it on the calling
// thread, since each op is below the parallel grain. fused_sgd_ makes one pass per parameter, and
// the CPU kernel splits all parameters' elements across threads at once. Each element still rounds
// to the parameter's dtype after each step of the op-by-op rule, and both the CPU binary kernel's
// add(x, y, alpha) and this kernel compute `x + alpha * y` with tensor/cpu/add_scaled.h (one fused
// multiply-add where the level has FMA, as PyTorch's vectorised add). So fused and op-by-op SGD
// give the same bits at every level and optimisation level (tests/optim/fused_sgd_test.cc, also
// under the sanitizers' -O1); a CUDA kernel rounds the same way (nvcc contracts the binary kernel's
// expression into an FMA too).
void fused_sgd_(const std::vector<SgdParameter>& params, const SgdHyperparameters& h) {
  if (params.empty()) return;
  const Tensor& first = params.front().param;
  EMBER_CHECK(first.defined(), "fused_sgd_: parameter 0 is an undefined tensor");
  const bool momentum = h.momentum != 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const SgdParameter& p = params[i];
    EMBER_CHECK(p.param.defined() && p.grad.defined(), "fused_sgd_: parameter ", i, " (",
                p.param.describe(), ") or its gradient (", p.grad.describe(), ") is undefined");
    EMBER_CHECK(p.momentum_buffer.defined() == momentum, "fused_sgd_: parameter ", i, " ",
                momentum ? "needs" : "takes no", " momentum buffer with momentum ", h.momentum);
    EMBER_CHECK(!GradMode::is_enabled() || !p.param.requires_grad(), "fused_sgd_: parameter ", i,
                " (", p.param.describe(), ") requires grad and grad mode is on; update it under ",
                "NoGradGuard, as an optimizer step does");
    EMBER_CHECK(p.param.dtype() == kFloat32 || p.param.dtype() == kFloat64,
                "fused_sgd_: parameter ", i, " is ", p.param.describe(),
                "; only float32 and float64 parameters are fused");
    for (const Tensor* t : {&p.param, &p.grad, &p.momentum_buffer}) {
      if (!t->defined()) continue;
      EMBER_CHECK(!t->is_sparse() && t->is_contiguous() && t->dtype() == p.param.dtype() &&
                      t->sizes() == p.param.sizes() && t->device() == first.device(),
                  "fused_sgd_: parameter ", i, ": expected dense contiguous tensors of the ",
                  "parameter's dtype and shape on ", first.device().str(), ", got param ",
                  p.param.describe(), ", grad ", p.grad.describe(), ", momentum_buffer ",
                  p.momentum_buffer.describe());
    }
    EMBER_CHECK(!p.param.is_alias_of(p.grad) &&
                    !(momentum && (p.momentum_buffer.is_alias_of(p.param) ||
                                   p.momentum_buffer.is_alias_of(p.grad))),
                "fused_sgd_: parameter ", i, " (", p.param.describe(),
                "): its parameter, gradient and momentum buffer must not share storage");
  }
  kernel_for(&KernelTable::fused_sgd, "fused_sgd_", {&first})(params, h);
  for (const SgdParameter& p : params) {
    p.param.bump_version();
    if (momentum) p.momentum_buffer.bump_version();
  }
}

bool fused_sgd_takes(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer) {
  auto plain = [&](const Tensor& t) {
    return !t.is_sparse() && t.is_contiguous() && t.dtype() == param.dtype() &&
           t.sizes() == param.sizes() && t.device() == param.device();
  };
  const Tensor& buf = momentum_buffer;
  return (param.dtype() == kFloat32 || param.dtype() == kFloat64) && plain(param) && plain(grad) &&
         !param.is_alias_of(grad) &&
         (!buf.defined() || (plain(buf) && !buf.is_alias_of(param) && !buf.is_alias_of(grad)));
}

}  // namespace ember
