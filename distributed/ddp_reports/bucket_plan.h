// docs/design.md steps 4 and 13 made visible: a bucket plan (which parameters each bucket holds, in
// launch order, and its bytes) as the trace's JSON and as the first-iteration report's text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::distributed {

// Where one parameter's gradient lives in its bucket's flat buffer (the Reducer's bucket view,
// docs/design.md step 5): elements [offset, offset + length), viewed with the parameter's shape.
struct BucketSlot {
  int64_t offset = 0;
  int64_t length = 0;
  std::vector<int64_t> shape;
};

struct BucketPlan {
  std::vector<std::vector<size_t>> indices;  // parameter indices per bucket, launch order
  std::vector<int64_t> bytes;                // per bucket
  // The buckets' memory, when known (Reducer::describe_bucket_memory): each bucket's dtype and
  // its slots, in the order of `indices`; empty slots for a sparse bucket, which has no buffer.
  std::vector<std::string> dtypes;
  std::vector<std::vector<BucketSlot>> slots;
};

// {"buckets":[{"bytes":N,"params":["layer1.0.conv1.weight",...]},...]}, each bucket with "dtype"
// and "slots":[{"param_index":I,"offset":O,"length":L,"shape":[...]},...] when the plan has them:
// the args of the trace's "ddp constructed" and "buckets rebuilt" events (scripts/bucket_plan.py
// and scripts/bucket_memory.py read them).
std::string bucket_plan_json(const BucketPlan& plan, const std::vector<std::string>& param_names);

// One line per bucket: "bucket 0   1.00 MB  20 params: fc.bias, fc.weight, ... layer3.2.bn2.weight",
// each line prefixed with `indent`; at most `max_names` names per bucket (the first and the last
// ones, "... N more ..." between).
std::string bucket_plan_text(const BucketPlan& plan, const std::vector<std::string>& param_names,
                             const std::string& indent, size_t max_names = 6);

// "1.00 MB", "412.0 KB", "96 B".
std::string format_bytes(int64_t bytes);

}  // namespace ember::distributed
