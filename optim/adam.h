// Adam and AdamW with PyTorch's update rules and bias correction (torch.optim.Adam / AdamW 1.13,
// single-tensor path). For step t (counted per parameter, from 1):
//   Adam:  g = grad + weight_decay * p          AdamW: p *= 1 - lr * weight_decay;  g = grad
//   exp_avg    = beta1 * exp_avg    + (1 - beta1) * g
//   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
//   v = amsgrad ? (max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq)) : exp_avg_sq
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   p -= lr / (1 - beta1^t) * exp_avg / denom
// Sparse gradients are rejected, as in PyTorch (which points to SparseAdam).
#pragma once

#include <utility>

#include "optim/optimizer.h"

namespace ember::optim {

using Betas = std::pair<double, double>;

// Adam's hyper-parameters with torch.optim.Adam's defaults (lr 1e-3, betas (0.9, 0.999), eps 1e-8,
// no weight decay, no amsgrad), chainable: AdamOptions(3e-4).weight_decay(1e-4).amsgrad(true).
class AdamOptions : public OptimizerOptions {
 public:
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  EMBER_OPTIM_ARG(double, lr);
  EMBER_OPTIM_ARG(Betas, betas) = {0.9, 0.999};
  EMBER_OPTIM_ARG(double, eps) = 1e-8;
  EMBER_OPTIM_ARG(double, weight_decay) = 0;
  EMBER_OPTIM_ARG(bool, amsgrad) = false;

 public:
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdamOptions>(*this); }
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  void save_to(nn::StateDict& sd, const std::string& prefix) const override;
  void load_from(const nn::StateDict& sd, const std::string& prefix) override;
  std::vector<std::string> option_names() const override;
};

// AdamW's options differ from Adam's only in the default weight decay (1e-2). The chainable
// setters return AdamOptions&, so AdamW takes AdamOptions (the values, not the type, matter).
class AdamWOptions : public AdamOptions {
 public:
  explicit AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay(1e-2); }
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdamWOptions>(*this); }
};

// PyTorch's torch.optim.Adam, the rule above; per-parameter state: step, exp_avg, exp_avg_sq and,
// with amsgrad, max_exp_avg_sq. Throws ember::Error on out-of-range lr, eps, betas or weight decay.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& defaults = AdamOptions());
  Adam(std::vector<OptimizerParamGroup> groups, const AdamOptions& defaults = AdamOptions());

  void step() override;
  const char* name() const override { return decoupled_ ? "AdamW" : "Adam"; }

 protected:
  // AdamW: weight decay applied to the parameter (decoupled) instead of added to the gradient.
  Adam(std::unique_ptr<OptimizerOptions> defaults, bool decoupled)
      : Optimizer(std::move(defaults)), decoupled_(decoupled) {}
  void validate_options(const OptimizerOptions& options) const override;
  bool is_state_buffer(const std::string& buffer) const override;

 private:
  bool decoupled_ = false;
};

// PyTorch's torch.optim.AdamW: Adam with decoupled weight decay, 1e-2 by default (AdamWOptions).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamOptions& defaults = AdamWOptions());
  AdamW(std::vector<OptimizerParamGroup> groups, const AdamOptions& defaults = AdamWOptions());
};

}  // namespace ember::optim
