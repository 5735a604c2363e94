#include "tensor/cpu/thread_scratch.h"

#include <algorithm>

#include "tensor/error.h"
#include "tensor/factories.h"

namespace ember::cpu {
namespace {

struct KeptBuffer {
  Tensor buffer;  // grows to the largest request up to kKeptFloats; freed when the thread ends
  bool in_use = false;
};

KeptBuffer& kept_buffer() {
  thread_local KeptBuffer kept;
  return kept;
}

}  // namespace

ThreadScratch::ThreadScratch(int64_t numel) {
  if (numel > kKeptFloats) {
    from_allocator_ = empty({numel}, kFloat32);
    data_ = from_allocator_.data_ptr<float>();
    return;
  }
  KeptBuffer& kept = kept_buffer();
  EMBER_CHECK(!kept.in_use, "ThreadScratch: this thread's scratch is already in use; kernels may ",
              "not nest them");
  if (!kept.buffer.defined() || kept.buffer.numel() < numel) {
    kept.buffer = Tensor();  // the old block goes back before the new one is taken
    kept.buffer = empty({std::max<int64_t>(numel, 1)}, kFloat32);
  }
  kept.in_use = true;
  data_ = kept.buffer.data_ptr<float>();
}

ThreadScratch::~ThreadScratch() {
  if (!from_allocator_.defined()) kept_buffer().in_use = false;
}

}  // namespace ember::cpu
