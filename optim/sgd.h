// SGD with momentum, dampening, Nesterov and weight decay, with exactly PyTorch's update rules
// (torch.optim.SGD, single-tensor path):
//   g = grad + weight_decay * p
//   buf = g (first step), else buf = momentum * buf + (1 - dampening) * g
//   g = nesterov ? g + momentum * buf : buf            (only when momentum != 0)
//   p -= lr * g
// Sparse gradients (Embedding(sparse=true)) are supported as in PyTorch 1.13: the update touches
// only the rows present in the coalesced gradient; with momentum the buffer is itself sparse (it
// grows to the union of rows ever touched). weight_decay with a sparse gradient is rejected, as
// PyTorch rejects add(sparse, dense). Dense float32/float64 parameters are updated by fused_sgd_
// (tensor/fused_sgd.h: one pass a parameter, all of a group's at once, the same bits as the ops);
// others by the tensor ops above.
#pragma once

#include "optim/optimizer.h"

namespace ember::optim {

// SGD's hyper-parameters with torch.optim.SGD's defaults (lr has none), chainable:
// SGDOptions(0.1).momentum(0.9).nesterov(true).
class SGDOptions : public OptimizerOptions {
 public:
  explicit SGDOptions(double lr) : lr_(lr) {}
  EMBER_OPTIM_ARG(double, lr);
  EMBER_OPTIM_ARG(double, momentum) = 0;
  EMBER_OPTIM_ARG(double, dampening) = 0;
  EMBER_OPTIM_ARG(double, weight_decay) = 0;
  EMBER_OPTIM_ARG(bool, nesterov) = false;

 public:
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<SGDOptions>(*this); }
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  void save_to(nn::StateDict& sd, const std::string& prefix) const override;
  void load_from(const nn::StateDict& sd, const std::string& prefix) override;
  std::vector<std::string> option_names() const override;
};

// PyTorch's torch.optim.SGD, the rule above; per-parameter state: momentum_buffer, with momentum.
// Throws ember::Error on a negative lr, momentum or weight decay, or on Nesterov without momentum
// or with dampening.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& defaults);
  SGD(std::vector<OptimizerParamGroup> groups, const SGDOptions& defaults);

  void step() override;
  const char* name() const override { return "SGD"; }

 protected:
  void validate_options(const OptimizerOptions& options) const override;
  bool is_state_buffer(const std::string& buffer) const override { return buffer == "momentum_buffer"; }

 private:
  void sparse_update(const Tensor& p, const Tensor& grad, const SGDOptions& o, size_t index);
  // buf: the momentum buffer's slot (undefined before the first step), or null without momentum.
  void dense_update(const Tensor& p, const Tensor& grad, Tensor* buf, const SGDOptions& o);
};

}  // namespace ember::optim
