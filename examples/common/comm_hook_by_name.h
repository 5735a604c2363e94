// Chooses a DDP communication hook by name for the command-line programs (examples/ddp_resnet,
// bench/ddp_bench): --comm_hook=none|allreduce|fp16|bf16|noop|powersgd|powersgd_blocking|
// batched_powersgd, from one table (the built-in rows come from EMBER_BUILTIN_COMM_HOOKS). It lives
// with the programs, not in distributed/: library users call
// DistributedDataParallel::register_*comm_hook. docs/design.md step 10.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ember/distributed.h>

#include "examples/common/flags.h"

namespace ember::examples {

struct CommHookSpec {
  std::string name = "none";            // "none": DDP's default sum-allreduce of pre-divided grads
  int64_t powersgd_rank = 1;            // matrix_approximation_rank
  int64_t powersgd_start_iter = 1000;   // start_powerSGD_iter
};

// The names register_comm_hook_by_name accepts, joined by `separator` (for help and errors).
std::string comm_hook_names(const std::string& separator);
// One line per name, "<indent>name: what it does", joined by newlines (no final one), for --help.
std::string comm_hook_help(const std::string& indent);

// --comm_hook (one of the table's names), --powersgd_rank (positive) and --powersgd_start_iter,
// checked by `start_iter_check` and described by `start_iter_help` (the programs' defaults differ).
void add_comm_hook_flags(flags::CommandLine& cli, CommHookSpec* spec, const flags::Check& start_iter_check,
                         const std::string& start_iter_help);

// Registers the named hook on `ddp` over `group` (the DDP's process group). Returns the
// PowerSGDState for the PowerSGD hooks (statistics, checkpoints), nullptr otherwise. Throws on an
// unknown name, listing the known ones.
std::shared_ptr<distributed::PowerSGDState> register_comm_hook_by_name(distributed::DistributedDataParallel& ddp,
                                                                       distributed::ProcessGroupPtr group,
                                                                       const CommHookSpec& spec);

}  // namespace ember::examples
