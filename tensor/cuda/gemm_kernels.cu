// Batched matrix products for integer dtypes, which cuBLAS does not have: one thread per output
// element, strided operands, wrapping arithmetic like the CPU's elementwise integer ops. Floating
// dtypes go to cuBLAS (gemm_slots.cc).
#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

template <typename T>
__global__ void integer_gemm_kernel(T* out, const T* a, const T* b, GemmShape g, double beta,
                                    double alpha) {
  using U = std::make_unsigned_t<T>;
  const int64_t total = g.batch * g.n * g.m;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t j = e % g.m, i = e / g.m % g.n, batch = e / (g.m * g.n);
    const T* arow = a + batch * g.a_strides[0] + i * g.a_strides[1];
    const T* bcol = b + batch * g.b_strides[0] + j * g.b_strides[2];
    U sum = 0;
    for (int64_t l = 0; l < g.k; ++l) {
      sum += static_cast<U>(arow[l * g.a_strides[2]]) * static_cast<U>(bcol[l * g.b_strides[1]]);
    }
    const U scaled = static_cast<U>(static_cast<T>(alpha)) * sum;
    out[e] = static_cast<T>(beta == 0 ? scaled
                                      : scaled + static_cast<U>(static_cast<T>(beta)) *
                                                     static_cast<U>(out[e]));
  }
}

}  // namespace

int launch_integer_gemm(DType dtype, void* out, const void* a, const void* b, const GemmShape& g,
                        double beta, double alpha, cudaStream_t stream) {
  const int64_t total = g.batch * g.n * g.m;
  if (total == 0) return 0;
  switch (dtype) {
    case DType::kInt32: {
      const auto kernel = integer_gemm_kernel<int32_t>;
      EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream,
                   static_cast<int32_t*>(out), static_cast<const int32_t*>(a),
                   static_cast<const int32_t*>(b), g, beta, alpha);
      break;
    }
    case DType::kInt64: {
      const auto kernel = integer_gemm_kernel<int64_t>;
      EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream,
                   static_cast<int64_t*>(out), static_cast<const int64_t*>(a),
                   static_cast<const int64_t*>(b), g, beta, alpha);
      break;
    }
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace ember::cuda
