// Linked into the per-level copies of the op suites (tests/common/cpu_capability_test.bzl): each copy
// sets EMBER_CPU_CAPABILITY, and at a level this CPU lacks every test is reported skipped (not run
// at a lower level and counted as passed).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "tensor/cpu/capability.h"

namespace {

bool level_unavailable(std::string* why) {
  const char* asked = std::getenv("EMBER_CPU_CAPABILITY");
  if (asked == nullptr || std::strcmp(ember::cpu_capability(), asked) == 0) return false;
  *why = std::string("this CPU supports up to ") +
         ember::cpu_capability_name(ember::cpu_capability_supported()) + " (" +
         ember::cpu_vector_extensions() + "), not " + asked;
  return true;
}

// A skip recorded when a test starts keeps gtest from running its body (Test::Run checks
// IsSkipped() after SetUp), and the XML says result="skipped". An Environment's GTEST_SKIP would
// not: gtest 1.12 reports the tests it never ran as passed.
class SkipUnavailableLevel : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override {
    std::string why;
    if (level_unavailable(&why)) GTEST_SKIP() << why;
  }
};

class CpuCapabilityEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_NE(std::getenv("EMBER_CPU_CAPABILITY"), nullptr)
        << "the per-level suites set EMBER_CPU_CAPABILITY";
    std::string why;
    if (level_unavailable(&why)) {
      std::printf("skipping every test: %s\n", why.c_str());
    } else {
      std::printf("CPU kernels at capability level %s\n", ember::cpu_capability());
    }
    ::testing::UnitTest::GetInstance()->listeners().Append(new SkipUnavailableLevel);
  }
};

const auto* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new CpuCapabilityEnvironment);

}  // namespace
