// docs/design.md steps 7-12, observed: the Reducer's statistics and trace events (reducer_statistics.h).
#include "distributed/ddp_reports/reducer_statistics.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "distributed/diagnostics/trace.h"

namespace ember::distributed {

namespace {

int64_t ns(double us) { return static_cast<int64_t>(std::llround(std::max(0.0, us) * 1000.0)); }

// PyTorch's calculate_avg_time: the running mean after the n-th sample.
void update_mean(int64_t& mean, int64_t sample, int64_t n) { mean = (mean * (n - 1) + sample) / n; }

}  // namespace

void ReducerStatistics::reset_buckets(size_t num_buckets) {
  launch_us_.assign(num_buckets, 0.0);
  done_us_.clear();
  for (size_t b = 0; b < num_buckets; ++b) done_us_.push_back(std::make_shared<double>(0.0));
}

void ReducerStatistics::forward_started() { forward_start_us_ = Trace::now_us(); }

void ReducerStatistics::backward_prepared() {
  backward_compute_start_us_ = Trace::now_us();
  num_buckets_reduced_ = 0;
  backward_start_us_ = 0;
  unused_search_ms_ = 0;
  std::fill(hook_us_.begin(), hook_us_.end(), 0.0);
}

void ReducerStatistics::gradient_ready(size_t index, const std::string& name, size_t bytes) {
  last_hook_us_ = Trace::now_us();
  if (backward_start_us_ == 0) backward_start_us_ = last_hook_us_;
  hook_us_[index] = last_hook_us_;
  if (Trace::get().enabled()) {
    // The bytes let a step-time model re-bucket the gradients (bench/step_model.py).
    Trace::get().instant("autograd_hook " + name, "ddp", 0,
                         nlohmann::json{{"param_index", index}, {"bytes", bytes}}.dump());
  }
}

void ReducerStatistics::bucket_skipped(size_t bucket_index) {
  launch_us_[bucket_index] = Trace::now_us();
  *done_us_[bucket_index] = launch_us_[bucket_index];
}

FuturePtr ReducerStatistics::time_bucket_reduction(const BucketFacts& bucket,
                                                   const std::function<FuturePtr()>& launch) {
  const double launch_us = Trace::now_us();
  launch_us_[bucket.index] = launch_us;
  *done_us_[bucket.index] = 0;
  ++num_buckets_reduced_;
  const bool tracing = Trace::get().enabled();
  // Device-side spans of the bucket's collectives (ProcessGroupNCCL's events) carry its name.
  const TraceLabel label(tracing ? "bucket " + std::to_string(bucket.index) : std::string());
  std::string args;
  if (tracing) {
    // Which hooks fed this bucket: scripts/merge_traces.py draws a flow from each to its allreduce.
    args = nlohmann::json{{"bucket", bucket.index},
                          {"params", bucket.param_indices.size()},
                          {"bytes", bucket.bytes},
                          {"param_indices", bucket.param_indices}}
               .dump();
  }
  // Chained with then(), not add_callback(): finalize_backward waits on the chained future, so it
  // never reads the completion time while the worker is still writing it.
  return launch()->then([done_us = done_us_[bucket.index], launch_us, index = bucket.index,
                         args = std::move(args)](Future& reduced) {
    *done_us = Trace::now_us();
    Trace::get().span("allreduce bucket " + std::to_string(index), "ddp", launch_us, *done_us - launch_us, 1,
                      args);
    return reduced.const_value();
  });
}

double ReducerStatistics::first_launch_us() const {
  double first = 0;
  for (double us : launch_us_) {
    if (us > 0) first = first > 0 ? std::min(first, us) : us;
  }
  return first;
}

// Note [Communication time] (logging.h).
void ReducerStatistics::iteration_finalized(double compute_end_us, double comm_end_us) {
  const double end_us = Trace::now_us();
  std::vector<std::pair<double, double>> spans;
  for (size_t b = 0; b < launch_us_.size(); ++b) {
    if (launch_us_[b] <= 0) continue;
    const double done = *done_us_[b] > 0 ? std::min(*done_us_[b], comm_end_us) : comm_end_us;
    spans.emplace_back(launch_us_[b], std::max(launch_us_[b], done));
  }
  const double comm_start_us = first_launch_us();
  // static_graph's first iteration fires no counted hook: its backward starts with the buckets'
  // launch (delay_all_reduce), or at finalize.
  double backward_start_us = backward_start_us_ > 0 ? backward_start_us_ : compute_end_us;
  if (comm_start_us > 0) backward_start_us = std::min(backward_start_us, comm_start_us);
  last_.backward_ms = (end_us - backward_start_us) / 1000.0;
  last_.comm_wall_ms = covered_length(spans) / 1000.0;
  // Exposed: the part of that union after the last gradient was ready. finalize_backward's wait
  // also holds the moment between the last reduction and its wake-up, which is not communication.
  last_.exposed_comm_ms = covered_length(spans, compute_end_us) / 1000.0;
  last_.overlap = last_.comm_wall_ms > 0 ? std::clamp(1.0 - last_.exposed_comm_ms / last_.comm_wall_ms, 0.0, 1.0)
                                         : 0.0;
  last_.first_launch_us = launch_us_.empty() ? 0.0 : launch_us_[0];
  last_.last_hook_us = last_hook_us_;
  last_.unused_search_ms = unused_search_ms_;
  compute_end_us_ = compute_end_us;
  record_runtime_stats(compute_end_us, comm_start_us, comm_end_us);
}

// PyTorch's five timer events (RuntimeStats in logging.h).
void ReducerStatistics::record_runtime_stats(double compute_end_us, double comm_start_us, double comm_end_us) {
  RuntimeStats& r = runtime_;
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

IterationTimeline ReducerStatistics::timeline(std::vector<int64_t> param_bytes,
                                              std::vector<int64_t> bucket_bytes) const {
  // static_graph's first iteration fires no counted hook: its times start at finalize.
  const double origin = backward_start_us_ > 0 ? backward_start_us_ : compute_end_us_;
  auto ms = [origin](double us) { return (us - origin) / 1000.0; };
  IterationTimeline t;
  for (double us : hook_us_) t.param_ready_ms.push_back(us > 0 ? ms(us) : -1.0);
  t.param_bytes = std::move(param_bytes);
  t.bucket_bytes = std::move(bucket_bytes);
  for (size_t b = 0; b < launch_us_.size(); ++b) {
    t.bucket_launch_ms.push_back(ms(launch_us_[b]));
    t.bucket_done_ms.push_back(ms(*done_us_[b] > 0 ? *done_us_[b] : compute_end_us_));
  }
  t.compute_end_ms = ms(compute_end_us_);
  return t;
}

}  // namespace ember::distributed
