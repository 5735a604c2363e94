// StateDict: a module's (or optimizer's) named tensors in a stable order, as PyTorch's
// OrderedDict[str, Tensor]. Checkpoint files (nn/checkpoint.h) store exactly this.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ember::nn {

using StateDict = std::vector<std::pair<std::string, Tensor>>;

// The tensor stored under `key`, or an undefined tensor.
inline Tensor find_in(const StateDict& sd, const std::string& key) {
  for (const auto& kv : sd) {
    if (kv.first == key) return kv.second;
  }
  return Tensor();
}

}  // namespace ember::nn
