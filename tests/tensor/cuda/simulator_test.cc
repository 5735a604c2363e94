// What the CUDA simulator (--config=cudasim) must reproduce of the device, checked with real
// kernels (simulator_kernels.cu): barriers and shared memory, warp shuffles and votes, atomics,
// dynamic shared memory, grid and block indices, per-thread parameters; its runtime's memory and
// stream checks; and the divergences it must reject. The semantic cases run unchanged on a GPU;
// the rejection cases are simulator-only (on a device they are undefined behaviour).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/simulator_kernels.h"

namespace ember::cuda::testing {
namespace {

class SimulatorTest : public ::testing::Test {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_F(SimulatorTest, SharedMemoryTreeReductionWithBarriers) {
  constexpr int kBlocks = 5;
  std::vector<float> in(kBlocks * 256);
  std::iota(in.begin(), in.end(), 0.0f);
  DeviceBuffer<float> d_in(in), d_out(kBlocks);
  ASSERT_EQ(block_sums(d_in.get(), d_out.get(), kBlocks), cudaSuccess);
  const std::vector<float> out = d_out.download();
  for (int b = 0; b < kBlocks; ++b) {
    const float first = b * 256.0f;
    EXPECT_EQ(out[b], 256 * first + 255 * 256 / 2) << "block " << b;
  }
}

TEST_F(SimulatorTest, WarpShufflesExchangeLaneValues) {
  constexpr int kThreads = 256;
  std::vector<float> in(kThreads);
  for (int i = 0; i < kThreads; ++i) in[i] = static_cast<float>(i % 7 + i / 32);
  DeviceBuffer<float> d_in(in), d_xor(kThreads), d_down(kThreads / 32);
  ASSERT_EQ(warp_sums(d_in.get(), d_xor.get(), d_down.get(), kThreads), cudaSuccess);
  const std::vector<float> by_xor = d_xor.download(), by_down = d_down.download();
  for (int w = 0; w < kThreads / 32; ++w) {
    const float expected = std::accumulate(in.begin() + 32 * w, in.begin() + 32 * (w + 1), 0.0f);
    EXPECT_EQ(by_down[w], expected) << "warp " << w;
    for (int lane = 0; lane < 32; ++lane) {
      EXPECT_EQ(by_xor[32 * w + lane], expected) << "warp " << w << " lane " << lane;
    }
  }
}

TEST_F(SimulatorTest, AtomicAddCountsEveryThread) {
  DeviceBuffer<float> counter(std::vector<float>{0.0f});
  ASSERT_EQ(atomic_count(counter.get(), 40), cudaSuccess);
  EXPECT_EQ(counter.download()[0], 40.0f * 256);
}

TEST_F(SimulatorTest, DynamicSharedMemoryIsPerBlock) {
  constexpr int kThreads = 96, kBlocks = 3;
  std::vector<int> in(kThreads * kBlocks);
  std::iota(in.begin(), in.end(), 0);
  DeviceBuffer<int> d_in(in), d_out(in.size());
  ASSERT_EQ(reverse_in_blocks(d_in.get(), d_out.get(), kThreads, kBlocks), cudaSuccess);
  const std::vector<int> out = d_out.download();
  for (int b = 0; b < kBlocks; ++b) {
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_EQ(out[b * kThreads + t], b * kThreads + kThreads - 1 - t);
    }
  }
}

TEST_F(SimulatorTest, ThreeDimensionalGridAndBlockIndices) {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const int n = 3 * 2 * 2 * 4 * 3 * 2;
  DeviceBuffer<int> out(std::vector<int>(n, -1));
  ASSERT_EQ(write_indices(out.get(), grid, block), cudaSuccess);
  const std::vector<int> ids = out.download();
  for (int i = 0; i < n; ++i) EXPECT_EQ(ids[i], i);
}

TEST_F(SimulatorTest, BallotCollectsPredicatesOfTheWarp) {
  DeviceBuffer<unsigned> out(2);
  ASSERT_EQ(ballots(out.get()), cudaSuccess);
  const std::vector<unsigned> votes = out.download();
  for (int w = 0; w < 2; ++w) {
    unsigned expected = 0;
    for (int lane = 0; lane < 32; ++lane) {
      if ((32 * w + lane) % 3 == 0) expected |= 1u << lane;
    }
    EXPECT_EQ(votes[w], expected) << "warp " << w;
  }
}

TEST_F(SimulatorTest, KernelParametersArePerThreadCopies) {
  DeviceBuffer<int> out(64);
  ASSERT_EQ(parameters_are_per_thread(out.get(), 10, 64), cudaSuccess);
  for (int v : out.download()) EXPECT_EQ(v, 9);
}

TEST_F(SimulatorTest, EventsMeasureElapsedTimeOnAStream) {
  cudaStream_t stream;
  cudaEvent_t start, end;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, stream), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaEventDestroy(start), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(end), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(SimulatorTest, CopiesCheckDirectionAndExtent) {
  DeviceBuffer<float> device(4);
  std::vector<float> host(8, 1.0f);
  EXPECT_EQ(cudaMemcpy(device.get(), host.data(), 4 * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  // Wrong direction, and past the end of the allocation.
  EXPECT_NE(cudaMemcpy(device.get(), host.data(), 4 * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_NE(cudaMemcpy(device.get(), host.data(), 8 * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_NE(cudaFree(host.data()), cudaSuccess);
  cudaGetLastError();
}

#ifdef EMBER_CUDA_SIMULATOR
// Undefined behaviour on a device (a hang or garbage); the simulator must name it.
TEST_F(SimulatorTest, RejectsABarrierOnlySomeThreadsReach) {
  DeviceBuffer<float> out(64);
  EXPECT_EQ(divergent_barrier(out.get()), cudaErrorLaunchFailure);
  EXPECT_NE(std::string(ember::cudasim::last_error_detail()).find("divergent __syncthreads"),
            std::string::npos)
      << ember::cudasim::last_error_detail();
}

TEST_F(SimulatorTest, RejectsABarrierAfterAnEarlyExitOfThreadZero) {
  DeviceBuffer<float> out(64);
  EXPECT_EQ(early_exit_before_barrier(out.get()), cudaErrorLaunchFailure);
  const std::string detail = ember::cudasim::last_error_detail();
  EXPECT_NE(detail.find("early_exit_kernel"), std::string::npos) << detail;
  EXPECT_NE(detail.find("divergent __syncthreads"), std::string::npos) << detail;
}

TEST_F(SimulatorTest, RejectsAnInvalidLaunchConfiguration) {
  DeviceBuffer<float> out(64);
  EXPECT_EQ(oversized_block(out.get()), cudaErrorInvalidConfiguration);
  EXPECT_NE(std::string(ember::cudasim::last_error_detail()).find("2048 threads per block"),
            std::string::npos);
}

TEST_F(SimulatorTest, LaunchesAfterAFailureStartClean) {
  DeviceBuffer<float> out(64);
  EXPECT_EQ(divergent_barrier(out.get()), cudaErrorLaunchFailure);
  DeviceBuffer<float> counter(std::vector<float>{0.0f});
  EXPECT_EQ(atomic_count(counter.get(), 1), cudaSuccess);
  EXPECT_EQ(counter.download()[0], 256.0f);
}

// On a device, host code that dereferences device memory faults (Note [Simulated device memory is
// not host memory]); the simulator's must too, and say why. Copies and kernels still reach it.
using SimulatorDeathTest = SimulatorTest;
TEST_F(SimulatorDeathTest, HostCodeTouchingDeviceMemoryDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  DeviceBuffer<float> d(std::vector<float>{1.0f, 2.0f});
  EXPECT_DEATH(
      {
        volatile float x = d.get()[1];
        (void)x;
      },
      "cudasim: host code touched device memory");
  EXPECT_DEATH(d.get()[0] = 3.0f, "cudasim: host code touched device memory");
  EXPECT_EQ(d.download(), (std::vector<float>{1.0f, 2.0f}));
  DeviceBuffer<float> counter(std::vector<float>{0.0f});
  EXPECT_EQ(atomic_count(counter.get(), 1), cudaSuccess);
  EXPECT_EQ(counter.download()[0], 256.0f);
}
#endif

}  // namespace
}  // namespace ember::cuda::testing
