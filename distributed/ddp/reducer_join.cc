// docs/design.md steps 9-13 under Join (distributed/join.h): the divisor of the default path, and a joined
// rank's shadow of one backward (zero buckets through the comm hook, the used map, the rebuild).
#include <utility>

#include "distributed/ddp/ddp_check.h"
#include "distributed/ddp/reducer.h"
#include "tensor/factories.h"
#include "tensor/sparse.h"

namespace ember::distributed {

void Reducer::set_forward_pass_work_handle(WorkPtr work, bool use_static_world_size) {
  std::lock_guard<std::mutex> lock(mutex_);
  forward_pass_work_ = std::move(work);
  use_static_world_size_ = use_static_world_size;
  div_factor_ = 0.0;
}

// Note [Who divides gradients by the world size]: the default path divides by the group size, or,
// under Join with divide_by_initial_world_size=false, by the ranks that have not joined (the result
// of the forward's notify allreduce; joined ranks contribute 0 to it). Resolved once per iteration.
double Reducer::divide_factor() {
  if (div_factor_ != 0.0) return div_factor_;
  div_factor_ = static_cast<double>(process_group_->size());
  if (forward_pass_work_ && !use_static_world_size_) {
    forward_pass_work_->wait();
    const double active = forward_pass_work_->result().at(0).item<double>();
    DDP_CHECK(active >= 1, "Join counted ",
              active, " ranks still training, expected at least 1");
    div_factor_ = active;
  }
  return div_factor_;
}

// PyTorch's _match_all_reduce_for_bwd_pass + _match_unused_params_allreduce: the same collectives,
// in the same order, as a rank still training issues in its backward (mark_bucket_ready launches
// buckets strictly in order; the used map follows the last bucket). A joined rank's buckets hold
// zeros, in fresh tensors, so gradients aliasing its bucket views (gradient_as_bucket_view) stay.
void Reducer::match_all_reduce_for_bwd_pass() {
  std::lock_guard<std::mutex> lock(mutex_);
  // static_graph's first iteration reduces the used map before the buckets (delay_all_reduce);
  // a joined rank shadows only the later iterations' layout.
  DDP_CHECK(!options_.static_graph || num_iterations_ > 0,
            "Join with static_graph=true needs every rank to train at least one iteration before it "
            "joins; this rank joined before its first");
  NoGradGuard no_grad;
  std::vector<std::pair<size_t, FuturePtr>> futures;  // by bucket index
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    if (should_skip_all_reduce_bucket(bucket)) continue;  // the ranks still training skip it too
    Tensor zeros_buffer;
    if (bucket.expect_sparse_gradient) {
      zeros_buffer = empty_sparse_gradient(bucket.variables[0]);
    } else {
      zeros_buffer = zeros_like(bucket.gradients);
    }
    GradBucket zeros_bucket = make_grad_bucket(bucket, b, zeros_buffer);
    futures.emplace_back(b, run_comm_hook(zeros_bucket));
  }
  WorkPtr used_map_work;
  if (dynamic_graph_find_unused()) {
    // As PyTorch's _match_unused_params_allreduce: the joined rank sends the map of its last
    // iteration, reduced in place, so it stays the global map of the previous iteration. A
    // parameter used in the iteration before is therefore "used" for good once a rank joined, and
    // the ranks still training get zeros for it instead of leaving its .grad untouched.
    if (!local_used_map_dev_.defined()) {
      local_used_map_dev_ = zeros_like(local_used_map_).to(process_group_->collective_device());
    }
    std::vector<Tensor> map{local_used_map_dev_};
    used_map_work = process_group_->allreduce(map);
  }
  for (const auto& [b, future] : futures) {
    try {
      future->wait();
    } catch (const std::exception& e) {
      DDP_THROW("this rank has joined; shadowing the reduction of bucket ", b, " of ", buckets_.size(),
                " for the ranks still training failed: ", e.what());
    }
  }
  if (used_map_work) used_map_work->wait();
}

void Reducer::push_all_rebuilt_params() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!should_rebuild_buckets() || !rebuilt_param_indices_.empty()) return;
  for (size_t i = 0; i < params_.size(); ++i) push_rebuilt_params(i);
}

}  // namespace ember::distributed
