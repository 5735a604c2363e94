// docs/design.md steps 7-8: DDP's output sink (PyTorch's _DDPSink). DDP's forward passes every output
// that requires grad through one node, so backward always reaches all outputs' graphs together:
// an output the loss never used hands an undefined gradient down its branch, the parameters there
// fire their hooks without a gradient, and the Reducer fills their slots with zeros instead of
// waiting for them forever. Under static_graph, the sink also queues the first iteration's
// delay_all_reduce to run after the whole backward.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ember::distributed {

class Reducer;

// Returns `outputs` with every tensor that requires grad replaced by an alias whose grad_fn is one
// shared sink node; the others are returned as they are. The sink's backward passes gradients
// through unchanged (undefined ones stay undefined) and, when `delay_all_reduce` is set, queues
// reducer.delay_all_reduce() on the engine.
std::vector<Tensor> pass_through_ddp_sink(const std::vector<Tensor>& outputs, Reducer& reducer,
                                          bool delay_all_reduce);

}  // namespace ember::distributed
