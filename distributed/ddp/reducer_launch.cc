// docs/design.md steps 10-11: launching each bucket's reduction through the comm hook, strictly in bucket
// order, and, once the last one is launched, queueing finalize_backward on the autograd engine.
#include <algorithm>

#include "autograd/engine.h"
#include "distributed/ddp/ddp_check.h"
#include "distributed/ddp/reducer.h"
#include "distributed/diagnostics/trace.h"

namespace ember::distributed {

// Step 10: buckets launch strictly in order, so every rank issues the same collectives in the
// same order even if its gradients became ready in a different order.
void Reducer::mark_bucket_ready(size_t bucket_index) {
  DDP_INTERNAL_ASSERT(bucket_index >= next_bucket_, "bucket ", bucket_index,
                      " became ready again after it was launched (next bucket: ", next_bucket_, ")");
  if (bucket_index > next_bucket_) return;
  for (; next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0; ++next_bucket_) {
    Bucket& bucket = buckets_[next_bucket_];
    if (should_skip_all_reduce_bucket(bucket)) {
      skip_all_reduce_bucket(bucket, next_bucket_);
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
  return std::all_of(bucket.variable_indices.begin(), bucket.variable_indices.end(), [this](size_t index) {
    return std::find(unused_parameters_.begin(), unused_parameters_.end(), index) != unused_parameters_.end();
  });
}

// Its result is what every rank holds: the zeros the unused parameters left in the bucket.
void Reducer::skip_all_reduce_bucket(Bucket& bucket, size_t bucket_index) {
  statistics_.bucket_skipped(bucket_index);
  const Tensor& contents = bucket.expect_sparse_gradient ? bucket.sparse_gradient : bucket.gradients;
  bucket.future_work = std::make_shared<Future>(std::vector<Device>{contents.device()});
  bucket.future_work->mark_completed({contents});
}

// Seed 000's all_reduce_bucket: hand the bucket to the comm hook and keep its future. The
// collective waits for the bucket's copies, not for the rest of backward (Note [Bucket copies on
// the communication stream]); the hook's own kernels run there too.
void Reducer::all_reduce_bucket(Bucket& bucket, size_t bucket_index) {
  GradBucket grad_bucket = make_grad_bucket(
      bucket, bucket_index, bucket.expect_sparse_gradient ? bucket.sparse_gradient : bucket.gradients);
  const auto on_stream = on_bucket_stream();
  const BucketFacts facts{bucket_index, bucket.expect_sparse_gradient ? 0 : bucket.gradients.nbytes(),
                          bucket.variable_indices};
  bucket.future_work = statistics_.time_bucket_reduction(facts, [&] { return run_comm_hook(grad_bucket); });
}

// What the comm hook sees of a bucket: `buffer` (its gradients, or a joined rank's zeros) and
// where each parameter's gradient lies in it.
GradBucket Reducer::make_grad_bucket(const Bucket& bucket, size_t bucket_index, const Tensor& buffer) const {
  return GradBucket(bucket_index, buckets_.size(), buffer, bucket.offsets, bucket.lengths, bucket.sizes,
                    bucket.variables);
}

std::optional<CudaStreamGuard> Reducer::on_bucket_stream() {
  if (!bucket_stream_) return std::nullopt;
  return bucket_stream_->after_current();
}

FuturePtr Reducer::run_comm_hook(GradBucket& grad_bucket) {
  try {
    return comm_hook_->run_hook(grad_bucket);
  } catch (const std::exception& e) {
    DDP_THROW("comm hook '", comm_hook_->name(), "' failed on bucket ", grad_bucket.index(), ": ", e.what());
  }
}

// find_unused_parameters: which parameters got a gradient on any rank, summed over the ranks,
// after the last bucket (finalize_backward waits for it).
void Reducer::all_reduce_local_used_map() {
  const Device device = process_group_->collective_device();
  local_used_map_dev_ = device.is_cpu() ? local_used_map_.clone() : local_used_map_.to(device);
  std::vector<Tensor> t{local_used_map_dev_};
  TraceLabel label("used-parameter map");
  local_used_work_ = process_group_->allreduce(t);
}

// Step 11: the used map's allreduce follows the last bucket, and finalize_backward runs once the
// engine has run the whole graph (later hooks of this backward may still write .grad).
void Reducer::queue_finalize_backward() {
  if (dynamic_graph_find_unused()) all_reduce_local_used_map();
  autograd::Engine::get_default_engine().queue_callback([this] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Every bucket was launched before this callback was queued, and nothing relaunches one.
      DDP_INTERNAL_ASSERT(next_bucket_ == buckets_.size(), next_bucket_, " of ", buckets_.size(),
                          " buckets launched when the backward ended");
      finalize_backward();
    }
    notify_iteration_observer();
  });
}

}  // namespace ember::distributed
