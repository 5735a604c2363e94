// Linked into the per-level copies of the op suites (tests/common/cpu_capability_test.bzl): each copy sets
// EMBER_CPU_CAPABILITY, and a level this CPU lacks is skipped rather than run at a lower level.
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "tensor/cpu/capability.h"

namespace {

class CpuCapabilityEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* asked = std::getenv("EMBER_CPU_CAPABILITY");
    ASSERT_NE(asked, nullptr) << "the per-level suites set EMBER_CPU_CAPABILITY";
    if (std::strcmp(ember::cpu_capability(), asked) != 0) {
      GTEST_SKIP() << "this CPU supports up to "
                   << ember::cpu_capability_name(ember::cpu_capability_supported())
                   << " (" << ember::cpu_vector_extensions() << "), not " << asked;
    }
    std::printf("CPU kernels at capability level %s\n", ember::cpu_capability());
  }
};

const auto* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new CpuCapabilityEnvironment);

}  // namespace
