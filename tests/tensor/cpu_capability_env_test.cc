// EMBER_CPU_CAPABILITY set to something that is not a level (this target's env) is a clear error
// naming the value, on first use and again on every later use; never a silent fallback.
#include <gtest/gtest.h>

#include "tensor/all.h"
#include "tensor/cpu/capability.h"
#include "tests/tensor/test_util.h"

namespace ember {
namespace {

TEST(CpuCapabilityEnv, UnknownLevelIsAnErrorNamingIt) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    EXPECT_EMBER_ERROR(cpu_capability_level(), "EMBER_CPU_CAPABILITY=avx9000",
                       "is not a CPU capability level", "default, avx2 or avx512");
  }
  EXPECT_EMBER_ERROR(ones({2}) + ones({2}), "EMBER_CPU_CAPABILITY=avx9000");
}

}  // namespace
}  // namespace ember
