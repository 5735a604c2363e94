#include "examples/common/comm_hook_by_name.h"

#include <functional>
#include <vector>

#include <ember/distributed.h>

namespace ember::examples {
namespace {

using distributed::BuiltinCommHookInfo;
using distributed::DistributedDataParallel;
using distributed::FuturePtr;
using distributed::GradBucket;
using distributed::PowerSGDOptions;
using distributed::PowerSGDState;
using distributed::ProcessGroupPtr;
using distributed::kBuiltinCommHooks;

// One --comm_hook name. `install` takes the group and the options (CommHookSpec) so that rows with
// their own state (PowerSGD) fit the same shape as the built-in ones; it returns that state, if any.
struct CommHookChoice {
  const char* name;
  const char* help;
  std::function<std::shared_ptr<PowerSGDState>(DistributedDataParallel&, ProcessGroupPtr, const CommHookSpec&)>
      install;
};

template <FuturePtr (*Hook)(PowerSGDState&, GradBucket&)>
CommHookChoice powersgd_choice(const char* name, const char* hook_name, const char* help) {
  return {name, help, [hook_name](DistributedDataParallel& ddp, ProcessGroupPtr group, const CommHookSpec& spec) {
            auto state = std::make_shared<PowerSGDState>(std::move(group),
                PowerSGDOptions().matrix_approximation_rank(spec.powersgd_rank).start_powerSGD_iter(spec.powersgd_start_iter));
            ddp.register_comm_hook<PowerSGDState>(state, Hook, hook_name);
            return state;
          }};
}

// PowerSGD as a hook that blocks: it waits on the training thread until its rounds are done, so
// backward stops at every bucket. The same results as powerSGD_hook; what the difference in step
// time measures is what the non-blocking form hides (docs/how-ddp-works.md).
FuturePtr powerSGD_hook_blocking(PowerSGDState& state, GradBucket& bucket) {
  FuturePtr reduced = distributed::powerSGD_hook(state, bucket);
  reduced->wait();
  return reduced;
}

// The table: "none", every row of EMBER_BUILTIN_COMM_HOOKS (Note [Built-in comm hooks]), then the
// hooks that carry their own state. A new stateful hook is one row here.
const std::vector<CommHookChoice>& comm_hook_choices() {
  static const std::vector<CommHookChoice> choices = [] {
    std::vector<CommHookChoice> c;
    c.push_back({"none", "DDP's default: gradients divided while bucketed, then allreduced",
                 [](DistributedDataParallel&, ProcessGroupPtr, const CommHookSpec&) { return nullptr; }});
    for (const BuiltinCommHookInfo& b : kBuiltinCommHooks) {
      c.push_back({b.name, b.help,
                   [type = b.type](DistributedDataParallel& ddp, ProcessGroupPtr, const CommHookSpec&) {
                     ddp.register_builtin_comm_hook(type);
                     return nullptr;
                   }});
    }
    c.push_back(powersgd_choice<distributed::powerSGD_hook>(
        "powersgd", "powerSGD_hook", "low-rank (--powersgd_rank) per matrix from --powersgd_start_iter"));
    c.push_back(powersgd_choice<powerSGD_hook_blocking>(
        "powersgd_blocking", "powerSGD_hook_blocking", "powersgd, but the hook waits for its rounds (backward stops)"));
    c.push_back(powersgd_choice<distributed::batched_powerSGD_hook>(
        "batched_powersgd", "batched_powerSGD_hook", "low-rank of the whole bucket as one square matrix"));
    return c;
  }();
  return choices;
}

}  // namespace

std::string comm_hook_names(const std::string& separator) {
  std::string out;
  for (const CommHookChoice& c : comm_hook_choices()) out += (out.empty() ? "" : separator) + c.name;
  return out;
}

std::string comm_hook_help(const std::string& indent) {
  std::string out;
  for (const CommHookChoice& c : comm_hook_choices()) {
    out += (out.empty() ? "" : "\n") + indent + c.name + ": " + c.help;
  }
  return out;
}

void add_comm_hook_flags(flags::CommandLine& cli, CommHookSpec* spec, const flags::Check& start_iter_check,
                         const std::string& start_iter_help) {
  std::vector<std::string> names;
  for (const CommHookChoice& c : comm_hook_choices()) names.push_back(c.name);
  cli.add_option("--comm_hook", spec->name, "communication hook:\n" + comm_hook_help("  "))
      ->check(flags::one_of(names));
  cli.add_option("--powersgd_rank", spec->powersgd_rank, "PowerSGD matrix_approximation_rank")
      ->check(flags::positive_integer());
  cli.add_option("--powersgd_start_iter", spec->powersgd_start_iter, start_iter_help)->check(start_iter_check);
}

std::shared_ptr<PowerSGDState> register_comm_hook_by_name(DistributedDataParallel& ddp, ProcessGroupPtr group,
                                                          const CommHookSpec& spec) {
  for (const CommHookChoice& c : comm_hook_choices()) {
    if (spec.name == c.name) return c.install(ddp, std::move(group), spec);
  }
  EMBER_THROW("unknown comm hook '", spec.name, "' (known: ", comm_hook_names(", "), ")");
}

}  // namespace ember::examples
