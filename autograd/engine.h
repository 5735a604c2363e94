// Engine: executes the backward graph on the calling thread. It counts dependencies over the graph
// reachable from the roots, then pops a ready queue ordered by sequence_nr (newest first,
// AccumulateGrad first of all), so the order gradients become ready is deterministic and identical
// on every rank. Callbacks queued during backward run once after the whole graph has executed
// (DDP's finalize_backward, docs/design.md step 11-12).
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "autograd/node.h"

namespace ember::autograd {

// Runs backward graphs (PyTorch's torch::autograd::Engine): one instance, get_default_engine(),
// used by Tensor::backward and run_backward. queue_callback throws ember::Error outside a backward.
class Engine {
 public:
  static Engine& get_default_engine();

  // Runs backward from `roots` seeded with `grad_outputs` (one per root).
  void execute(const std::vector<Edge>& roots, const variable_list& grad_outputs, bool keep_graph);

  // Queues fn to run after the current backward's graph has finished; only valid during backward.
  void queue_callback(std::function<void()> fn);
  // True while a backward is executing on this thread.
  static bool is_executing();
};

// Note [Backward node observer]: a profiler's view of backward. When set, the engine calls it after
// every node it runs (pre-hooks, apply and the node's post-hooks, such as DDP's autograd hook on an
// AccumulateGrad) with the node and when it began and ended. Process-wide and read atomically, so
// tracing costs one load per node when off. The DDP trace (distributed/diagnostics/trace.h) draws them.
using NodeObserver = void (*)(const Node& node, std::chrono::steady_clock::time_point begin,
                              std::chrono::steady_clock::time_point end);
void set_node_observer(NodeObserver observer);  // nullptr: none

// backward() for several outputs at once (torch.autograd.backward); undefined gradients default to
// ones for one-element outputs.
void run_backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                  bool retain_graph);

}  // namespace ember::autograd
