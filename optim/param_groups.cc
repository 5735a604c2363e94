#include "optim/param_groups.h"

#include <string>
#include <utility>

namespace ember::optim {

std::vector<OptimizerParamGroup> configure_optimizer_groups(const nn::GPT& model, double weight_decay,
                                                            const AdamOptions& options) {
  const nn::GPT::WeightDecaySplit split = model.weight_decay_split();
  auto tensors = [](const std::vector<std::pair<std::string, Tensor>>& named) {
    std::vector<Tensor> out;
    for (const auto& kv : named) out.push_back(kv.second);
    return out;
  };
  AdamOptions decay = options, no_decay = options;
  decay.weight_decay(weight_decay);
  no_decay.weight_decay(0.0);
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(tensors(split.decay), decay);
  groups.emplace_back(tensors(split.no_decay), no_decay);
  return groups;
}

}  // namespace ember::optim
