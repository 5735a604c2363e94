// Parameter groups made from a model's own rules, as nanoGPT's configure_optimizers does.
#pragma once

#include <vector>

#include "nn/models/gpt.h"
#include "optim/adam.h"
#include "optim/optimizer.h"

namespace ember::optim {

// The two groups of model.weight_decay_split() for Adam/AdamW: copies of `options` with
// weight_decay set to `weight_decay` for the parameters that decay (every one of 2 or more dims)
// and 0 for the rest (biases, LayerNorm weights).
std::vector<OptimizerParamGroup> configure_optimizer_groups(const nn::GPT& model, double weight_decay,
                                                            const AdamOptions& options = AdamWOptions());

}  // namespace ember::optim
