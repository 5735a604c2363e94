// Strided copies between tensors of one device, converting the dtype on the way (Tensor::to,
// copy_, contiguous). Conversions go through the wider of the two types, as static_cast does on
// the CPU: float to integer truncates, anything to bool is `!= 0`.
#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

// tensor/cpu/convert.h's rules: 16-bit floats through float, floats to integers through int64
// (negative values wrap instead of being undefined), anything to bool is `!= 0`.
template <typename Out, typename In>
__device__ Out convert(In x) {
  using M = opmath_t<In>;
  if constexpr (std::is_same<Out, bool>::value) {
    return M(x) != M(0);
  } else if constexpr (std::is_same<Out, Half>::value || std::is_same<Out, BFloat16>::value) {
    return Out(static_cast<float>(M(x)));
  } else if constexpr (std::is_integral<Out>::value && std::is_floating_point<M>::value) {
    return static_cast<Out>(static_cast<int64_t>(M(x)));
  } else {
    return static_cast<Out>(M(x));
  }
}

template <typename Out, typename In>
__global__ void copy_kernel(Out* out, const In* in, Indexer ix, int64_t n) {
  for (int64_t i = global_thread_index(); i < n; i += grid_stride()) {
    const Offsets<2> o = offsets_of<2>(ix, i);
    out[o.of[0]] = convert<Out, In>(in[o.of[1]]);
  }
}

template <typename T>
__global__ void fill_kernel(T* out, Indexer ix, int64_t n, T value) {
  for (int64_t i = global_thread_index(); i < n; i += grid_stride()) {
    out[offsets_of<1>(ix, i).of[0]] = value;
  }
}

}  // namespace

int launch_fill(DType dtype, void* out, const Indexer& ix, int64_t n, ScalarArg value,
                cudaStream_t stream) {
  if (n == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = fill_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(n), kThreadsPerBlock, 0, stream, static_cast<T*>(out), ix, n,
                 T(scalar_as<opmath_t<T>>(value)));
    return static_cast<int>(cudaGetLastError());
  });
}

int launch_copy(DType out_dtype, DType in_dtype, void* out, const void* in, const Indexer& ix,
                int64_t n, cudaStream_t stream) {
  if (n == 0) return 0;
  return dispatch_all(out_dtype, [&](auto out_tag) {
    return dispatch_all(in_dtype, [&](auto in_tag) {
      using Out = decltype(out_tag);
      using In = decltype(in_tag);
      const auto kernel = copy_kernel<Out, In>;
      EMBER_LAUNCH(kernel, blocks_for(n), kThreadsPerBlock, 0, stream, static_cast<Out*>(out),
                   static_cast<const In*>(in), ix, n);
      return static_cast<int>(cudaGetLastError());
    });
  });
}

}  // namespace ember::cuda
