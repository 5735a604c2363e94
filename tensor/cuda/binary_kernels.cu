// Elementwise float32 add/sub/mul/div on the current device's default stream (see launch.h).
#include "tensor/cuda/device_code.h"
#include "tensor/cuda/launch.h"

namespace ember::cuda {
namespace {

struct AddOp { __device__ float operator()(float x, float y, float al) const { return x + al * y; } };
struct SubOp { __device__ float operator()(float x, float y, float al) const { return x - al * y; } };
struct MulOp { __device__ float operator()(float x, float y, float) const { return x * y; } };
struct DivOp { __device__ float operator()(float x, float y, float) const { return x / y; } };

template <typename Op>
__global__ void binary_kernel(float* out, const float* a, int64_t a_step, const float* b,
                              int64_t b_step, float alpha, int64_t n) {
  const Op op;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    out[i] = op(a[i * a_step], b[i * b_step], alpha);
  }
}

template <typename Op>
int launch(float* out, const float* a, int64_t a_step, const float* b, int64_t b_step,
           float alpha, int64_t n, cudaStream_t stream) {
  if (n == 0) return 0;
  EMBER_LAUNCH(binary_kernel<Op>, blocks_for(n), kThreadsPerBlock, 0, stream, out, a, a_step, b,
               b_step, alpha, n);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_binary_f32(BinaryKind op, float* out, const float* a, int64_t a_step, const float* b,
                      int64_t b_step, float alpha, int64_t n, cudaStream_t stream) {
  switch (op) {
    case BinaryKind::Add: return launch<AddOp>(out, a, a_step, b, b_step, alpha, n, stream);
    case BinaryKind::Sub: return launch<SubOp>(out, a, a_step, b, b_step, alpha, n, stream);
    case BinaryKind::Mul: return launch<MulOp>(out, a, a_step, b, b_step, alpha, n, stream);
    case BinaryKind::Div: return launch<DivOp>(out, a, a_step, b, b_step, alpha, n, stream);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace ember::cuda
