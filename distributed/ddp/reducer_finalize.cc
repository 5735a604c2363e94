// DESIGN.md steps 7, 12 and 13: prepare_for_backward (and the unused-parameter traversal),
// finalize_backward (wait, write back, globally-unused parameters keep their grads), and the
// one-time bucket rebuild in the observed gradient order.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "autograd/graph_traversal.h"
#include "distributed/ddp/ddp_check.h"
#include "distributed/ddp/reducer.h"
#include "distributed/trace.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::distributed {

void Reducer::prepare_for_forward() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++num_iterations_;
  forward_start_us_ = Trace::now_us();
}

// Step 7. Nothing here checks the previous iteration: a forward that was never followed by a
// backward (validation with grad enabled, a skipped step) is legal; rebuild_buckets, called at
// every forward with grad enabled, reports an iteration whose reduction started but never ended.
void Reducer::prepare_for_backward(const std::vector<Tensor>& outputs) {
  std::lock_guard<std::mutex> lock(mutex_);
  expect_autograd_hooks_ = true;
  backward_compute_start_us_ = Trace::now_us();
  next_bucket_ = 0;
  num_buckets_reduced_ = 0;
  for (Bucket& b : buckets_) b.pending = b.variables.size();
  if (options_.static_graph) num_grad_hooks_this_iteration_ = num_grad_hooks_triggered_;
  std::fill(ready_this_iteration_.begin(), ready_this_iteration_.end(), false);
  has_marked_unused_parameters_ = false;
  backward_start_us_ = 0;
  std::fill(hook_us_.begin(), hook_us_.end(), 0.0);
  unused_search_ms_ = 0;
  // Under static_graph the unused set is found once, from the first iteration's hook counts
  // (delay_all_reduce), and kept.
  if (dynamic_graph_find_unused()) {
    unused_parameters_.clear();
    search_unused_parameters(outputs);
  }
}

void Reducer::search_unused_parameters(const std::vector<Tensor>& outputs) {
  TraceScope scope("search_unused_parameters", "ddp");
  const double start_us = Trace::now_us();
  autograd::ReachableGraph graph = autograd::collect_reachable(outputs);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!graph.reaches(grad_accumulators_[i].get())) unused_parameters_.push_back(i);
  }
  unused_search_ms_ = (Trace::now_us() - start_us) / 1000.0;
  if (unused_parameters_.empty() && !warned_no_unused_) {
    warned_no_unused_ = true;
    std::fprintf(stderr,
                 "[rank %d] DistributedDataParallel warning: find_unused_parameters=true was specified, "
                 "but no unused parameters were found in the forward pass. This flag results in an extra "
                 "traversal of the autograd graph every iteration, which can adversely affect "
                 "performance. If your model indeed never has any unused parameters in the forward "
                 "pass, consider turning this flag off.\n",
                 process_group_->rank());
  }
}

void Reducer::ensure_prior_reduction_finished() {
  if (!require_finalize_) return;
  std::string indices, names;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (ready_this_iteration_[i]) continue;
    indices += (indices.empty() ? "" : " ") + std::to_string(i);
    names += (names.empty() ? "" : ", ") + param_name(i);
  }
  const int r = process_group_->rank();
  // The advice depends on what the configuration already does, as PyTorch's does.
  const char* kOutputsInLoss = "making sure all forward outputs participate in calculating loss. ";
  std::string why;
  if (options_.static_graph) {
    why = "This error indicates that your training graph has changed in this iteration, e.g., one "
          "parameter is used in the first iteration but unused in the second: this is not "
          "compatible with static_graph=true. ";
  } else if (!options_.find_unused_parameters) {
    why = std::string("This error indicates that your module has parameters that were not used in "
                      "producing loss. You can enable unused parameter detection by setting "
                      "find_unused_parameters=true in DDPOptions, and by ") + kOutputsInLoss;
  } else {
    why = std::string("This error indicates that your module has parameters that were not used in "
                      "producing loss. Since find_unused_parameters=true is enabled, this likely "
                      "means that not all forward outputs participate in computing loss. You can fix "
                      "this by ") + kOutputsInLoss;
  }
  DDP_THROW("Expected to have finished reduction in the prior "
            "iteration before starting a new one. ", why, "Parameter indices which did not receive "
            "grad for rank ", r, ": ", indices, ". Parameters which did not receive grad for rank ", r,
            ": ", names);
}

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

// Step 12: the engine's final callback (the caller holds mutex_). In DESIGN.md's order: wait for
// every bucket, write the results back into .grad (parameters unused on every rank keep theirs),
// reset the per-iteration state. Every bucket is waited for and the state is reset even when a
// reduction failed, so the error reaches the caller and the next iteration starts clean.
void Reducer::finalize_backward() {
  TraceScope scope("finalize_backward", "ddp");
  NoGradGuard no_grad;
  const double compute_end_us = Trace::now_us();
  expect_autograd_hooks_ = false;
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
  record_iteration_stats(compute_end_us, comm_end_us);
  if (error) std::rethrow_exception(error);
}

// Waits for every bucket (also after one failed: none may still be writing into its buffer when
// the next iteration starts) and returns the first failure, named by bucket and parameters.
std::exception_ptr Reducer::wait_for_bucket_reductions(std::vector<Tensor>& results) {
  std::exception_ptr first;
  results.assign(buckets_.size(), Tensor());
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& bucket = buckets_[i];
    try {
      bucket.future_work->wait();
      results[i] = comm_hook_->parse_hook_result(*bucket.future_work);
    } catch (const std::exception& e) {
      if (first) continue;
      std::string names;
      for (size_t idx : bucket.variable_indices) names += (names.empty() ? "" : ", ") + param_name(idx);
      first = std::make_exception_ptr(Error(DDP_MESSAGE(
          "the reduction of bucket ", i, " of ", buckets_.size(), " (", bucket.variables.size(),
          " parameters: ", names, ") did not complete: ", e.what(), ". ", uneven_inputs_hint(),
          " No gradient was written back in this iteration; skip this optimizer step.")));
    }
  }
  return first;
}

// Without Join, a rank that ran out of data simply stops issuing collectives: the others' next
// bucket allreduce finds no partner. The group's stall inspector asked every rank where it was when
// the allreduce timed out (distributed/stall_inspector.h), so the hint names the ranks that stopped
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
  EMBER_CHECK(result.defined() && result.numel() == bucket.gradients.numel(),
              "DistributedDataParallel: comm hook '", comm_hook_->name(), "' returned ",
              result.describe(), " for bucket ", bucket_index, ", expected ",
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

namespace {

int64_t ns(double us) { return static_cast<int64_t>(std::llround(std::max(0.0, us) * 1000.0)); }

// PyTorch's calculate_avg_time: the running mean after the n-th sample.
void update_mean(int64_t& mean, int64_t sample, int64_t n) { mean = (mean * (n - 1) + sample) / n; }

}  // namespace

// Statistics for logging_data() and the trace (Note [Communication time] in logging.h).
void Reducer::record_iteration_stats(double compute_end_us, double comm_end_us) {
  const double end_us = Trace::now_us();
  std::vector<std::pair<double, double>> spans;
  double comm_start_us = 0;
  for (const Bucket& b : buckets_) {
    if (b.launch_us <= 0) continue;
    const double done = *b.done_us > 0 ? std::min(*b.done_us, comm_end_us) : comm_end_us;
    spans.emplace_back(b.launch_us, std::max(b.launch_us, done));
    comm_start_us = comm_start_us > 0 ? std::min(comm_start_us, b.launch_us) : b.launch_us;
  }
  // static_graph's first iteration fires no counted hook: its backward starts with the buckets'
  // launch (delay_all_reduce), or at finalize.
  double backward_start_us = backward_start_us_ > 0 ? backward_start_us_ : compute_end_us;
  if (comm_start_us > 0) backward_start_us = std::min(backward_start_us, comm_start_us);
  last_stats_.backward_ms = (end_us - backward_start_us) / 1000.0;
  last_stats_.comm_wall_ms = covered_length(spans) / 1000.0;
  // Exposed: the part of that union after the last gradient was ready. finalize_backward's wait
  // also holds the moment between the last reduction and its wake-up, which is not communication.
  last_stats_.exposed_comm_ms = covered_length(spans, compute_end_us) / 1000.0;
  last_stats_.overlap = last_stats_.comm_wall_ms > 0
                            ? std::clamp(1.0 - last_stats_.exposed_comm_ms / last_stats_.comm_wall_ms, 0.0, 1.0)
                            : 0.0;
  last_stats_.first_launch_us = buckets_.empty() ? 0.0 : buckets_[0].launch_us;
  last_stats_.last_hook_us = last_hook_us_;
  last_stats_.unused_search_ms = unused_search_ms_;
  compute_end_us_ = compute_end_us;

  RuntimeStats& r = runtime_stats_;
  r.forward_compute_time = forward_start_us_ > 0 ? ns(backward_compute_start_us_ - forward_start_us_) : 0;
  r.backward_compute_time = ns(compute_end_us - backward_compute_start_us_);
  r.backward_comm_time = comm_start_us > 0 ? ns(comm_end_us - comm_start_us) : 0;
  r.backward_compute_comm_overlap_time = comm_start_us > 0 ? ns(compute_end_us - comm_start_us) : 0;
  const int64_t n = ++r.num_iterations_stats_recorded;
  update_mean(r.avg_forward_compute_time, r.forward_compute_time, n);
  update_mean(r.avg_backward_compute_time, r.backward_compute_time, n);
  update_mean(r.avg_backward_comm_time, r.backward_comm_time, n);
  update_mean(r.avg_backward_compute_comm_overlap_time, r.backward_compute_comm_overlap_time, n);
}

IterationTimeline Reducer::last_iteration_timeline() const {
  // static_graph's first iteration fires no counted hook: its times start at finalize.
  const double origin = backward_start_us_ > 0 ? backward_start_us_ : compute_end_us_;
  auto ms = [origin](double us) { return (us - origin) / 1000.0; };
  IterationTimeline t;
  for (size_t i = 0; i < params_.size(); ++i) {
    t.param_ready_ms.push_back(hook_us_[i] > 0 ? ms(hook_us_[i]) : -1.0);
    t.param_bytes.push_back(static_cast<int64_t>(params_[i].nbytes()));
  }
  t.bucket_bytes = bucket_sizes_in_bytes(bucket_indices_);
  for (const Bucket& b : buckets_) {
    t.bucket_launch_ms.push_back(ms(b.launch_us));
    t.bucket_done_ms.push_back(ms(*b.done_us > 0 ? *b.done_us : compute_end_us_));
  }
  t.compute_end_ms = ms(compute_end_us_);
  return t;
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
      EMBER_CHECK(grad.data_ptr() == in.data_ptr(), "DistributedDataParallel: the gradient of ",
                  "parameter '", param_name(index), "' is not its bucket view (bucket ", bucket_index,
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

// Step 13.
bool Reducer::rebuild_buckets() {
  std::lock_guard<std::mutex> lock(mutex_);
  // As in PyTorch: an unfinished reduction (unused parameters without find_unused_parameters) is
  // reported here, at the next forward, before the rebuild would discard the pending buckets and
  // broadcast a layout built from an incomplete gradient order.
  ensure_prior_reduction_finished();
  if (!should_rebuild_buckets() || rebuilt_params_.empty()) return false;
  // Parameters that produced no gradient in the first iteration (unused under static_graph) go
  // last, in reverse index order, which is where their gradients would have arrived.
  std::vector<bool> seen(params_.size(), false);
  for (int64_t i : rebuilt_param_indices_) seen[static_cast<size_t>(i)] = true;
  for (size_t i = params_.size(); i-- > 0;) {
    if (!seen[i]) push_rebuilt_params(i);
  }
  BucketAssignment a = compute_bucket_assignment_with_limits(
      rebuilt_params_, {options_.first_bucket_bytes, options_.bucket_bytes_cap}, expect_sparse_gradient_,
      rebuilt_param_indices_);
  initialize_buckets(sync_bucket_indices(std::move(a.bucket_indices)));
  has_rebuilt_bucket_ = true;
  rebuilt_params_.clear();
  rebuilt_param_indices_.clear();
  return true;
}

void Reducer::load_rebuilt_buckets(std::vector<std::vector<size_t>> bucket_indices) {
  std::lock_guard<std::mutex> lock(mutex_);
  DDP_CHECK(num_iterations_ == 0 && !expect_autograd_hooks_, "load_bucket_layout must be called before the first forward");
  std::vector<bool> seen(params_.size(), false);
  size_t count = 0;
  for (const auto& bucket : bucket_indices) {
    DDP_CHECK(!bucket.empty(), "load_bucket_layout: an empty bucket");
    for (size_t i : bucket) {
      DDP_CHECK(i < params_.size() && !seen[i], "load_bucket_layout: parameter index ", i,
                i < params_.size() ? " appears twice" : " is out of range", " (the model has ",
                params_.size(), " parameters): the layout is from another model");
      seen[i] = true;
      ++count;
    }
  }
  DDP_CHECK(count == params_.size(), "load_bucket_layout covers ",
            count, " of the model's ", params_.size(), " parameters: the layout is from another model");
  initialize_buckets(std::move(bucket_indices));
  has_rebuilt_bucket_ = true;
  rebuilt_params_.clear();
  rebuilt_param_indices_.clear();
}

// Rank 0's assignment is broadcast so every rank launches identical buckets.
std::vector<std::vector<size_t>> Reducer::sync_bucket_indices(std::vector<std::vector<size_t>> indices) {
  int64_t total = 0;
  for (const auto& b : indices) total += static_cast<int64_t>(b.size());
  const Device device = process_group_->collective_device();
  Tensor header = from_vector<int64_t>({static_cast<int64_t>(indices.size()), total}).to(device);
  std::vector<Tensor> h{header};
  process_group_->broadcast(h)->wait();
  header = header.to(kCPU);
  const int64_t num_buckets = header.data_ptr<int64_t>()[0], n = header.data_ptr<int64_t>()[1];
  Tensor flat = empty({num_buckets + n}, kInt64);
  if (process_group_->rank() == 0) {
    int64_t* p = flat.data_ptr<int64_t>();
    for (const auto& b : indices) *p++ = static_cast<int64_t>(b.size());
    for (const auto& b : indices)
      for (size_t i : b) *p++ = static_cast<int64_t>(i);
  }
  std::vector<Tensor> f{flat.to(device)};
  process_group_->broadcast(f)->wait();
  flat = f[0].to(kCPU);
  const int64_t* p = flat.data_ptr<int64_t>();
  std::vector<std::vector<size_t>> out(num_buckets);
  const int64_t* ids = p + num_buckets;
  for (int64_t b = 0; b < num_buckets; ++b) {
    for (int64_t k = 0; k < p[b]; ++k) out[b].push_back(static_cast<size_t>(*ids++));
  }
  return out;
}

// Bytes per bucket of a layout (parameter indices per bucket).
std::vector<int64_t> Reducer::bucket_sizes_in_bytes(const std::vector<std::vector<size_t>>& indices) const {
  std::vector<int64_t> sizes;
  for (const auto& bucket : indices) {
    int64_t bytes = 0;
    for (size_t i : bucket) bytes += params_[i].numel() * static_cast<int64_t>(params_[i].element_size());
    sizes.push_back(bytes);
  }
  return sizes;
}

DDPLoggingData Reducer::logging_data() const {
  DDPLoggingData d;
  d.rank = process_group_->rank();
  d.world_size = process_group_->size();
  d.backend = process_group_->backend_name();
  d.comm_hook = comm_hook_->name();
  d.bucket_cap_bytes = static_cast<int64_t>(options_.bucket_bytes_cap);
  d.first_bucket_bytes = static_cast<int64_t>(options_.first_bucket_bytes);
  d.find_unused_parameters = options_.find_unused_parameters;
  d.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  d.static_graph = options_.static_graph;
  d.num_parameters = static_cast<int64_t>(params_.size());
  d.num_buckets = static_cast<int64_t>(buckets_.size());
  d.num_buckets_reduced = num_buckets_reduced_;
  d.runtime = runtime_stats_;
  d.bucket_sizes = bucket_sizes_in_bytes(bucket_indices_);
  d.bucket_indices = bucket_indices_;
  d.initial_bucket_sizes = bucket_sizes_in_bytes(initial_bucket_indices_);
  d.initial_bucket_indices = initial_bucket_indices_;
  d.has_rebuilt_buckets = has_rebuilt_bucket_;
  d.num_iterations = num_iterations_;
  d.unused_parameter_count = static_cast<int64_t>(unused_parameters_.size());
  d.unused_parameter_indices = unused_parameters_;
  for (size_t i : unused_parameters_) d.unused_parameter_names.push_back(param_name(i));
  d.last = last_stats_;
  return d;
}

}  // namespace ember::distributed
