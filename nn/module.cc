#include "nn/module.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "tensor/ops.h"

namespace ember::nn {

Tensor Module::forward(const Tensor&) {
  EMBER_THROW(type_name_, " has no forward(); call its children directly");
}

std::vector<Tensor> Module::forward_many(const std::vector<Tensor>& inputs) {
  EMBER_CHECK(inputs.size() == 1, type_name_, "::forward_many: got ", inputs.size(),
              " inputs, but this module only has the single-tensor forward(); override forward_many");
  return {forward(inputs[0])};
}

std::string Module::repr() const {
  std::ostringstream os;
  os << type_name_ << "(" << extra_repr();
  if (!children_.empty()) {
    os << "\n";
    for (const auto& [name, child] : children_) {
      std::string r = child->repr();
      std::string indented;
      for (char c : r) {
        indented += c;
        if (c == '\n') indented += "  ";
      }
      os << "  (" << name << "): " << indented << "\n";
    }
  }
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

void Module::check_new_name(const std::string& name) const {
  EMBER_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name_,
              ": invalid attribute name '", name, "' (must be non-empty and contain no '.')");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& kv) { return kv.first == name; });
  };
  EMBER_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), type_name_,
              ": attribute '", name, "' is already registered");
}

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name);
  if (tensor.defined() && requires_grad) tensor.set_requires_grad(true);
  params_.emplace_back(name, std::move(tensor));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor) {
  check_new_name(name);
  buffers_.emplace_back(name, std::move(tensor));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  EMBER_CHECK(module != nullptr, type_name_, ": register_module('", name, "') got a null module");
  children_.emplace_back(name, std::move(module));
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  EMBER_CHECK(module != nullptr, type_name_, ": replace_module('", name, "') got a null module");
  for (auto& kv : children_) {
    if (kv.first == name) {
      kv.second = std::move(module);
      return;
    }
  }
  EMBER_THROW(type_name_, ": replace_module: no child module named '", name, "'");
}

Tensor& Module::param(const std::string& name) {
  for (auto& kv : params_) {
    if (kv.first == name) return kv.second;
  }
  EMBER_THROW(type_name_, ": no parameter named '", name, "'");
}

Tensor& Module::buffer(const std::string& name) {
  for (auto& kv : buffers_) {
    if (kv.first == name) return kv.second;
  }
  EMBER_THROW(type_name_, ": no buffer named '", name, "'");
}

void Module::collect(const std::string& prefix, bool params, bool recurse,
                     std::vector<std::pair<std::string, Tensor>>& out,
                     std::vector<const TensorImpl*>& seen) const {
  for (const auto& [name, t] : params ? params_ : buffers_) {
    if (!t.defined()) continue;
    // Shared tensors (tied weights) are listed once, under the first name they were reached by.
    if (std::find(seen.begin(), seen.end(), t.unsafe_impl()) != seen.end()) continue;
    seen.push_back(t.unsafe_impl());
    out.emplace_back(prefix + name, t);
  }
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", params, true, out, seen);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const TensorImpl*> seen;
  collect("", true, recurse, out, seen);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& kv : named_parameters(recurse)) out.push_back(kv.second);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const TensorImpl*> seen;
  collect("", false, recurse, out, seen);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& kv : named_buffers(recurse)) out.push_back(kv.second);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::vector<const Module*> seen;
  std::function<void(const std::string&, const std::shared_ptr<Module>&)> visit =
      [&](const std::string& prefix, const std::shared_ptr<Module>& m) {
        if (std::find(seen.begin(), seen.end(), m.get()) != seen.end()) return;
        seen.push_back(m.get());
        out.emplace_back(prefix, m);
        for (const auto& [name, child] : m->children_) visit(prefix.empty() ? name : prefix + "." + name, child);
      };
  visit("", shared_from_this());
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& kv : children_) kv.second->train(on);
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.mutable_grad() = Tensor();
    } else {
      NoGradGuard g;
      zero_(p.mutable_grad());
    }
  }
}

template <typename F>
void Module::for_each_tensor(F f) {
  for (auto& kv : params_) f(kv.second, true);
  for (auto& kv : buffers_) f(kv.second, false);
  for (auto& kv : children_) kv.second->for_each_tensor(f);
}

// Tied parameters (one tensor under several names, as GPT's head and token embedding) stay tied,
// as PyTorch's in-place .data conversion keeps them: each distinct tensor is converted once.
template <typename Convert>
void Module::convert_tensors(Convert convert) {
  std::vector<std::pair<Tensor, Tensor>> converted;  // (before, after); holding `before` keeps its address unique
  for_each_tensor([&](Tensor& t, bool is_param) {
    if (!t.defined()) return;
    for (const auto& [before, after] : converted) {
      if (before.unsafe_impl() == t.unsafe_impl()) {
        t = after;
        return;
      }
    }
    const Tensor before = t;
    NoGradGuard g;
    const bool rg = t.requires_grad();
    if (!convert(t)) return;
    if (is_param && rg) t.set_requires_grad(true);
    converted.emplace_back(before, t);
  });
}

void Module::to(ScalarType dtype) {
  EMBER_CHECK(is_floating_point(dtype), type_name_, ".to: expected a floating dtype, got ", dtype);
  convert_tensors([dtype](Tensor& t) {
    if (!t.is_floating_point()) return false;
    t = t.to(dtype).detach();
    return true;
  });
}

void Module::to(Device device) {
  convert_tensors([device](Tensor& t) {
    t = t.to(device).detach();
    return true;
  });
}

StateDict Module::state_dict() const {
  // Unlike named_parameters, a state dict keeps every name (tied weights appear under each).
  StateDict sd;
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m,
                                                                     const std::string& prefix) {
    for (const auto& [name, t] : m.params_) {
      if (t.defined()) sd.emplace_back(prefix + name, t.detach());
    }
    for (const auto& [name, t] : m.buffers_) {
      if (t.defined()) sd.emplace_back(prefix + name, t.detach());
    }
    for (const auto& [name, child] : m.children_) visit(*child, prefix + name + ".");
  };
  visit(*this, "");
  return sd;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [name, t] : own) {
    Tensor src = find_in(state, name);
    if (!src.defined()) {
      missing.push_back(name);
    } else if (src.sizes() != t.sizes()) {
      mismatched.push_back(detail::str_cat(name, ": checkpoint has shape ", src.shape_str(),
                                           ", the model has ", t.shape_str()));
    }
  }
  for (const auto& [name, t] : state) {
    if (!find_in(own, name).defined()) unexpected.push_back(name);
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + ("\"" + x + "\"");
    return s;
  };
  EMBER_CHECK(mismatched.empty(), type_name_, ".load_state_dict: size mismatch for ",
              join(mismatched));
  EMBER_CHECK(!strict || (missing.empty() && unexpected.empty()), type_name_,
              ".load_state_dict: error(s) in loading state_dict:",
              missing.empty() ? "" : " missing key(s): " + join(missing) + ".",
              unexpected.empty() ? "" : " unexpected key(s): " + join(unexpected) + ".");
  NoGradGuard g;
  for (const auto& [name, t] : own) {
    Tensor src = find_in(state, name);
    if (src.defined()) copy_(t, src);  // t aliases the live parameter/buffer
  }
}

}  // namespace ember::nn
