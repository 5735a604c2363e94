#include "autograd/engine.h"

#include <atomic>
#include <queue>
#include <unordered_map>

#include "autograd/functions/function_node.h"
#include "autograd/variable.h"
#include "tensor/factories.h"
#include "tensor/ops.h"
#include "tensor/sparse.h"

namespace ember::autograd {
namespace {

// Gradients arriving at one node, summed per input slot.
struct InputBuffer {
  variable_list grads;
  explicit InputBuffer(size_t n = 0) : grads(n) {}
  void add(size_t pos, Tensor&& g) {
    if (!g.defined()) return;
    Tensor& slot = grads[pos];
    if (!slot.defined()) {
      slot = std::move(g);
    } else if (slot.is_sparse() && g.is_sparse()) {
      slot = sparse_add(slot, g);
    } else if (slot.is_sparse() || g.is_sparse()) {
      slot = slot.is_sparse() ? add_sparse_to_dense_(g.clone(), slot) : add_sparse_to_dense_(slot.clone(), g);
    } else if (can_accumulate_in_place(slot, g)) {
      slot.add_(g);
    } else {
      slot = ember::add(slot, g);
    }
  }

  // Note [In-place gradient accumulation]: as PyTorch's InputBuffer::accumulate, the sum is
  // written into the first gradient when nothing else can see it: no other handle to the tensor or
  // its storage (not another edge's copy, not a saved variable, not a view of a DDP bucket), dense,
  // and already of the sum's shape and dtype. Saves a fresh output (allocated, cold) per sum: a
  // ResNet's backward sums at every residual connection.
  static bool can_accumulate_in_place(const Tensor& slot, const Tensor& g) {
    return slot.impl_ptr().use_count() == 1 && slot.storage().use_count() == 1 &&
           slot.is_contiguous() && slot.sizes() == g.sizes() && slot.dtype() == g.dtype() &&
           slot.device() == g.device();
  }
};

struct NodeTask {
  std::shared_ptr<Node> fn;
  InputBuffer buffer;
};

struct ReadyQueueOrder {
  bool operator()(const NodeTask* a, const NodeTask* b) const {
    return a->fn->sequence_nr() < b->fn->sequence_nr();  // largest sequence_nr on top
  }
};

struct GraphTask {
  bool keep_graph = false;
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, NodeTask> not_ready;
  std::vector<std::function<void()>> final_callbacks;
};

thread_local GraphTask* t_current_graph_task = nullptr;

void compute_dependencies(Node* root, GraphTask& task) {
  std::vector<Node*> stack{root};
  std::unordered_map<Node*, bool> seen{{root, true}};
  while (!stack.empty()) {
    Node* fn = stack.back();
    stack.pop_back();
    for (const Edge& e : fn->next_edges()) {
      Node* next = e.function.get();
      if (!next) continue;
      ++task.dependencies[next];
      if (seen.emplace(next, true).second) stack.push_back(next);
    }
  }
}

// Makes each produced gradient match its input's metadata (shape by summation, then dtype).
void validate_outputs(const Node& fn, variable_list& grads) {
  const auto& edges = fn.next_edges();
  EMBER_CHECK(grads.size() == edges.size(), fn.name(), ": returned ", grads.size(),
              " gradients but has ", edges.size(), " inputs (this is a bug in its backward formula)");
  const auto& meta = fn.input_metadata();
  for (size_t i = 0; i < grads.size(); ++i) {
    Tensor& g = grads[i];
    if (!g.defined() || !edges[i].is_valid()) continue;
    const InputMetadata& m = meta[i];
    if (g.is_sparse()) {
      EMBER_CHECK(g.sizes() == m.shape, fn.name(), ": sparse gradient ", g.describe(),
                  " does not match input ", i, " of shape ", shape_to_string(m.shape));
      continue;
    }
    if (g.sizes() != m.shape) {
      try {
        g = sum_to(g, m.shape);
      } catch (const Error&) {
        EMBER_THROW(fn.name(), ": gradient ", g.describe(), " for input ", i,
                    " cannot be reduced to the input's shape ", shape_to_string(m.shape));
      }
    }
    if (g.dtype() != m.dtype) g = g.to(m.dtype);
  }
}

}  // namespace

Engine& Engine::get_default_engine() {
  static Engine engine;
  return engine;
}

bool Engine::is_executing() { return t_current_graph_task != nullptr; }

namespace {
std::atomic<NodeObserver> g_node_observer{nullptr};
}  // namespace

void set_node_observer(NodeObserver observer) { g_node_observer.store(observer, std::memory_order_release); }

void Engine::queue_callback(std::function<void()> fn) {
  EMBER_CHECK(t_current_graph_task != nullptr,
              "queue_callback: final callbacks can only be queued during backward (from a hook or a "
              "backward function)");
  t_current_graph_task->final_callbacks.push_back(std::move(fn));
}

void Engine::execute(const std::vector<Edge>& roots, const variable_list& grad_outputs,
                     bool keep_graph) {
  NoGradGuard no_grad;  // gradients are plain tensors: higher-order graphs are not supported
  GraphTask task;
  task.keep_graph = keep_graph;
  auto graph_root = std::make_shared<GraphRoot>(roots, grad_outputs);
  compute_dependencies(graph_root.get(), task);

  GraphTask* outer = t_current_graph_task;  // reentrant backward from inside a hook is allowed
  t_current_graph_task = &task;
  struct Restore {
    GraphTask* prev;
    ~Restore() { t_current_graph_task = prev; }
  } restore{outer};

  std::priority_queue<NodeTask*, std::vector<NodeTask*>, ReadyQueueOrder> ready;
  std::vector<std::unique_ptr<NodeTask>> owned;
  owned.push_back(std::make_unique<NodeTask>(NodeTask{graph_root, InputBuffer(0)}));
  ready.push(owned.back().get());

  while (!ready.empty()) {
    NodeTask* nt = ready.top();
    ready.pop();
    std::shared_ptr<Node> fn = nt->fn;
    variable_list outputs;
    // Note [Backward node observer].
    const NodeObserver observer = g_node_observer.load(std::memory_order_acquire);
    const auto begin = observer ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    try {
      variable_list inputs = std::move(nt->buffer.grads);
      if (fn->has_pre_hooks()) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (inputs[i].defined()) inputs[i] = fn->run_pre_hooks(static_cast<uint32_t>(i), inputs[i]);
        }
      }
      outputs = fn->apply(std::move(inputs));
      if (!keep_graph) fn->release_variables();
      validate_outputs(*fn, outputs);
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      if (msg.rfind("backward of ", 0) == 0) throw;  // already names its node
      EMBER_THROW("backward of ", fn->name(), " failed: ", msg);
    }
    if (observer && fn != graph_root) observer(*fn, begin, std::chrono::steady_clock::now());
    const auto& edges = fn->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.is_valid()) continue;
      Node* next = e.function.get();
      auto it = task.not_ready.find(next);
      if (it == task.not_ready.end()) {
        it = task.not_ready.emplace(next, NodeTask{e.function, InputBuffer(next->num_inputs())}).first;
      }
      it->second.buffer.add(e.input_nr, std::move(outputs[i]));
      if (--task.dependencies[next] == 0) {
        owned.push_back(std::make_unique<NodeTask>(std::move(it->second)));
        task.not_ready.erase(it);
        ready.push(owned.back().get());
      }
    }
    nt->fn.reset();
  }

  // Callbacks may queue more callbacks (e.g. DDP finalize after a hook): run until none remain.
  for (size_t i = 0; i < task.final_callbacks.size(); ++i) {
    auto cb = std::move(task.final_callbacks[i]);
    cb();
  }
}

void run_backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                  bool retain_graph) {
  EMBER_CHECK(outputs.size() == grad_outputs.size(), "backward: got ", outputs.size(),
              " outputs but ", grad_outputs.size(), " gradients");
  std::vector<Edge> roots;
  variable_list grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    EMBER_CHECK(out.defined(), "backward: output ", i, " is undefined");
    EMBER_CHECK(out.requires_grad(), "backward: element ", i,
                " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grad_outputs[i];
    if (!g.defined()) {
      EMBER_CHECK(out.numel() == 1, "backward: grad can be implicitly created only for scalar ",
                  "outputs; output ", i, " is ", out.describe(), " (pass a gradient of that shape)");
      g = ones_like(out);
    } else {
      EMBER_CHECK(g.sizes() == out.sizes(), "backward: gradient ", g.describe(),
                  " does not match the shape of output ", i, ", ", out.describe());
    }
    roots.push_back(impl::gradient_edge(out));
    grads.push_back(g);
  }
  Engine::get_default_engine().execute(roots, grads, retain_graph);
}

}  // namespace ember::autograd
