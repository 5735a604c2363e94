// The autograd dispatch table: one slot per differentiable primitive op, with the op's own
// signature. A public op first asks `autograd_kernel(&AutogradKernels::op, {inputs})`; when grad
// mode is on, we are not already below autograd, an input requires grad and autograd/ filled the
// slot, it gets the autograd kernel (which records the graph and runs the plain op underneath).
// Composite ops (matmul, reshape, narrow, mean, stack, ...) have no slot: they are differentiable
// because the primitives they call are. Keep this list in sync with autograd/functions/.
#pragma once

#include <initializer_list>
#include <optional>
#include <vector>

#include "tensor/autograd_interface.h"
#include "tensor/nn_ops.h"
#include "tensor/tensor.h"

namespace ember {

struct AutogradKernels {
  using TT = Tensor (*)(const Tensor&, const Tensor&);
  using TTS = Tensor (*)(const Tensor&, const Tensor&, const Scalar&);
  using TS = Tensor (*)(const Tensor&, const Scalar&);
  using T1 = Tensor (*)(const Tensor&);
  using InplaceTTS = const Tensor& (*)(const Tensor&, const Tensor&, const Scalar&);
  using InplaceTT = const Tensor& (*)(const Tensor&, const Tensor&);
  using InplaceTS = const Tensor& (*)(const Tensor&, const Scalar&);

  // elementwise
  TTS add = nullptr, sub = nullptr;
  TT mul = nullptr, div = nullptr, pow = nullptr, maximum = nullptr, minimum = nullptr;
  TS add_scalar = nullptr, sub_scalar = nullptr, mul_scalar = nullptr, div_scalar = nullptr,
     pow_scalar = nullptr, rsub = nullptr, rdiv = nullptr;
  Tensor (*where)(const Tensor&, const Tensor&, const Tensor&) = nullptr;
  T1 neg = nullptr, exp = nullptr, log = nullptr, sqrt = nullptr, rsqrt = nullptr, abs = nullptr,
     relu = nullptr, sigmoid = nullptr, tanh = nullptr, sign = nullptr;
  Tensor (*clamp)(const Tensor&, std::optional<Scalar>, std::optional<Scalar>) = nullptr;
  // in place
  InplaceTTS add_ = nullptr, sub_ = nullptr;
  InplaceTT mul_ = nullptr, div_ = nullptr, copy_ = nullptr;
  InplaceTS add_scalar_ = nullptr, mul_scalar_ = nullptr, div_scalar_ = nullptr, fill_ = nullptr;
  // reductions
  Tensor (*sum)(const Tensor&, const Shape&, bool) = nullptr;
  T1 max = nullptr, min = nullptr;
  // linear algebra
  TT mm = nullptr, bmm = nullptr;
  Tensor (*addmm)(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&) = nullptr;
  // views and copies
  Tensor (*view)(const Tensor&, const Shape&) = nullptr;
  Tensor (*permute)(const Tensor&, const Shape&) = nullptr;
  Tensor (*transpose)(const Tensor&, int64_t, int64_t) = nullptr;
  Tensor (*slice)(const Tensor&, int64_t, int64_t, int64_t, int64_t) = nullptr;
  Tensor (*select)(const Tensor&, int64_t, int64_t) = nullptr;
  Tensor (*expand)(const Tensor&, const Shape&) = nullptr;
  T1 squeeze = nullptr;
  Tensor (*squeeze_dim)(const Tensor&, int64_t) = nullptr;
  Tensor (*unsqueeze)(const Tensor&, int64_t) = nullptr;
  Tensor (*as_strided)(const Tensor&, const Shape&, const Shape&, int64_t) = nullptr;
  T1 clone = nullptr;
  Tensor (*to_dtype)(const Tensor&, ScalarType, bool) = nullptr;
  // joining and indexing
  Tensor (*cat)(const std::vector<Tensor>&, int64_t) = nullptr;
  Tensor (*index_select)(const Tensor&, int64_t, const Tensor&) = nullptr;
  Tensor (*gather)(const Tensor&, int64_t, const Tensor&) = nullptr;
  Tensor (*scatter_add)(const Tensor&, int64_t, const Tensor&, const Tensor&) = nullptr;
  const Tensor& (*index_add_)(const Tensor&, int64_t, const Tensor&, const Tensor&) = nullptr;
  // neural-network primitives (tensor/nn_ops.h)
  Tensor (*conv2d)(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) = nullptr;
  Tensor (*max_pool2d)(const Tensor&, Pair, Pair, Pair) = nullptr;
  Tensor (*avg_pool2d)(const Tensor&, Pair, Pair, Pair) = nullptr;
  Tensor (*adaptive_avg_pool2d)(const Tensor&, Pair) = nullptr;
  Tensor (*batch_norm)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       bool, double, double) = nullptr;
  Tensor (*log_softmax)(const Tensor&, int64_t) = nullptr;
  Tensor (*nll_loss)(const Tensor&, const Tensor&, Reduction, int64_t) = nullptr;
  Tensor (*embedding)(const Tensor&, const Tensor&, bool) = nullptr;
};

// The table autograd/ fills at startup.
AutogradKernels& autograd_kernels();

// True when an op on these inputs must be recorded for autograd.
bool should_record(std::initializer_list<const Tensor*> inputs);
bool should_record(const std::vector<Tensor>& inputs);

// The slot's kernel if the op must be recorded, else nullptr (run the plain op).
template <typename Fn>
Fn autograd_kernel(Fn AutogradKernels::*slot, std::initializer_list<const Tensor*> inputs) {
  Fn fn = autograd_kernels().*slot;
  return (fn != nullptr && should_record(inputs)) ? fn : nullptr;
}

}  // namespace ember
