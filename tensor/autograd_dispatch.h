// The autograd dispatch table: one slot per differentiable primitive op, with the op's own
// signature. A public op first asks `autograd_kernel(&AutogradKernels::op, {inputs})`; when grad
// mode is on, we are not already below autograd, an input requires grad and autograd/ filled the
// slot, it gets the autograd kernel (which records the graph and runs the plain op underneath).
// Composite ops (matmul, reshape, narrow, mean, stack, ...) have no slot: they are differentiable
// because the primitives they call are.
#pragma once

#include <initializer_list>
#include <optional>
#include <vector>

#include "tensor/autograd_interface.h"
#include "tensor/nn_ops.h"
#include "tensor/tensor.h"

namespace ember {

// The signatures of the autograd slots (a macro argument cannot hold a function type's commas).
namespace autograd_fn {
using TT = Tensor (*)(const Tensor&, const Tensor&);
using TTS = Tensor (*)(const Tensor&, const Tensor&, const Scalar&);
using TS = Tensor (*)(const Tensor&, const Scalar&);
using T1 = Tensor (*)(const Tensor&);
using InplaceTTS = const Tensor& (*)(const Tensor&, const Tensor&, const Scalar&);
using InplaceTT = const Tensor& (*)(const Tensor&, const Tensor&);
using InplaceTS = const Tensor& (*)(const Tensor&, const Scalar&);
using InplaceT1 = const Tensor& (*)(const Tensor&);
using Where = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);
using Clamp = Tensor (*)(const Tensor&, std::optional<Scalar>, std::optional<Scalar>);
using Sum = Tensor (*)(const Tensor&, const Shape&, bool);
using Addmm = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&);
using WithShape = Tensor (*)(const Tensor&, const Shape&);
using WithTwoInts = Tensor (*)(const Tensor&, int64_t, int64_t);
using Slice = Tensor (*)(const Tensor&, int64_t, int64_t, int64_t, int64_t);
using WithDim = Tensor (*)(const Tensor&, int64_t);
using AsStrided = Tensor (*)(const Tensor&, const Shape&, const Shape&, int64_t);
using ToDtype = Tensor (*)(const Tensor&, ScalarType, bool);
using Cat = Tensor (*)(const std::vector<Tensor>&, int64_t);
using Indexed = Tensor (*)(const Tensor&, int64_t, const Tensor&);
using ScatterAdd = Tensor (*)(const Tensor&, int64_t, const Tensor&, const Tensor&);
using IndexAdd = const Tensor& (*)(const Tensor&, int64_t, const Tensor&, const Tensor&);
using Conv2d = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&);
using Pool2d = Tensor (*)(const Tensor&, Pair, Pair, Pair);
using AdaptivePool2d = Tensor (*)(const Tensor&, Pair);
using BatchNorm = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                             const Tensor&, bool, double, double);
using BatchNormRelu = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                 const Tensor&, bool, double, double, const Tensor&);
using NllLoss = Tensor (*)(const Tensor&, const Tensor&, Reduction, int64_t);
using Gelu = Tensor (*)(const Tensor&, GeluApproximation);
using Embedding = Tensor (*)(const Tensor&, const Tensor&, bool);
}  // namespace autograd_fn

// Every differentiable primitive, written once as _(name, signature): it generates
// AutogradKernels' slots and their names, which are the differentiable ops the gradcheck coverage
// test requires a case for (autograd::differentiable_op_names() adds the composites).
#define EMBER_FORALL_AUTOGRAD_SLOTS(_)                                                          \
  /* elementwise */                                                                             \
  _(add, TTS) _(sub, TTS) _(mul, TT) _(div, TT) _(pow, TT) _(maximum, TT) _(minimum, TT)        \
  _(add_scalar, TS) _(sub_scalar, TS) _(mul_scalar, TS) _(div_scalar, TS) _(pow_scalar, TS)     \
  _(rsub, TS) _(rdiv, TS) _(where, Where) _(neg, T1) _(exp, T1) _(log, T1) _(sqrt, T1)          \
  _(rsqrt, T1) _(abs, T1) _(relu, T1) _(sigmoid, T1) _(tanh, T1) _(sign, T1) _(clamp, Clamp)    \
  _(gelu, Gelu)                                                                                 \
  /* in place */                                                                                \
  _(add_, InplaceTTS) _(sub_, InplaceTTS) _(mul_, InplaceTT) _(div_, InplaceTT)                 \
  _(copy_, InplaceTT) _(add_scalar_, InplaceTS) _(mul_scalar_, InplaceTS)                       \
  _(div_scalar_, InplaceTS) _(fill_, InplaceTS) _(relu_, InplaceT1)                             \
  /* reductions */                                                                              \
  _(sum, Sum) _(max, T1) _(min, T1)                                                             \
  /* linear algebra */                                                                          \
  _(mm, TT) _(bmm, TT) _(addmm, Addmm)                                                          \
  /* views and copies */                                                                        \
  _(view, WithShape) _(permute, WithShape) _(transpose, WithTwoInts) _(slice, Slice)              \
  _(select, WithTwoInts) _(expand, WithShape) _(squeeze, T1) _(squeeze_dim, WithDim)              \
  _(unsqueeze, WithDim) _(as_strided, AsStrided) _(clone, T1) _(to_dtype, ToDtype)              \
  /* joining and indexing */                                                                    \
  _(cat, Cat) _(index_select, Indexed) _(gather, Indexed) _(scatter_add, ScatterAdd)            \
  _(index_add_, IndexAdd)                                                                       \
  /* neural-network primitives (tensor/nn_ops.h) */                                             \
  _(conv2d, Conv2d) _(max_pool2d, Pool2d) _(avg_pool2d, Pool2d)                                 \
  _(adaptive_avg_pool2d, AdaptivePool2d) _(batch_norm, BatchNorm)                              \
  _(batch_norm_relu, BatchNormRelu) _(log_softmax, WithDim) _(nll_loss, NllLoss)                 \
  _(embedding, Embedding)

struct AutogradKernels {
#define EMBER_DECLARE_AUTOGRAD_SLOT(name, signature) autograd_fn::signature name = nullptr;
  EMBER_FORALL_AUTOGRAD_SLOTS(EMBER_DECLARE_AUTOGRAD_SLOT)
#undef EMBER_DECLARE_AUTOGRAD_SLOT
};

// The slots' names in declaration order, and whether a table fills each.
const std::vector<const char*>& autograd_slot_names();
std::vector<bool> autograd_slots_filled(const AutogradKernels& kernels);

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
