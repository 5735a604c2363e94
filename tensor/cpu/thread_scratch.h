// Working memory a thread keeps from one kernel call to the next: Note [Thread scratch].
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace ember::cpu {

// Note [Thread scratch]
// A kernel that writes and rereads a large working buffer per image (the Winograd forward's
// transformed tiles V and M, up to ~0.5 MiB) wants the same memory on every call, in its own
// core's cache. Taken from the caching allocator per call, a thread got whichever free block of
// that size came first, as often one the other thread had just written, whose cache then handed
// over every line, and at 2 threads the Winograd forward cost much more CPU time than at 1 (a
// 2-thread ResNet-20 step: `EMBER_PARALLEL_PROFILE=1 taskset -c 0,1
// bazel-bin/bench/resnet_train_bench --threads=2`; docs/measurements.md, "Threads"). Each thread
// keeps one buffer of up to kKeptFloats for its life; larger requests come from the allocator.
class ThreadScratch {
 public:
  // `numel` uninitialised floats, 64-byte aligned. One ThreadScratch per thread at a time.
  explicit ThreadScratch(int64_t numel);
  ~ThreadScratch();
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;

  float* data() const { return data_; }

  static constexpr int64_t kKeptFloats = int64_t{1} << 20;  // 4 MiB a thread at most

 private:
  Tensor from_allocator_;  // requests above kKeptFloats
  float* data_ = nullptr;
};

}  // namespace ember::cpu
