// Optimizer: the base class every optimizer derives from (PyTorch's torch::optim::Optimizer).
// It owns the parameter groups (parameters + that group's options such as lr), the per-parameter
// state buffers (momentum_buffer, exp_avg, ...), zero_grad, and the state_dict scheme below.
//
// Parameters are shared with the model and, under DDP, with the Reducer's bucket views, so every
// update is made in place under NoGradGuard: an optimizer never reassigns a parameter tensor.
// Parameters whose grad is undefined are skipped by step() (DDP leaves unused parameters' grads
// untouched, and a parameter never reached by backward has none).
//
// Note [Optimizer state_dict layout]
// state_dict() returns an nn::StateDict (so it can be written with nn::save) whose keys are:
//   param_groups.<g>.params    int64 [n]: the global indices of group g's parameters, numbered
//                              across groups in order (PyTorch's integer ids)
//   param_groups.<g>.<option>  the group's options: numbers as 0-dim float64, bools as 0/1,
//                              betas as float64 [2]
//   state.<i>.<buffer>         parameter i's buffers (momentum_buffer, exp_avg, exp_avg_sq,
//                              max_exp_avg_sq; step as 0-dim float64); a sparse momentum buffer is
//                              stored as state.<i>.momentum_buffer.indices / .values
// load_state_dict() checks group and parameter counts, buffer shapes and unknown keys before it
// changes anything, so a failed load leaves the optimizer as it was.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/state_dict.h"
#include "tensor/tensor.h"

// Declares an option with a chainable setter and a getter, as PyTorch's TORCH_ARG:
// SGDOptions(0.1).momentum(0.9).nesterov(true); opts.momentum() reads it back.
#define EMBER_OPTIM_ARG(T, name)            \
 public:                                    \
  auto& name(const T& new_value) {          \
    name##_ = new_value;                    \
    return *this;                           \
  }                                         \
  const T& name() const { return name##_; } \
                                            \
 private:                                   \
  T name##_

namespace ember::optim {

// Options shared by all optimizers: each derived options type has its own fields plus the lr the
// schedulers read and write through get_lr/set_lr.
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  // Writes / reads this group's options under `prefix` ("param_groups.0.") — see the Note above.
  virtual void save_to(nn::StateDict& sd, const std::string& prefix) const = 0;
  virtual void load_from(const nn::StateDict& sd, const std::string& prefix) = 0;
  // The option names save_to writes, so load_state_dict can reject unexpected keys.
  virtual std::vector<std::string> option_names() const = 0;
};

// A group of parameters optimised with one set of options. Without options the group takes a copy
// of the optimizer's defaults when it is added.
class OptimizerParamGroup {
 public:
  explicit OptimizerParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}
  OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
      : params_(std::move(params)), options_(std::move(options)) {}
  template <typename Options, typename = std::enable_if_t<std::is_base_of_v<OptimizerOptions, Options>>>
  OptimizerParamGroup(std::vector<Tensor> params, const Options& options)
      : params_(std::move(params)), options_(options.clone()) {}
  OptimizerParamGroup(const OptimizerParamGroup& other);
  OptimizerParamGroup& operator=(const OptimizerParamGroup& other);
  OptimizerParamGroup(OptimizerParamGroup&&) = default;
  OptimizerParamGroup& operator=(OptimizerParamGroup&&) = default;

  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }
  bool has_options() const { return options_ != nullptr; }
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }

 private:
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
};

// One parameter's named buffers, in creation order.
using ParamState = nn::StateDict;

// The base every optimizer derives from, as described above. add_param_group (so each constructor
// too) throws ember::Error on a parameter that is not a dense floating leaf or already in a group.
class Optimizer {
 public:
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer() = default;

  // One update of every parameter that has a gradient; runs under NoGradGuard, in place.
  virtual void step() = 0;
  // One update of `params` only (each in one of this optimizer's groups), with grads[i] in place
  // of params[i].grad(): the others are skipped as if they had no gradient. ZeRO's overlap hook
  // (distributed/optim/) steps the parameters of one DDP bucket with the bucket's reduced
  // gradients before the Reducer has written them back to .grad. The arithmetic is step()'s, so
  // stepping a model bucket by bucket gives step()'s bits.
  void step_parameters(const std::vector<Tensor>& params, const std::vector<Tensor>& grads);
  // Clears gradients: set_to_none resets p.grad to undefined (the default, as in PyTorch 2.x);
  // otherwise a dense grad is zeroed in place (keeping DDP's bucket views aliased) and a sparse one
  // replaced by an empty sparse tensor.
  void zero_grad(bool set_to_none = true);
  // Validates and appends a group; its options default to a copy of defaults().
  void add_param_group(OptimizerParamGroup group);

  std::vector<OptimizerParamGroup>& param_groups() { return param_groups_; }
  const std::vector<OptimizerParamGroup>& param_groups() const { return param_groups_; }
  const OptimizerOptions& defaults() const { return *defaults_; }
  // Every parameter of every group, in order (the numbering used by state_dict).
  std::vector<Tensor> parameters() const;
  // The state of `param`, or nullptr before its first update.
  const ParamState* state(const Tensor& param) const;

  // Virtual so that a wrapper (ZeroRedundancyOptimizer) can answer with a state gathered from
  // several processes in the same layout.
  virtual nn::StateDict state_dict() const;
  virtual void load_state_dict(const nn::StateDict& sd);

  // "SGD", "Adam", ... for error messages.
  virtual const char* name() const = 0;

 protected:
  explicit Optimizer(std::unique_ptr<OptimizerOptions> defaults) : defaults_(std::move(defaults)) {}
  // Derived constructors call this (virtual validation is not available in the base constructor):
  // validates the defaults, then adds each group.
  void init_groups(std::vector<OptimizerParamGroup> groups);
  // Throws if `options` are out of range (e.g. negative lr); each optimizer checks its own fields.
  virtual void validate_options(const OptimizerOptions& options) const = 0;
  // The buffers this optimizer keeps per parameter; load_state_dict rejects any other name.
  virtual bool is_state_buffer(const std::string& buffer) const = 0;
  // The mutable state of `param`, created empty on first use.
  ParamState& mutable_state(const Tensor& param);
  // What step() uses as `param`'s gradient: param.grad(), or, inside step_parameters, the given
  // gradient for a parameter in the subset and an undefined tensor (skip it) for the others.
  const Tensor& gradient_for_step(const Tensor& param) const;
  // Looks up `name` in `state`, or returns an undefined tensor.
  static Tensor& buffer(ParamState& state, const std::string& name);

  std::unique_ptr<OptimizerOptions> defaults_;
  std::vector<OptimizerParamGroup> param_groups_;
  // Keyed by TensorImpl: a parameter's identity is its handle's impl, which stays fixed because
  // parameters are only ever modified in place.
  std::unordered_map<const TensorImpl*, ParamState> state_;

 private:
  // Set only while step_parameters runs: the subset and its gradients.
  const std::unordered_map<const TensorImpl*, Tensor>* step_subset_ = nullptr;
};

// Helpers for OptimizerOptions::save_to / load_from.
void put_number(nn::StateDict& sd, const std::string& key, double value);
double get_number(const nn::StateDict& sd, const std::string& key);

}  // namespace ember::optim
