// Reductions over a [rows, cols] view of the input (rows: the kept dims, cols: the reduced ones,
// each enumerated row-major by an Indexer): one block per row, threads striding over the row and
// meeting in a shared-memory tree. Sum accumulates in the CPU's acc_t (double for floats, int64 for
// integers); max/min propagate NaN; argmax/argmin pick the first extreme, or the first NaN, like
// the CPU's sequential scan. Results go to a dense [rows] buffer that the glue copies into `out`.
#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

constexpr int kReduceThreads = 256;  // the most threads a row gets (the shared arrays' size)

// Threads per row: a power of two no larger than the row needs, so short rows do not leave most of
// a block idle at every step of the tree.
unsigned threads_for(int64_t cols) {
  unsigned t = 32;
  while (t < kReduceThreads && t < cols) t *= 2;
  return t;
}

template <typename T, typename Acc>
__global__ void sum_kernel(Acc* out, const T* in, Indexer kept, Indexer reduced, int64_t rows,
                           int64_t cols) {
  EMBER_SHARED(Acc, partial, kReduceThreads);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = offsets_of<1>(kept, row).of[0];
    Acc acc = Acc(0);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      acc += static_cast<Acc>(opmath_t<T>(in[base + offsets_of<1>(reduced, c).of[0]]));
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[row] = partial[0];
    __syncthreads();  // partial[0] is read before the next row overwrites it
  }
}

template <typename M>
__device__ bool nan_of(M v) {
  if constexpr (std::is_floating_point<M>::value) {
    return v != v;
  } else {
    return false;
  }
}

// Whether candidate (v, i) beats the current best (b, j): NaN first (the earliest), then the
// extreme value, ties to the earlier index.
template <typename M>
__device__ bool beats(bool is_max, M v, int64_t i, M b, int64_t j) {
  if (j < 0) return true;
  const bool vn = nan_of(v), bn = nan_of(b);
  if (vn || bn) return vn && (!bn || i < j);
  if (v == b) return i < j;
  return is_max ? v > b : v < b;
}

template <typename T>
__global__ void extreme_kernel(T* values, int64_t* indices, const T* in, Indexer kept,
                               Indexer reduced, int64_t rows, int64_t cols, bool is_max) {
  using M = opmath_t<T>;
  EMBER_SHARED(M, best_value, kReduceThreads);
  EMBER_SHARED(int64_t, best_index, kReduceThreads);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = offsets_of<1>(kept, row).of[0];
    M b = M(0);
    int64_t j = -1;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const M v = M(in[base + offsets_of<1>(reduced, c).of[0]]);
      if (beats(is_max, v, c, b, j)) {
        b = v;
        j = c;
      }
    }
    best_value[threadIdx.x] = b;
    best_index[threadIdx.x] = j;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) {
        const int other = threadIdx.x + half;
        if (best_index[other] >= 0 &&
            beats(is_max, best_value[other], best_index[other], best_value[threadIdx.x],
                  best_index[threadIdx.x])) {
          best_value[threadIdx.x] = best_value[other];
          best_index[threadIdx.x] = best_index[other];
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (values != nullptr) values[row] = T(best_value[0]);
      if (indices != nullptr) indices[row] = best_index[0];
    }
    __syncthreads();
  }
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < kMaxBlocks ? (rows > 0 ? rows : 1) : kMaxBlocks);
}

}  // namespace

int launch_sum(DType dtype, void* out, const void* in, const Indexer& kept,
               const Indexer& reduced, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<is_floating_v<T>, double, int64_t>;
    const auto kernel = sum_kernel<T, Acc>;
    EMBER_LAUNCH(kernel, row_blocks(rows), threads_for(cols), 0, stream, static_cast<Acc*>(out),
                 static_cast<const T*>(in), kept, reduced, rows, cols);
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_extreme(DType dtype, bool is_max, void* values, int64_t* indices, const void* in,
                   const Indexer& kept, const Indexer& reduced, int64_t rows, int64_t cols,
                   cudaStream_t stream) {
  if (rows == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = extreme_kernel<T>;
    EMBER_LAUNCH(kernel, row_blocks(rows), threads_for(cols), 0, stream, static_cast<T*>(values),
                 indices, static_cast<const T*>(in), kept, reduced, rows, cols, is_max);
    return static_cast<int>(cudaGetLastError());
  });
}

}  // namespace ember::cuda
