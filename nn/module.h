// Module: the base of every layer and model (PyTorch's nn.Module). It owns named parameters,
// buffers and child modules in registration order; named_parameters() recurses and de-duplicates
// shared (tied) parameters; state_dict()/load_state_dict() round-trip them by dotted name.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/state_dict.h"
#include "tensor/tensor.h"

namespace ember::nn {

// The base of every layer and model (PyTorch's torch.nn.Module): derive, register parameters,
// buffers and children in the constructor, override forward(). Held by shared_ptr, not copyable;
// registering a name twice, or one containing '.', throws ember::Error.
class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The computation; single tensor in and out (containers without one throw).
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }
  // Several tensors in and out, for models with more than one input or output (PyTorch's forward
  // takes and returns any structure). The default runs forward() on exactly one input.
  virtual std::vector<Tensor> forward_many(const std::vector<Tensor>& inputs);

  const std::string& type_name() const { return type_name_; }
  // One-line description, e.g. "Linear(in_features=4, out_features=2, bias=true)".
  virtual std::string extra_repr() const { return ""; }
  std::string repr() const;

  // Registration (names must be unique within this module and must not contain '.').
  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor tensor);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // Replaces the registered child `name` in place (PyTorch's setattr of an existing submodule);
  // throws if there is none. The module's own typed pointers, if any, are not touched.
  void replace_module(const std::string& name, std::shared_ptr<Module> module);

  // Recursive, registration order, shared parameters listed once (under their first name).
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  // Self first (name ""), then descendants depth-first, each module once.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void zero_grad(bool set_to_none = true);
  // Converts every parameter and floating buffer (call before building optimizers or DDP: the
  // parameter tensors are replaced).
  void to(ScalarType dtype);
  void to(Device device);

  StateDict state_dict() const;
  // strict: missing and unexpected keys are errors (both listed in the message).
  void load_state_dict(const StateDict& state, bool strict = true);

 protected:
  // Direct access for layers' forward.
  Tensor& param(const std::string& name);
  Tensor& buffer(const std::string& name);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, bool params, bool recurse,
               std::vector<std::pair<std::string, Tensor>>& out,
               std::vector<const TensorImpl*>& seen) const;
  void check_new_name(const std::string& name) const;
  template <typename F>
  void for_each_tensor(F f);
  // Replaces each distinct parameter and buffer by convert(tensor) (which returns false to keep it).
  template <typename Convert>
  void convert_tensors(Convert convert);

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

using ModulePtr = std::shared_ptr<Module>;

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace ember::nn
