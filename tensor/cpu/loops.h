// Strided N-operand loops for CPU kernels (a small cousin of PyTorch's TensorIterator).
// Operands are already broadcast to one shape (stride 0 on broadcast dims). Size-1 dims are dropped
// and adjacent dims merged where every operand allows it, so a contiguous op is one flat loop; the
// innermost run is handed to the kernel with its byte strides, letting it pick a vectorisable path.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace ember::cpu {

// A fixed-length array stored inline up to K elements (on the heap beyond). Loop plans are built
// on every op call; with std::vectors here the plan cost as much as a 64 Ki-element kernel
// (bench/elementwise_bench, callgrind).
template <typename T, size_t K>
class InlineArray {
 public:
  explicit InlineArray(size_t n) : n_(n), on_heap_(n > K) {
    if (on_heap_) heap_.resize(n);
  }
  T* data() { return on_heap_ ? heap_.data() : inline_.data(); }
  const T* data() const { return on_heap_ ? heap_.data() : inline_.data(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  size_t size() const { return n_; }
  void shrink(size_t n) { n_ = n; }  // n <= size(); storage stays where it is

 private:
  std::array<T, K> inline_{};
  std::vector<T> heap_;
  size_t n_;
  bool on_heap_;
};

constexpr size_t kInlineLoopDims = 8;

template <size_t N>
struct LoopDim {
  int64_t size;
  std::array<int64_t, N> strides;  // in bytes, per operand
};

template <size_t N>
struct LoopPlan {
  explicit LoopPlan(size_t max_dims) : dims(max_dims) {}
  InlineArray<LoopDim<N>, kInlineLoopDims> dims;  // innermost last
  int64_t numel = 1;
};

// `tensors` all have shape `sizes` (operand 0 is usually the output).
template <size_t N>
LoopPlan<N> make_loop_plan(const Shape& sizes, const std::array<const Tensor*, N>& tensors) {
  LoopPlan<N> plan(std::max<size_t>(sizes.size(), 1));
  std::array<const int64_t*, N> strides;
  std::array<int64_t, N> elem;
  for (size_t k = 0; k < N; ++k) {
    strides[k] = tensors[k]->strides().data();
    elem[k] = static_cast<int64_t>(tensors[k]->element_size());
  }
  size_t ndim = 0;
  // Outermost first: drop size-1 dims, and merge dim d into the previous kept one when
  // stride[prev] == stride[d] * size[d] for every operand.
  for (size_t d = 0; d < sizes.size(); ++d) {
    plan.numel *= sizes[d];
    if (sizes[d] == 1) continue;
    LoopDim<N> dim{sizes[d], {}};
    for (size_t k = 0; k < N; ++k) dim.strides[k] = strides[k][d] * elem[k];
    bool merge = ndim > 0;
    for (size_t k = 0; k < N && merge; ++k) {
      merge = plan.dims[ndim - 1].strides[k] == dim.strides[k] * dim.size;
    }
    if (merge) {
      plan.dims[ndim - 1].size *= dim.size;
      plan.dims[ndim - 1].strides = dim.strides;
    } else {
      plan.dims[ndim++] = dim;
    }
  }
  if (ndim == 0) plan.dims[ndim++] = LoopDim<N>{1, {}};  // a single element
  plan.dims.shrink(ndim);
  return plan;
}

// Calls inner(ptrs, inner_strides, n) once per innermost run.
template <size_t N, typename Inner>
void run_loop_plan(const LoopPlan<N>& plan, std::array<char*, N> base, Inner&& inner) {
  if (plan.numel == 0) return;
  const int64_t ndim = static_cast<int64_t>(plan.dims.size());
  const LoopDim<N>& innermost = plan.dims[ndim - 1];
  const int64_t n = innermost.size;
  if (ndim == 1) {
    inner(base, innermost.strides, n);
    return;
  }
  InlineArray<int64_t, kInlineLoopDims> counter(ndim - 1);
  for (int64_t d = 0; d < ndim - 1; ++d) counter[d] = 0;
  std::array<char*, N> ptrs = base;
  const int64_t outer = plan.numel / n;
  for (int64_t it = 0; it < outer; ++it) {
    inner(ptrs, innermost.strides, n);
    // Odometer increment over the outer dims.
    for (int64_t d = ndim - 2; d >= 0; --d) {
      const LoopDim<N>& dim = plan.dims[d];
      if (++counter[d] < dim.size) {
        for (size_t k = 0; k < N; ++k) ptrs[k] += dim.strides[k];
        break;
      }
      for (size_t k = 0; k < N; ++k) ptrs[k] -= dim.strides[k] * (dim.size - 1);
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

// Elementwise out = f(in...) over same-dtype operands; `Out` and `In` are the C++ element types.
// The contiguous inner case is a plain indexed loop the compiler vectorises.
template <typename Out, typename In, typename F>
void unary_loop(const Tensor& out, const Tensor& in, F f) {
  for_each_strided<2>(out.sizes(), {&out, &in},
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
  for_each_strided<3>(
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

}  // namespace ember::cpu
