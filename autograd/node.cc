#include "autograd/node.h"

#include <atomic>

namespace ember::autograd {

uint64_t next_sequence_nr() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

uint64_t Node::next_hook_handle() {
  static std::atomic<uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

void Node::add_input(const Edge& edge, const Tensor& input) {
  next_edges_.push_back(edge);
  input_metadata_.push_back(InputMetadata{input.sizes(), input.dtype(), input.device()});
}

uint64_t Node::add_pre_hook(uint32_t input_nr, GradHook hook) {
  const uint64_t h = next_hook_handle();
  pre_hooks_.push_back(PreHook{h, input_nr, std::move(hook)});
  return h;
}

bool Node::remove_pre_hook(uint64_t handle) {
  for (auto it = pre_hooks_.begin(); it != pre_hooks_.end(); ++it) {
    if (it->handle == handle) {
      pre_hooks_.erase(it);
      return true;
    }
  }
  return false;
}

Tensor Node::run_pre_hooks(uint32_t input_nr, Tensor grad) const {
  for (const PreHook& h : pre_hooks_) {
    if (h.input_nr != input_nr) continue;
    Tensor replaced = h.fn(grad);
    if (replaced.defined()) grad = std::move(replaced);
  }
  return grad;
}

GraphRoot::GraphRoot(std::vector<Edge> roots, variable_list grads)
    : Node(std::numeric_limits<uint64_t>::max()), grads_(std::move(grads)) {
  for (size_t i = 0; i < roots.size(); ++i) add_input(roots[i], grads_[i]);
}

}  // namespace ember::autograd
