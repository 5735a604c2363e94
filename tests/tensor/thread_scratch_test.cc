// ThreadScratch (tensor/cpu/thread_scratch.h): the buffer a thread keeps between kernel calls,
// Note [Thread scratch].
#include <cstdint>
#include <thread>

#include <gtest/gtest.h>

#include "tensor/cpu/thread_scratch.h"
#include "tests/tensor/test_util.h"

namespace ember::cpu {
namespace {

bool aligned64(const float* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(ThreadScratch, AThreadGetsTheSameMemoryBackUntilItNeedsMore) {
  float* first;
  {
    ThreadScratch a(1000);
    first = a.data();
    EXPECT_TRUE(aligned64(first));
    first[999] = 1.5f;
  }
  {
    ThreadScratch b(600);  // smaller: the same buffer, contents kept
    EXPECT_EQ(b.data(), first);
    EXPECT_EQ(b.data()[999], 1.5f);
  }
  ThreadScratch c(5000);  // larger: a new buffer of at least 5000 floats
  EXPECT_TRUE(aligned64(c.data()));
  c.data()[4999] = 2.0f;
}

TEST(ThreadScratch, EachThreadHasItsOwn) {
  float* mine;
  float* theirs = nullptr;
  ThreadScratch here(256);
  mine = here.data();
  std::thread other([&] {
    ThreadScratch there(256);
    theirs = there.data();
  });
  other.join();
  EXPECT_NE(mine, theirs);
}

TEST(ThreadScratch, NestingIsAnError) {
  ThreadScratch outer(64);
  EXPECT_EMBER_ERROR(ThreadScratch(64), "ThreadScratch: this thread's scratch is already in use");
}

TEST(ThreadScratch, LargeRequestsComeFromTheAllocatorAndDoNotDisturbTheKeptBuffer) {
  float* kept;
  {
    ThreadScratch small(128);
    kept = small.data();
    // Not nested use of the kept buffer: a request above kKeptFloats has memory of its own.
    ThreadScratch large(ThreadScratch::kKeptFloats + 1);
    EXPECT_NE(large.data(), kept);
    EXPECT_TRUE(aligned64(large.data()));
  }
  ThreadScratch again(128);
  EXPECT_EQ(again.data(), kept);
}

}  // namespace
}  // namespace ember::cpu
