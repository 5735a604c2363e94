// conv2d forward and backward on the CPU: one im2col over the whole batch, one GEMM per group
// (Eigen through ember::mm), and a strided copy into NCHW. Backward recomputes the columns rather
// than keeping them alive between forward and backward.
#include "tensor/autograd_dispatch.h"
#include "tensor/cpu/im2col.h"
#include "tensor/factories.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"

namespace ember {
namespace {

cpu::ConvGeometry geometry(const char* op, const Tensor& input, const Tensor& weight,
                           const Conv2dParams& p) {
  EMBER_CHECK(input.defined() && weight.defined(), op, ": undefined input or weight");
  EMBER_CHECK(input.is_cpu() && weight.is_cpu(), "no ", input.device().str(), " kernel for ", op,
              " (input ", input.describe(), ", weight ", weight.describe(), ")");
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

Tensor columns(const Tensor& input, const cpu::ConvGeometry& g) {
  Tensor in = input.contiguous();
  Tensor cols = empty({g.C * g.kh * g.kw, g.N * g.Ho * g.Wo}, input.dtype());
  if (input.dtype() == kFloat32) {
    cpu::im2col(in.data_ptr<float>(), g, cols.data_ptr<float>());
  } else {
    cpu::im2col(in.data_ptr<double>(), g, cols.data_ptr<double>());
  }
  return cols;
}

Tensor conv2d_forward(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Conv2dParams& p) {
  const cpu::ConvGeometry g = geometry("conv2d", input, weight, p);
  const int64_t O = weight.size(0), G = p.groups, Og = O / G, L = g.N * g.Ho * g.Wo;
  if (bias.defined()) {
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == O && bias.dtype() == input.dtype(),
                "conv2d: bias ", bias.describe(), " must be 1-d with ", O, " ",
                dtype_name(input.dtype()), " elements");
  }
  Tensor cols = columns(input, g);
  Tensor w2 = weight.reshape({O, -1});
  const int64_t rows_per_group = cols.size(0) / G;
  Tensor res = G == 1 ? mm(w2, cols) : empty({O, L}, input.dtype());
  for (int64_t gi = 0; G > 1 && gi < G; ++gi) {
    copy_(res.narrow(0, gi * Og, Og),
          mm(w2.narrow(0, gi * Og, Og), cols.narrow(0, gi * rows_per_group, rows_per_group)));
  }
  Tensor out = empty({g.N, O, g.Ho, g.Wo}, input.dtype());
  copy_(out.view({g.N, O, g.Ho * g.Wo}), res.view({O, g.N, g.Ho * g.Wo}).permute({1, 0, 2}));
  if (bias.defined()) add_(out, bias.view({1, O, 1, 1}));
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
  const int64_t O = weight.size(0), G = p.groups, Og = O / G, L = g.N * g.Ho * g.Wo;
  EMBER_CHECK(grad_out.sizes() == Shape({g.N, O, g.Ho, g.Wo}), "conv2d_backward: grad_output ",
              grad_out.describe(), " does not match the output shape [", g.N, ", ", O, ", ", g.Ho,
              ", ", g.Wo, "]");
  // [N, O, HW] -> [O, N*HW], matching the column layout.
  Tensor go = empty({O, L}, grad_out.dtype());
  copy_(go.view({O, g.N, g.Ho * g.Wo}), grad_out.reshape({g.N, O, g.Ho * g.Wo}).permute({1, 0, 2}));
  Tensor grad_input, grad_weight, grad_bias;
  Tensor w2 = weight.reshape({O, -1});
  const int64_t rows_per_group = w2.size(1);
  if (mask[1]) {
    Tensor cols = columns(input, g);
    Tensor gw = G == 1 ? mm(go, cols.t()) : empty({O, rows_per_group}, input.dtype());
    for (int64_t gi = 0; G > 1 && gi < G; ++gi) {
      copy_(gw.narrow(0, gi * Og, Og), mm(go.narrow(0, gi * Og, Og),
                                          cols.narrow(0, gi * rows_per_group, rows_per_group).t()));
    }
    grad_weight = gw.view(weight.sizes());
  }
  if (mask[0]) {
    Tensor gcols = G == 1 ? mm(w2.t(), go) : empty({rows_per_group * G, L}, input.dtype());
    for (int64_t gi = 0; G > 1 && gi < G; ++gi) {
      copy_(gcols.narrow(0, gi * rows_per_group, rows_per_group),
            mm(w2.narrow(0, gi * Og, Og).t(), go.narrow(0, gi * Og, Og)));
    }
    grad_input = zeros(input.sizes(), input.dtype());
    if (input.dtype() == kFloat32) {
      cpu::col2im(gcols.data_ptr<float>(), g, grad_input.data_ptr<float>());
    } else {
      cpu::col2im(gcols.data_ptr<double>(), g, grad_input.data_ptr<double>());
    }
  }
  if (mask[2]) grad_bias = sum(go, {1});
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace ember
