#include "distributed/process_group.h"
#include "distributed/process_group_wrapper.h"

#include "distributed/collective_lifecycle.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

namespace ember::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "SUM";
    case ReduceOp::kAvg: return "AVG";
    case ReduceOp::kProduct: return "PRODUCT";
    case ReduceOp::kMin: return "MIN";
    case ReduceOp::kMax: return "MAX";
  }
  return "?";
}

ProcessGroup::ProcessGroup(int rank, int size, Options options)
    : rank_(rank), size_(size), options_(std::move(options)) {
  EMBER_CHECK(size_ > 0 && rank_ >= 0 && rank_ < size_, "ProcessGroup: rank ", rank_,
              " out of range for size ", size_);
  EMBER_CHECK(options_.timeout.count() > 0, "ProcessGroup: timeout must be positive, got ",
              options_.timeout.count(), " ms");
}

DebugLevel ProcessGroup::debug_level() const {
  return options_.has_debug_level ? options_.debug_level : distributed::debug_level();
}

std::string ProcessGroup::broken_reason() const { return lifecycle_ ? lifecycle_->broken_reason() : ""; }
StallReport ProcessGroup::stall_report() const { return lifecycle_ ? lifecycle_->stall_report() : StallReport{}; }
const StallInspector* ProcessGroup::side_channel() const { return lifecycle_ ? &lifecycle_->inspector() : nullptr; }

void ProcessGroup::throw_unsupported(const char* what) const {
  EMBER_THROW("backend '", backend_name(), "' does not support ", what);
}

ProcessGroupPtr ProcessGroup::new_subgroup(const std::vector<int>& ranks, Options options) {
  return with_debug_wrapper(run_new_subgroup(ranks, std::move(options)));
}

ProcessGroupPtr ProcessGroup::run_new_subgroup(const std::vector<int>&, Options) {
  throw_unsupported("new_group");
}

// ---- registry and default group ----------------------------------------------------------------
namespace {
struct GlobalState {
  std::mutex mutex;
  std::map<std::string, BackendFactory> backends;
  ProcessGroupPtr default_group;
  std::vector<ProcessGroupPtr> groups;  // made by new_group; destroyed with the default group
  int next_group_id = 0;
};
GlobalState& state() {
  static GlobalState* s = new GlobalState();  // never destroyed: backends register at static init
  return *s;
}
}  // namespace

bool register_backend(const std::string& name, BackendFactory factory) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().backends[name] = std::move(factory);
  return true;
}

int local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 0;
}

std::vector<std::string> registered_backends() {
  std::lock_guard<std::mutex> lock(state().mutex);
  std::vector<std::string> names;
  for (const auto& kv : state().backends) names.push_back(kv.first);
  return names;
}

ProcessGroupPtr init_process_group(const std::string& backend, ProcessGroup::Options options) {
  BackendFactory factory;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    EMBER_CHECK(!state().default_group,
                "init_process_group: the default process group is already initialized "
                "(call destroy_process_group() first)");
    auto it = state().backends.find(backend);
    if (it == state().backends.end()) {
      std::string known;
      for (const auto& kv : state().backends) known += (known.empty() ? "" : ", ") + kv.first;
      EMBER_THROW("init_process_group: unknown backend '", backend, "' (registered: ",
                  known.empty() ? "none" : known, ")");
    }
    factory = it->second;
  }
  options.backend = backend;
  if (options.group_name.empty()) options.group_name = "default_pg";
  ProcessGroupPtr pg = with_debug_wrapper(factory(options));
  std::lock_guard<std::mutex> lock(state().mutex);
  state().default_group = pg;
  return pg;
}

void destroy_process_group() {
  std::vector<ProcessGroupPtr> groups;
  ProcessGroupPtr world;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    groups.swap(state().groups);
    world = std::move(state().default_group);
  }
  // Sub-groups first: their communicators derive from the world's.
  groups.clear();
  world.reset();
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().default_group != nullptr;
}

ProcessGroupPtr get_default_group() {
  std::lock_guard<std::mutex> lock(state().mutex);
  EMBER_CHECK(state().default_group,
              "the default process group is not initialized: call init_process_group() first");
  return state().default_group;
}

int get_rank() { return get_default_group()->rank(); }
int get_world_size() { return get_default_group()->size(); }
void barrier() { get_default_group()->barrier()->wait(); }

ProcessGroupPtr new_group(const std::vector<int>& ranks, std::chrono::milliseconds timeout) {
  ProcessGroupPtr world = get_default_group();
  ProcessGroup::Options options = world->options();
  if (timeout.count() > 0) options.timeout = timeout;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    options.group_name = detail::str_cat("group_", state().next_group_id++);
  }
  ProcessGroupPtr pg = world->new_subgroup(ranks, options);
  if (pg) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().groups.push_back(pg);
  }
  return pg;
}

}  // namespace ember::distributed
