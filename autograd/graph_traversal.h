// Walks the backward graph from some outputs and reports what it reaches. DDP's
// prepare_for_backward uses it with find_unused_parameters (docs/design.md step 7): every parameter
// whose AccumulateGrad is not reached gets no gradient this iteration.
#pragma once

#include <unordered_set>
#include <vector>

#include "autograd/node.h"

namespace ember::autograd {

// What collect_reachable() found from some outputs: the nodes reached, the AccumulateGrad nodes
// among them, and their leaves (the tensors a backward from those outputs gives a gradient).
struct ReachableGraph {
  std::unordered_set<const Node*> nodes;      // every Node reached through next_edges
  std::vector<const Node*> accumulators;      // the AccumulateGrad nodes among them
  std::vector<Tensor> leaves;                 // the leaf tensors those accumulators feed
  bool reaches(const Node* n) const { return nodes.count(n) > 0; }
};

ReachableGraph collect_reachable(const std::vector<Tensor>& outputs);

}  // namespace ember::autograd
