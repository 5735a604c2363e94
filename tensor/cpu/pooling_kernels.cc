// CPU kernels for 2-d max / average / adaptive-average pooling over dense planes (the loops that
// tensor/pooling.cc ran inline before pooling had device slots). Planes are independent, so each
// kernel splits them across threads (Note [Deterministic parallel kernels]): a backward zeroes and
// fills its own planes of the input gradient.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tensor/cpu/kernels_cpu.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

// f(first, last) over runs of whole input planes, in parallel.
template <typename F>
void for_planes(const PoolGeometry& g, const F& f) {
  parallel_for(0, g.planes, rows_grain(g.H * g.W), f);
}

template <typename T>
void zero_planes(T* planes, const PoolGeometry& g, int64_t first, int64_t last) {
  const int64_t plane = g.H * g.W;
  std::memset(planes + first * plane, 0, sizeof(T) * static_cast<size_t>((last - first) * plane));
}

template <typename T>
void max_pool(const T* in, const PoolGeometry& g, T* out, int64_t* idx, int64_t first,
              int64_t last) {
  for (int64_t p = first; p < last; ++p) {
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

// Calls f(plane, oh, ow, ih0, ih1, iw0, iw1, count) for each output of an average pool window
// of planes [first, last).
template <typename F>
void for_each_avg_window(const PoolGeometry& g, int64_t first, int64_t last, F f) {
  for (int64_t p = first; p < last; ++p) {
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

// PyTorch's adaptive pooling windows: [floor(o*in/out), ceil((o+1)*in/out)).
int64_t start_index(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
int64_t end_index(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

// Calls f(plane, oh, ow, ih0, ih1, iw0, iw1) for each output of an adaptive average pool window
// of planes [first, last).
template <typename F>
void for_each_adaptive_window(const PoolGeometry& g, int64_t first, int64_t last, F f) {
  for (int64_t p = first; p < last; ++p) {
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t h0 = start_index(oh, g.Ho, g.H), h1 = end_index(oh, g.Ho, g.H);
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        f(p, oh, ow, h0, h1, start_index(ow, g.Wo, g.W), end_index(ow, g.Wo, g.W));
      }
    }
  }
}

void max_pool2d_kernel(const Tensor& out, const Tensor& indices, const Tensor& input,
                       const PoolGeometry& g) {
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "max_pool2d", [&] {
    const scalar_t* ip = input.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    int64_t* idx = indices.data_ptr<int64_t>();
    for_planes(g, [&](int64_t first, int64_t last) { max_pool(ip, g, op, idx, first, last); });
  });
}

void avg_pool2d_kernel(const Tensor& out, const Tensor& input, const PoolGeometry& g) {
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "avg_pool2d", [&] {
    const scalar_t* ip = input.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    for_planes(g, [&](int64_t first, int64_t last) {
      for_each_avg_window(g, first, last, [&](int64_t p, int64_t oh, int64_t ow, int64_t h0,
                                              int64_t h1, int64_t w0, int64_t w1, int64_t count) {
        double s = 0;
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) s += ip[(p * g.H + h) * g.W + w];
        }
        op[(p * g.Ho + oh) * g.Wo + ow] = scalar_t(s / count);
      });
    });
  });
}

void avg_pool2d_backward_kernel(const Tensor& grad_input, const Tensor& grad_out,
                                const PoolGeometry& g) {
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(grad_input.dtype(), "avg_pool2d_backward", [&] {
    scalar_t* gp = grad_input.data_ptr<scalar_t>();
    const scalar_t* op = grad_out.data_ptr<scalar_t>();
    for_planes(g, [&](int64_t first, int64_t last) {
      zero_planes(gp, g, first, last);
      for_each_avg_window(g, first, last, [&](int64_t p, int64_t oh, int64_t ow, int64_t h0,
                                              int64_t h1, int64_t w0, int64_t w1, int64_t count) {
        const double v = double(op[(p * g.Ho + oh) * g.Wo + ow]) / count;
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) gp[(p * g.H + h) * g.W + w] += scalar_t(v);
        }
      });
    });
  });
}

void adaptive_avg_pool2d_kernel(const Tensor& out, const Tensor& input, const PoolGeometry& g) {
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "adaptive_avg_pool2d", [&] {
    const scalar_t* ip = input.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    for_planes(g, [&](int64_t first, int64_t last) {
      for_each_adaptive_window(g, first, last, [&](int64_t p, int64_t oh, int64_t ow, int64_t h0,
                                                   int64_t h1, int64_t w0, int64_t w1) {
        double s = 0;
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) s += ip[(p * g.H + h) * g.W + w];
        }
        op[(p * g.Ho + oh) * g.Wo + ow] = scalar_t(s / double((h1 - h0) * (w1 - w0)));
      });
    });
  });
}

void adaptive_avg_pool2d_backward_kernel(const Tensor& grad_input, const Tensor& grad_out,
                                         const PoolGeometry& g) {
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(grad_input.dtype(), "adaptive_avg_pool2d_backward", [&] {
    scalar_t* gp = grad_input.data_ptr<scalar_t>();
    const scalar_t* op = grad_out.data_ptr<scalar_t>();
    for_planes(g, [&](int64_t first, int64_t last) {
      zero_planes(gp, g, first, last);
      for_each_adaptive_window(g, first, last, [&](int64_t p, int64_t oh, int64_t ow, int64_t h0,
                                                   int64_t h1, int64_t w0, int64_t w1) {
        const double v =
            double(op[(p * g.Ho + oh) * g.Wo + ow]) / double((h1 - h0) * (w1 - w0));
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) gp[(p * g.H + h) * g.W + w] += scalar_t(v);
        }
      });
    });
  });
}

}  // namespace

void register_pooling_kernels(KernelTable& table) {
  table.max_pool2d = max_pool2d_kernel;
  table.avg_pool2d = avg_pool2d_kernel;
  table.avg_pool2d_backward = avg_pool2d_backward_kernel;
  table.adaptive_avg_pool2d = adaptive_avg_pool2d_kernel;
  table.adaptive_avg_pool2d_backward = adaptive_avg_pool2d_backward_kernel;
}

}  // namespace ember::cpu::CPU_CAPABILITY
