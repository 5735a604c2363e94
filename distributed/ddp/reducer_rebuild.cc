// docs/design.md step 13: after the first iteration, the buckets rebuilt once in the order gradients
// became ready (rank 0's order, broadcast); the check that the last iteration's reduction finished,
// which runs first; and a layout loaded for exact resume.
#include <vector>

#include "distributed/ddp/bucketing.h"
#include "distributed/ddp/ddp_check.h"
#include "distributed/ddp/reducer.h"
#include "distributed/diagnostics/trace.h"
#include "tensor/factories.h"

namespace ember::distributed {

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
  std::vector<std::vector<size_t>> indices = compute_bucket_assignment_by_size(
      rebuilt_params_, {options_.first_bucket_bytes, options_.bucket_bytes_cap}, expect_sparse_gradient_,
      rebuilt_param_indices_);
  initialize_buckets(sync_bucket_indices(std::move(indices)));
  has_rebuilt_bucket_ = true;
  rebuilt_params_.clear();
  rebuilt_param_indices_.clear();
  return true;
}

void Reducer::load_rebuilt_buckets(std::vector<std::vector<size_t>> bucket_indices) {
  std::lock_guard<std::mutex> lock(mutex_);
  DDP_CHECK(num_iterations_ == 0 && !expect_autograd_hooks_, "load_bucket_layout must be called before the first forward");
  initialize_buckets(std::move(bucket_indices));
  has_rebuilt_bucket_ = true;
  rebuilt_params_.clear();
  rebuilt_param_indices_.clear();
}

// Every parameter in exactly one bucket, no bucket empty: what the constructor's, the rebuild's and
// a loaded layout (load_bucket_layout, from a checkpoint that may be another model's) must all be.
void Reducer::check_bucket_layout(const std::vector<std::vector<size_t>>& bucket_indices) const {
  std::vector<bool> seen(params_.size(), false);
  size_t count = 0;
  for (size_t b = 0; b < bucket_indices.size(); ++b) {
    DDP_CHECK(!bucket_indices[b].empty(), "bucket layout: an empty bucket (bucket ", b, ")");
    for (size_t i : bucket_indices[b]) {
      DDP_CHECK(i < params_.size() && !seen[i], "bucket layout: parameter index ", i,
                i < params_.size() ? " appears twice" : " is out of range", " (the model has ", params_.size(),
                " parameters): the layout is not this model's");
      seen[i] = true;
      ++count;
    }
  }
  DDP_CHECK(count == params_.size(), "bucket layout: the buckets cover ", count, " of the model's ", params_.size(),
            " parameters: the layout is not this model's");
}

// Rank 0's assignment is broadcast so every rank launches identical buckets.
std::vector<std::vector<size_t>> Reducer::sync_bucket_indices(std::vector<std::vector<size_t>> indices) {
  TraceLabel label("bucket layout");
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

void Reducer::push_rebuilt_params(size_t index) {
  rebuilt_params_.push_back(params_[index]);
  rebuilt_param_indices_.push_back(static_cast<int64_t>(index));
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

}  // namespace ember::distributed
