// EMBER_CUDASIM_CHECKS=none turns the simulator's sanitizer off: the planted bugs that
// sanitizer_test.cc sees pass unseen here, which shows it is the checks that see them.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/sanitizer_kernels.h"

namespace ember::cuda::testing {
namespace {

// Before main, so before the simulator first reads it.
const bool kChecksOff = setenv("EMBER_CUDASIM_CHECKS", "none", 1) == 0;

class SanitizerOffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EMBER_SKIP_WITHOUT_CUDA_DEVICE();
    ASSERT_TRUE(kChecksOff);
  }
};

#ifdef EMBER_CUDA_SIMULATOR
TEST_F(SanitizerOffTest, PlantedBugsPassUnseen) {
  DeviceBuffer<float> out(10), never_written(8), sums(8);
  EXPECT_EQ(write_one_past_end(out.get(), 10), cudaSuccess);
  EXPECT_EQ(add_one(never_written.get(), sums.get(), 8), cudaSuccess);
  EXPECT_EQ(two_threads_write_one_element(out.get()), cudaSuccess);
}
#endif

}  // namespace
}  // namespace ember::cuda::testing
