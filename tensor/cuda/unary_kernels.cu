// Elementwise float32 neg/relu on the current device's default stream (see launch.h).
#include "tensor/cuda/device_code.h"
#include "tensor/cuda/launch.h"

namespace ember::cuda {
namespace {

struct NegOp { __device__ float operator()(float x) const { return -x; } };
// `x < 0 ? 0 : x` keeps NaN as NaN, like the CPU kernel and PyTorch.
struct ReluOp { __device__ float operator()(float x) const { return x < 0.0f ? 0.0f : x; } };

template <typename Op>
__global__ void unary_kernel(float* out, const float* in, int64_t n) {
  const Op op;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    out[i] = op(in[i]);
  }
}

template <typename Op>
int launch(float* out, const float* in, int64_t n, cudaStream_t stream) {
  if (n == 0) return 0;
  EMBER_LAUNCH(unary_kernel<Op>, blocks_for(n), kThreadsPerBlock, 0, stream, out, in, n);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_unary_f32(UnaryKind op, float* out, const float* in, int64_t n,
                     cudaStream_t stream) {
  switch (op) {
    case UnaryKind::Neg: return launch<NegOp>(out, in, n, stream);
    case UnaryKind::Relu: return launch<ReluOp>(out, in, n, stream);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace ember::cuda
