// CPU reduction kernels. Sum/Max/Min walk the input once with the output broadcast over the reduced
// dims (stride 0), so one strided loop serves every layout: when the innermost run is reduced, a
// register accumulator (four partial sums) does the work; otherwise rows accumulate elementwise.
// Arg-reductions move the reduced dims last and scan rows.
#include <cmath>
#include <limits>
#include <numeric>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/cpu/loops.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

template <typename T>
bool nan_of(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  (void)v;
  return false;
}

// out (shape of in with size 1 on reduced dims) viewed with stride 0 over the reduced dims.
Tensor broadcast_out(const Tensor& out, const Tensor& in) {
  Shape strides = out.strides();
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (out.sizes()[d] == 1 && in.sizes()[d] != 1) strides[d] = 0;
  }
  return out.as_strided(in.sizes(), strides, out.storage_offset());
}

template <typename Acc, typename In>
void sum_into(const Tensor& acc, const Tensor& in) {
  Tensor acc_b = broadcast_out(acc, in);
  for_each_strided<2>(in.sizes(), {&acc_b, &in},
                      [](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
                        Acc* o = reinterpret_cast<Acc*>(p[0]);
                        if (s[0] == 0) {
                          Acc part[4] = {0, 0, 0, 0};
                          int64_t i = 0;
                          if (s[1] == sizeof(In)) {
                            const In* x = reinterpret_cast<const In*>(p[1]);
                            for (; i + 4 <= n; i += 4) {
                              part[0] += convert<Acc>(x[i]);
                              part[1] += convert<Acc>(x[i + 1]);
                              part[2] += convert<Acc>(x[i + 2]);
                              part[3] += convert<Acc>(x[i + 3]);
                            }
                          }
                          for (; i < n; ++i) {
                            part[0] += convert<Acc>(*reinterpret_cast<const In*>(p[1] + i * s[1]));
                          }
                          *o += (part[0] + part[1]) + (part[2] + part[3]);
                        } else if (s[0] == sizeof(Acc) && s[1] == sizeof(In)) {
                          const In* x = reinterpret_cast<const In*>(p[1]);
                          for (int64_t i = 0; i < n; ++i) o[i] += convert<Acc>(x[i]);
                        } else {
                          for (int64_t i = 0; i < n; ++i) {
                            *reinterpret_cast<Acc*>(p[0] + i * s[0]) +=
                                convert<Acc>(*reinterpret_cast<const In*>(p[1] + i * s[1]));
                          }
                        }
                      });
}

template <typename T>
void extreme_into(bool is_max, const Tensor& out, const Tensor& in) {
  using M = opmath_t<T>;
  // Seed with the first element of each reduction (every slice is non-empty: checked by the op).
  Tensor first = in;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (out.sizes()[d] == 1) first = first.narrow(d, 0, 1);
  }
  copy_(out, first);
  Tensor out_b = broadcast_out(out, in);
  for_each_strided<2>(in.sizes(), {&out_b, &in},
                      [is_max](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
                        for (int64_t i = 0; i < n; ++i) {
                          T* o = reinterpret_cast<T*>(p[0] + i * s[0]);
                          const T x = *reinterpret_cast<const T*>(p[1] + i * s[1]);
                          const M cur = M(*o), v = M(x);
                          if (nan_of(cur)) continue;  // NaN propagates
                          if (nan_of(v) || (is_max ? v > cur : v < cur)) *o = x;
                        }
                      });
}

template <typename T>
void arg_extreme(bool is_max, const Tensor& out, const Tensor& in, const std::vector<bool>& mask) {
  using M = opmath_t<T>;
  // Kept dims first, reduced dims last. Filled by index: no push_back here (loops.h says why).
  Shape perm(in.dim());
  int64_t rows = 1, cols = 1, next = 0;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (!mask[d]) {
      perm[next++] = d;
      rows *= in.sizes()[d];
    }
  }
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (mask[d]) {
      perm[next++] = d;
      cols *= in.sizes()[d];
    }
  }
  Tensor flat = in.permute(perm).contiguous();
  const T* x = flat.data_ptr<T>();
  Tensor out_c = out.is_contiguous() ? out : empty(out.sizes(), kInt64);
  int64_t* o = out_c.data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * cols;
    int64_t best = 0;
    M bv = M(row[0]);
    for (int64_t c = 1; c < cols && !nan_of(bv); ++c) {
      const M v = M(row[c]);
      if (nan_of(v) || (is_max ? v > bv : v < bv)) {
        best = c;
        bv = v;
      }
    }
    o[r] = best;
  }
  if (!out_c.is_same(out)) copy_(out, out_c);
}

void reduce_kernel(ReduceKind op, const Tensor& out, const Tensor& in, const std::vector<bool>& mask) {
  switch (op) {
    case ReduceKind::kSum:
      EMBER_DISPATCH_ALL_TYPES(in.dtype(), "sum", [&] {
        using A = acc_t<scalar_t>;
        if (out.dtype() == dtype_of<A>() && out.is_contiguous()) {
          zero_(out);
          sum_into<A, scalar_t>(out, in);
        } else {
          Tensor acc = zeros(out.sizes(), dtype_of<A>());
          sum_into<A, scalar_t>(acc, in);
          copy_(out, acc);
        }
      });
      return;
    case ReduceKind::kMax:
    case ReduceKind::kMin:
      EMBER_DISPATCH_ALL_TYPES(in.dtype(), op == ReduceKind::kMax ? "max" : "min",
                               [&] { extreme_into<scalar_t>(op == ReduceKind::kMax, out, in); });
      return;
    case ReduceKind::kArgMax:
    case ReduceKind::kArgMin:
      EMBER_DISPATCH_ALL_TYPES(in.dtype(), op == ReduceKind::kArgMax ? "argmax" : "argmin", [&] {
        arg_extreme<scalar_t>(op == ReduceKind::kArgMax, out, in, mask);
      });
      return;
  }
}

}  // namespace

void register_reduction_kernels(KernelTable& table) { table.reduce = reduce_kernel; }

}  // namespace ember::cpu::CPU_CAPABILITY
