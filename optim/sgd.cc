#include "optim/sgd.h"

#include <algorithm>

#include "tensor/autograd_interface.h"
#include "tensor/factories.h"
#include "tensor/fused_sgd.h"
#include "tensor/ops.h"
#include "tensor/sparse.h"

namespace ember::optim {

void SGDOptions::save_to(nn::StateDict& sd, const std::string& prefix) const {
  put_number(sd, prefix + "lr", lr_);
  put_number(sd, prefix + "momentum", momentum_);
  put_number(sd, prefix + "dampening", dampening_);
  put_number(sd, prefix + "weight_decay", weight_decay_);
  put_number(sd, prefix + "nesterov", nesterov_ ? 1.0 : 0.0);
}

void SGDOptions::load_from(const nn::StateDict& sd, const std::string& prefix) {
  lr_ = get_number(sd, prefix + "lr");
  momentum_ = get_number(sd, prefix + "momentum");
  dampening_ = get_number(sd, prefix + "dampening");
  weight_decay_ = get_number(sd, prefix + "weight_decay");
  nesterov_ = get_number(sd, prefix + "nesterov") != 0.0;
}

std::vector<std::string> SGDOptions::option_names() const {
  return {"lr", "momentum", "dampening", "weight_decay", "nesterov"};
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& defaults) : Optimizer(defaults.clone()) {
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(std::move(params));
  init_groups(std::move(groups));
}

SGD::SGD(std::vector<OptimizerParamGroup> groups, const SGDOptions& defaults)
    : Optimizer(defaults.clone()) {
  init_groups(std::move(groups));
}

void SGD::validate_options(const OptimizerOptions& options) const {
  const auto* o = dynamic_cast<const SGDOptions*>(&options);
  EMBER_CHECK(o != nullptr, "SGD: a parameter group's options must be SGDOptions");
  EMBER_CHECK(o->lr() >= 0, "SGD: invalid learning rate: ", o->lr());
  EMBER_CHECK(o->momentum() >= 0, "SGD: invalid momentum value: ", o->momentum());
  EMBER_CHECK(o->weight_decay() >= 0, "SGD: invalid weight_decay value: ", o->weight_decay());
  EMBER_CHECK(!o->nesterov() || (o->momentum() > 0 && o->dampening() == 0),
              "SGD: Nesterov momentum requires a momentum and zero dampening (momentum ",
              o->momentum(), ", dampening ", o->dampening(), ")");
}

void SGD::step() {
  NoGradGuard no_grad;
  size_t index = 0;  // global parameter index, for error messages
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const SGDOptions&>(group.options());
    // The group's dense parameters, one fused_sgd_ call per device and dtype.
    std::vector<std::vector<SgdParameter>> fused;
    for (const Tensor& p : group.params()) {
      const Tensor& grad = gradient_for_step(p);
      if (!grad.defined()) {
        ++index;
        continue;
      }
      if (grad.is_sparse()) {
        sparse_update(p, grad, o, index++);
        continue;
      }
      Tensor* buf = nullptr;
      if (o.momentum() != 0) {
        buf = &buffer(mutable_state(p), "momentum_buffer");
        EMBER_CHECK(!(buf->defined() && buf->is_sparse()), "SGD: parameter ", index,
                    " has a sparse momentum buffer but now a dense gradient; mixing the two is ",
                    "not supported");
      }
      if (!fused_sgd_takes(p, grad, buf ? *buf : Tensor())) {
        dense_update(p, grad, buf, o);
        ++index;
        continue;
      }
      SgdParameter sp{p, grad, Tensor(), false};
      if (buf) {
        if (!buf->defined()) {
          *buf = empty(p.sizes(), TensorOptions(p.dtype(), p.device()));
          sp.first_step = true;
        }
        sp.momentum_buffer = *buf;
      }
      auto same_kind = [&](const std::vector<SgdParameter>& batch) {
        const Tensor& q = batch.front().param;
        return q.device() == p.device() && q.dtype() == p.dtype();
      };
      auto it = std::find_if(fused.begin(), fused.end(), same_kind);
      if (it == fused.end()) it = fused.insert(fused.end(), std::vector<SgdParameter>());
      it->push_back(std::move(sp));
      ++index;
    }
    for (const auto& batch : fused) {
      fused_sgd_(batch, SgdHyperparameters{o.lr(), o.momentum(), o.dampening(), o.weight_decay(),
                                           o.nesterov()});
    }
  }
}

// The same update as tensor ops, for parameters fused_sgd_ does not take.
void SGD::dense_update(const Tensor& p, const Tensor& grad, Tensor* buf, const SGDOptions& o) {
  Tensor d_p = o.weight_decay() != 0 ? grad.add(p, o.weight_decay()) : grad;
  if (buf) {
    if (!buf->defined()) {
      *buf = d_p.clone();
    } else {
      buf->mul_(o.momentum()).add_(d_p, 1 - o.dampening());
    }
    d_p = o.nesterov() ? d_p.add(*buf, o.momentum()) : *buf;
  }
  p.add_(d_p, -o.lr());
}

void SGD::sparse_update(const Tensor& p, const Tensor& grad, const SGDOptions& o, size_t index) {
  EMBER_CHECK(o.weight_decay() == 0, "SGD: weight_decay is not supported with sparse gradients ",
              "(parameter ", index, ", grad ", grad.describe(),
              "); PyTorch likewise rejects add(sparse, dense)");
  Tensor d_p = coalesce(grad);
  if (o.momentum() != 0) {
    Tensor& buf = buffer(mutable_state(p), "momentum_buffer");
    if (!buf.defined()) {
      buf = sparse_coo_tensor(sparse_indices(d_p).clone(), sparse_values(d_p).clone(), d_p.sizes());
    } else {
      EMBER_CHECK(buf.is_sparse(), "SGD: parameter ", index, " has a dense momentum buffer but ",
                  "now a sparse gradient; mixing the two is not supported");
      buf = coalesce(sparse_add(sparse_mul_scalar(buf, o.momentum()),
                                sparse_mul_scalar(d_p, 1 - o.dampening())));
    }
    d_p = o.nesterov() ? coalesce(sparse_add(d_p, sparse_mul_scalar(buf, o.momentum()))) : buf;
  }
  // Only the rows present in d_p are touched.
  add_sparse_to_dense_(p, d_p, -o.lr());
}

}  // namespace ember::optim
