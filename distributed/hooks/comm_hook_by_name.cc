#include "distributed/hooks/comm_hook_by_name.h"

#include <map>

#include "distributed/hooks/default_hooks.h"
#include "distributed/hooks/powersgd_hook.h"

namespace ember::distributed {

std::string comm_hook_names(const std::string& separator) {
  static const char* const names[] = {"none", "allreduce", "fp16", "bf16", "noop", "powersgd", "batched_powersgd"};
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : separator) + n;
  return out;
}

std::shared_ptr<PowerSGDState> register_comm_hook_by_name(DistributedDataParallel& ddp, ProcessGroupPtr group,
                                                          const CommHookSpec& spec) {
  const std::string& name = spec.name;
  if (name == "none") return nullptr;
  static const std::map<std::string, BuiltinCommHookType> builtin{
      {"allreduce", BuiltinCommHookType::ALLREDUCE},
      {"fp16", BuiltinCommHookType::FP16_COMPRESS},
      {"bf16", BuiltinCommHookType::BF16_COMPRESS},
      {"noop", BuiltinCommHookType::NOOP},
  };
  if (auto it = builtin.find(name); it != builtin.end()) {
    ddp.register_builtin_comm_hook(it->second);
    return nullptr;
  }
  if (name == "powersgd" || name == "batched_powersgd") {
    auto state = std::make_shared<PowerSGDState>(std::move(group), spec.powersgd_rank, spec.powersgd_start_iter);
    if (name == "powersgd") {
      ddp.register_comm_hook<PowerSGDState>(state, powerSGD_hook, "powerSGD_hook");
    } else {
      ddp.register_comm_hook<PowerSGDState>(state, batched_powerSGD_hook, "batched_powerSGD_hook");
    }
    return state;
  }
  EMBER_THROW("unknown comm hook '", name, "' (known: ", comm_hook_names(", "), ")");
}

}  // namespace ember::distributed
