// The process-wide debug level (debug_level.h).
#include "distributed/debug_level.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>

#include "tensor/error.h"

namespace ember::distributed {
namespace {
// -1: not read yet. The environment is read lazily so a test can set it before first use.
std::atomic<int> g_level{-1};
}  // namespace

DebugLevel parse_debug_level(const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::toupper(c); });
  if (t.empty() || t == "OFF" || t == "0") return DebugLevel::kOff;
  if (t == "INFO" || t == "1") return DebugLevel::kInfo;
  if (t == "DETAIL" || t == "2") return DebugLevel::kDetail;
  EMBER_THROW("EMBER_DISTRIBUTED_DEBUG: expected OFF, INFO or DETAIL, got '", text, "'");
}

DebugLevel debug_level() {
  int level = g_level.load();
  if (level < 0) {
    const char* env = std::getenv("EMBER_DISTRIBUTED_DEBUG");
    level = static_cast<int>(parse_debug_level(env ? env : ""));
    g_level.store(level);
  }
  return static_cast<DebugLevel>(level);
}

void set_debug_level(DebugLevel level) { g_level.store(static_cast<int>(level)); }

const char* debug_level_name(DebugLevel level) {
  switch (level) {
    case DebugLevel::kOff: return "OFF";
    case DebugLevel::kInfo: return "INFO";
    case DebugLevel::kDetail: return "DETAIL";
  }
  return "?";
}

}  // namespace ember::distributed
