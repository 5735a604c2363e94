// Streams, events, pinned memory and non-blocking copies on cuda:0, and the caching allocator's
// statistics as tensors come and go (its bookkeeping alone: caching_allocator_test.cc).
#include <gtest/gtest.h>

#include "tensor/cuda_stream.h"
#include "tensor/device_backend.h"
#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/device_parity.h"

namespace ember::testing {
namespace {

class CudaStreamMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_F(CudaStreamMemoryTest, PinnedMemoryAndNonBlockingCopies) {
  const Tensor x = parity_input({64, 33}, kFloat32, 1);
  EXPECT_FALSE(x.is_pinned());
  const Tensor pinned = x.pin_memory();
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_TRUE(equal(pinned, x));
  const Tensor on_device = pinned.to(kCuda0, /*copy=*/false, /*non_blocking=*/true);
  const Tensor back = on_device.to(kCPU, /*copy=*/false, /*non_blocking=*/true);
  EXPECT_TRUE(back.is_pinned()) << "a non-blocking copy to the CPU lands in pinned memory";
  cuda_synchronize();
  EXPECT_TRUE(equal(back, x));
  // Pageable memory is copied synchronously whatever non_blocking says.
  EXPECT_TRUE(equal(x.to(kCuda0, false, true).cpu(), x));
}

// Pinned blocks come from a cache (tensor/cuda/caching_host_allocator.h; its bookkeeping alone:
// caching_host_allocator_test.cc).
TEST_F(CudaStreamMemoryTest, PinnedBlocksAreCachedAndReused) {
  const Tensor x = parity_input({1000}, kFloat32, 3);
  cuda_host_empty_cache();
  const DeviceMemoryStats before = cuda_host_memory_stats();
  for (int i = 0; i < 5; ++i) {
    const Tensor pinned = x.pin_memory();
    EXPECT_TRUE(pinned.is_pinned());
    // A non-blocking copy reads the block; it is reused once the copy completed.
    const Tensor on_device = pinned.to(kCuda0, /*copy=*/false, /*non_blocking=*/true);
    cuda_synchronize();
    EXPECT_TRUE(equal(on_device.cpu(), x));
  }
  const DeviceMemoryStats after = cuda_host_memory_stats();
  EXPECT_EQ(after.num_allocs - before.num_allocs, 5);
  EXPECT_EQ(after.num_device_mallocs - before.num_device_mallocs, 1) << "one cudaHostAlloc";
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.reserved_bytes - before.reserved_bytes, 4096) << "1000 floats: the 4096-byte class";
  cuda_host_empty_cache();
  EXPECT_EQ(cuda_host_memory_stats().reserved_bytes, before.reserved_bytes);
  EXPECT_FALSE(empty_pinned({0}, kFloat32).is_pinned()) << "no memory, nothing pinned";
}

TEST_F(CudaStreamMemoryTest, OpsRunOnTheCurrentStream) {
  const CudaStream side = CudaStream::create();
  EXPECT_EQ(CudaStream::current().handle(), nullptr) << "the default stream";
  const Tensor a = parity_input({100}, kFloat32, 2).to(kCuda0);
  Tensor b;
  CudaEvent start(/*enable_timing=*/true), done(/*enable_timing=*/true);
  {
    CudaStreamGuard guard(side);
    EXPECT_EQ(CudaStream::current().handle(), side.handle());
    start.record(side);
    b = mul(a, 2.0);
    done.record(side);
  }
  EXPECT_EQ(CudaStream::current().handle(), nullptr) << "the guard restores the previous stream";
  CudaStream::default_stream().wait(done);
  done.synchronize();
  EXPECT_GE(start.elapsed_ms(done), 0.0f);
  side.synchronize();
  EXPECT_TRUE(equal(b.cpu(), mul(a.cpu(), 2.0)));
}

TEST_F(CudaStreamMemoryTest, AllocatorStatisticsFollowTensors) {
  cuda_empty_cache();
  const DeviceMemoryStats before = cuda_memory_stats();
  {
    const Tensor t = empty({1000}, TensorOptions(kFloat32, kCuda0));  // 4000 B -> 4096 B class
    const DeviceMemoryStats during = cuda_memory_stats();
    EXPECT_EQ(during.allocated_bytes - before.allocated_bytes, 4096);
    EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
  }
  const DeviceMemoryStats freed = cuda_memory_stats();
  EXPECT_EQ(freed.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(freed.reserved_bytes - before.reserved_bytes, 4096) << "kept in the cache";
  const Tensor again = empty({900}, TensorOptions(kFloat32, kCuda0));  // same class: reused
  EXPECT_EQ(cuda_memory_stats().num_cache_hits, freed.num_cache_hits + 1);
  {
    // Another stream does not get the cached block (it may still be in use on its own stream).
    CudaStreamGuard guard(CudaStream::create());
    const int64_t mallocs = cuda_memory_stats().num_device_mallocs;
    const Tensor other = empty({1000}, TensorOptions(kFloat32, kCuda0));
    EXPECT_EQ(cuda_memory_stats().num_device_mallocs, mallocs + 1);
  }
  cuda_empty_cache();
  EXPECT_EQ(cuda_memory_stats().reserved_bytes, cuda_memory_stats().allocated_bytes);
}

}  // namespace
}  // namespace ember::testing
