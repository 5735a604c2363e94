// The CUDA table's random slot: one 64-bit draw from the ember Generator keys Philox for the whole
// tensor (random_kernels.cu). A seed therefore gives the same device tensor on every run and rank,
// and the generator advances by one draw per call whatever the tensor's size; the values differ
// from the CPU's for the same seed, as in PyTorch.
#include <mutex>

#include "tensor/cuda/slot_glue.h"

namespace ember::cuda {
namespace {

void random_cuda(const Tensor& out, const RandomSpec& spec, Generator& gen) {
  uint64_t key;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    key = gen.next_u64();
  }
  RandomDraw draw{RandomDraw::kUniform, spec.bits, spec.low, spec.range};
  if (spec.kind == RandomSpec::Kind::kNormal) draw.kind = RandomDraw::kNormal;
  if (spec.kind == RandomSpec::Kind::kInteger) draw.kind = RandomDraw::kInteger;
  DeviceGuard guard(out.device().index);
  check_launch(launch_random(dtype_of(out), out.data_ptr(), out.numel(), key, draw, stream_of(out)),
               "random", out);
}

const bool kRegistered = [] {
  kernel_table(DeviceType::kCUDA).random = random_cuda;
  return true;
}();

}  // namespace
}  // namespace ember::cuda
