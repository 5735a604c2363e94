// docs/design.md steps 4 and 13 made visible: a bucket plan (which parameters each bucket holds, in
// launch order, and its bytes) as the trace's JSON and as the first-iteration report's text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::distributed {

struct BucketPlan {
  std::vector<std::vector<size_t>> indices;  // parameter indices per bucket, launch order
  std::vector<int64_t> bytes;                // per bucket
};

// {"buckets":[{"bytes":N,"params":["layer1.0.conv1.weight",...]},...]}: the args of the trace's
// "ddp constructed" and "buckets rebuilt" events (scripts/draw_bucket_plan.py reads them).
std::string bucket_plan_json(const BucketPlan& plan, const std::vector<std::string>& param_names);

// One line per bucket: "bucket 0   1.00 MB  20 params: fc.bias, fc.weight, ... layer3.2.bn2.weight",
// each line prefixed with `indent`; at most `max_names` names per bucket (the first and the last
// ones, "... N more ..." between).
std::string bucket_plan_text(const BucketPlan& plan, const std::vector<std::string>& param_names,
                             const std::string& indent, size_t max_names = 6);

// "1.00 MB", "412.0 KB", "96 B".
std::string format_bytes(int64_t bytes);

}  // namespace ember::distributed
