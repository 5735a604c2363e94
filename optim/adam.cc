#include "optim/adam.h"

#include <cmath>

#include "tensor/autograd_interface.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::optim {

void AdamOptions::save_to(nn::StateDict& sd, const std::string& prefix) const {
  put_number(sd, prefix + "lr", lr_);
  sd.emplace_back(prefix + "betas", from_vector<double>({betas_.first, betas_.second}, {2}));
  put_number(sd, prefix + "eps", eps_);
  put_number(sd, prefix + "weight_decay", weight_decay_);
  put_number(sd, prefix + "amsgrad", amsgrad_ ? 1.0 : 0.0);
}

void AdamOptions::load_from(const nn::StateDict& sd, const std::string& prefix) {
  lr_ = get_number(sd, prefix + "lr");
  const Tensor b = nn::find_in(sd, prefix + "betas");
  EMBER_CHECK(b.defined(), "load_state_dict: missing key '", prefix, "betas'");
  EMBER_CHECK(!b.is_sparse() && b.dim() == 1 && b.numel() == 2, "load_state_dict: '", prefix,
              "betas' must have shape [2], got ", b.describe());
  const Tensor bd = b.to(kFloat64).contiguous();
  betas_ = {bd.data_ptr<double>()[0], bd.data_ptr<double>()[1]};
  eps_ = get_number(sd, prefix + "eps");
  weight_decay_ = get_number(sd, prefix + "weight_decay");
  amsgrad_ = get_number(sd, prefix + "amsgrad") != 0.0;
}

std::vector<std::string> AdamOptions::option_names() const {
  return {"lr", "betas", "eps", "weight_decay", "amsgrad"};
}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& defaults) : Optimizer(defaults.clone()) {
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(std::move(params));
  init_groups(std::move(groups));
}

Adam::Adam(std::vector<OptimizerParamGroup> groups, const AdamOptions& defaults)
    : Optimizer(defaults.clone()) {
  init_groups(std::move(groups));
}

AdamW::AdamW(std::vector<Tensor> params, const AdamOptions& defaults)
    : Adam(defaults.clone(), /*decoupled=*/true) {
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(std::move(params));
  init_groups(std::move(groups));
}

AdamW::AdamW(std::vector<OptimizerParamGroup> groups, const AdamOptions& defaults)
    : Adam(defaults.clone(), /*decoupled=*/true) {
  init_groups(std::move(groups));
}

void Adam::validate_options(const OptimizerOptions& options) const {
  const auto* o = dynamic_cast<const AdamOptions*>(&options);
  EMBER_CHECK(o != nullptr, name(), ": a parameter group's options must be AdamOptions");
  EMBER_CHECK(o->lr() >= 0, name(), ": invalid learning rate: ", o->lr());
  EMBER_CHECK(o->eps() >= 0, name(), ": invalid epsilon value: ", o->eps());
  EMBER_CHECK(o->betas().first >= 0 && o->betas().first < 1, name(),
              ": invalid beta parameter at index 0: ", o->betas().first);
  EMBER_CHECK(o->betas().second >= 0 && o->betas().second < 1, name(),
              ": invalid beta parameter at index 1: ", o->betas().second);
  EMBER_CHECK(o->weight_decay() >= 0, name(), ": invalid weight_decay value: ", o->weight_decay());
}

bool Adam::is_state_buffer(const std::string& buffer) const {
  return buffer == "step" || buffer == "exp_avg" || buffer == "exp_avg_sq" ||
         buffer == "max_exp_avg_sq";
}

void Adam::step() {
  NoGradGuard no_grad;
  size_t index = 0;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamOptions&>(group.options());
    const double beta1 = o.betas().first, beta2 = o.betas().second;
    for (const Tensor& p : group.params()) {
      const size_t i = index++;
      const Tensor& grad = gradient_for_step(p);
      if (!grad.defined()) continue;
      EMBER_CHECK(!grad.is_sparse(), name(), " does not support sparse gradients (parameter ", i,
                  ", grad ", grad.describe(), "), please consider SparseAdam instead");
      ParamState& st = mutable_state(p);
      if (!buffer(st, "step").defined()) {
        buffer(st, "step") = scalar_tensor(0.0, kFloat64);
        buffer(st, "exp_avg") = zeros_like(p);
        buffer(st, "exp_avg_sq") = zeros_like(p);
      }
      if (o.amsgrad() && !buffer(st, "max_exp_avg_sq").defined()) {
        buffer(st, "max_exp_avg_sq") = zeros_like(p);
      }
      // Handles share the buffers' storage, so the in-place updates below land in the state.
      const Tensor s = buffer(st, "step"), m = buffer(st, "exp_avg"), v = buffer(st, "exp_avg_sq");
      s.add_(1.0);
      const double t = s.item<double>();

      Tensor g = grad;
      if (decoupled_) {
        p.mul_(1 - o.lr() * o.weight_decay());
      } else if (o.weight_decay() != 0) {
        g = grad.add(p, o.weight_decay());
      }
      m.mul_(beta1).add_(g, 1 - beta1);
      v.mul_(beta2).add_(g.mul(g), 1 - beta2);
      const double bias_correction1 = 1 - std::pow(beta1, t);
      const double bias_correction2 = 1 - std::pow(beta2, t);
      const double step_size = o.lr() / bias_correction1;
      const double bias_correction2_sqrt = std::sqrt(bias_correction2);
      Tensor denom;
      if (o.amsgrad()) {
        const Tensor vmax = buffer(st, "max_exp_avg_sq");
        vmax.copy_(maximum(vmax, v));
        denom = vmax.sqrt().div(bias_correction2_sqrt).add_(o.eps());
      } else {
        denom = v.sqrt().div(bias_correction2_sqrt).add_(o.eps());
      }
      p.add_(m.div(denom), -step_size);
    }
  }
}

}  // namespace ember::optim
