// CPU kernels for copies within the CPU (dtype-converting, strided, broadcasting) and fills.
#include <cstdint>
#include <type_traits>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/cpu/loops.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

void copy_kernel(const Tensor& dst, const Tensor& src) {
  EMBER_DISPATCH_ALL_TYPES(dst.dtype(), "copy_", [&] {
    using dst_t = scalar_t;
    EMBER_DISPATCH_ALL_TYPES(src.dtype(), "copy_", [&] {
      using src_t = scalar_t;
      if constexpr (std::is_same_v<src_t, bool>) {
        // Bools read as their bytes (0 or 1): the loop then vectorises, which bool loads do not
        // (masks such as ReLU's backward go through here).
        unary_loop<dst_t, uint8_t>(dst, src, [](uint8_t v) { return convert<dst_t>(v); });
      } else {
        unary_loop<dst_t, src_t>(dst, src, [](src_t v) { return convert<dst_t>(v); });
      }
    });
  });
}

void fill_kernel(const Tensor& t, const Scalar& value) {
  EMBER_DISPATCH_ALL_TYPES(t.dtype(), "fill_", [&] {
    const scalar_t v = value.to<scalar_t>();
    for_each_strided<1>(t.sizes(), {&t},
                        [&](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
                          if (s[0] == sizeof(scalar_t)) {
                            scalar_t* o = reinterpret_cast<scalar_t*>(p[0]);
                            for (int64_t i = 0; i < n; ++i) o[i] = v;
                          } else {
                            for (int64_t i = 0; i < n; ++i) {
                              *reinterpret_cast<scalar_t*>(p[0] + i * s[0]) = v;
                            }
                          }
                        });
  });
}

}  // namespace

void register_copy_kernels(KernelTable& table) {
  table.copy = copy_kernel;
  table.fill = fill_kernel;
}

}  // namespace ember::cpu::CPU_CAPABILITY
