// Containers: Sequential (forward chains its children) and ModuleList (holds modules, no forward).
#pragma once

#include <memory>
#include <vector>

#include "nn/module.h"

namespace ember::nn {

// PyTorch's torch.nn.Sequential: forward() passes the input through the modules in order. They are
// registered as children "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  explicit Sequential(std::vector<ModulePtr> modules);
  // Appends a module named by its position ("0", "1", ...).
  void push_back(ModulePtr module);
  Tensor forward(const Tensor& input) override;
  size_t size() const { return modules_.size(); }
  ModulePtr operator[](size_t i) const { return modules_.at(i); }

 private:
  std::vector<ModulePtr> modules_;
};

// PyTorch's torch.nn.ModuleList: registers its modules as children "0", "1", ... (so their
// parameters count) and iterates over them; it has no forward() of its own (calling it throws).
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  void push_back(ModulePtr module);
  size_t size() const { return modules_.size(); }
  ModulePtr operator[](size_t i) const { return modules_.at(i); }
  std::vector<ModulePtr>::const_iterator begin() const { return modules_.begin(); }
  std::vector<ModulePtr>::const_iterator end() const { return modules_.end(); }

 private:
  std::vector<ModulePtr> modules_;
};

}  // namespace ember::nn
