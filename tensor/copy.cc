// copy_, dtype and device conversion, clone/contiguous, fill_/zero_.
#include <cstdint>
#include <type_traits>

#include "tensor/autograd_dispatch.h"
#include "tensor/cpu/convert.h"
#include "tensor/cpu/loops.h"
#include "tensor/device_backend.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember {
namespace {

bool ranges_overlap(const Tensor& a, const Tensor& b) {
  if (!a.is_alias_of(b) || a.numel() == 0 || b.numel() == 0) return false;
  auto span = [](const Tensor& t) {
    int64_t lo = t.storage_offset(), hi = t.storage_offset();
    for (int64_t i = 0; i < t.dim(); ++i) hi += (t.sizes()[i] - 1) * t.strides()[i];
    return std::pair<int64_t, int64_t>(lo * t.element_size(), (hi + 1) * t.element_size());
  };
  auto [alo, ahi] = span(a);
  auto [blo, bhi] = span(b);
  return alo < bhi && blo < ahi;
}

void copy_cpu(const Tensor& dst, const Tensor& src) {
  EMBER_DISPATCH_ALL_TYPES(dst.dtype(), "copy_", [&] {
    using dst_t = scalar_t;
    EMBER_DISPATCH_ALL_TYPES(src.dtype(), "copy_", [&] {
      using src_t = scalar_t;
      if constexpr (std::is_same_v<src_t, bool>) {
        // Bools read as their bytes (0 or 1): the loop then vectorises, which bool loads do not
        // (masks such as ReLU's backward go through here).
        cpu::unary_loop<dst_t, uint8_t>(dst, src, [](uint8_t v) { return cpu::convert<dst_t>(v); });
      } else {
        cpu::unary_loop<dst_t, src_t>(dst, src, [](src_t v) { return cpu::convert<dst_t>(v); });
      }
    });
  });
}

}  // namespace

const Tensor& copy_(const Tensor& dst, const Tensor& src) {
  if (auto f = autograd_kernel(&AutogradKernels::copy_, {&dst, &src})) return f(dst, src);
  EMBER_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor (dst ", dst.describe(),
              ", src ", src.describe(), ")");
  EMBER_CHECK(!dst.is_sparse() && !src.is_sparse(), "copy_: sparse tensors are not supported (dst ",
              dst.describe(), ", src ", src.describe(), "); use to_dense()");
  Tensor s;
  try {
    s = expand(src, dst.sizes());
  } catch (const Error&) {
    EMBER_THROW("copy_: source ", src.describe(), " cannot be broadcast to destination ",
                dst.describe());
  }
  if (dst.numel() == 0) return dst;
  if (dst.is_same(src)) return dst;
  const Device dd = dst.device(), sd = src.device();
  if (dd != sd || dd.is_cuda()) {
    // Cross-device (or on-GPU) copies move raw bytes: same dtype, both dense.
    if (dd.is_cpu() && (s.dtype() != dst.dtype() || !s.is_contiguous() || !dst.is_contiguous())) {
      Tensor staged = empty(s.sizes(), TensorOptions(s.dtype(), kCPU));
      copy_(staged, s);  // recursion brings the bytes to the CPU, then converts there
      return copy_(dst, staged);
    }
    Tensor from = s;
    if (sd.is_cpu() && (from.dtype() != dst.dtype() || !from.is_contiguous())) {
      from = to_dtype(from, dst.dtype()).contiguous();
    }
    EMBER_CHECK(from.dtype() == dst.dtype() && from.is_contiguous() && dst.is_contiguous(),
                "copy_: no CUDA kernel for a strided or dtype-converting copy from ",
                src.describe(), " to ", dst.describe());
    DeviceBackend& b = device_backend(dd.is_cuda() ? dd.type : sd.type, "copy_");
    b.copy_bytes(dst.data_ptr(), dd, from.data_ptr(), sd, dst.nbytes());
    dst.bump_version();
    return dst;
  }
  if (ranges_overlap(dst, s)) s = clone(s);
  copy_cpu(dst, s);
  dst.bump_version();
  return dst;
}

Tensor to_dtype(const Tensor& t, ScalarType dtype, bool copy) {
  if (t.dtype() == dtype && !copy) return t;
  if (auto f = autograd_kernel(&AutogradKernels::to_dtype, {&t})) return f(t, dtype, copy);
  Tensor out = empty(t.sizes(), TensorOptions(dtype, t.device()));
  copy_(out, t);
  return out;
}

Tensor to_device(const Tensor& t, Device device, bool copy) {
  if (t.device() == device && !copy) return t;
  Tensor out = empty(t.sizes(), TensorOptions(t.dtype(), device));
  copy_(out, t);
  return out;
}

Tensor clone(const Tensor& t) {
  if (auto f = autograd_kernel(&AutogradKernels::clone, {&t})) return f(t);
  Tensor out = empty(t.sizes(), TensorOptions(t.dtype(), t.device()));
  copy_(out, t);
  return out;
}

Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? t : clone(t); }

const Tensor& fill_(const Tensor& t, const Scalar& value) {
  if (auto f = autograd_kernel(&AutogradKernels::fill_, {&t})) return f(t, value);
  EMBER_CHECK(t.defined(), "fill_: undefined tensor");
  if (t.is_cuda()) {
    EMBER_CHECK(value.to_double() == 0.0 && t.is_contiguous(),
                "fill_: no CUDA kernel for fill_ with a non-zero value or strided ", t.describe());
    device_backend(DeviceType::CUDA, "fill_").fill_zero(t.data_ptr(), t.device(), t.nbytes());
    t.bump_version();
    return t;
  }
  EMBER_DISPATCH_ALL_TYPES(t.dtype(), "fill_", [&] {
    const scalar_t v = value.to<scalar_t>();
    cpu::for_each_strided<1>(t.sizes(), {&t},
                             [&](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
                               if (s[0] == sizeof(scalar_t)) {
                                 scalar_t* o = reinterpret_cast<scalar_t*>(p[0]);
                                 for (int64_t i = 0; i < n; ++i) o[i] = v;
                               } else {
                                 for (int64_t i = 0; i < n; ++i)
                                   *reinterpret_cast<scalar_t*>(p[0] + i * s[0]) = v;
                               }
                             });
  });
  t.bump_version();
  return t;
}

const Tensor& zero_(const Tensor& t) { return fill_(t, 0); }

}  // namespace ember
