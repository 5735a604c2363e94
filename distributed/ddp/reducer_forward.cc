// docs/design.md steps 6-7: what DDP's forward tells the Reducer: a synchronising forward began, and
// (prepare_for_backward) the outputs, from which find_unused_parameters finds the parameters that
// will get no gradient.
#include <algorithm>
#include <cstdio>

#include "autograd/graph_traversal.h"
#include "distributed/ddp/reducer.h"
#include "distributed/diagnostics/trace.h"

namespace ember::distributed {

void Reducer::prepare_for_forward() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++num_iterations_;
  statistics_.forward_started();
}

// Step 7. Nothing here checks the previous iteration: a forward that was never followed by a
// backward (validation with grad enabled, a skipped step) is legal; rebuild_buckets, called at
// every forward with grad enabled, reports an iteration whose reduction started but never ended.
void Reducer::prepare_for_backward(const std::vector<Tensor>& outputs) {
  std::lock_guard<std::mutex> lock(mutex_);
  expect_autograd_hooks_ = true;
  statistics_.backward_prepared();
  next_bucket_ = 0;
  for (Bucket& b : buckets_) b.pending = b.variables.size();
  if (options_.static_graph) num_grad_hooks_this_iteration_ = num_grad_hooks_triggered_;
  std::fill(ready_this_iteration_.begin(), ready_this_iteration_.end(), false);
  has_marked_unused_parameters_ = false;
  // Under static_graph the unused set is found once, from the first iteration's hook counts
  // (delay_all_reduce), and kept.
  if (dynamic_graph_find_unused()) {
    unused_parameters_.clear();
    search_unused_parameters(outputs);
  }
}

// Every parameter whose AccumulateGrad the graph from the outputs does not reach.
void Reducer::search_unused_parameters(const std::vector<Tensor>& outputs) {
  TraceScope scope("search_unused_parameters", "ddp");
  const double start_us = Trace::now_us();
  autograd::ReachableGraph graph = autograd::collect_reachable(outputs);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!graph.reaches(grad_accumulators_[i].get())) unused_parameters_.push_back(i);
  }
  statistics_.unused_parameters_searched((Trace::now_us() - start_us) / 1000.0);
  if (unused_parameters_.empty()) warn_no_unused_parameters();
}

void Reducer::warn_no_unused_parameters() {
  if (warned_no_unused_) return;
  warned_no_unused_ = true;
  std::fprintf(stderr,
               "[rank %d] DistributedDataParallel warning: find_unused_parameters=true was specified, "
               "but no unused parameters were found in the forward pass. This flag results in an extra "
               "traversal of the autograd graph every iteration, which can adversely affect "
               "performance. If your model indeed never has any unused parameters in the forward "
               "pass, consider turning this flag off.\n",
               process_group_->rank());
}

}  // namespace ember::distributed
