#include "autograd/graph_traversal.h"

#include "autograd/accumulate_grad.h"
#include "autograd/variable.h"

namespace ember::autograd {

ReachableGraph collect_reachable(const std::vector<Tensor>& outputs) {
  ReachableGraph g;
  std::vector<const Node*> stack;
  for (const Tensor& t : outputs) {
    if (!t.defined()) continue;
    Edge e = impl::gradient_edge(t);
    if (e.is_valid() && g.nodes.insert(e.function.get()).second) stack.push_back(e.function.get());
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (auto* acc = dynamic_cast<const AccumulateGrad*>(n)) {
      g.accumulators.push_back(acc);
      g.leaves.push_back(acc->variable());
    }
    for (const Edge& e : n->next_edges()) {
      if (e.is_valid() && g.nodes.insert(e.function.get()).second) stack.push_back(e.function.get());
    }
  }
  return g;
}

}  // namespace ember::autograd
