// docs/design.md steps 4 and 13 made visible (bucket_plan.h).
#include "distributed/ddp_reports/bucket_plan.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace ember::distributed {

std::string bucket_plan_json(const BucketPlan& plan, const std::vector<std::string>& param_names) {
  nlohmann::ordered_json buckets = nlohmann::ordered_json::array();
  for (size_t b = 0; b < plan.indices.size(); ++b) {
    nlohmann::ordered_json params = nlohmann::ordered_json::array();
    for (size_t i : plan.indices[b]) params.push_back(i < param_names.size() ? param_names[i] : std::to_string(i));
    nlohmann::ordered_json bucket{{"bytes", b < plan.bytes.size() ? plan.bytes[b] : 0}, {"params", std::move(params)}};
    if (b < plan.slots.size()) {
      nlohmann::ordered_json slots = nlohmann::ordered_json::array();
      for (size_t j = 0; j < plan.slots[b].size(); ++j) {
        const BucketSlot& s = plan.slots[b][j];
        slots.push_back({{"param_index", plan.indices[b][j]}, {"offset", s.offset}, {"length", s.length},
                         {"shape", s.shape}});
      }
      bucket["dtype"] = b < plan.dtypes.size() ? plan.dtypes[b] : "";
      bucket["slots"] = std::move(slots);
    }
    buckets.push_back(std::move(bucket));
  }
  return nlohmann::ordered_json{{"buckets", std::move(buckets)}}.dump();
}

std::string format_bytes(int64_t bytes) {
  if (bytes >= 1024 * 1024) return fmt::format("{:.2f} MiB", bytes / (1024.0 * 1024.0));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string bucket_plan_text(const BucketPlan& plan, const std::vector<std::string>& param_names,
                             const std::string& indent, size_t max_names) {
  std::string out;
  auto name = [&](size_t i) { return i < param_names.size() ? param_names[i] : std::to_string(i); };
  for (size_t b = 0; b < plan.indices.size(); ++b) {
    const std::vector<size_t>& params = plan.indices[b];
    out += fmt::format("{}bucket {:<3} {:>10}  {:>3} param{}: ", indent, b,
                       format_bytes(b < plan.bytes.size() ? plan.bytes[b] : 0), params.size(),
                       params.size() == 1 ? " " : "s");
    const size_t head = params.size() <= max_names ? params.size() : max_names / 2;
    for (size_t k = 0; k < head; ++k) out += (k ? ", " : "") + name(params[k]);
    if (head < params.size()) {
      const size_t tail = max_names - head;
      out += fmt::format(", ... {} more ..., ", params.size() - head - tail);
      for (size_t k = params.size() - tail; k < params.size(); ++k) {
        out += name(params[k]) + (k + 1 < params.size() ? ", " : "");
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace ember::distributed
