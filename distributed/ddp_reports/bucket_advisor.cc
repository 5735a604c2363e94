// docs/design.md steps 10-13 replayed (bucket_advisor.h, Note [Bucket-size advisor model]).
#include "distributed/ddp_reports/bucket_advisor.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "distributed/ddp_reports/bucket_plan.h"

namespace ember::distributed {

namespace {

constexpr double kMB = 1024.0 * 1024.0;

// Step 1: (ready ms, bytes) of the gradients that arrived, in arrival order.
std::vector<std::pair<double, int64_t>> gradients_in_ready_order(const IterationTimeline& t) {
  std::vector<std::pair<double, int64_t>> g;
  for (size_t i = 0; i < t.param_ready_ms.size(); ++i) {
    if (t.param_ready_ms[i] >= 0) g.emplace_back(t.param_ready_ms[i], t.param_bytes[i]);
  }
  std::stable_sort(g.begin(), g.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return g;
}

// Each bucket's time on the communication thread: from when it could start to when it was done.
std::vector<double> service_times(const IterationTimeline& t) {
  std::vector<double> s;
  double previous_done = -1e300;
  for (size_t b = 0; b < t.bucket_done_ms.size(); ++b) {
    const double start = std::max(t.bucket_launch_ms[b], previous_done);
    s.push_back(std::max(0.0, t.bucket_done_ms[b] - start));
    previous_done = t.bucket_done_ms[b];
  }
  return s;
}

// Steps 2-4 for one cap, over the gradients already in ready order (step 1).
BucketCapPrediction predict(const std::vector<std::pair<double, int64_t>>& gradients, double compute_end_ms,
                            int64_t first_bucket_bytes, int64_t cap_bytes, double alpha_ms, double beta_ms_per_byte) {
  BucketCapPrediction p;
  p.cap_bytes = cap_bytes;
  double comm_free = 0, ready = 0;
  int64_t filled = 0;
  auto close_bucket = [&] {  // steps 2-3
    const double start = std::max(ready, comm_free);
    comm_free = start + alpha_ms + beta_ms_per_byte * static_cast<double>(filled);
    ++p.buckets;
    filled = 0;
  };
  for (const auto& [ready_ms, bytes] : gradients) {
    filled += bytes;
    ready = ready_ms;
    if (filled >= (p.buckets == 0 ? first_bucket_bytes : cap_bytes)) close_bucket();
  }
  if (filled > 0) close_bucket();
  p.backward_ms = std::max(compute_end_ms, comm_free);  // step 4
  return p;
}

// Least squares of service time s = alpha + beta * bytes over the buckets; without a positive fit,
// half the fastest bucket is the fixed cost and the rest is spread over the bytes.
void fit_service_time(const IterationTimeline& t, const std::vector<double>& s, int64_t total_bytes,
                      BucketCapAdvice& a, double& alpha, double& beta) {
  const double n = static_cast<double>(s.size());
  double mx = 0, my = 0;
  for (size_t b = 0; b < s.size(); ++b) mx += t.bucket_bytes[b] / n, my += s[b] / n;
  double sxx = 0, sxy = 0;
  for (size_t b = 0; b < s.size(); ++b) {
    sxx += (t.bucket_bytes[b] - mx) * (t.bucket_bytes[b] - mx);
    sxy += (t.bucket_bytes[b] - mx) * (s[b] - my);
  }
  beta = sxx > 0 ? sxy / sxx : 0;
  alpha = my - beta * mx;
  a.fitted = sxx > 0 && beta > 0 && alpha > 0;
  if (!a.fitted) {
    alpha = *std::min_element(s.begin(), s.end()) / 2;
    beta = std::max(0.0, std::accumulate(s.begin(), s.end(), 0.0) - n * alpha) / static_cast<double>(total_bytes);
  }
  a.alpha_ms = alpha;
  a.beta_ms_per_mb = beta * kMB;
}

// The advice in words, from the candidates' predictions.
std::string advice_summary(const BucketCapAdvice& a, const std::vector<std::pair<double, int64_t>>& gradients,
                           int64_t first_bucket_bytes, int64_t current_cap_bytes) {
  const double saved = a.current.backward_ms - a.best.backward_ms;
  bool all_same = true;
  for (const BucketCapPrediction& c : a.candidates) all_same = all_same && c.buckets == a.current.buckets;
  // What the first bucket leaves: the gradients after it closes (at first_bucket_bytes or more).
  int64_t first_fill = 0, after_first = 0;
  for (const auto& [ready_ms, bytes] : gradients) {
    (first_fill < first_bucket_bytes ? first_fill : after_first) += bytes;
  }
  if (all_same && after_first <= static_cast<int64_t>(0.25 * kMB)) {
    // A model whose gradients hardly exceed the first bucket: the cap only shapes what is left.
    return fmt::format("bucket_cap_mb makes no difference here: after the first bucket ({}) only {} of "
                       "gradients remain; first_bucket_mb is the size that matters",
                       format_bytes(first_fill), format_bytes(after_first));
  }
  if (saved < 0.03 * a.current.backward_ms || saved < 0.05) {
    // Below 3% (or 0.05 ms) the prediction is within what one iteration's noise can move.
    return fmt::format("keep bucket_cap_mb={:g}: predicted backward {:.2f} ms; no cap tried ends it 3% sooner",
                       current_cap_bytes / kMB, a.current.backward_ms);
  }
  return fmt::format("try bucket_cap_mb={:g}: predicted backward {:.2f} ms instead of {:.2f} ms (-{:.2f} ms, {:.0f}%)",
                     a.best.cap_bytes / kMB, a.best.backward_ms, a.current.backward_ms, saved,
                     100 * saved / a.current.backward_ms);
}

}  // namespace

BucketCapAdvice advise_bucket_cap(const IterationTimeline& t, int64_t first_bucket_bytes, int64_t current_cap_bytes) {
  BucketCapAdvice a;
  const std::vector<double> s = service_times(t);
  const int64_t total_bytes = std::accumulate(t.bucket_bytes.begin(), t.bucket_bytes.end(), int64_t{0});
  const std::vector<std::pair<double, int64_t>> gradients = gradients_in_ready_order(t);
  if (s.empty() || total_bytes <= 0 || gradients.empty()) return a;
  a.valid = true;
  a.fitted_buckets = static_cast<int64_t>(s.size());
  double alpha = 0, beta = 0;
  fit_service_time(t, s, total_bytes, a, alpha, beta);
  std::vector<int64_t> caps;
  for (double mb : {0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0}) caps.push_back(static_cast<int64_t>(mb * kMB));
  if (std::find(caps.begin(), caps.end(), current_cap_bytes) == caps.end()) caps.push_back(current_cap_bytes);
  std::sort(caps.begin(), caps.end());
  for (int64_t cap : caps) {
    a.candidates.push_back(predict(gradients, t.compute_end_ms, first_bucket_bytes, cap, alpha, beta));
    if (cap == current_cap_bytes) a.current = a.candidates.back();
  }
  // The smallest prediction; ties go to the larger cap (fewer collectives, same time).
  a.best = a.candidates.front();
  for (const BucketCapPrediction& c : a.candidates) {
    const double d = c.backward_ms - a.best.backward_ms;
    if (d < -1e-9 || (d <= 1e-9 && c.cap_bytes > a.best.cap_bytes)) a.best = c;
  }
  a.summary = advice_summary(a, gradients, first_bucket_bytes, current_cap_bytes);
  return a;
}

}  // namespace ember::distributed
