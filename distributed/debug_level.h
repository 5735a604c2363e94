// DebugLevel: how much a process group checks and tells (OFF / INFO / DETAIL), from
// EMBER_DISTRIBUTED_DEBUG as PyTorch's from TORCH_DISTRIBUTED_DEBUG; a group's option
// (ProcessGroup::Options::debug_level). What DETAIL does is distributed/process_group_wrapper.h's.
#pragma once

#include <string>

namespace ember::distributed {

enum class DebugLevel : int { kOff = 0, kInfo = 1, kDetail = 2 };

// The process-wide level: EMBER_DISTRIBUTED_DEBUG read once ("OFF", "INFO", "DETAIL", any case),
// unless set_debug_level() overrode it. An unknown value throws, naming the variable.
DebugLevel debug_level();
void set_debug_level(DebugLevel level);
DebugLevel parse_debug_level(const std::string& text);
const char* debug_level_name(DebugLevel level);

}  // namespace ember::distributed
