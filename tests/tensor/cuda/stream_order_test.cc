// What only asynchronous streams can show (Note [Simulated streams], sim/cuda/streams.cc):
// a stream held back by a gate, so work on another stream or the host runs first, exactly as a
// busy GPU lets it. Each test plants the mistake a real GPU punishes and checks the simulator
// shows it, or checks that ember's own code does not make it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "tensor/cuda_stream.h"
#include "tensor/device_backend.h"
#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/device_parity.h"
#include "tests/tensor/cuda/stream_gate.h"

namespace ember::testing {
namespace {

class StreamOrderTest : public ::testing::Test {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_F(StreamOrderTest, QueriesAnswerNotReadyWhileWorkIsPendingAndLeaveItAsTheLastError) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t done;
  ASSERT_EQ(cudaEventCreate(&done), cudaSuccess);
  cuda::testing::DeviceBuffer<float> buffer(std::vector<float>(16, 0.0f));
  {
    StreamGate gate(stream);
    ASSERT_EQ(cudaMemsetAsync(buffer.get(), 0, 16 * sizeof(float), stream), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(done, stream), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady);
    EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
    // As on a GPU: the next launch's cudaGetLastError check sees it unless the poller clears it.
    EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);
    gate.open();
    EXPECT_EQ(cudaEventSynchronize(done), cudaSuccess);
  }
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(done), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// A copy on one stream of what another stream writes: stale without cudaStreamWaitEvent, right
// with it.
TEST_F(StreamOrderTest, AStreamThatDoesNotWaitForAnEventReadsStaleData) {
  cudaStream_t writer, reader;
  ASSERT_EQ(cudaStreamCreateWithFlags(&writer, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t written;
  ASSERT_EQ(cudaEventCreate(&written), cudaSuccess);
  for (const bool wait : {false, true}) {
    SCOPED_TRACE(wait ? "with cudaStreamWaitEvent" : "without cudaStreamWaitEvent");
    cuda::testing::DeviceBuffer<unsigned char> source(std::vector<unsigned char>(64, 0));
    cuda::testing::DeviceBuffer<unsigned char> copy(std::vector<unsigned char>(64, 9));
    StreamGate gate(writer);
    ASSERT_EQ(cudaMemsetAsync(source.get(), 7, 64, writer), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(written, writer), cudaSuccess);
    if (wait) {
      ASSERT_EQ(cudaStreamWaitEvent(reader, written, 0), cudaSuccess);
    }
    ASSERT_EQ(cudaMemcpyAsync(copy.get(), source.get(), 64, cudaMemcpyDeviceToDevice, reader), cudaSuccess);
    if (!wait) {
      ASSERT_EQ(cudaStreamSynchronize(reader), cudaSuccess);  // ran while the writer was held
    }
    gate.open();
    ASSERT_EQ(cudaStreamSynchronize(reader), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(writer), cudaSuccess);
    EXPECT_EQ(copy.download()[0], wait ? 7 : 0);
  }
  EXPECT_EQ(cudaEventDestroy(written), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(reader), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(writer), cudaSuccess);
}

// Note [Pinned blocks and in-flight copies]: a pinned tensor dropped while its non-blocking copy
// waits in the stream keeps its block until the copy ran, so a new pinned tensor of the same size
// cannot overwrite what the copy has yet to read.
TEST_F(StreamOrderTest, APinnedBlockIsNotReusedWhileItsCopyIsInFlight) {
  const Tensor x = parity_input({1000}, kFloat32, 5);
  const Tensor y = parity_input({1000}, kFloat32, 6);
  cuda_host_empty_cache();
  Tensor on_device;
  {
    StreamGate gate(static_cast<cudaStream_t>(CudaStream::current(0).handle()));
    {
      const Tensor pinned = x.pin_memory();
      on_device = pinned.to(kCuda0, /*copy=*/false, /*non_blocking=*/true);
    }
    const Tensor other = y.pin_memory();  // the same 4096-byte class
    gate.open();
    cuda_synchronize();
  }
  EXPECT_TRUE(equal(on_device.cpu(), x)) << "the copy read a block that was handed out again";
}

}  // namespace
}  // namespace ember::testing
