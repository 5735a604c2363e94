// Strided N-operand loops for CPU kernels (a small cousin of PyTorch's TensorIterator).
// Operands are already broadcast to one shape (stride 0 on broadcast dims). Size-1 dims are dropped
// and adjacent dims merged where every operand allows it, so a contiguous op is one flat loop; the
// innermost run is handed to the kernel with its byte strides, letting it pick a vectorisable path.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tensor/parallel.h"
#include "tensor/tensor.h"

#include "tensor/cpu/capability_namespace.h"

namespace ember::cpu {
namespace CPU_CAPABILITY {  // Note [CPU capability namespaces]

template <size_t N>
struct LoopPlan {
  std::vector<int64_t> sizes;                   // innermost last
  std::array<std::vector<int64_t>, N> strides;  // in bytes, per operand
  int64_t numel = 1;
};

// `tensors` all have shape `sizes` (operand 0 is usually the output).
template <size_t N>
LoopPlan<N> make_loop_plan(const Shape& sizes, const std::array<const Tensor*, N>& tensors) {
  LoopPlan<N> plan;
  for (int64_t s : sizes) plan.numel *= s;
  // Keep non-trivial dims, outermost first.
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    plan.sizes.push_back(sizes[d]);
    for (size_t k = 0; k < N; ++k) {
      plan.strides[k].push_back(tensors[k]->strides()[d] *
                                static_cast<int64_t>(tensors[k]->element_size()));
    }
  }
  // Merge dim i into dim i-1 when stride[i-1] == stride[i] * size[i] for every operand.
  std::vector<int64_t> sz;
  std::array<std::vector<int64_t>, N> st;
  for (size_t d = 0; d < plan.sizes.size(); ++d) {
    bool merge = !sz.empty();
    for (size_t k = 0; k < N && merge; ++k) {
      merge = st[k].back() == plan.strides[k][d] * plan.sizes[d];
    }
    if (merge) {
      sz.back() *= plan.sizes[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = plan.strides[k][d];
    } else {
      sz.push_back(plan.sizes[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back(plan.strides[k][d]);
    }
  }
  if (sz.empty()) {  // a single element
    sz.push_back(1);
    for (size_t k = 0; k < N; ++k) st[k].push_back(0);
  }
  plan.sizes = std::move(sz);
  plan.strides = std::move(st);
  return plan;
}

// Calls inner(ptrs, inner_strides, n) once per innermost run.
template <size_t N, typename Inner>
void run_loop_plan(const LoopPlan<N>& plan, std::array<char*, N> base, Inner&& inner) {
  if (plan.numel == 0) return;
  const int64_t ndim = static_cast<int64_t>(plan.sizes.size());
  const int64_t n = plan.sizes[ndim - 1];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = plan.strides[k][ndim - 1];
  if (ndim == 1) {
    inner(base, inner_strides, n);
    return;
  }
  std::vector<int64_t> counter(ndim - 1, 0);
  std::array<char*, N> ptrs = base;
  const int64_t outer = plan.numel / n;
  for (int64_t it = 0; it < outer; ++it) {
    inner(ptrs, inner_strides, n);
    // Odometer increment over the outer dims.
    for (int64_t d = ndim - 2; d >= 0; --d) {
      if (++counter[d] < plan.sizes[d]) {
        for (size_t k = 0; k < N; ++k) ptrs[k] += plan.strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) ptrs[k] -= plan.strides[k][d] * (plan.sizes[d] - 1);
      counter[d] = 0;
    }
  }
}

// Like run_loop_plan, for the elements [lo, hi) in the plan's order (runs are clipped to it).
template <size_t N, typename Inner>
void run_loop_plan_range(const LoopPlan<N>& plan, std::array<char*, N> base, int64_t lo, int64_t hi,
                         Inner&& inner) {
  const int64_t ndim = static_cast<int64_t>(plan.sizes.size());
  const int64_t n = plan.sizes[ndim - 1];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = plan.strides[k][ndim - 1];
  // The odometer of run lo / n over the outer dims.
  std::vector<int64_t> counter(std::max<int64_t>(ndim - 1, 0), 0);
  std::array<char*, N> ptrs = base;
  for (int64_t d = ndim - 2, run = lo / n; d >= 0; --d) {
    counter[d] = run % plan.sizes[d];
    run /= plan.sizes[d];
    for (size_t k = 0; k < N; ++k) ptrs[k] += counter[d] * plan.strides[k][d];
  }
  int64_t offset = lo % n;
  while (lo < hi) {
    const int64_t len = std::min(n - offset, hi - lo);
    std::array<char*, N> start = ptrs;
    for (size_t k = 0; k < N; ++k) start[k] += offset * inner_strides[k];
    inner(start, inner_strides, len);
    lo += len;
    offset = 0;
    for (int64_t d = ndim - 2; d >= 0; --d) {
      if (++counter[d] < plan.sizes[d]) {
        for (size_t k = 0; k < N; ++k) ptrs[k] += plan.strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) ptrs[k] -= plan.strides[k][d] * (plan.sizes[d] - 1);
      counter[d] = 0;
    }
  }
}

template <size_t N, typename Inner>
void for_each_strided(const Shape& sizes, const std::array<const Tensor*, N>& tensors,
                      Inner&& inner) {
  LoopPlan<N> plan = make_loop_plan<N>(sizes, tensors);
  std::array<char*, N> base;
  for (size_t k = 0; k < N; ++k) base[k] = static_cast<char*>(tensors[k]->data_ptr());
  run_loop_plan<N>(plan, base, inner);
}

// Elements per thread below which an elementwise loop stays on one thread.
constexpr int64_t kElementwiseGrain = 32768;

// for_each_strided with the elements split across threads. Only for loops where each element of
// operand 0 is written from its own inputs alone (elementwise ops; not reductions into a
// broadcast output), so the result is the same for any thread count.
template <size_t N, typename Inner>
void parallel_for_each_strided(const Shape& sizes, const std::array<const Tensor*, N>& tensors,
                               Inner&& inner) {
  LoopPlan<N> plan = make_loop_plan<N>(sizes, tensors);
  if (plan.numel == 0) return;
  std::array<char*, N> base;
  for (size_t k = 0; k < N; ++k) base[k] = static_cast<char*>(tensors[k]->data_ptr());
  parallel_for(0, plan.numel, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    run_loop_plan_range<N>(plan, base, lo, hi, inner);
  });
}

// Elementwise out = f(in...) over same-dtype operands; `Out` and `In` are the C++ element types.
// The contiguous inner case is a plain indexed loop the compiler vectorises.
template <typename Out, typename In, typename F>
void unary_loop(const Tensor& out, const Tensor& in, F f) {
  parallel_for_each_strided<2>(out.sizes(), {&out, &in},
                      [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
                        Out* o = reinterpret_cast<Out*>(p[0]);
                        const In* a = reinterpret_cast<const In*>(p[1]);
                        if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
                          for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
                        } else {
                          for (int64_t i = 0; i < n; ++i) {
                            *reinterpret_cast<Out*>(p[0] + i * s[0]) =
                                f(*reinterpret_cast<const In*>(p[1] + i * s[1]));
                          }
                        }
                      });
}

template <typename Out, typename In, typename F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  parallel_for_each_strided<3>(
      out.sizes(), {&out, &a, &b},
      [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
        Out* o = reinterpret_cast<Out*>(p[0]);
        const In* x = reinterpret_cast<const In*>(p[1]);
        const In* y = reinterpret_cast<const In*>(p[2]);
        constexpr int64_t so = sizeof(Out), si = sizeof(In);
        if (s[0] == so && s[1] == si && s[2] == si) {
          for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
        } else if (s[0] == so && s[1] == si && s[2] == 0) {
          const In yv = *y;
          for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
        } else if (s[0] == so && s[1] == 0 && s[2] == si) {
          const In xv = *x;
          for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) {
            *reinterpret_cast<Out*>(p[0] + i * s[0]) =
                f(*reinterpret_cast<const In*>(p[1] + i * s[1]),
                  *reinterpret_cast<const In*>(p[2] + i * s[2]));
          }
        }
      });
}

}  // namespace CPU_CAPABILITY
using namespace CPU_CAPABILITY;
}  // namespace ember::cpu
