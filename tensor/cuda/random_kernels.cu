// Random draws on the device with Philox4x32-10 (philox.h), a counter-based generator: element i's
// numbers are a pure function of (key, i), so every thread draws its own without shared state and
// the result does not depend on the launch shape. The key is one 64-bit draw from the ember
// Generator (random_slots.cc).
#include <cmath>

#include "tensor/cuda/device_types.h"
#include "tensor/cuda/philox.h"

namespace ember::cuda {
namespace {

template <typename T>
__global__ void random_kernel(T* out, int64_t n, uint64_t key, RandomDraw draw) {
  for (int64_t i = global_thread_index(); i < n; i += grid_stride()) {
    const Philox4 r = philox_for_element(static_cast<uint64_t>(i), key);
    const uint64_t a = (static_cast<uint64_t>(r.x[0]) << 32) | r.x[1];
    const uint64_t b = (static_cast<uint64_t>(r.x[2]) << 32) | r.x[3];
    double v;
    if (draw.kind == RandomDraw::kNormal) {
      // Box-Muller with u1 in (0, 1] so the logarithm is finite.
      const double u1 = static_cast<double>((a >> 11) + 1) * 0x1.0p-53;
      const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
      v = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    } else if (draw.kind == RandomDraw::kInteger) {
      v = static_cast<double>(draw.low + static_cast<int64_t>(a % draw.range));
    } else {
      v = std::ldexp(static_cast<double>(a >> (64 - draw.bits)), -draw.bits);
    }
    if constexpr (std::is_integral<T>::value && !std::is_same<T, bool>::value) {
      out[i] = static_cast<T>(static_cast<int64_t>(v));
    } else if constexpr (std::is_same<T, bool>::value) {
      out[i] = v != 0;
    } else {
      out[i] = T(static_cast<opmath_t<T>>(v));
    }
  }
}

}  // namespace

int launch_random(DType dtype, void* out, int64_t n, uint64_t key, const RandomDraw& draw,
                  cudaStream_t stream) {
  if (n == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = random_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(n), kThreadsPerBlock, 0, stream, static_cast<T*>(out), n, key,
                 draw);
    return static_cast<int>(cudaGetLastError());
  });
}

}  // namespace ember::cuda
