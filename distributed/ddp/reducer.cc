// DESIGN.md steps 5 and 8-11: bucket construction, the autograd hooks, marking variables and
// buckets ready, and launching each bucket's reduction through the comm hook.
#include "distributed/ddp/ddp_check.h"
#include "distributed/ddp/reducer.h"

#include <algorithm>
#include <cstdio>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "distributed/trace.h"
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

Reducer::Reducer(std::vector<Tensor> params, std::vector<std::string> param_names,
                 std::vector<std::vector<size_t>> bucket_indices, ProcessGroupPtr process_group,
                 std::vector<bool> expect_sparse_gradient, ReducerOptions options)
    : params_(std::move(params)),
      param_names_(std::move(param_names)),
      expect_sparse_gradient_(std::move(expect_sparse_gradient)),
      process_group_(std::move(process_group)),
      options_(options),
      comm_hook_(std::make_unique<AllReduceBySumCommHook>(process_group_)) {
  EMBER_CHECK(!params_.empty(), "Reducer: no parameters to reduce");
  if (expect_sparse_gradient_.empty()) expect_sparse_gradient_.assign(params_.size(), false);
  ready_this_iteration_.assign(params_.size(), false);
  hook_us_.assign(params_.size(), 0.0);
  local_used_map_ = zeros({static_cast<int64_t>(params_.size())}, kInt32);
  num_grad_hooks_triggered_.assign(params_.size(), 0);
  initialize_buckets(std::move(bucket_indices));
  initial_bucket_indices_ = bucket_indices_;
  register_autograd_hooks();
}

Reducer::~Reducer() {
  for (size_t i = 0; i < grad_accumulators_.size(); ++i) {
    grad_accumulators_[i]->remove_post_hook(hook_handles_[i]);
  }
}

std::string Reducer::param_name(size_t index) const {
  return index < param_names_.size() && !param_names_[index].empty() ? param_names_[index]
                                                                      : "<unnamed>";
}

// Step 5: one flat, zero-filled buffer per dense bucket and a view per parameter; with
// gradient_as_bucket_view, existing .grad tensors are moved into (and replaced by) their views.
void Reducer::initialize_buckets(std::vector<std::vector<size_t>> bucket_indices) {
  NoGradGuard no_grad;
  buckets_.clear();
  variable_locators_.assign(params_.size(), VariableLocator{});
  std::vector<bool> seen(params_.size(), false);
  for (size_t b = 0; b < bucket_indices.size(); ++b) {
    const auto& indices = bucket_indices[b];
    EMBER_CHECK(!indices.empty(), "Reducer: bucket ", b, " is empty");
    Bucket bucket;
    if (indices.size() == 1 && expect_sparse_gradient_[indices[0]]) {
      bucket.expect_sparse_gradient = true;
    }
    int64_t offset = 0;
    for (size_t j = 0; j < indices.size(); ++j) {
      const size_t i = indices[j];
      EMBER_CHECK(i < params_.size() && !seen[i], "Reducer: parameter index ", i,
                  " is out of range or assigned to two buckets");
      seen[i] = true;
      const Tensor& p = params_[i];
      DDP_CHECK(indices.size() == 1 || !expect_sparse_gradient_[i], "bucket ", b,
                " holds parameter '", param_name(i), "', which expects a sparse gradient, with ",
                indices.size() - 1,
                " others: a parameter with sparse gradients needs a bucket of its own");
      EMBER_CHECK(p.dtype() == params_[indices[0]].dtype() && p.device() == params_[indices[0]].device(),
                  "Reducer: bucket ", b, " mixes ", params_[indices[0]].describe(), " and ",
                  p.describe(), " (parameter '", param_name(i), "')");
      bucket.variables.push_back(p);
      bucket.variable_indices.push_back(i);
      bucket.offsets.push_back(static_cast<size_t>(offset));
      bucket.lengths.push_back(static_cast<size_t>(p.numel()));
      bucket.sizes.push_back(p.sizes());
      variable_locators_[i] = VariableLocator{buckets_.size(), j};
      offset += p.numel();
    }
    if (!bucket.expect_sparse_gradient) {
      const Tensor& first = params_[indices[0]];
      bucket.gradients = zeros({offset}, TensorOptions(first.dtype(), first.device()));
      for (size_t j = 0; j < indices.size(); ++j) {
        Tensor view = bucket.gradients.narrow(0, static_cast<int64_t>(bucket.offsets[j]),
                                              static_cast<int64_t>(bucket.lengths[j]))
                          .view(bucket.sizes[j]);
        bucket.bucket_views_in.push_back(view);
        bucket.bucket_views_out.push_back(view);
        if (options_.gradient_as_bucket_view) {
          Tensor& grad = params_[indices[j]].mutable_grad();
          if (grad.defined() && grad.data_ptr() != view.data_ptr()) {
            copy_(view, grad);
            grad = view;
          }
        }
      }
    }
    bucket.pending = bucket.variables.size();
    buckets_.push_back(std::move(bucket));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    EMBER_CHECK(seen[i], "Reducer: parameter ", i, " ('", param_name(i), "') is in no bucket");
  }
  for (const Bucket& bucket : buckets_) {
    if (!bucket_stream_ && bucket.gradients.defined() && bucket.gradients.is_cuda()) {
      bucket_stream_ = std::make_unique<BucketStream>(bucket.gradients.device());
    }
  }
  bucket_indices_ = std::move(bucket_indices);
}

// Step 5: a post-accumulate hook on every parameter's AccumulateGrad (kept alive here, as the
// graph only holds accumulators while a graph exists).
void Reducer::register_autograd_hooks() {
  for (size_t i = 0; i < params_.size(); ++i) {
    auto acc = autograd::impl::grad_accumulator(params_[i]);
    hook_handles_.push_back(acc->add_post_hook([this, i](const Tensor&) { autograd_hook(i); }));
    grad_accumulators_.push_back(std::move(acc));
  }
}

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
  if (static_graph_first_iteration()) {
    ++num_grad_hooks_triggered_[index];
    return;
  }
  // Outside a synchronising DDP forward (no_sync, or backward without DDP's forward) gradients
  // simply accumulate locally.
  if (!expect_autograd_hooks_) return;
  last_hook_us_ = Trace::now_us();
  if (backward_start_us_ == 0) backward_start_us_ = last_hook_us_;
  hook_us_[index] = last_hook_us_;
  if (Trace::get().enabled()) {
    // The bytes let a step-time model re-bucket the gradients (bench/step_model.py).
    const size_t bytes = params_[index].nbytes();
    Trace::get().instant("autograd_hook " + param_name(index), "ddp", 0,
                         "{\"param_index\":" + std::to_string(index) + ",\"bytes\":" + std::to_string(bytes) + "}");
  }
  // With unused parameters, the first hook marks all of them ready (their buckets hold zeros).
  if (!has_marked_unused_parameters_) {
    has_marked_unused_parameters_ = true;
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

void Reducer::push_rebuilt_params(size_t index) {
  rebuilt_params_.push_back(params_[index]);
  rebuilt_param_indices_.push_back(static_cast<int64_t>(index));
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
  if (--bucket.pending == 0) mark_bucket_ready(loc.bucket_index);
  // Step 11: once the last bucket is launched, finalize after the whole graph has run.
  if (next_bucket_ == buckets_.size()) {
    if (dynamic_graph_find_unused()) all_reduce_local_used_map();
    autograd::Engine::get_default_engine().queue_callback([this] {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        finalize_backward();
      }
      notify_iteration_observer();
    });
  }
}

void Reducer::mark_variable_ready_dense(size_t index) {
  NoGradGuard no_grad;
  const VariableLocator& loc = variable_locators_[index];
  Bucket& bucket = buckets_[loc.bucket_index];
  const Tensor& view = bucket.bucket_views_in[loc.intra_bucket_index];
  Tensor& grad = params_[index].mutable_grad();
  const auto on_stream = on_bucket_stream();  // Note [Bucket copies on the communication stream]
  if (!grad.defined()) {  // unused this iteration: contributes zeros
    zero_(view);
    return;
  }
  const int rank = process_group_->rank();
  DDP_CHECK(!grad.is_sparse(), "parameter '",
            param_name(index), "' (index ", index, ") produced a sparse gradient but its bucket ",
            "is dense; construct the Embedding with sparse=true before wrapping it in DDP");
  DDP_CHECK(grad.dtype() == view.dtype() && grad.device() == view.device() && grad.sizes() == view.sizes(),
            "the gradient of parameter '", param_name(index), "' (index ", index, ") is ",
            grad.describe(), ", but its bucket view is ", view.describe(),
            "; gradients must keep the parameter's dtype, device and shape");
  if (!same_memory_layout(grad, view) && !warned_strides_) {
    warned_strides_ = true;
    std::fprintf(stderr,
                 "[rank %d] DistributedDataParallel warning: the gradient of parameter '%s' has strides %s "
                 "but its bucket view has %s; it is copied correctly, but this may hurt performance.\n",
                 rank, param_name(index).c_str(), shape_to_string(grad.strides()).c_str(),
                 shape_to_string(view.strides()).c_str());
  }
  // See Note [Who divides gradients by the world size].
  const double factor = comm_hook_->expects_prescaled_gradients() ? divide_factor() : 1.0;
  const bool scale = factor != 1.0;
  if (options_.gradient_as_bucket_view && grad.data_ptr() == view.data_ptr()) {
    if (scale) div_(view, factor);
    return;
  }
  copy_(view, grad);
  if (scale) div_(view, factor);
  if (options_.gradient_as_bucket_view) grad = view;  // alias .grad to the bucket from now on
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
  const double factor = comm_hook_->expects_prescaled_gradients() ? divide_factor() : 1.0;
  bucket.sparse_gradient = factor != 1.0 ? sparse_mul_scalar(grad, 1.0 / factor) : grad;
}

// Step 10: buckets launch strictly in order, so every rank issues the same collectives in the
// same order even if its gradients became ready in a different order.
void Reducer::mark_bucket_ready(size_t bucket_index) {
  if (bucket_index > next_bucket_) return;
  for (; next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0; ++next_bucket_) {
    Bucket& bucket = buckets_[next_bucket_];
    if (should_skip_all_reduce_bucket(bucket)) {
      skip_all_reduce_bucket(bucket);
    } else {
      all_reduce_bucket(bucket, next_bucket_);
    }
  }
}

// The unused set is static_graph's (from its first iteration) or this iteration's graph search;
// before either is known every bucket communicates.
bool Reducer::should_skip_all_reduce_bucket(const Bucket& bucket) const {
  if (!options_.skip_all_reduce_unused_params) return false;
  if (!static_graph_after_first_iteration() && !dynamic_graph_find_unused()) return false;
  for (size_t index : bucket.variable_indices) {
    if (std::find(unused_parameters_.begin(), unused_parameters_.end(), index) == unused_parameters_.end()) {
      return false;
    }
  }
  return true;
}

// Its result is what every rank holds: the zeros the unused parameters left in the bucket.
void Reducer::skip_all_reduce_bucket(Bucket& bucket) {
  bucket.launch_us = Trace::now_us();
  *bucket.done_us = bucket.launch_us;
  auto done = std::make_shared<Future>(std::vector<Device>{bucket.gradients.defined() ? bucket.gradients.device() : kCPU});
  done->mark_completed({bucket.expect_sparse_gradient ? bucket.sparse_gradient : bucket.gradients});
  bucket.future_work = done;
}

void Reducer::all_reduce_bucket(Bucket& bucket, size_t bucket_index) {
  const double launch_us = Trace::now_us();
  bucket.launch_us = launch_us;
  *bucket.done_us = 0;
  ++num_buckets_reduced_;
  GradBucket grad_bucket(bucket_index, buckets_.size(),
                         bucket.expect_sparse_gradient ? bucket.sparse_gradient : bucket.gradients,
                         bucket.offsets, bucket.lengths, bucket.sizes, bucket.variables);
  // Timestamp the completion on the communication thread (for the trace and overlap statistics).
  // Chained with then(), not add_callback(): finalize_backward waits on the chained future, so it
  // never reads done_us while the worker is still writing it.
  const size_t n = bucket.variables.size();
  const size_t bytes = bucket.expect_sparse_gradient ? 0 : bucket.gradients.nbytes();
  // Which hooks fed this bucket: scripts/merge_traces.py draws a flow from each to its allreduce.
  std::string indices;
  if (Trace::get().enabled()) {
    for (size_t index : bucket.variable_indices) indices += (indices.empty() ? "" : ",") + std::to_string(index);
  }
  // Device-side spans of this bucket's collectives (ProcessGroupNCCL's events) carry its name.
  TraceLabel label(Trace::get().enabled() ? "bucket " + std::to_string(bucket_index) : std::string());
  // The collective waits for the bucket's copies, not for the rest of backward (Note [Bucket
  // copies on the communication stream]); the hook's own kernels run there too.
  const auto on_stream = on_bucket_stream();
  bucket.future_work =
      run_comm_hook(grad_bucket)->then([done_us = bucket.done_us, launch_us, bucket_index, n, bytes,
                                         indices](Future& reduced) {
        *done_us = Trace::now_us();
        Trace::get().span("allreduce bucket " + std::to_string(bucket_index), "ddp", launch_us,
                          *done_us - launch_us, 1,
                          "{\"bucket\":" + std::to_string(bucket_index) + ",\"params\":" + std::to_string(n) +
                              ",\"bytes\":" + std::to_string(bytes) + ",\"param_indices\":[" + indices + "]}");
        return reduced.const_value();
      });
}

std::optional<CudaStreamGuard> Reducer::on_bucket_stream() {
  if (!bucket_stream_) return std::nullopt;
  return bucket_stream_->after_current();
}

FuturePtr Reducer::run_comm_hook(GradBucket& grad_bucket) {
  try {
    return comm_hook_->run_hook(grad_bucket);
  } catch (const std::exception& e) {
    DDP_THROW("comm hook '",
              comm_hook_->name(), "' failed on bucket ", grad_bucket.index(), ": ", e.what());
  }
}

void Reducer::all_reduce_local_used_map() {
  const Device device = process_group_->collective_device();
  local_used_map_dev_ = device.is_cpu() ? local_used_map_.clone() : local_used_map_.to(device);
  std::vector<Tensor> t{local_used_map_dev_};
  local_used_work_ = process_group_->allreduce(t);
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

void Reducer::register_comm_hook(std::unique_ptr<CommHookInterface> hook) {
  EMBER_CHECK(hook != nullptr, "register_comm_hook: null hook");
  EMBER_CHECK(!user_comm_hook_, "register_comm_hook: a communication hook ('", comm_hook_->name(),
              "') is already registered; register_comm_hook can only be called once");
  EMBER_CHECK(num_iterations_ == 0 && !expect_autograd_hooks_,
              "register_comm_hook: must be called before the first forward/backward of the DDP model");
  comm_hook_ = std::move(hook);
  user_comm_hook_ = true;
}

}  // namespace ember::distributed
