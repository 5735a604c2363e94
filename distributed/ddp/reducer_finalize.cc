// docs/design.md step 12: finalize_backward, the engine's final callback: wait for every bucket, write
// the results back into .grad (a parameter unused on every rank keeps its own), reset the
// per-iteration state; and static_graph's first iteration, reduced in one go at its end.
#include <algorithm>
#include <utility>
#include <vector>

#include "distributed/ddp/ddp_check.h"
#include "distributed/ddp/reducer.h"
#include "distributed/diagnostics/stall_inspector.h"
#include "distributed/diagnostics/trace.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::distributed {

// static_graph, first iteration (queued by DDP's output sink): every parameter whose hook never
// fired is unused for good; all gradients go into their buckets and every bucket is reduced now.
// PyTorch's delay_all_reduce: the first iteration gives no overlap, and needs no parameter order.
void Reducer::delay_all_reduce() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    delay_all_reduce_locked();
  }
  notify_iteration_observer();
}

void Reducer::delay_all_reduce_locked() {
  TraceScope scope("delay_all_reduce", "ddp");
  all_reduce_local_used_map();
  unused_parameters_.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (num_grad_hooks_triggered_[i] == 0) unused_parameters_.push_back(i);
    ready_this_iteration_[i] = true;
    require_finalize_ = true;
    if (expect_sparse_gradient_[i]) {
      mark_variable_ready_sparse(i);
    } else {
      mark_variable_ready_dense(i);
    }
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].pending = 0;
    all_reduce_bucket(buckets_[b], b);
  }
  next_bucket_ = buckets_.size();
  finalize_backward();
}

// Step 12: the engine's final callback (the caller holds mutex_). In docs/design.md's order: wait for
// every bucket, write the results back into .grad (parameters unused on every rank keep theirs),
// reset the per-iteration state. Every bucket is waited for and the state is reset even when a
// reduction failed, so the error reaches the caller and the next iteration starts clean.
void Reducer::finalize_backward() {
  TraceScope scope("finalize_backward", "ddp");
  NoGradGuard no_grad;
  const double compute_end_us = Trace::now_us();
  // A backward DDP prepared, whose gradients were marked ready, ends here once (PyTorch's asserts).
  DDP_INTERNAL_ASSERT(expect_autograd_hooks_, "finalize_backward without a backward to finalize");
  expect_autograd_hooks_ = false;
  DDP_INTERNAL_ASSERT(require_finalize_, "finalize_backward although no gradient was marked ready");
  require_finalize_ = false;
  std::vector<Tensor> results;
  std::exception_ptr error = wait_for_bucket_reductions(results);
  // Note [Bucket copies on the communication stream]: the write-back reads what the hooks wrote.
  if (bucket_stream_) bucket_stream_->current_waits();
  std::exception_ptr used_map_error = wait_for_local_used_map();
  if (!error) error = used_map_error;
  const double comm_end_us = Trace::now_us();
  if (!error) {
    try {
      for (size_t i = 0; i < buckets_.size(); ++i) write_back_bucket(buckets_[i], i, results[i]);
    } catch (...) {
      error = std::current_exception();
    }
  }
  reset_after_iteration();
  statistics_.iteration_finalized(compute_end_us, comm_end_us);
  if (error) std::rethrow_exception(error);
}

// Waits for every bucket (also after one failed: none may still be writing into its buffer when
// the next iteration starts) and returns the first failure, named by bucket and parameters.
std::exception_ptr Reducer::wait_for_bucket_reductions(std::vector<Tensor>& results) {
  std::exception_ptr first;
  results.assign(buckets_.size(), Tensor());
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& bucket = buckets_[i];
    DDP_INTERNAL_ASSERT(bucket.future_work != nullptr, "bucket ", i, " of ", buckets_.size(),
                        " was never launched; was the comm hook installed?");
    try {
      bucket.future_work->wait();
      results[i] = comm_hook_->parse_hook_result(*bucket.future_work);
    } catch (const std::exception& e) {
      if (first) continue;
      first = std::make_exception_ptr(Error(DDP_MESSAGE(
          "the reduction of bucket ", i, " of ", buckets_.size(), " (", bucket.variables.size(),
          " parameters: ", param_names_of(bucket), ") did not complete: ", e.what(), ". ", uneven_inputs_hint(),
          " No gradient was written back in this iteration; skip this optimizer step.")));
    }
  }
  return first;
}

// Without Join, a rank that ran out of data simply stops issuing collectives: the others' next
// bucket allreduce finds no partner. The group's stall inspector asked every rank where it was when
// the allreduce timed out (distributed/diagnostics/stall_inspector.h), so the hint names the ranks that stopped
// at any world size; without its findings (another backend, or a failure that was no timeout), only
// two ranks make it certain.
std::string Reducer::uneven_inputs_hint() const {
  const int rank = process_group_->rank(), world = process_group_->size();
  std::string others;
  for (int r = 0; r < world; ++r) {
    if (r != rank) others += (others.empty() ? "" : ", ") + std::to_string(r);
  }
  const StallReport stall = process_group_->stall_report();
  // A peer whose process exited did not run out of data: say so instead of suggesting Join.
  if (!stall.gone.empty() && stall.gone.size() == stall.not_arrived.size()) {
    return detail::str_cat(rank_list(stall.gone), stall.gone.size() > 1 ? " are" : " is",
                           " gone (the process exited): a rank died, these are not uneven inputs. Find why "
                           "in its own output, then resume from a checkpoint.");
  }
  const std::string who = !stall.not_arrived.empty() ? rank_list(stall.not_arrived) + " stopped"
                          : world == 2 ? "rank " + others + " (the only other rank) stopped"
                                       : "at least one of ranks " + others + " stopped";
  const char* pronoun = stall.not_arrived.size() > 1 ? "they" : "it";
  return detail::str_cat("Inputs look uneven: this rank is in its iteration ", num_iterations_, " but ", who,
                         " before issuing this collective -- ", pronoun,
                         " ran out of data (or stalled, or died). "
                         "Wrap the training loop in Join (distributed/join.h) to train on uneven inputs; "
                         "without it every rank must call forward/backward the same number of times.");
}

// The used map's allreduce (find_unused_parameters, static_graph's first iteration) is always
// waited for, so its failure is reported instead of dropped.
std::exception_ptr Reducer::wait_for_local_used_map() {
  if (!local_used_work_ || local_used_map_reduced_) return nullptr;
  try {
    local_used_work_->wait();
    copy_(local_used_map_, local_used_map_dev_);
    local_used_map_reduced_ = true;
    return nullptr;
  } catch (const std::exception& e) {
    return std::make_exception_ptr(Error(DDP_MESSAGE(
        "the allreduce of the used-parameter map (find_unused_parameters) failed: ", e.what())));
  }
}

void Reducer::write_back_bucket(Bucket& bucket, size_t bucket_index, const Tensor& result) {
  if (bucket.expect_sparse_gradient) {
    const size_t index = bucket.variable_indices[0];
    if (!is_globally_unused(index)) params_[index].mutable_grad() = result;
    return;
  }
  DDP_CHECK(result.defined() && result.numel() == bucket.gradients.numel(), "comm hook '", comm_hook_->name(),
            "' returned ", result.describe(), " for bucket ", bucket_index, ", expected ",
            bucket.gradients.numel(), " elements");
  if (!result.is_same(bucket.gradients)) {
    // The hook produced a new buffer: read the results through views into it.
    Tensor flat = result.to(bucket.gradients.dtype()).reshape({-1});
    for (size_t j = 0; j < bucket.variables.size(); ++j) {
      bucket.bucket_views_out[j] = flat.narrow(0, static_cast<int64_t>(bucket.offsets[j]),
                                               static_cast<int64_t>(bucket.lengths[j]))
                                       .view(bucket.sizes[j]);
    }
  }
  finalize_bucket_dense(bucket, bucket_index);
}

// Ready for the next iteration, whatever happened in this one. A static graph keeps its first
// iteration's (reduced) used map for good; a dynamic one starts from zero.
void Reducer::reset_after_iteration() {
  for (Bucket& bucket : buckets_) {
    bucket.bucket_views_out = bucket.bucket_views_in;
    bucket.sparse_gradient = Tensor();
  }
  if (dynamic_graph_find_unused()) {
    zero_(local_used_map_);
    local_used_map_reduced_ = false;
  }
  local_used_work_.reset();
  div_factor_ = 0.0;
  forward_pass_work_.reset();
}

void Reducer::notify_iteration_observer() {
  if (iteration_observer_) iteration_observer_();
}

void Reducer::finalize_bucket_dense(Bucket& bucket, size_t bucket_index) {
  for (size_t j = 0; j < bucket.variables.size(); ++j) {
    const size_t index = bucket.variable_indices[j];
    const bool global_unused = is_globally_unused(index);
    if (!options_.gradient_as_bucket_view) {
      copy_bucket_to_grad(params_[index], bucket, j, global_unused);
      continue;
    }
    const Tensor& out = bucket.bucket_views_out[j];
    const Tensor& in = bucket.bucket_views_in[j];
    if (out.data_ptr() != in.data_ptr()) copy_(in, out);
    if (global_unused) continue;
    Tensor& grad = params_[index].mutable_grad();
    if (!grad.defined()) {
      grad = in;
    } else {
      DDP_CHECK(grad.data_ptr() == in.data_ptr(), "the gradient of parameter '", param_name(index),
                "' is not its bucket view (bucket ", bucket_index,
                ") although gradient_as_bucket_view=true; was .grad reassigned during backward?");
    }
  }
}

// A parameter no rank produced a gradient for keeps its .grad untouched (undefined stays
// undefined, so optimizers skip it). finalize_backward has waited for the used map's allreduce.
bool Reducer::is_globally_unused(size_t index) const {
  if (!options_.static_graph && !options_.find_unused_parameters) return false;
  return local_used_map_.data_ptr<int32_t>()[index] == 0;
}

void Reducer::copy_bucket_to_grad(const Tensor& variable, Bucket& bucket, size_t intra_bucket_index,
                                  bool global_unused) {
  if (global_unused) return;
  const Tensor& view = bucket.bucket_views_out[intra_bucket_index];
  Tensor& grad = variable.mutable_grad();
  if (!grad.defined()) {
    grad = view.clone();
  } else {
    copy_(grad, view);
  }
}

}  // namespace ember::distributed
