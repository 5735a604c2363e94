// Node and Edge: the backward graph. A Node is one backward function; its next_edges point at the
// Nodes that receive the gradients it produces (one edge per differentiable forward input). Nodes
// carry a monotonically increasing sequence_nr so the engine can run them in a deterministic order
// (newest first), and hooks: pre-hooks on incoming gradients (tensor hooks), and for AccumulateGrad,
// post-accumulate hooks (DDP's Reducer hangs its autograd_hook there).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ember::autograd {

class Node;
using variable_list = std::vector<Tensor>;

// Where a gradient goes (PyTorch's torch::autograd::Edge): input `input_nr` of Node `function`.
// Invalid (null function) where no gradient flows, e.g. into a tensor that does not require grad.
struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
  bool is_valid() const { return function != nullptr; }
};

// What the gradient for a forward input must look like (the engine reduces/casts to it).
struct InputMetadata {
  Shape shape;
  ScalarType dtype = kFloat32;
  Device device;
};

uint64_t next_sequence_nr();
// AccumulateGrad runs as soon as it is ready (PyTorch gives it the highest priority too).
constexpr uint64_t kAccumulateGradSequenceNr = std::numeric_limits<uint64_t>::max();

using GradHook = std::function<Tensor(const Tensor&)>;

// One backward function of the graph (PyTorch's torch::autograd::Node): apply() turns the gradients
// of its forward's outputs into those of its inputs, sent along next_edges(). Edges own the nodes
// they point at, so a tensor's grad_fn keeps its whole history alive.
class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(uint64_t sequence_nr = next_sequence_nr()) : sequence_nr_(sequence_nr) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  virtual std::string name() const = 0;
  // Gradients w.r.t. this node's forward outputs in, gradients w.r.t. its forward inputs out
  // (one per next edge; undefined where no gradient flows).
  virtual variable_list apply(variable_list&& grads) = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release_variables() {}
  // Number of gradients this node takes (its forward's outputs).
  virtual size_t num_inputs() const { return 1; }

  uint64_t sequence_nr() const { return sequence_nr_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  const std::vector<InputMetadata>& input_metadata() const { return input_metadata_; }
  // Adds the edge for a forward input and remembers its shape/dtype/device.
  void add_input(const Edge& edge, const Tensor& input);
  bool should_compute_output(size_t i) const { return i < next_edges_.size() && next_edges_[i].is_valid(); }

  // Tensor hooks on the gradient arriving at input `input_nr` (run before apply, in order).
  uint64_t add_pre_hook(uint32_t input_nr, GradHook hook);
  bool remove_pre_hook(uint64_t handle);
  Tensor run_pre_hooks(uint32_t input_nr, Tensor grad) const;
  bool has_pre_hooks() const { return !pre_hooks_.empty(); }

 protected:
  static uint64_t next_hook_handle();

 private:
  uint64_t sequence_nr_;
  std::vector<Edge> next_edges_;
  std::vector<InputMetadata> input_metadata_;
  struct PreHook {
    uint64_t handle;
    uint32_t input_nr;
    GradHook fn;
  };
  std::vector<PreHook> pre_hooks_;
};

// The engine's entry node: hands the user's grad_outputs to the roots of backward().
class GraphRoot final : public Node {
 public:
  GraphRoot(std::vector<Edge> roots, variable_list grads);
  std::string name() const override { return "GraphRoot"; }
  variable_list apply(variable_list&&) override { return grads_; }
  size_t num_inputs() const override { return 0; }

 private:
  variable_list grads_;
};

}  // namespace ember::autograd
