// docs/design.md steps 4, 7, 10-13 as the user sees them: the report EMBER_DISTRIBUTED_DEBUG=INFO prints
// once DDP's first iterations are over (DistributedDataParallel::first_iteration_report()): the
// bucket plan before and after the rebuild, the parameters that got no gradient (with their
// modules), what the unused-parameter search cost, the overlap achieved with the final buckets and
// the bucket-size advisor's recommendation (bucket_advisor.h).
#pragma once

#include <string>
#include <vector>

#include "distributed/ddp_reports/logging.h"

namespace ember::distributed {

// What one synchronising iteration left behind.
struct IterationSnapshot {
  DDPLoggingData data;
  IterationTimeline timeline;
};

// What format_first_iteration_report() reads: the first iteration, the first with the final
// buckets, and every parameter's name and module.
struct FirstIterationFacts {
  IterationSnapshot first;    // iteration 1, with the constructor's buckets
  IterationSnapshot settled;  // the first iteration with the final buckets (== first when no rebuild follows)
  std::vector<std::string> param_names;    // by parameter index, as DDP names them
  std::vector<std::string> param_modules;  // by parameter index: "Conv2d layer1.0.conv1"
};

// The report, lines starting with "[rank R] " (R = facts.first.data.rank).
std::string format_first_iteration_report(const FirstIterationFacts& facts);

// The parameters of `snapshot`'s iteration that got no gradient on this rank, by index: those
// find_unused_parameters found, or else those whose autograd hook did not fire.
std::vector<size_t> parameters_without_gradient(const IterationSnapshot& snapshot);

}  // namespace ember::distributed
