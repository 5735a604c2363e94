// conv2d forward and backward on the CPU: image by image, im2col into a reused buffer and one
// Eigen GEMM per group straight into NCHW. Backward recomputes the columns rather than keeping
// them alive between forward and backward. Stride-1 float convolutions on wide enough maps (the
// forward and input gradient of ResNet's 3x3 layers) skip im2col: tensor/cpu/direct_conv.h.
#include <type_traits>

#include <Eigen/Core>

#include "tensor/autograd_dispatch.h"
#include "tensor/cpu/direct_conv.h"
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

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MapMatrix = Eigen::Map<RowMatrix<T>>;
template <typename T>
using ConstMapMatrix = Eigen::Map<const RowMatrix<T>>;

// A 1x1, stride-1, unpadded convolution reads the input plane directly as its column matrix.
bool is_pointwise(const cpu::ConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

// Uninitialised working memory from the caching allocator (a std::vector would zero it first).
template <typename T>
Tensor scratch(int64_t numel) {
  return empty({numel}, dtype_of<T>());
}

// One image's column matrix [C*kh*kw, Ho*Wo]: im2col into `buffer`, or the plane itself.
template <typename T>
const T* image_columns(const T* image, const cpu::ConvGeometry& g, T* buffer) {
  if (is_pointwise(g)) return image;
  cpu::ConvGeometry one = g;
  one.N = 1;
  cpu::im2col(image, one, buffer);
  return buffer;
}

// Image by image: the column matrix of one image stays in cache, the product lands directly in
// NCHW layout, and nothing is permuted afterwards.
template <typename T>
void conv_forward_impl(const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const cpu::ConvGeometry& g, int64_t G, const Tensor& out) {
  const int64_t O = weight.size(0), Og = O / G, Cg = g.C / G, K = Cg * g.kh * g.kw,
                P = g.Ho * g.Wo;
  const T* in = input.data_ptr<T>();
  const T* w = weight.data_ptr<T>();
  const T* b = bias.defined() ? bias.data_ptr<T>() : nullptr;
  T* o = out.data_ptr<T>();
  const bool direct = std::is_same_v<T, float> && G == 1 && cpu::direct_conv_applies(g, O);
  Tensor buffer = scratch<T>(direct ? cpu::direct_conv_scratch_size(g, O)
                                    : is_pointwise(g) ? 0 : g.C * g.kh * g.kw * P);
  for (int64_t n = 0; n < g.N; ++n) {
    if constexpr (std::is_same_v<T, float>) {
      if (direct) cpu::direct_conv(in + n * g.C * g.H * g.W, w, g, O, o + n * O * P, buffer.data_ptr<T>());
    }
    if (!direct) {
      const T* cols = image_columns(in + n * g.C * g.H * g.W, g, buffer.data_ptr<T>());
      for (int64_t gi = 0; gi < G; ++gi) {
        MapMatrix<T> dst(o + (n * O + gi * Og) * P, Og, P);
        dst.noalias() = ConstMapMatrix<T>(w + gi * Og * K, Og, K) * ConstMapMatrix<T>(cols + gi * K * P, K, P);
      }
    }
    if (b) {
      for (int64_t c = 0; c < O; ++c) {
        T* row = o + (n * O + c) * P;
        for (int64_t i = 0; i < P; ++i) row[i] += b[c];
      }
    }
  }
}

// Stride 1 with padding <= dilation*(kernel-1): the input gradient is itself a convolution of the
// output gradient with the flipped, transposed kernel ("full" padding), which costs an im2col
// and a well-shaped GEMM instead of a thin GEMM plus a scatter-add col2im.
bool input_grad_is_a_conv(const cpu::ConvGeometry& g) {
  return g.sh == 1 && g.sw == 1 && g.ph <= g.dh * (g.kh - 1) && g.pw <= g.dw * (g.kw - 1) &&
         !(g.kh == 1 && g.kw == 1);
}

// W [O, C/G, kh, kw] -> W' [C, O/G, kh, kw] with the spatial taps reversed, group by group.
Tensor flipped_transposed_weight(const Tensor& weight, int64_t G) {
  const int64_t O = weight.size(0), Cg = weight.size(1), kh = weight.size(2), kw = weight.size(3);
  const int64_t Og = O / G;
  Tensor w = weight.contiguous();
  Tensor out = empty({Cg * G, Og, kh, kw}, weight.dtype());
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(weight.dtype(), "conv2d_backward", [&] {
    const scalar_t* src = w.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    for (int64_t gi = 0; gi < G; ++gi)
      for (int64_t o = 0; o < Og; ++o)
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j)
              dst[((((gi * Cg + c) * Og + o) * kh) + (kh - 1 - i)) * kw + (kw - 1 - j)] =
                  src[(((gi * Og + o) * Cg + c) * kh + i) * kw + j];
  });
  return out;
}

template <typename T>
void conv_backward_impl(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                        const cpu::ConvGeometry& g, int64_t G, const Tensor& grad_input,
                        const Tensor& grad_weight, const Tensor& grad_bias) {
  const bool input_grad_by_conv = input_grad_is_a_conv(g);
  if (grad_input.defined() && input_grad_by_conv) {
    cpu::ConvGeometry t{g.N, weight.size(0), g.Ho, g.Wo, g.kh, g.kw, 1, 1,
                        g.dh * (g.kh - 1) - g.ph, g.dw * (g.kw - 1) - g.pw, g.dh, g.dw, g.H, g.W};
    conv_forward_impl<T>(grad_out, flipped_transposed_weight(weight, G), Tensor(), t, G, grad_input);
  }
  const int64_t O = weight.size(0), Og = O / G, Cg = g.C / G, K = Cg * g.kh * g.kw,
                P = g.Ho * g.Wo;
  const T* in = input.data_ptr<T>();
  const T* w = weight.data_ptr<T>();
  const T* go = grad_out.data_ptr<T>();
  const int64_t cols_size = g.C * g.kh * g.kw * P;
  Tensor buffer = scratch<T>(grad_weight.defined() && !is_pointwise(g) ? cols_size : 0);
  Tensor gcols = scratch<T>(grad_input.defined() && !input_grad_by_conv ? cols_size : 0);
  T* gw = grad_weight.defined() ? grad_weight.data_ptr<T>() : nullptr;
  if (gw) std::fill(gw, gw + O * K, T(0));
  cpu::ConvGeometry one = g;
  one.N = 1;
  for (int64_t n = 0; n < g.N; ++n) {
    const T* go_n = go + n * O * P;
    if (gw) {
      const T* cols = image_columns(in + n * g.C * g.H * g.W, g, buffer.data_ptr<T>());
      for (int64_t gi = 0; gi < G; ++gi) {
        MapMatrix<T>(gw + gi * Og * K, Og, K).noalias() +=
            ConstMapMatrix<T>(go_n + gi * Og * P, Og, P) *
            ConstMapMatrix<T>(cols + gi * K * P, K, P).transpose();
      }
    }
    if (grad_input.defined() && !input_grad_by_conv) {
      T* gi_n = grad_input.data_ptr<T>() + n * g.C * g.H * g.W;
      T* target = is_pointwise(g) ? gi_n : gcols.data_ptr<T>();
      for (int64_t gi = 0; gi < G; ++gi) {
        MapMatrix<T>(target + gi * K * P, K, P).noalias() =
            ConstMapMatrix<T>(w + gi * Og * K, Og, K).transpose() *
            ConstMapMatrix<T>(go_n + gi * Og * P, Og, P);
      }
      if (!is_pointwise(g)) {
        std::fill(gi_n, gi_n + g.C * g.H * g.W, T(0));
        cpu::col2im(gcols.data_ptr<T>(), one, gi_n);
      }
    }
  }
  if (grad_bias.defined()) {
    T* gb = grad_bias.data_ptr<T>();
    for (int64_t c = 0; c < O; ++c) {
      double s = 0;
      for (int64_t n = 0; n < g.N; ++n) {
        const T* row = go + (n * O + c) * P;
        T part = 0;
        for (int64_t i = 0; i < P; ++i) part += row[i];
        s += part;
      }
      gb[c] = static_cast<T>(s);
    }
  }
}

Tensor conv2d_forward(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Conv2dParams& p) {
  const cpu::ConvGeometry g = geometry("conv2d", input, weight, p);
  const int64_t O = weight.size(0);
  if (bias.defined()) {
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == O && bias.dtype() == input.dtype(),
                "conv2d: bias ", bias.describe(), " must be 1-d with ", O, " ",
                dtype_name(input.dtype()), " elements");
  }
  Tensor out = empty({g.N, O, g.Ho, g.Wo}, input.dtype());
  Tensor in = input.contiguous(), w = weight.contiguous();
  Tensor b = bias.defined() ? bias.contiguous() : bias;
  if (input.dtype() == kFloat32) {
    conv_forward_impl<float>(in, w, b, g, p.groups, out);
  } else {
    conv_forward_impl<double>(in, w, b, g, p.groups, out);
  }
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
  Tensor grad_input = mask[0] ? empty(input.sizes(), input.dtype()) : Tensor();
  Tensor grad_weight = mask[1] ? empty(weight.sizes(), weight.dtype()) : Tensor();
  Tensor grad_bias = mask[2] ? empty({O}, weight.dtype()) : Tensor();
  Tensor go = grad_out.to(input.dtype()).contiguous();
  Tensor in = input.contiguous(), w = weight.contiguous();
  if (input.dtype() == kFloat32) {
    conv_backward_impl<float>(go, in, w, g, p.groups, grad_input, grad_weight, grad_bias);
  } else {
    conv_backward_impl<double>(go, in, w, g, p.groups, grad_input, grad_weight, grad_bias);
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace ember
