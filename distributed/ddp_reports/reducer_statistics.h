// docs/design.md steps 7-12, observed: what the Reducer's steps record for logging_data(), the iteration
// timeline and the trace (distributed/diagnostics/trace.h), kept here so each step function reads as the seed's:
// a step calls one of these at its start or end and knows nothing of timestamps or trace JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/ddp_reports/logging.h"
#include "distributed/work.h"

namespace ember::distributed {

// The facts of one bucket that the statistics and the trace need; the indices are the bucket's
// own (read only while tracing, so no launch copies them).
struct BucketFacts {
  size_t index;
  size_t bytes;                               // 0 for a sparse bucket
  const std::vector<size_t>& param_indices;  // the parameters whose hooks fed it
};

// Owned by the Reducer and touched under its mutex, except each bucket's completion time, which the
// communication thread writes (Note [Bucket completion time]).
class ReducerStatistics {
 public:
  explicit ReducerStatistics(size_t num_params) : hook_us_(num_params, 0.0) {}

  // The buckets were (re)built: `num_buckets` of them, in launch order.
  void reset_buckets(size_t num_buckets);
  // Step 6: a synchronising forward began (PyTorch's kForwardStart).
  void forward_started();
  // Step 7: prepare_for_backward (kBackwardComputeStart); this iteration's records start empty.
  void backward_prepared();
  // Step 7: the unused-parameter search took `ms`.
  void unused_parameters_searched(double ms) { unused_search_ms_ = ms; }
  // Step 8: parameter `index`'s hook fired (a trace instant carries its name and bytes).
  void gradient_ready(size_t index, const std::string& name, size_t bytes);
  // Step 10: a bucket skipped (skip_all_reduce_unused_params) completes as it launches.
  void bucket_skipped(size_t bucket_index);
  // Step 10: launches a bucket's reduction (`launch` runs its comm hook) and times it: the returned
  // future completes with the hook's value once the completion time is stamped and, when tracing,
  // the bucket's span written; the hook's collectives carry the bucket's name (TraceLabel).
  FuturePtr time_bucket_reduction(const BucketFacts& bucket, const std::function<FuturePtr()>& launch);
  // Step 12: finalize_backward began at `compute_end_us` and its wait for the buckets ended at
  // `comm_end_us` (Note [Communication time] in logging.h).
  void iteration_finalized(double compute_end_us, double comm_end_us);

  int64_t num_buckets_reduced() const { return num_buckets_reduced_; }
  const IterationStats& last() const { return last_; }
  const RuntimeStats& runtime() const { return runtime_; }
  // The last iteration's gradient-ready and bucket times (Reducer::last_iteration_timeline).
  IterationTimeline timeline(std::vector<int64_t> param_bytes, std::vector<int64_t> bucket_bytes) const;

 private:
  void record_runtime_stats(double compute_end_us, double comm_start_us, double comm_end_us);
  // The first bucket's launch; 0 when nothing launched.
  double first_launch_us() const;

  int64_t num_buckets_reduced_ = 0;       // this (or the last) iteration's buckets that communicated
  double forward_start_us_ = 0;           // PyTorch's kForwardStart
  double backward_compute_start_us_ = 0;  // kBackwardComputeStart
  double backward_start_us_ = 0;          // the first hook of this iteration
  double last_hook_us_ = 0;
  double unused_search_ms_ = 0;
  double compute_end_us_ = 0;             // finalize_backward began, in the last iteration
  std::vector<double> hook_us_;           // by parameter index, this iteration (0: not fired)
  std::vector<double> launch_us_;         // by bucket, this iteration (0: not launched)
  // Note [Bucket completion time]: written on the communication thread by the continuation that
  // time_bucket_reduction chains, and read only after finalize_backward waited on that continuation's
  // future; shared with it, so a bucket table rebuilt meanwhile is never written.
  std::vector<std::shared_ptr<double>> done_us_;
  IterationStats last_;
  RuntimeStats runtime_;
};

}  // namespace ember::distributed
