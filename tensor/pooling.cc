// 2-d max / average / adaptive-average pooling over NCHW planes, forward and backward (CPU).
#include <cmath>
#include <limits>

#include "tensor/autograd_dispatch.h"
#include "tensor/factories.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"

namespace ember {
namespace {

struct PoolGeometry {
  int64_t planes, H, W, kh, kw, sh, sw, ph, pw, Ho, Wo;
};

PoolGeometry pool_geometry(const char* op, const Tensor& input, Pair kernel, Pair stride,
                           Pair padding) {
  EMBER_CHECK(input.defined(), op, ": undefined input");
  EMBER_CHECK(input.is_cpu(), "no ", input.device().str(), " kernel for ", op);
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

template <typename T>
void max_pool_kernel(const T* in, const PoolGeometry& g, T* out, int64_t* idx) {
  for (int64_t p = 0; p < g.planes; ++p) {
    const T* plane = in + p * g.H * g.W;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        T best = -std::numeric_limits<T>::infinity();
        int64_t best_i = -1;
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t ih = oh * g.sh - g.ph + i;
          if (ih < 0 || ih >= g.H) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t iw = ow * g.sw - g.pw + j;
            if (iw < 0 || iw >= g.W) continue;
            const T v = plane[ih * g.W + iw];
            if (v > best || std::isnan(v) || best_i < 0) {
              best = v;
              best_i = ih * g.W + iw;
              if (std::isnan(v)) break;
            }
          }
        }
        out[(p * g.Ho + oh) * g.Wo + ow] = best;
        idx[(p * g.Ho + oh) * g.Wo + ow] = best_i;
      }
    }
  }
}

// Calls f(plane, oh, ow, ih0, ih1, iw0, iw1, count) for each output of an average pool window.
template <typename F>
void for_each_avg_window(const PoolGeometry& g, F f) {
  for (int64_t p = 0; p < g.planes; ++p) {
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
        int64_t h1 = std::min(h0 + g.kh, g.H + g.ph), w1 = std::min(w0 + g.kw, g.W + g.pw);
        const int64_t count = (h1 - h0) * (w1 - w0);  // count_include_pad
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, g.H);
        w1 = std::min(w1, g.W);
        f(p, oh, ow, h0, h1, w0, w1, count);
      }
    }
  }
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Pair kernel, Pair stride,
                                                   Pair padding) {
  const PoolGeometry g = pool_geometry("max_pool2d", input, kernel, stride, padding);
  Tensor in = input.contiguous();
  Tensor out = empty(out_shape(input, g.Ho, g.Wo), input.dtype());
  Tensor idx = empty(out.sizes(), kInt64);
  if (input.dtype() == kFloat32) {
    max_pool_kernel(in.data_ptr<float>(), g, out.data_ptr<float>(), idx.data_ptr<int64_t>());
  } else {
    max_pool_kernel(in.data_ptr<double>(), g, out.data_ptr<double>(), idx.data_ptr<int64_t>());
  }
  return {out, idx};
}

Tensor max_pool2d(const Tensor& input, Pair kernel, Pair stride, Pair padding) {
  if (auto f = autograd_kernel(&AutogradKernels::max_pool2d, {&input})) {
    return f(input, kernel, stride, padding);
  }
  return std::get<0>(max_pool2d_with_indices(input, kernel, stride, padding));
}

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& input, const Tensor& indices) {
  Tensor gi = zeros(input.sizes(), input.dtype());
  const int64_t plane_in = input.size(-2) * input.size(-1);
  const int64_t plane_out = indices.size(-2) * indices.size(-1);
  const int64_t planes = input.numel() / plane_in;
  Tensor go = grad_out.contiguous().to(input.dtype());
  const int64_t* ip = indices.data_ptr<int64_t>();
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "max_pool2d_backward", [&] {
    scalar_t* gp = gi.data_ptr<scalar_t>();
    const scalar_t* op = go.data_ptr<scalar_t>();
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t o = 0; o < plane_out; ++o) {
        const int64_t i = ip[p * plane_out + o];
        if (i >= 0) gp[p * plane_in + i] += op[p * plane_out + o];
      }
    }
  });
  return gi;
}

Tensor avg_pool2d(const Tensor& input, Pair kernel, Pair stride, Pair padding) {
  if (auto f = autograd_kernel(&AutogradKernels::avg_pool2d, {&input})) {
    return f(input, kernel, stride, padding);
  }
  const PoolGeometry g = pool_geometry("avg_pool2d", input, kernel, stride, padding);
  Tensor in = input.contiguous();
  Tensor out = empty(out_shape(input, g.Ho, g.Wo), input.dtype());
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "avg_pool2d", [&] {
    const scalar_t* ip = in.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    for_each_avg_window(g, [&](int64_t p, int64_t oh, int64_t ow, int64_t h0, int64_t h1, int64_t w0,
                               int64_t w1, int64_t count) {
      double s = 0;
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = w0; w < w1; ++w) s += ip[(p * g.H + h) * g.W + w];
      }
      op[(p * g.Ho + oh) * g.Wo + ow] = scalar_t(s / count);
    });
  });
  return out;
}

Tensor avg_pool2d_backward(const Tensor& grad_out, const Tensor& input, Pair kernel, Pair stride,
                           Pair padding) {
  const PoolGeometry g = pool_geometry("avg_pool2d_backward", input, kernel, stride, padding);
  Tensor gi = zeros(input.sizes(), input.dtype());
  Tensor go = grad_out.contiguous().to(input.dtype());
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "avg_pool2d_backward", [&] {
    scalar_t* gp = gi.data_ptr<scalar_t>();
    const scalar_t* op = go.data_ptr<scalar_t>();
    for_each_avg_window(g, [&](int64_t p, int64_t oh, int64_t ow, int64_t h0, int64_t h1, int64_t w0,
                               int64_t w1, int64_t count) {
      const double v = double(op[(p * g.Ho + oh) * g.Wo + ow]) / count;
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = w0; w < w1; ++w) gp[(p * g.H + h) * g.W + w] += scalar_t(v);
      }
    });
  });
  return gi;
}

namespace {
// PyTorch's adaptive pooling windows: [floor(o*in/out), ceil((o+1)*in/out)).
int64_t start_index(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
int64_t end_index(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }
}  // namespace

Tensor adaptive_avg_pool2d(const Tensor& input, Pair output_size) {
  if (auto f = autograd_kernel(&AutogradKernels::adaptive_avg_pool2d, {&input})) {
    return f(input, output_size);
  }
  EMBER_CHECK(input.defined() && input.is_cpu() && (input.dim() == 3 || input.dim() == 4),
              "adaptive_avg_pool2d: expected a 3-d or 4-d CPU input, got ", input.describe());
  EMBER_CHECK(output_size[0] > 0 && output_size[1] > 0,
              "adaptive_avg_pool2d: output size must be positive");
  const int64_t H = input.size(-2), W = input.size(-1), Ho = output_size[0], Wo = output_size[1];
  const int64_t planes = input.numel() / std::max<int64_t>(H * W, 1);
  Tensor in = input.contiguous();
  Tensor out = empty(out_shape(input, Ho, Wo), input.dtype());
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "adaptive_avg_pool2d", [&] {
    const scalar_t* ip = in.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t h0 = start_index(oh, Ho, H), h1 = end_index(oh, Ho, H);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t w0 = start_index(ow, Wo, W), w1 = end_index(ow, Wo, W);
          double s = 0;
          for (int64_t h = h0; h < h1; ++h) {
            for (int64_t w = w0; w < w1; ++w) s += ip[(p * H + h) * W + w];
          }
          op[(p * Ho + oh) * Wo + ow] = scalar_t(s / double((h1 - h0) * (w1 - w0)));
        }
      }
    }
  });
  return out;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& input) {
  const int64_t H = input.size(-2), W = input.size(-1), Ho = grad_out.size(-2), Wo = grad_out.size(-1);
  const int64_t planes = input.numel() / std::max<int64_t>(H * W, 1);
  Tensor gi = zeros(input.sizes(), input.dtype());
  Tensor go = grad_out.contiguous().to(input.dtype());
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "adaptive_avg_pool2d_backward", [&] {
    scalar_t* gp = gi.data_ptr<scalar_t>();
    const scalar_t* op = go.data_ptr<scalar_t>();
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t h0 = start_index(oh, Ho, H), h1 = end_index(oh, Ho, H);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t w0 = start_index(ow, Wo, W), w1 = end_index(ow, Wo, W);
          const double v = double(op[(p * Ho + oh) * Wo + ow]) / double((h1 - h0) * (w1 - w0));
          for (int64_t h = h0; h < h1; ++h) {
            for (int64_t w = w0; w < w1; ++w) gp[(p * H + h) * W + w] += scalar_t(v);
          }
        }
      }
    }
  });
  return gi;
}

}  // namespace ember
