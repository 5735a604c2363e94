// Batch normalisation CPU kernels over contiguous [N, C, inner] data: per-channel statistics in
// one pass (in double), the fused scale-and-shift, and the closed-form backward's reduction and
// transform. The sums run over fixed chunks of images (Note [Batch-norm sums by image chunks]),
// the transforms over rows; every value is computed in a fixed order (Note [Deterministic
// parallel kernels]).
#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/cpu/add_scaled.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/cpu/vec.h"
#include "tensor/parallel.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

// The forward's output before ReLU, x * scale + shift, as the transform rounds it and as the
// backward of batch_norm_relu recomputes it for ReLU's mask (Note [Batch norm + ReLU],
// tensor/batch_norm.cc): one FMA where the level has FMA (vec::fmadd rounds the same way).
template <typename T>
inline T affine(T x, T scale, T shift) {
  return add_scaled(shift, scale, x);
}

// ReLU's backward on the output y (threshold_backward): g where y > 0 or y is NaN.
template <typename T>
inline T relu_mask(T y, T g) {
  return y <= T(0) ? T(0) : g;
}

// A row's ReLU mask in the backward of batch_norm_relu: scale and shift of its channel, as T.
template <typename T>
struct RowRelu {
  T scale, shift;
};

// Sum of a and of a*(b - shift) over one row, with independent partial sums in the element type
// (vectorisable) folded into double once per row. With kRelu, a is first masked by ReLU's
// backward on affine(b, relu.scale, relu.shift) (the backward's g by the output of x = b). The
// products are added with add_scaled, not left to the compiler's contraction, which differed
// between the two instantiations and so gave batch_norm_relu other bits than batch norm.
template <bool kRelu, typename T>
void row_sums(const T* a, const T* b, T shift, RowRelu<T> relu, int64_t n, double& sa,
              double& sab) {
  const auto value = [&](int64_t i) {
    return kRelu ? relu_mask(affine(b[i], relu.scale, relu.shift), a[i]) : a[i];
  };
  T pa[8] = {0, 0, 0, 0, 0, 0, 0, 0}, pb[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      const T v = value(i + k);
      pa[k] += v;
      pb[k] = add_scaled(pb[k], v, T(b[i + k] - shift));
    }
  }
  double ra = 0, rb = 0;
  for (; i < n; ++i) {
    const T v = value(i);
    ra += v;
    rb = add_scaled(rb, double(v), double(b[i] - shift));
  }
  for (int k = 0; k < 8; ++k) {
    ra += pa[k];
    rb += pb[k];
  }
  sa += ra;
  sab += rb;
}

// float rows in explicit vectors of the level's width, two of each sum in flight: GCC's own
// vectorisation of the loop above spills and shuffles (perf: stats and backward_reduce were 9% of
// a ResNet-20 step).
template <bool kRelu>
void row_sums(const float* a, const float* b, float shift, RowRelu<float> relu, int64_t n,
              double& sa, double& sab) {
  using namespace vec;
  const Vec s = broadcast(shift), scale = broadcast(relu.scale), relu_shift = broadcast(relu.shift);
  const auto load_a = [&](int64_t i) {
    return kRelu ? vec::relu_mask(fmadd(load(b + i), scale, relu_shift), load(a + i)) : load(a + i);
  };
  Vec pa0 = zero(), pa1 = zero(), pb0 = zero(), pb1 = zero();
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const Vec a0 = load_a(i), a1 = load_a(i + kLanes);
    pa0 = add(pa0, a0);
    pa1 = add(pa1, a1);
    pb0 = fmadd(a0, sub(load(b + i), s), pb0);
    pb1 = fmadd(a1, sub(load(b + i + kLanes), s), pb1);
  }
  if (i + kLanes <= n) {
    const Vec a0 = load_a(i);
    pa0 = add(pa0, a0);
    pb0 = fmadd(a0, sub(load(b + i), s), pb0);
    i += kLanes;
  }
  double ra = sum(add(pa0, pa1)), rb = sum(add(pb0, pb1));
  for (; i < n; ++i) {
    const float v = kRelu ? relu_mask(affine(b[i], relu.scale, relu.shift), a[i]) : a[i];
    ra += v;
    rb = add_scaled(rb, double(v), double(b[i] - shift));
  }
  sa += ra;
  sab += rb;
}

// Note [Batch-norm sums by image chunks]
// The per-channel sums (statistics, and the backward's sums of g and g (x - mean)) run over
// chunks of whole images, each chunk's C partial sums combined afterwards in chunk order. Split
// over channels instead, every thread read a strided slice of every image, most of them written
// by another thread's core in the op before, and a layer with fewer channels than threads left
// threads idle. Chunk bounds depend only on the shape (about kChunkElements elements each), so
// the bits do not depend on the thread count.
constexpr int64_t kChunkElements = 32768;

// sa[c] = sum of a and sab[c] = sum of a * (b - shift[c]) over channel c's rows, a masked first
// where relu is set (row_sums).
template <typename T>
void channel_sums(const T* a, const T* b, const BatchNormShape& s, const T* shift,
                  const BatchNormRelu& relu, double* sa, double* sab) {
  const int64_t image = std::max<int64_t>(s.C * s.inner, 1);
  const int64_t per_chunk =
      std::clamp<int64_t>((kChunkElements + image - 1) / image, 1, std::max<int64_t>(s.N, 1));
  const int64_t chunks = (s.N + per_chunk - 1) / per_chunk;
  std::vector<double> partial(static_cast<size_t>(2 * chunks * s.C), 0.0);
  parallel_for(0, chunks, 1, [&](int64_t k_begin, int64_t k_end) {
    // Summed in the thread's own memory: neighbouring chunks' partials may share a cache line.
    std::vector<double> local(static_cast<size_t>(2 * s.C));
    for (int64_t k = k_begin; k < k_end; ++k) {
      std::fill(local.begin(), local.end(), 0.0);
      for (int64_t n = k * per_chunk; n < std::min(s.N, (k + 1) * per_chunk); ++n) {
        for (int64_t c = 0; c < s.C; ++c) {
          const int64_t offset = (n * s.C + c) * s.inner;
          if (relu.scale != nullptr) {
            const RowRelu<T> r{T(relu.scale[c]), T(relu.shift[c])};
            row_sums<true>(a + offset, b + offset, shift[c], r, s.inner, local[c], local[s.C + c]);
          } else {
            row_sums<false>(a + offset, b + offset, shift[c], RowRelu<T>{}, s.inner, local[c],
                            local[s.C + c]);
          }
        }
      }
      std::copy(local.begin(), local.end(), partial.begin() + 2 * k * s.C);
    }
  });
  for (int64_t c = 0; c < s.C; ++c) {
    double total_a = 0, total_ab = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      total_a += partial[2 * k * s.C + c];
      total_ab += partial[(2 * k + 1) * s.C + c];
    }
    sa[c] = total_a;
    sab[c] = total_ab;
  }
}

template <typename T>
void stats(const T* x, const BatchNormShape& s, double* mean, double* var) {
  const int64_t M = s.N * s.inner;
  // Shifting by each channel's first value keeps sum-of-squares accurate when |mean| >> std.
  std::vector<T> shift(static_cast<size_t>(s.C));
  for (int64_t c = 0; c < s.C; ++c) shift[c] = x[c * s.inner];
  std::vector<double> sum(static_cast<size_t>(s.C)), sumsq(static_cast<size_t>(s.C));
  channel_sums(x, x, s, shift.data(), BatchNormRelu{}, sum.data(), sumsq.data());
  for (int64_t c = 0; c < s.C; ++c) {
    // sumsq accumulated x*(x - shift): var = E[x(x-shift)] - mean*(mean-shift)
    mean[c] = sum[c] / M;
    var[c] = std::max(sumsq[c] / M - mean[c] * (mean[c] - shift[c]), 0.0);
  }
}

// y = x * scale + shift (+ residual), then ReLU where relu is set: the residual is added as the
// add kernel adds it (one rounding) and ReLU is the unary kernel's x < 0 ? 0 : x (NaN and -0
// kept), so the result has the bits of batch norm, add_ and relu_ one after the other.
template <typename T>
void transform(T* y, const T* x, const BatchNormShape& s, const double* scale, const double* shift,
               const T* residual, bool relu) {
  parallel_for(0, s.N * s.C, rows_grain(s.inner), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t c = row % s.C;
      const T a = T(scale[c]), b = T(shift[c]);
      const T* __restrict p = x + row * s.inner;
      T* __restrict q = y + row * s.inner;
      if (residual != nullptr) {
        const T* __restrict r = residual + row * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) {
          const T v = affine(p[i], a, b) + r[i];
          q[i] = relu && v < T(0) ? T(0) : v;
        }
      } else if (relu) {
        for (int64_t i = 0; i < s.inner; ++i) {
          const T v = affine(p[i], a, b);
          q[i] = v < T(0) ? T(0) : v;
        }
      } else {
        for (int64_t i = 0; i < s.inner; ++i) q[i] = affine(p[i], a, b);
      }
    }
  });
}

template <typename T>
void backward_reduce(const T* g, const T* x, const BatchNormShape& s, const double* mean,
                     const BatchNormRelu& relu, double* sum_g, double* sum_gx) {
  std::vector<T> shift(static_cast<size_t>(s.C));
  for (int64_t c = 0; c < s.C; ++c) shift[c] = T(mean[c]);
  channel_sums(g, x, s, shift.data(), relu, sum_g, sum_gx);
}

// a g - b - d (x - m), with its two products fused where the level has FMA (add_scaled), so that
// batch norm and batch_norm_relu round it alike.
template <typename T>
inline T training_input_gradient(T g, T x, T a, T b, T d, T m) {
  return add_scaled(add_scaled(-b, a, g), -d, T(x - m));
}

template <typename T>
void backward_transform(T* gi, const T* g, const T* x, const BatchNormShape& s,
                        const BatchNormBackwardCoefficients& k) {
  parallel_for(0, s.N * s.C, rows_grain(s.inner), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t c = row % s.C;
      const T* xp = x + row * s.inner;
      const T* gp = g + row * s.inner;
      T* q = gi + row * s.inner;
      const T a = T(k.a[c]);
      if (k.relu.scale != nullptr) {
        const T rs = T(k.relu.scale[c]), rb = T(k.relu.shift[c]);
        const auto g_at = [&](int64_t i) { return relu_mask(affine(xp[i], rs, rb), gp[i]); };
        if (k.b != nullptr) {
          const T b = T(k.b[c]), d = T(k.d[c]), m = T(k.mean[c]);
          for (int64_t i = 0; i < s.inner; ++i) {
            q[i] = training_input_gradient(g_at(i), xp[i], a, b, d, m);
          }
        } else {
          for (int64_t i = 0; i < s.inner; ++i) q[i] = a * g_at(i);
        }
      } else if (k.b != nullptr) {
        const T b = T(k.b[c]), d = T(k.d[c]), m = T(k.mean[c]);
        for (int64_t i = 0; i < s.inner; ++i) {
          q[i] = training_input_gradient(gp[i], xp[i], a, b, d, m);
        }
      } else {
        for (int64_t i = 0; i < s.inner; ++i) q[i] = a * gp[i];
      }
    }
  });
}

void stats_kernel(const Tensor& input, const BatchNormShape& s, double* mean, double* var) {
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "batch_norm", [&] {
    stats(input.data_ptr<scalar_t>(), s, mean, var);
  });
}

void transform_kernel(const Tensor& out, const Tensor& input, const BatchNormShape& s,
                      const double* scale, const double* shift, const Tensor& residual,
                      bool relu) {
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "batch_norm", [&] {
    const scalar_t* r = residual.defined() ? residual.data_ptr<scalar_t>() : nullptr;
    transform(out.data_ptr<scalar_t>(), input.data_ptr<scalar_t>(), s, scale, shift, r, relu);
  });
}

void backward_reduce_kernel(const Tensor& grad_out, const Tensor& input, const BatchNormShape& s,
                            const double* mean, const BatchNormRelu& relu, double* sum_g,
                            double* sum_gx) {
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "batch_norm_backward", [&] {
    backward_reduce(grad_out.data_ptr<scalar_t>(), input.data_ptr<scalar_t>(), s, mean, relu,
                    sum_g, sum_gx);
  });
}

void backward_transform_kernel(const Tensor& grad_input, const Tensor& grad_out,
                               const Tensor& input, const BatchNormShape& s,
                               const BatchNormBackwardCoefficients& k) {
  EMBER_DISPATCH_FLOAT_AND_DOUBLE(input.dtype(), "batch_norm_backward", [&] {
    backward_transform(grad_input.data_ptr<scalar_t>(), grad_out.data_ptr<scalar_t>(),
                       input.data_ptr<scalar_t>(), s, k);
  });
}

}  // namespace

void register_batch_norm_kernels(KernelTable& table) {
  table.batch_norm_stats = stats_kernel;
  table.batch_norm_transform = transform_kernel;
  table.batch_norm_backward_reduce = backward_reduce_kernel;
  table.batch_norm_backward_transform = backward_transform_kernel;
}

}  // namespace ember::cpu::CPU_CAPABILITY
