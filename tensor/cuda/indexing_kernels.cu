// index_select, index_add, gather and scatter_add on the device. Indices arrive checked (in range,
// negative ones counting from the end) and int64. The accumulating ones use atomicAdd, so repeated
// indices add up; on a GPU the order of those additions, and so the last bits of a float sum, may
// vary from run to run (PyTorch's index_add_ and scatter_add_ are nondeterministic the same way).
#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

__device__ __forceinline__ int64_t wrapped(int64_t idx, int64_t size) {
  return idx < 0 ? idx + size : idx;
}

// CUDA has atomicAdd for float, double, int and unsigned long long; int64 adds as the latter
// (two's complement makes them the same bits).
template <typename T>
__device__ void atomic_add(T* address, T value) {
  if constexpr (std::is_same<T, int64_t>::value) {
    atomicAdd(reinterpret_cast<unsigned long long*>(address),
              static_cast<unsigned long long>(value));
  } else {
    atomicAdd(address, value);
  }
}

// out [outer, n, inner] = in [outer, size, inner] at rows index[i]; both dense.
template <typename T>
__global__ void index_select_kernel(T* out, const T* in, const int64_t* index, int64_t outer,
                                    int64_t n, int64_t size, int64_t inner) {
  const int64_t total = outer * n * inner;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t r = e % inner, i = e / inner % n, o = e / (inner * n);
    out[e] = in[(o * size + wrapped(index[i], size)) * inner + r];
  }
}

template <typename T>
__global__ void index_add_kernel(T* self, const T* src, const int64_t* index, int64_t outer,
                                 int64_t n, int64_t size, int64_t inner) {
  const int64_t total = outer * n * inner;
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const int64_t r = e % inner, i = e / inner % n, o = e / (inner * n);
    atomic_add(&self[(o * size + wrapped(index[i], size)) * inner + r], src[e]);
  }
}

// Offsets of position e of `shape` (ndim dims, row-major) in two strided operands, with the first
// operand's coordinate along `dim` replaced by index[e] (index dense over `shape`).
struct IndexedOffsets {
  int64_t indexed, plain;
};
__device__ IndexedOffsets indexed_offsets(const Indexer& g, int64_t e, int dim,
                                          const int64_t* index, int64_t dim_size) {
  IndexedOffsets o{0, 0};
  const int64_t target = wrapped(index[e], dim_size);
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t c = e % g.sizes[d];
    e /= g.sizes[d];
    o.indexed += (d == dim ? target : c) * g.strides[0][d];
    o.plain += c * g.strides[1][d];
  }
  return o;
}

// g.strides[0] are in's, g.strides[1] out's.
template <typename T>
__global__ void gather_kernel(T* out, const T* in, const int64_t* index, Indexer g, int dim,
                              int64_t dim_size, int64_t total) {
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const IndexedOffsets o = indexed_offsets(g, e, dim, index, dim_size);
    out[o.plain] = in[o.indexed];
  }
}

// g.strides[0] are self's, g.strides[1] src's.
template <typename T>
__global__ void scatter_add_kernel(T* self, const T* src, const int64_t* index, Indexer g, int dim,
                                   int64_t dim_size, int64_t total) {
  for (int64_t e = global_thread_index(); e < total; e += grid_stride()) {
    const IndexedOffsets o = indexed_offsets(g, e, dim, index, dim_size);
    atomic_add(&self[o.indexed], src[o.plain]);
  }
}

template <typename T>
constexpr bool has_atomic_add_v =
    std::is_same<T, float>::value || std::is_same<T, double>::value ||
    std::is_same<T, int32_t>::value || std::is_same<T, int64_t>::value;

}  // namespace

int launch_index_select(DType dtype, void* out, const void* in, const int64_t* index,
                        const SliceShape& s, cudaStream_t stream) {
  const int64_t total = s.outer * s.n * s.inner;
  if (total == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = index_select_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(out),
                 static_cast<const T*>(in), index, s.outer, s.n, s.size, s.inner);
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_index_add(DType dtype, void* self, const void* src, const int64_t* index,
                     const SliceShape& s, cudaStream_t stream) {
  const int64_t total = s.outer * s.n * s.inner;
  if (total == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (has_atomic_add_v<T>) {
      const auto kernel = index_add_kernel<T>;
      EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(self),
                   static_cast<const T*>(src), index, s.outer, s.n, s.size, s.inner);
      return static_cast<int>(cudaGetLastError());
    } else {
      return static_cast<int>(cudaErrorInvalidValue);  // the glue widens these first
    }
  });
}

int launch_gather(DType dtype, void* out, const void* in, const int64_t* index, const Indexer& g,
                  int dim, int64_t dim_size, int64_t total, cudaStream_t stream) {
  if (total == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = gather_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(out),
                 static_cast<const T*>(in), index, g, dim, dim_size, total);
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_scatter_add(DType dtype, void* self, const void* src, const int64_t* index,
                       const Indexer& g, int dim, int64_t dim_size, int64_t total,
                       cudaStream_t stream) {
  if (total == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (has_atomic_add_v<T>) {
      const auto kernel = scatter_add_kernel<T>;
      EMBER_LAUNCH(kernel, blocks_for(total), kThreadsPerBlock, 0, stream, static_cast<T*>(self),
                   static_cast<const T*>(src), index, g, dim, dim_size, total);
      return static_cast<int>(cudaGetLastError());
    } else {
      return static_cast<int>(cudaErrorInvalidValue);  // the glue widens these first
    }
  });
}

}  // namespace ember::cuda
