// docs/design.md steps 8-9: the autograd hook of each parameter, and marking its gradient ready: into
// its bucket view, scaled by 1/world while copying, then one fewer pending in its bucket.
#include <algorithm>
#include <cstdio>

#include "autograd/engine.h"
#include "distributed/ddp/ddp_check.h"
#include "distributed/ddp/reducer.h"
#include "distributed/diagnostics/trace.h"
#include "tensor/factories.h"
#include "tensor/ops.h"
#include "tensor/sparse.h"

namespace ember::distributed {

namespace {

// Equal strides wherever they matter: a dimension of size 1 is never stepped over, so its stride
// says nothing about the layout (a [1, 16] gradient from a transposed product may carry (1, 1)
// where its parameter has (16, 1)). PyTorch's AccumulateGrad makes gradients match the parameter's
// strides exactly (its layout contract); ember's does not, so this is where it would show.
bool same_memory_layout(const Tensor& a, const Tensor& b) {
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  }
  return true;
}

}  // namespace

// Step 8: runs after parameter `index`'s AccumulateGrad, also when the incoming gradient was
// undefined (an output that did not reach the loss, see ddp_sink.h): then .grad is left as it was
// and the parameter counts as unused here, but its bucket still gets its slot (zeros).
void Reducer::autograd_hook(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A parameter with a gradient was used; remembered across no_sync iterations too. As PyTorch,
  // .grad is what counts (an undefined incoming gradient leaves it undefined after zero_grad).
  if (tracks_local_use() && params_[index].grad().defined()) {
    local_used_map_.data_ptr<int32_t>()[index] = 1;
  }
  // static_graph, first iteration: only count; delay_all_reduce reduces everything at the end.
  // Only a synchronising backward counts: a no_sync backward before the second synchronising
  // forward would inflate the counts, and no parameter would be ready again (PyTorch #187732).
  if (static_graph_first_iteration()) {
    if (expect_autograd_hooks_) ++num_grad_hooks_triggered_[index];
    return;
  }
  // Outside a synchronising DDP forward (no_sync, or backward without DDP's forward) gradients
  // simply accumulate locally.
  if (!expect_autograd_hooks_) return;
  statistics_.gradient_ready(index, param_name(index), params_[index].nbytes());
  // With unused parameters, the first hook marks all of them ready (their buckets hold zeros).
  if (!has_marked_unused_parameters_) {
    has_marked_unused_parameters_ = true;
    if (!unused_parameters_.empty() && Trace::get().enabled()) trace_unused_marked_ready();
    for (size_t unused : unused_parameters_) mark_variable_ready(unused);
  }
  if (static_graph_after_first_iteration()) {
    // A parameter is ready once its hook fired as often as in the first iteration (reentrant
    // backward, as activation checkpointing does, fires it more than once).
    DDP_CHECK(num_grad_hooks_this_iteration_[index] > 0, "the gradient hook of parameter '", param_name(index),
              "' (index ", index, ") fired more often in this iteration than in the first (",
              num_grad_hooks_triggered_[index], " times). Your training graph has changed in this "
              "iteration, e.g. a parameter unused in the first iteration got used, which is not "
              "compatible with static_graph=true; construct DDP with static_graph=false (and "
              "find_unused_parameters=true if some parameters are unused)");
    if (--num_grad_hooks_this_iteration_[index] > 0) return;
  }
  if (should_rebuild_buckets()) push_rebuilt_params(index);
  mark_variable_ready(index);
}

// What the walkthrough and a trace show of step 8's first hook: the unused parameters it marks ready.
void Reducer::trace_unused_marked_ready() const {
  std::string names;
  for (size_t unused : unused_parameters_) names += (names.empty() ? "" : " ") + param_name(unused);
  Trace::get().instant("first hook marks the unused ready: " + names, "ddp");
}

// Step 9.
void Reducer::mark_variable_ready(size_t index) {
  if (ready_this_iteration_[index]) fail_marked_twice(index);
  ready_this_iteration_[index] = true;
  // From here on the iteration must reach finalize_backward before the next one starts.
  require_finalize_ = true;
  const VariableLocator& loc = variable_locators_[index];
  Bucket& bucket = buckets_[loc.bucket_index];
  if (bucket.expect_sparse_gradient) {
    mark_variable_ready_sparse(index);
  } else {
    mark_variable_ready_dense(index);
  }
  DDP_INTERNAL_ASSERT(bucket.pending > 0, "bucket ", loc.bucket_index, " has no gradient pending, yet parameter '",
                      param_name(index), "' became ready");
  if (--bucket.pending == 0) mark_bucket_ready(loc.bucket_index);
  // Step 11: once the last bucket is launched, finalize after the whole graph has run.
  if (next_bucket_ == buckets_.size()) queue_finalize_backward();
}

// See Note [Who divides gradients by the world size]: the gradient is scaled by 1/divisor while it
// is copied into the bucket, in one pass (PyTorch's mul_out(bucket_view, grad, 1/div)); a gradient
// that already is its bucket view (gradient_as_bucket_view) is scaled in place by the same factor
// (PyTorch divides there; the reciprocal keeps both paths, and allreduce_hook, bit-identical).
void Reducer::mark_variable_ready_dense(size_t index) {
  NoGradGuard no_grad;
  const VariableLocator& loc = variable_locators_[index];
  const Tensor& view = buckets_[loc.bucket_index].bucket_views_in[loc.intra_bucket_index];
  Tensor& grad = params_[index].mutable_grad();
  const auto on_stream = on_bucket_stream();  // Note [Bucket copies on the communication stream]
  if (!grad.defined()) {  // unused this iteration: contributes zeros
    zero_(view);
    return;
  }
  check_dense_gradient(index, grad, view);
  const bool prescale = comm_hook_->expects_prescaled_gradients();
  if (options_.gradient_as_bucket_view && grad.data_ptr() == view.data_ptr()) {
    if (prescale) mul_(view, 1.0 / divide_factor());
    return;
  }
  if (prescale) {
    mul_out(view, grad, 1.0 / divide_factor());
  } else {
    copy_(view, grad);
  }
  if (options_.gradient_as_bucket_view) grad = view;  // alias .grad to the bucket from now on
}

// A dense bucket takes a dense gradient of its parameter's dtype, device and shape; other strides
// are copied correctly, with one warning, as PyTorch's layout-contract warning.
void Reducer::check_dense_gradient(size_t index, const Tensor& grad, const Tensor& view) {
  DDP_CHECK(!grad.is_sparse(), "parameter '", param_name(index), "' (index ", index,
            ") produced a sparse gradient but its bucket is dense; construct the Embedding with "
            "sparse=true before wrapping it in DDP");
  DDP_CHECK(grad.dtype() == view.dtype() && grad.device() == view.device() && grad.sizes() == view.sizes(),
            "the gradient of parameter '", param_name(index), "' (index ", index, ") is ", grad.describe(),
            ", but its bucket view is ", view.describe(),
            "; gradients must keep the parameter's dtype, device and shape");
  if (same_memory_layout(grad, view) || warned_strides_) return;
  warned_strides_ = true;
  std::fprintf(stderr,
               "[rank %d] DistributedDataParallel warning: the gradient of parameter '%s' has strides %s "
               "but its bucket view has %s; it is copied correctly, but this may hurt performance.\n",
               ddp_rank(), param_name(index).c_str(), shape_to_string(grad.strides()).c_str(),
               shape_to_string(view.strides()).c_str());
}

// A sparse gradient of `param`'s shape with no rows (one sparse dimension, as Embedding's).
Tensor Reducer::empty_sparse_gradient(const Tensor& param) {
  Shape value_shape = param.sizes();
  value_shape[0] = 0;
  return sparse_coo_tensor(empty({1, 0}, kInt64), empty(value_shape, param.dtype()), param.sizes());
}

void Reducer::mark_variable_ready_sparse(size_t index) {
  NoGradGuard no_grad;
  Bucket& bucket = buckets_[variable_locators_[index].bucket_index];
  const Tensor& param = params_[index];
  const Tensor& grad = param.grad();
  if (!grad.defined()) {
    // Unused on this rank (find_unused_parameters): contribute no rows. PyTorch throws here, but
    // then the other ranks' allgather would wait for this one until the timeout.
    bucket.sparse_gradient = empty_sparse_gradient(param);
    return;
  }
  DDP_CHECK(grad.is_sparse(), "parameter '", param_name(index), "' (index ", index,
            ") expects a sparse gradient but got ", grad.describe());
  // See Note [Who divides gradients by the world size].
  const bool prescale = comm_hook_->expects_prescaled_gradients();
  bucket.sparse_gradient = prescale ? sparse_mul_scalar(grad, 1.0 / divide_factor()) : grad;
}

// The causes PyTorch lists, narrowed to those that can apply here: static_graph is suggested only
// while it is off (under it, a parameter firing too often fails earlier, in autograd_hook), and
// the unused-parameter cause only when the traversal did mark this parameter unused.
void Reducer::fail_marked_twice(size_t index) {
  const bool found_unused = has_marked_unused_parameters_ &&
                            std::find(unused_parameters_.begin(), unused_parameters_.end(), index) !=
                                unused_parameters_.end();
  const std::string static_graph_hint =
      options_.static_graph ? ""
                            : " If the graph does not change between iterations, static_graph=true "
                              "supports this.";
  std::string causes =
      "1) Use of a module parameter outside the forward function: make sure model parameters are not "
      "shared across multiple concurrent forward-backward passes." + static_graph_hint +
      " 2) Reused parameters in multiple reentrant backward passes: e.g. activation checkpointing "
      "that wraps the same part of the model several times, or a backward run from inside a hook "
      "over the same parameters, marks them ready twice; DDP does not support this by default." +
      static_graph_hint;
  if (found_unused) {
    causes += " 3) Incorrect unused-parameter detection: the graph traversal from the forward outputs "
              "found this parameter unused, but a gradient showed up anyway (e.g. from a reentrant "
              "backward). If every parameter takes part in the loss, construct DDP with "
              "find_unused_parameters=false.";
  }
  DDP_THROW("Expected to mark a variable ready only once. This error is caused by one of the "
            "following reasons: ", causes, " Parameter at index ", index, " with name '",
            param_name(index), "' has been marked as ready twice. This means that multiple autograd "
            "engine hooks have fired for this particular parameter during this iteration.");
}

}  // namespace ember::distributed
