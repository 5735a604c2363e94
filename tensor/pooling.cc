// 2-d max / average / adaptive-average pooling over NCHW planes, forward and backward: the checks
// and the geometry here, for every device; the passes over the data are the device's pooling
// slots (tensor/cpu/pooling_kernels.cc, tensor/cuda/pooling_kernels.cu). max_pool2d's backward is
// a scatter_add of the gradient to the recorded indices.
#include "tensor/autograd_dispatch.h"
#include "tensor/factories.h"
#include "tensor/kernels.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"

namespace ember {
namespace {

PoolGeometry pool_geometry(const char* op, const Tensor& input, Pair kernel, Pair stride,
                           Pair padding) {
  EMBER_CHECK(input.defined(), op, ": undefined input");
  EMBER_CHECK(input.dim() == 4 || input.dim() == 3, op, ": expected a 3-d or 4-d input, got ",
              input.describe());
  EMBER_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64, op,
              ": supports float32 and float64, got ", input.describe());
  if (stride[0] == 0 && stride[1] == 0) stride = kernel;  // PyTorch: stride defaults to kernel
  EMBER_CHECK(kernel[0] > 0 && kernel[1] > 0 && stride[0] > 0 && stride[1] > 0, op,
              ": kernel and stride must be positive");
  EMBER_CHECK(padding[0] >= 0 && padding[1] >= 0 && padding[0] * 2 <= kernel[0] &&
                  padding[1] * 2 <= kernel[1],
              op, ": padding should be at most half of the kernel size, got padding [", padding[0],
              ", ", padding[1], "] for kernel [", kernel[0], ", ", kernel[1], "]");
  const int64_t H = input.size(-2), W = input.size(-1);
  PoolGeometry g{input.numel() / (H * W), H, W, kernel[0], kernel[1], stride[0], stride[1],
                 padding[0], padding[1], 0, 0};
  g.Ho = (H + 2 * g.ph - g.kh) / g.sh + 1;
  g.Wo = (W + 2 * g.pw - g.kw) / g.sw + 1;
  EMBER_CHECK(g.Ho > 0 && g.Wo > 0, op, ": kernel [", kernel[0], ", ", kernel[1],
              "] is larger than the padded input ", input.describe());
  return g;
}

Shape out_shape(const Tensor& input, int64_t Ho, int64_t Wo) {
  Shape s = input.sizes();
  s[s.size() - 2] = Ho;
  s[s.size() - 1] = Wo;
  return s;
}

// PyTorch's adaptive pooling needs no kernel, stride or padding: only the plane sizes.
PoolGeometry adaptive_geometry(const Tensor& input, int64_t Ho, int64_t Wo) {
  const int64_t H = input.size(-2), W = input.size(-1);
  return PoolGeometry{input.numel() / std::max<int64_t>(H * W, 1), H, W, 0, 0, 0, 0, 0, 0, Ho, Wo};
}

TensorOptions like(const Tensor& t) { return TensorOptions(t.dtype(), t.device()); }

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Pair kernel, Pair stride,
                                                   Pair padding) {
  const PoolGeometry g = pool_geometry("max_pool2d", input, kernel, stride, padding);
  Tensor in = input.contiguous();
  Tensor out = empty(out_shape(input, g.Ho, g.Wo), like(input));
  Tensor idx = empty(out.sizes(), TensorOptions(kInt64, input.device()));
  kernel_for(&KernelTable::max_pool2d, "max_pool2d", {&out, &idx, &in})(out, idx, in, g);
  return {out, idx};
}

Tensor max_pool2d(const Tensor& input, Pair kernel, Pair stride, Pair padding) {
  if (auto f = autograd_kernel(&AutogradKernels::max_pool2d, {&input})) {
    return f(input, kernel, stride, padding);
  }
  return std::get<0>(max_pool2d_with_indices(input, kernel, stride, padding));
}

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& input, const Tensor& indices) {
  // Each output's gradient goes to the input position its maximum came from (a window always
  // holds at least one input element, so every index is valid).
  const int64_t plane_in = input.size(-2) * input.size(-1);
  const int64_t plane_out = indices.size(-2) * indices.size(-1);
  const int64_t planes = input.numel() / std::max<int64_t>(plane_in, 1);
  Tensor gi = zeros({planes, plane_in}, like(input));
  scatter_add_(gi, 1, indices.reshape({planes, plane_out}),
               grad_out.to(input.dtype()).reshape({planes, plane_out}));
  return gi.view(input.sizes());
}

Tensor avg_pool2d(const Tensor& input, Pair kernel, Pair stride, Pair padding) {
  if (auto f = autograd_kernel(&AutogradKernels::avg_pool2d, {&input})) {
    return f(input, kernel, stride, padding);
  }
  const PoolGeometry g = pool_geometry("avg_pool2d", input, kernel, stride, padding);
  Tensor in = input.contiguous();
  Tensor out = empty(out_shape(input, g.Ho, g.Wo), like(input));
  kernel_for(&KernelTable::avg_pool2d, "avg_pool2d", {&out, &in})(out, in, g);
  return out;
}

Tensor avg_pool2d_backward(const Tensor& grad_out, const Tensor& input, Pair kernel, Pair stride,
                           Pair padding) {
  const PoolGeometry g = pool_geometry("avg_pool2d_backward", input, kernel, stride, padding);
  Tensor gi = empty(input.sizes(), like(input));
  Tensor go = grad_out.contiguous().to(input.dtype());
  kernel_for(&KernelTable::avg_pool2d_backward, "avg_pool2d_backward", {&gi, &go})(gi, go, g);
  return gi;
}

Tensor adaptive_avg_pool2d(const Tensor& input, Pair output_size) {
  if (auto f = autograd_kernel(&AutogradKernels::adaptive_avg_pool2d, {&input})) {
    return f(input, output_size);
  }
  EMBER_CHECK(input.defined() && (input.dim() == 3 || input.dim() == 4),
              "adaptive_avg_pool2d: expected a 3-d or 4-d input, got ", input.describe());
  EMBER_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64,
              "adaptive_avg_pool2d: supports float32 and float64, got ", input.describe());
  EMBER_CHECK(output_size[0] > 0 && output_size[1] > 0,
              "adaptive_avg_pool2d: output size must be positive");
  const PoolGeometry g = adaptive_geometry(input, output_size[0], output_size[1]);
  Tensor in = input.contiguous();
  Tensor out = empty(out_shape(input, g.Ho, g.Wo), like(input));
  kernel_for(&KernelTable::adaptive_avg_pool2d, "adaptive_avg_pool2d", {&out, &in})(out, in, g);
  return out;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& input) {
  const PoolGeometry g = adaptive_geometry(input, grad_out.size(-2), grad_out.size(-1));
  Tensor gi = empty(input.sizes(), like(input));
  Tensor go = grad_out.contiguous().to(input.dtype());
  kernel_for(&KernelTable::adaptive_avg_pool2d_backward, "adaptive_avg_pool2d_backward",
             {&gi, &go})(gi, go, g);
  return gi;
}

}  // namespace ember
