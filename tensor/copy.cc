// copy_, dtype and device conversion, clone/contiguous, fill_/zero_.
#include <cstdint>

#include "tensor/autograd_dispatch.h"
#include "tensor/kernels.h"
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

}  // namespace

const Tensor& copy_(const Tensor& dst, const Tensor& src) { return copy_(dst, src, false); }

const Tensor& copy_(const Tensor& dst, const Tensor& src, bool non_blocking) {
  // A recorded copy is a blocking one (the autograd slot has no non_blocking).
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
  if (dd != sd) {
    // Across devices only dense bytes of one dtype move: densify on the source device, move the
    // bytes, and convert (or scatter into a strided dst) with the destination device's kernel.
    const Tensor from = s.is_contiguous() ? s : contiguous(s);
    const bool direct = dst.is_contiguous() && dst.dtype() == from.dtype();
    const Tensor landing = direct ? dst : empty(from.sizes(), TensorOptions(from.dtype(), dd));
    DeviceBackend& b = device_backend(dd.is_cuda() ? dd.type : sd.type, "copy_");
    b.copy_bytes(landing.data_ptr(), dd, from.data_ptr(), sd, landing.nbytes(), non_blocking);
    if (!direct) kernel_for(&KernelTable::copy, "copy_", {&dst, &landing})(dst, landing);
    dst.bump_version();
    return dst;
  }
  if (ranges_overlap(dst, s)) s = clone(s);
  kernel_for(&KernelTable::copy, "copy_", {&dst, &s})(dst, s);
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
  return to_device(t, device, copy, /*non_blocking=*/false);
}

Tensor to_device(const Tensor& t, Device device, bool copy, bool non_blocking) {
  if (t.device() == device && !copy) return t;
  // A non-blocking copy to the CPU lands in pinned memory, which is what lets it run async.
  const bool pinned_landing = non_blocking && device.is_cpu() && t.is_cuda();
  Tensor out = pinned_landing ? empty_pinned(t.sizes(), t.dtype())
                              : empty(t.sizes(), TensorOptions(t.dtype(), device));
  copy_(out, t, non_blocking);
  return out;
}

Tensor empty_pinned(const Shape& sizes, ScalarType dtype) {
  DeviceBackend& b = device_backend(DeviceType::kCUDA, "empty_pinned");
  const size_t nbytes = static_cast<size_t>(shape_numel(sizes)) * element_size(dtype);
  void* p = nbytes == 0 ? nullptr : b.allocate_pinned(nbytes);
  return from_blob(p, sizes, dtype, [&b](void* q) { b.free_pinned(q); });
}

Tensor pin_memory(const Tensor& t) {
  EMBER_CHECK(t.defined() && t.is_cpu() && !t.is_sparse(),
              "pin_memory: expected a dense CPU tensor, got ", t.describe());
  if (t.is_pinned()) return t;
  Tensor out = empty_pinned(t.sizes(), t.dtype());
  copy_(out, t);
  return out;
}

bool is_pinned(const Tensor& t) {
  return t.defined() && t.is_cpu() && !t.is_sparse() && t.numel() > 0 &&
         has_device_backend(DeviceType::kCUDA) &&
         device_backend(DeviceType::kCUDA, "is_pinned").is_pinned(t.data_ptr());
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
  kernel_for(&KernelTable::fill, "fill_", {&t})(t, value);
  t.bump_version();
  return t;
}

const Tensor& zero_(const Tensor& t) { return fill_(t, 0); }

}  // namespace ember
