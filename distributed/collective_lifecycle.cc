#include "distributed/collective_lifecycle.h"

#include "distributed/diagnostics/fault_injection.h"
#include "tensor/error.h"

namespace ember::distributed {

CollectiveLifecycle::CollectiveLifecycle(Options options) : options_(options), inspector_(options.rank) {}

void CollectiveLifecycle::enter(uint64_t seq, const std::string& fingerprint) {
  if (options_.inject_faults) maybe_inject_stall(options_.rank, seq);
  inspector_.entered(seq, fingerprint);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!broken_.empty()) EMBER_THROW("the group is unusable: ", broken_);
}

bool CollectiveLifecycle::break_group(std::string why, StallReport report) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!broken_.empty()) return false;
  broken_ = std::move(why);
  stall_report_ = std::move(report);
  return true;
}

std::string CollectiveLifecycle::broken_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

StallReport CollectiveLifecycle::stall_report() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stall_report_;
}

}  // namespace ember::distributed
