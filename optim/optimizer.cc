#include "optim/optimizer.h"

#include <map>
#include <unordered_set>

#include "tensor/autograd_interface.h"
#include "tensor/factories.h"
#include "tensor/ops.h"
#include "tensor/sparse.h"

namespace ember::optim {

OptimizerParamGroup::OptimizerParamGroup(const OptimizerParamGroup& other)
    : params_(other.params_), options_(other.options_ ? other.options_->clone() : nullptr) {}

OptimizerParamGroup& OptimizerParamGroup::operator=(const OptimizerParamGroup& other) {
  if (this != &other) {
    params_ = other.params_;
    options_ = other.options_ ? other.options_->clone() : nullptr;
  }
  return *this;
}

OptimizerOptions& OptimizerParamGroup::options() {
  EMBER_CHECK(options_ != nullptr, "OptimizerParamGroup: the group has no options yet");
  return *options_;
}

const OptimizerOptions& OptimizerParamGroup::options() const {
  EMBER_CHECK(options_ != nullptr, "OptimizerParamGroup: the group has no options yet");
  return *options_;
}

void Optimizer::init_groups(std::vector<OptimizerParamGroup> groups) {
  validate_options(*defaults_);
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(OptimizerParamGroup group) {
  if (!group.has_options()) group.set_options(defaults_->clone());
  validate_options(group.options());
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& g : param_groups_) {
    for (const Tensor& p : g.params()) seen.insert(p.unsafe_impl());
  }
  const size_t index = param_groups_.size();
  for (size_t i = 0; i < group.params().size(); ++i) {
    const Tensor& p = group.params()[i];
    EMBER_CHECK(p.defined(), name(), ": parameter ", i, " of group ", index, " is undefined");
    EMBER_CHECK(!p.is_sparse() && p.is_floating_point(), name(), ": parameter ", i, " of group ",
                index, " must be a dense floating-point tensor, got ", p.describe());
    EMBER_CHECK(p.is_leaf(), name(), ": can't optimize a non-leaf tensor (parameter ", i,
                " of group ", index, ", ", p.describe(), ")");
    EMBER_CHECK(seen.insert(p.unsafe_impl()).second, name(), ": parameter ", i, " of group ", index,
                " appears more than once across the parameter groups");
  }
  param_groups_.push_back(std::move(group));
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : param_groups_) {
    for (Tensor& p : g.params()) {
      Tensor& grad = p.mutable_grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        grad = Tensor();
      } else if (grad.is_sparse()) {
        // zero_ has no sparse kernel; an empty COO tensor of the same shape is the sparse zero.
        const Tensor values = sparse_values(grad);
        Shape vshape = values.sizes();
        vshape[0] = 0;
        grad = sparse_coo_tensor(empty({sparse_indices(grad).sizes()[0], 0},
                                       TensorOptions(kInt64, values.device())),
                                 empty(vshape, TensorOptions(values.dtype(), values.device())),
                                 grad.sizes());
      } else {
        NoGradGuard no_grad;
        // In place, not a new tensor: under gradient_as_bucket_view the grad is a bucket view.
        if (grad.grad_fn() != nullptr) grad = grad.detach();
        grad.zero_();
      }
    }
  }
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const auto& g : param_groups_) out.insert(out.end(), g.params().begin(), g.params().end());
  return out;
}

const ParamState* Optimizer::state(const Tensor& param) const {
  auto it = state_.find(param.unsafe_impl());
  return it == state_.end() ? nullptr : &it->second;
}

void Optimizer::step_parameters(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  EMBER_CHECK(params.size() == grads.size(), name(), "::step_parameters: ", params.size(),
              " parameters but ", grads.size(), " gradients");
  std::unordered_set<const TensorImpl*> mine;
  for (const auto& g : param_groups_) {
    for (const Tensor& p : g.params()) mine.insert(p.unsafe_impl());
  }
  std::unordered_map<const TensorImpl*, Tensor> subset;
  for (size_t i = 0; i < params.size(); ++i) {
    EMBER_CHECK(mine.count(params[i].unsafe_impl()) != 0, name(), "::step_parameters: parameter ", i,
                " (", params[i].describe(), ") is not in any of this optimizer's groups");
    EMBER_CHECK(!grads[i].defined() || grads[i].sizes() == params[i].sizes(), name(),
                "::step_parameters: gradient ", i, " has shape ", grads[i].shape_str(),
                " but its parameter has shape ", params[i].shape_str());
    subset[params[i].unsafe_impl()] = grads[i];
  }
  struct Reset {
    const std::unordered_map<const TensorImpl*, Tensor>*& slot;
    ~Reset() { slot = nullptr; }
  } reset{step_subset_};
  step_subset_ = &subset;
  step();
}

const Tensor& Optimizer::gradient_for_step(const Tensor& param) const {
  if (step_subset_ == nullptr) return param.grad();
  static const Tensor kNone;
  auto it = step_subset_->find(param.unsafe_impl());
  return it == step_subset_->end() ? kNone : it->second;
}

ParamState& Optimizer::mutable_state(const Tensor& param) { return state_[param.unsafe_impl()]; }

Tensor& Optimizer::buffer(ParamState& state, const std::string& name) {
  for (auto& kv : state) {
    if (kv.first == name) return kv.second;
  }
  state.emplace_back(name, Tensor());
  return state.back().second;
}

void put_number(nn::StateDict& sd, const std::string& key, double value) {
  sd.emplace_back(key, scalar_tensor(value, kFloat64));
}

double get_number(const nn::StateDict& sd, const std::string& key) {
  const Tensor t = nn::find_in(sd, key);
  EMBER_CHECK(t.defined(), "load_state_dict: missing key '", key, "'");
  EMBER_CHECK(!t.is_sparse() && t.numel() == 1 && t.dim() == 0, "load_state_dict: '", key,
              "' must be a 0-dim number, got ", t.describe());
  return t.item<double>();
}

nn::StateDict Optimizer::state_dict() const {
  nn::StateDict sd;
  int64_t index = 0;
  std::vector<std::pair<int64_t, Tensor>> numbered;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const auto& group = param_groups_[g];
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    std::vector<int64_t> ids;
    for (const Tensor& p : group.params()) {
      ids.push_back(index);
      numbered.emplace_back(index++, p);
    }
    sd.emplace_back(prefix + "params", from_vector<int64_t>(ids, {static_cast<int64_t>(ids.size())}));
    group.options().save_to(sd, prefix);
  }
  for (const auto& [i, p] : numbered) {
    const ParamState* st = state(p);
    if (st == nullptr) continue;
    const std::string prefix = "state." + std::to_string(i) + ".";
    for (const auto& [buf_name, t] : *st) {
      if (t.is_sparse()) {
        const Tensor c = coalesce(t);
        sd.emplace_back(prefix + buf_name + ".indices", sparse_indices(c).clone());
        sd.emplace_back(prefix + buf_name + ".values", sparse_values(c).clone());
      } else {
        sd.emplace_back(prefix + buf_name, t.clone());
      }
    }
  }
  return sd;
}

namespace {
// Splits "state.<i>.<rest>" / "param_groups.<g>.<rest>"; false if `key` has another form.
bool split_key(const std::string& key, const std::string& head, int64_t* index, std::string* rest) {
  if (key.compare(0, head.size(), head) != 0) return false;
  const size_t dot = key.find('.', head.size());
  if (dot == std::string::npos || dot == head.size()) return false;
  const std::string num = key.substr(head.size(), dot - head.size());
  if (num.find_first_not_of("0123456789") != std::string::npos || num.size() > 9) return false;
  *index = std::stoll(num);
  *rest = key.substr(dot + 1);
  return true;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

void Optimizer::load_state_dict(const nn::StateDict& sd) {
  const std::string op = std::string(name()) + "::load_state_dict";
  // Groups: counts first, then each group's params and options (into copies, applied at the end).
  int64_t n_groups = 0;
  while (nn::find_in(sd, "param_groups." + std::to_string(n_groups) + ".params").defined()) ++n_groups;
  EMBER_CHECK(n_groups == static_cast<int64_t>(param_groups_.size()), op, ": the optimizer has ",
              param_groups_.size(), " parameter groups but the state dict has ", n_groups);
  std::vector<std::unique_ptr<OptimizerOptions>> new_options;
  for (int64_t g = 0; g < n_groups; ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    const Tensor ids = nn::find_in(sd, prefix + "params");
    const size_t expect = param_groups_[g].params().size();
    EMBER_CHECK(!ids.is_sparse() && ids.dim() == 1 && ids.numel() == static_cast<int64_t>(expect),
                op, ": parameter group ", g, " has ", expect, " parameters but the state dict's '",
                prefix, "params' is ", ids.describe());
    auto opts = param_groups_[g].options().clone();
    opts->load_from(sd, prefix);
    validate_options(*opts);
    new_options.push_back(std::move(opts));
  }
  // Per-parameter state: every key must name a known buffer of an existing parameter with the
  // parameter's shape (step is a 0-dim number; a sparse buffer comes as .indices + .values).
  const std::vector<Tensor> params = parameters();
  std::map<int64_t, ParamState> loaded;
  std::map<std::pair<int64_t, std::string>, std::pair<Tensor, Tensor>> sparse_parts;
  for (const auto& [key, t] : sd) {
    int64_t index = 0;
    std::string rest;
    if (split_key(key, "param_groups.", &index, &rest)) {
      EMBER_CHECK(index < n_groups, op, ": unexpected key '", key, "'");
      bool known = rest == "params";
      for (const auto& o : new_options[index]->option_names()) known = known || rest == o;
      EMBER_CHECK(known, op, ": unexpected key '", key, "'");
      continue;
    }
    EMBER_CHECK(split_key(key, "state.", &index, &rest), op, ": unexpected key '", key, "'");
    EMBER_CHECK(index < static_cast<int64_t>(params.size()), op, ": '", key, "' refers to parameter ",
                index, " but the optimizer has ", params.size(), " parameters");
    EMBER_CHECK(t.defined() && !t.is_sparse(), op, ": '", key, "' must be a dense tensor");
    const Tensor& p = params[index];
    const bool is_indices = ends_with(rest, ".indices"), is_values = ends_with(rest, ".values");
    if (is_indices || is_values) {
      const std::string buf = rest.substr(0, rest.rfind('.'));
      EMBER_CHECK(is_state_buffer(buf), op, ": unexpected key '", key, "'");
      auto& parts = sparse_parts[{index, buf}];
      (is_indices ? parts.first : parts.second) = t;
      continue;
    }
    EMBER_CHECK(is_state_buffer(rest), op, ": unexpected key '", key, "'");
    if (rest == "step") {
      EMBER_CHECK(t.numel() == 1, op, ": '", key, "' must hold one number, got ", t.describe());
      loaded[index].emplace_back(rest, scalar_tensor(t.item<double>(), kFloat64));
    } else {
      EMBER_CHECK(t.sizes() == p.sizes(), op, ": '", key, "' has shape ", t.shape_str(),
                  " but parameter ", index, " has shape ", p.shape_str());
      loaded[index].emplace_back(rest, t.to(p.dtype()).to(p.device(), /*copy=*/true).contiguous());
    }
  }
  for (auto& [where, parts] : sparse_parts) {
    const std::string key = "state." + std::to_string(where.first) + "." + where.second;
    EMBER_CHECK(parts.first.defined() && parts.second.defined(), op, ": '", key,
                "' needs both .indices and .values");
    const Tensor& p = params[where.first];
    Tensor values = parts.second.to(p.dtype()).to(p.device(), /*copy=*/true);
    loaded[where.first].emplace_back(
        where.second,
        sparse_coo_tensor(parts.first.to(kInt64).to(p.device(), /*copy=*/true), values, p.sizes()));
  }
  // Everything checked: apply.
  for (int64_t g = 0; g < n_groups; ++g) param_groups_[g].set_options(std::move(new_options[g]));
  state_.clear();
  for (auto& [i, st] : loaded) state_[params[i].unsafe_impl()] = std::move(st);
}

}  // namespace ember::optim
