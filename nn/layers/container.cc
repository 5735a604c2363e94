#include "nn/layers/container.h"

namespace ember::nn {

Sequential::Sequential(std::vector<ModulePtr> modules) : Module("Sequential") {
  for (auto& m : modules) push_back(std::move(m));
}

void Sequential::push_back(ModulePtr module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (auto& m : modules_) x = m->forward(x);
  return x;
}

void ModuleList::push_back(ModulePtr module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

}  // namespace ember::nn
