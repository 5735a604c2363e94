// Strided N-operand loops for CPU kernels (a small cousin of PyTorch's TensorIterator).
// Operands are already broadcast to one shape (stride 0 on broadcast dims). Size-1 dims are dropped
// and adjacent dims merged where every operand allows it, so a contiguous op is one flat loop; the
// innermost run is handed to the kernel with its byte strides, letting it pick a vectorisable path.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "tensor/cpu/capability_namespace.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"

namespace ember::cpu {
namespace CPU_CAPABILITY {  // Note [CPU capability namespaces]

// Loops have at most this many dimensions (PyTorch's TensorIterator allows 25 on CUDA). Fixed
// arrays, not std::vector: vector members instantiated here would be shared with baseline code
// (Note [CPU capability namespaces]).
constexpr int64_t kMaxLoopDims = 25;
using LoopDims = std::array<int64_t, kMaxLoopDims>;

template <size_t N>
struct LoopPlan {
  int64_t ndim = 0;
  LoopDims sizes{};                   // [0, ndim), innermost last
  std::array<LoopDims, N> strides{};  // in bytes, per operand
  int64_t numel = 1;
};

// `tensors` all have shape `sizes` (operand 0 is usually the output). Size-1 dims are dropped and
// dim d merged into the dim outside it when stride[outer] == stride[d] * size[d] for every operand.
template <size_t N>
LoopPlan<N> make_loop_plan(const Shape& sizes, const std::array<const Tensor*, N>& tensors) {
  EMBER_CHECK(static_cast<int64_t>(sizes.size()) <= kMaxLoopDims, "elementwise and reduction "
              "kernels support at most ", kMaxLoopDims, " dimensions, got ", tensors[0]->describe());
  LoopPlan<N> plan;
  for (int64_t s : sizes) plan.numel *= s;
  for (size_t d = 0; d < sizes.size(); ++d) {  // outermost first
    if (sizes[d] == 1) continue;
    std::array<int64_t, N> st;
    for (size_t k = 0; k < N; ++k) {
      st[k] = tensors[k]->strides()[d] * static_cast<int64_t>(tensors[k]->element_size());
    }
    bool merge = plan.ndim > 0;
    for (size_t k = 0; k < N && merge; ++k) {
      merge = plan.strides[k][plan.ndim - 1] == st[k] * sizes[d];
    }
    if (merge) {
      plan.sizes[plan.ndim - 1] *= sizes[d];
      for (size_t k = 0; k < N; ++k) plan.strides[k][plan.ndim - 1] = st[k];
    } else {
      plan.sizes[plan.ndim] = sizes[d];
      for (size_t k = 0; k < N; ++k) plan.strides[k][plan.ndim] = st[k];
      ++plan.ndim;
    }
  }
  if (plan.ndim == 0) {  // a single element
    plan.sizes[0] = 1;
    for (size_t k = 0; k < N; ++k) plan.strides[k][0] = 0;
    plan.ndim = 1;
  }
  return plan;
}

// Calls inner(ptrs, inner_strides, n) once per innermost run, for the elements [lo, hi) in the
// plan's order (the first and last runs are clipped to them).
template <size_t N, typename Inner>
void run_loop_plan_range(const LoopPlan<N>& plan, std::array<char*, N> base, int64_t lo, int64_t hi,
                         Inner&& inner) {
  const int64_t ndim = plan.ndim;
  const int64_t n = plan.sizes[ndim - 1];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = plan.strides[k][ndim - 1];
  // The odometer of run lo / n over the outer dims.
  LoopDims counter{};
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

// Every element, on this thread.
template <size_t N, typename Inner>
void run_loop_plan(const LoopPlan<N>& plan, std::array<char*, N> base, Inner&& inner) {
  if (plan.numel > 0) run_loop_plan_range<N>(plan, base, 0, plan.numel, inner);
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
