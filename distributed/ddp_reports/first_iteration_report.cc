// docs/design.md steps 4, 7, 10-13 as the user sees them (first_iteration_report.h).
#include "distributed/ddp_reports/first_iteration_report.h"

#include <fmt/format.h>

#include <numeric>
#include <sstream>

#include "distributed/ddp_reports/bucket_advisor.h"
#include "distributed/ddp_reports/bucket_plan.h"

namespace ember::distributed {

namespace {

std::string on_off(bool b) { return b ? "true" : "false"; }

// Every line of `text` prefixed with "[rank R] ".
std::string prefix_lines(const std::string& text, int rank) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += fmt::format("[rank {}] {}\n", rank, line);
  return out;
}

std::string unused_line(const FirstIterationFacts& f) {
  const DDPLoggingData& d = f.first.data;
  const std::vector<size_t> unused = parameters_without_gradient(f.first);
  if (unused.empty()) return "parameters that got no gradient in iteration 1: none\n";
  std::string out = fmt::format("parameters that got no gradient in iteration 1: {}", unused.size());
  if (d.find_unused_parameters || d.static_graph) {
    out += " (their buckets carried zeros; other ranks' gradients still reach them)\n";
  } else {
    out += " -- without find_unused_parameters=true the next iteration stops with \"Expected to have "
           "finished reduction\"\n";
  }
  for (size_t i : unused) {
    out += fmt::format("  {}  (module {})\n", f.param_names[i],
                       i < f.param_modules.size() ? f.param_modules[i] : std::string("?"));
  }
  return out;
}

std::string search_line(const FirstIterationFacts& f) {
  const DDPLoggingData& d = f.first.data;
  if (!d.find_unused_parameters) return "unused-parameter search: off (find_unused_parameters=false)\n";
  if (d.static_graph) {
    return "unused-parameter search: none per iteration (static_graph: iteration 1's hook counts decided it)\n";
  }
  const double ms = f.settled.data.last.unused_search_ms, fwd = f.settled.data.last.forward_ms;
  return fmt::format("unused-parameter search (find_unused_parameters=true): {:.3f} ms per forward "
                     "({:.1f}% of the forward's {:.2f} ms), a walk of the autograd graph from the outputs\n",
                     ms, fwd > 0 ? 100 * ms / fwd : 0.0, fwd);
}

std::string overlap_line(const FirstIterationFacts& f) {
  const DDPLoggingData& d = f.settled.data;
  const IterationStats& s = d.last;
  const bool overlapped = s.first_launch_us > 0 && s.first_launch_us < s.last_hook_us;
  return fmt::format(
      "iteration {} ({} buckets): forward {:.2f} ms, backward {:.2f} ms; communication took {:.2f} ms of wall "
      "time, {:.2f} ms of it after the last gradient was ready (finalize waited), so {:.0f}% overlapped "
      "backward{}\n",
      d.num_iterations, d.num_buckets, s.forward_ms, s.backward_ms, s.comm_wall_ms, s.exposed_comm_ms,
      100 * s.overlap,
      overlapped ? " (the first bucket launched before the last gradient was ready)"
                 : " (no bucket launched before the last gradient was ready: nothing could overlap)");
}

std::string advisor_lines(const FirstIterationFacts& f) {
  const DDPLoggingData& d = f.settled.data;
  const BucketCapAdvice a = advise_bucket_cap(f.settled.timeline, d.first_bucket_bytes, d.bucket_cap_bytes);
  if (!a.valid) return "bucket-size advisor: nothing to learn from (no gradient or bucket was timed)\n";
  std::string out = fmt::format(
      "bucket-size advisor: a reduction took {:.3f} ms + {:.3f} ms/MiB as this rank saw it, waits for slower "
      "ranks included ({} from {} bucket{} of iteration {}); {}\n",
      a.alpha_ms, a.beta_ms_per_mb, a.fitted ? "fitted" : "estimated", a.fitted_buckets,
      a.fitted_buckets == 1 ? "" : "s", d.num_iterations, a.summary);
  out += "  predicted backward by bucket_cap_mb:";
  for (const BucketCapPrediction& c : a.candidates) {
    out += fmt::format(" {:g}:{:.2f}ms/{}b", c.cap_bytes / (1024.0 * 1024.0), c.backward_ms, c.buckets);
  }
  return out + "\n";
}

}  // namespace

std::vector<size_t> parameters_without_gradient(const IterationSnapshot& snapshot) {
  const DDPLoggingData& d = snapshot.data;
  std::vector<size_t> out;
  if (d.find_unused_parameters || d.static_graph) return d.unused_parameter_indices;
  for (size_t i = 0; i < snapshot.timeline.param_ready_ms.size(); ++i) {
    if (snapshot.timeline.param_ready_ms[i] < 0) out.push_back(i);
  }
  return out;
}

std::string format_first_iteration_report(const FirstIterationFacts& f) {
  const DDPLoggingData& first = f.first.data;
  const DDPLoggingData& now = f.settled.data;
  const int64_t grad_bytes = std::accumulate(now.bucket_sizes.begin(), now.bucket_sizes.end(), int64_t{0});
  std::string out = fmt::format(
      "DDP first-iteration report (EMBER_DISTRIBUTED_DEBUG=INFO): world size {}, backend {}, comm hook {}\n"
      "options: bucket_cap_mb {:.3g}, first_bucket_mb {:.3g}, find_unused_parameters {}, static_graph {}, "
      "gradient_as_bucket_view {}; {} parameters, {} of gradients\n",
      now.world_size, now.backend, now.comm_hook, now.bucket_cap_bytes / (1024.0 * 1024.0),
      now.first_bucket_bytes / (1024.0 * 1024.0), on_off(now.find_unused_parameters), on_off(now.static_graph),
      on_off(now.gradient_as_bucket_view), now.num_parameters, format_bytes(grad_bytes));
  out += fmt::format("bucket plan of iteration 1 (the constructor's, step 4), in launch order:\n");
  out += bucket_plan_text({first.initial_bucket_indices, first.initial_bucket_sizes}, f.param_names, "  ");
  if (now.has_rebuilt_buckets && now.num_iterations > first.num_iterations) {
    out += fmt::format("bucket plan after the rebuild (step 13: the gradient order of iteration 1, the first "
                       "bucket closed at {}, the others at {}):\n",
                       format_bytes(now.first_bucket_bytes), format_bytes(now.bucket_cap_bytes));
    out += bucket_plan_text({now.bucket_indices, now.bucket_sizes}, f.param_names, "  ");
  } else if (now.has_rebuilt_buckets) {
    out += "buckets: a layout loaded before training (load_bucket_layout), no rebuild\n";
  } else {
    out += "buckets: not rebuilt (find_unused_parameters without static_graph keeps the constructor's plan, "
           "as PyTorch does)\n";
  }
  out += unused_line(f) + search_line(f) + overlap_line(f) + advisor_lines(f);
  return prefix_lines(out, first.rank);
}

}  // namespace ember::distributed
