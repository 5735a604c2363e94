// conv2d forward and backward: shape checks, output allocation and autograd here; the kernels
// (im2col + GEMM, direct convolution, threads) are the device's, tensor/cpu/conv_kernels.cc.
#include "tensor/autograd_dispatch.h"
#include "tensor/cpu/conv_geometry.h"
#include "tensor/kernels.h"
#include "tensor/factories.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"

namespace ember {
namespace {

cpu::ConvGeometry geometry(const char* op, const Tensor& input, const Tensor& weight,
                           const Conv2dParams& p) {
  EMBER_CHECK(input.defined() && weight.defined(), op, ": undefined input or weight");
  EMBER_CHECK(input.device() == weight.device(), op, ": input ", input.describe(), " and weight ",
              weight.describe(), " must be on the same device");
  EMBER_CHECK(input.dim() == 4, op, ": expected a 4-d input [N, C, H, W], got ", input.describe());
  EMBER_CHECK(weight.dim() == 4, op, ": expected a 4-d weight [O, C/groups, kH, kW], got ",
              weight.describe());
  EMBER_CHECK(input.dtype() == weight.dtype(), op, ": input ", input.describe(), " and weight ",
              weight.describe(), " must have the same dtype");
  EMBER_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64, op,
              ": supports float32 and float64, got ", input.describe());
  EMBER_CHECK(p.groups >= 1 && input.size(1) % p.groups == 0 && weight.size(0) % p.groups == 0, op,
              ": groups=", p.groups, " must divide the input channels (", input.size(1),
              ") and the output channels (", weight.size(0), ")");
  EMBER_CHECK(weight.size(1) * p.groups == input.size(1), op, ": weight ", weight.describe(),
              " expects ", weight.size(1) * p.groups, " input channels (groups=", p.groups,
              "), but input ", input.describe(), " has ", input.size(1));
  for (int k = 0; k < 2; ++k) {
    EMBER_CHECK(p.stride[k] > 0 && p.dilation[k] > 0 && p.padding[k] >= 0, op,
                ": stride and dilation must be positive and padding non-negative");
  }
  cpu::ConvGeometry g{input.size(0), input.size(1), input.size(2), input.size(3),
                      weight.size(2), weight.size(3), p.stride[0], p.stride[1],
                      p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], 0, 0};
  g.Ho = (g.H + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.Wo = (g.W + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  EMBER_CHECK(g.Ho > 0 && g.Wo > 0, op, ": kernel ", weight.shape_str(), " (dilation ",
              g.dh, "x", g.dw, ") is larger than the padded input ", input.describe());
  return g;
}

Tensor conv2d_forward(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Conv2dParams& p) {
  const cpu::ConvGeometry g = geometry("conv2d", input, weight, p);
  const int64_t O = weight.size(0);
  if (bias.defined()) {
    EMBER_CHECK(bias.device() == input.device(), "conv2d: bias ", bias.describe(),
                " must be on the input's device (", input.describe(), ")");
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == O && bias.dtype() == input.dtype(),
                "conv2d: bias ", bias.describe(), " must be 1-d with ", O, " ",
                dtype_name(input.dtype()), " elements");
  }
  Tensor out = empty({g.N, O, g.Ho, g.Wo}, TensorOptions(input.dtype(), input.device()));
  Tensor in = input.contiguous(), w = weight.contiguous();
  Tensor b = bias.defined() ? bias.contiguous() : bias;
  kernel_for(&KernelTable::conv2d, "conv2d", {&in, &w})(out, in, w, b, g, p.groups);
  return out;
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dParams& p) {
  if (auto f = autograd_kernel(&AutogradKernels::conv2d, {&input, &weight, &bias})) {
    return f(input, weight, bias, p);
  }
  return conv2d_forward(input, weight, bias, p);
}

std::tuple<Tensor, Tensor, Tensor> conv2d_backward(const Tensor& grad_out, const Tensor& input,
                                                   const Tensor& weight, const Conv2dParams& p,
                                                   std::array<bool, 3> mask) {
  const cpu::ConvGeometry g = geometry("conv2d_backward", input, weight, p);
  const int64_t O = weight.size(0);
  EMBER_CHECK(grad_out.sizes() == Shape({g.N, O, g.Ho, g.Wo}), "conv2d_backward: grad_output ",
              grad_out.describe(), " does not match the output shape [", g.N, ", ", O, ", ", g.Ho,
              ", ", g.Wo, "]");
  const TensorOptions like(input.dtype(), input.device());
  Tensor grad_input = mask[0] ? empty(input.sizes(), like) : Tensor();
  Tensor grad_weight = mask[1] ? empty(weight.sizes(), like) : Tensor();
  Tensor grad_bias = mask[2] ? empty({O}, like) : Tensor();
  Tensor go = grad_out.to(input.dtype()).contiguous();
  Tensor in = input.contiguous(), w = weight.contiguous();
  kernel_for(&KernelTable::conv2d_backward, "conv2d_backward", {&go, &in, &w})(
      go, in, w, g, p.groups, grad_input, grad_weight, grad_bias);
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace ember
