// The CUDA simulator's sanitizer (Note [Simulated compute-sanitizer], sim/cuda/checks.cc):
// each check fires on a planted bug (sanitizer_kernels.cu) and names the kernel, thread, block,
// address, allocation and source line, while the bug's correct twin passes. The twins also run
// on a GPU; the reports are simulator-only (compute-sanitizer reports them there).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/sanitizer_kernels.h"
#include "tests/tensor/cuda/stream_gate.h"

namespace ember::cuda::testing {
namespace {

class SanitizerTest : public ::testing::Test {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_F(SanitizerTest, CorrectKernelsPass) {
  DeviceBuffer<float> out(10), in(std::vector<float>(10, 2.0f));
  EXPECT_EQ(write_in_bounds(out.get(), 10), cudaSuccess);
  EXPECT_EQ(add_one(in.get(), out.get(), 10), cudaSuccess);
  EXPECT_EQ(out.download(), std::vector<float>(10, 3.0f));

  std::vector<float> values(256);
  for (int i = 0; i < 256; ++i) values[i] = static_cast<float>(i);
  DeviceBuffer<float> d_values(values), sum(1);
  ASSERT_EQ(tree_sum(d_values.get(), sum.get(), /*barrier_between_levels=*/true), cudaSuccess);
  EXPECT_EQ(sum.download()[0], 255.0f * 256 / 2);

  DeviceBuffer<float> lanes(32);
  ASSERT_EQ(exchange_in_warp(lanes.get(), /*sync_warp=*/true), cudaSuccess);
  const std::vector<float> exchanged = lanes.download();
  for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(exchanged[lane], static_cast<float>(lane ^ 1));

  DeviceBuffer<float> counter(std::vector<float>{0.0f});
  ASSERT_EQ(every_block_increments_atomically(counter.get(), 3), cudaSuccess);
  EXPECT_EQ(counter.download()[0], 3.0f);
}

#ifdef EMBER_CUDA_SIMULATOR
// The planted bugs need every check on: the default, or EMBER_CUDASIM_CHECKS=all.
class SanitizerReportTest : public SanitizerTest {
 protected:
  void SetUp() override {
    SanitizerTest::SetUp();
    const char* checks = std::getenv("EMBER_CUDASIM_CHECKS");
    if (checks != nullptr && std::string(checks) != "all") {
      GTEST_SKIP() << "EMBER_CUDASIM_CHECKS=" << checks << " leaves checks off";
    }
  }
};

// The report of the launch that just failed, checked for each of `parts`.
void expect_report(cudaError_t result, const std::vector<std::string>& parts) {
  EXPECT_EQ(result, cudaErrorLaunchFailure);
  const std::string detail = ember::cudasim::last_error_detail();
  for (const std::string& part : parts) EXPECT_NE(detail.find(part), std::string::npos) << part << "\nin: " << detail;
  cudaGetLastError();  // so that the next launch's own error is what it returns
}

TEST_F(SanitizerReportTest, MemcheckNamesAWriteOnePastTheEnd) {
  DeviceBuffer<float> out(10);
  expect_report(write_one_past_end(out.get(), 10),
                {"fill_kernel: memcheck: invalid __global__ write of 4 bytes",
                 "by thread (10,0,0) of block (0,0,0)", "sanitizer_kernels.cu:",
                 "0 bytes past the end of the 40-byte allocation"});
}

// A sub-allocator (ember's caching allocator) narrows a block to what it handed out.
TEST_F(SanitizerReportTest, MemcheckUsesTheExtentASubAllocatorHandedOut) {
  DeviceBuffer<float> block(256);
  ember::cudasim::annotate_suballocation(block.get(), 10 * sizeof(float), nullptr);
  EXPECT_EQ(write_in_bounds(block.get(), 10), cudaSuccess);
  expect_report(write_one_past_end(block.get(), 10), {"0 bytes past the end of the 40-byte allocation"});
}

// The bug record_stream exists for: a block freed (to the cache) on its stream while work on
// another stream still reads it.
TEST_F(SanitizerReportTest, MemcheckNamesABlockFreedWhileAnotherStreamStillReadsIt) {
  cudaStream_t owner, reader;
  ASSERT_EQ(cudaStreamCreateWithFlags(&owner, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking), cudaSuccess);
  DeviceBuffer<float> block(256), out(16);
  ember::cudasim::annotate_suballocation(block.get(), 16 * sizeof(float), owner);
  ASSERT_EQ(write_in_bounds(block.get(), 16, owner), cudaSuccess);
  {
    ember::testing::StreamGate gate(reader);
    ASSERT_EQ(launch_add_one(block.get(), out.get(), 16, reader), cudaSuccess);
    ember::cudasim::annotate_suballocation_free(block.get(), 256 * sizeof(float), owner);
    ASSERT_EQ(cudaStreamSynchronize(owner), cudaSuccess);
    gate.open();
    expect_report(cudaStreamSynchronize(reader),
                  {"add_one_kernel: memcheck: invalid __global__ read of 4 bytes",
                   "inside the 1024-byte block", "which is free"});
  }
  cudaStreamDestroy(owner);
  cudaStreamDestroy(reader);
}

TEST_F(SanitizerReportTest, InitcheckNamesAReadOfMemoryNothingWrote) {
  DeviceBuffer<float> never_written(8), out(8);
  expect_report(add_one(never_written.get(), out.get(), 8),
                {"add_one_kernel: initcheck: read of 4 bytes", "by thread (0,0,0) of block (0,0,0)",
                 "byte 0 of the 32-byte allocation", "was not written"});
  // A device-to-device copy carries what its source had.
  DeviceBuffer<float> copy(8);
  ASSERT_EQ(cudaMemcpy(copy.get(), never_written.get(), 32, cudaMemcpyDeviceToDevice), cudaSuccess);
  expect_report(add_one(copy.get(), out.get(), 8), {"initcheck"});
  // A memset writes.
  ASSERT_EQ(cudaMemset(never_written.get(), 0, 32), cudaSuccess);
  EXPECT_EQ(add_one(never_written.get(), out.get(), 8), cudaSuccess);
}

// DDP's bucket copy without the cudaStreamWaitEvent on the compute stream's event: the copy reads
// the gradient before the kernel that writes it ran.
TEST_F(SanitizerReportTest, InitcheckNamesACopyThatDidNotWaitForItsProducer) {
  cudaStream_t compute, bucket;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&bucket, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t written;
  ASSERT_EQ(cudaEventCreate(&written), cudaSuccess);
  DeviceBuffer<float> grad(16), copied(16);
  {
    ember::testing::StreamGate gate(compute);
    ASSERT_EQ(launch_write_in_bounds(grad.get(), 16, compute), cudaSuccess);
    ASSERT_EQ(launch_add_one(grad.get(), copied.get(), 16, bucket), cudaSuccess);
    expect_report(cudaStreamSynchronize(bucket),
                  {"add_one_kernel: initcheck", "byte 0 of the 64-byte allocation", "was not written"});
  }
  // With the wait, the copy reads what the kernel wrote.
  {
    ember::testing::StreamGate gate(compute);
    ASSERT_EQ(launch_write_in_bounds(grad.get(), 16, compute), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(written, compute), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(bucket, written), cudaSuccess);
    ASSERT_EQ(launch_add_one(grad.get(), copied.get(), 16, bucket), cudaSuccess);
  }
  EXPECT_EQ(cudaStreamSynchronize(bucket), cudaSuccess);
  EXPECT_EQ(copied.download(), std::vector<float>(16, 2.0f));
  cudaEventDestroy(written);
  cudaStreamDestroy(compute);
  cudaStreamDestroy(bucket);
}

TEST_F(SanitizerReportTest, SharedMemoryStartsEveryBlockUnwritten) {
  DeviceBuffer<float> out(64);
  expect_report(read_unwritten_shared(out.get()),
                {"half_written_shared_kernel: initcheck", "__shared__", "thread (32,0,0)",
                 "byte 128 was not written in this block"});
}

TEST_F(SanitizerReportTest, RacecheckNamesAMissingSyncthreadsInATree) {
  DeviceBuffer<float> in(std::vector<float>(256, 1.0f)), out(1);
  expect_report(tree_sum(in.get(), out.get(), /*barrier_between_levels=*/false),
                {"tree_sum_kernel: racecheck: __shared__", "hazard at byte",
                 "thread (0,0,0) of block (0,0,0)", "sanitizer_kernels.cu:", "no __syncthreads"});
}

TEST_F(SanitizerReportTest, RacecheckKnowsWhatSyncwarpOrders) {
  DeviceBuffer<float> out(32);
  expect_report(exchange_in_warp(out.get(), /*sync_warp=*/false),
                {"racecheck: __shared__ write-after-read hazard", "thread (0,0,0)", "thread (1,0,0)"});
}

TEST_F(SanitizerReportTest, RacecheckNamesTwoThreadsWritingOneGlobalElement) {
  DeviceBuffer<float> out(32);
  expect_report(two_threads_write_one_element(out.get()),
                {"racecheck: __global__ write-after-write hazard",
                 "thread (0,0,0) of block (0,0,0) writes it", "thread (1,0,0) of block (0,0,0)"});
}

TEST_F(SanitizerReportTest, RacecheckNamesBlocksRacingWithoutAtomics) {
  DeviceBuffer<float> counter(std::vector<float>{0.0f});
  expect_report(every_block_increments(counter.get(), 2),
                {"racecheck: __global__", "thread (0,0,0) of block (0,0,0)",
                 "thread (0,0,0) of block (1,0,0)"});
}
#endif

}  // namespace
}  // namespace ember::cuda::testing
