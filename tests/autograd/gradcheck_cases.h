// The gradcheck table: one case per differentiable op (autograd::differentiable_op_names()), shared
// by the CPU suite (gradcheck_test.cc) and the CUDA one (cuda_gradcheck_test.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/gradcheck.h"
#include "tensor/all.h"
#include "tensor/nn_ops.h"

namespace ember::autograd {

using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

struct Case {
  std::vector<Shape> shapes;
  Fn fn;
  bool positive = false;  // inputs in [0.5, 2): for log, sqrt, division, pow bases
};

// An index tensor on the device of the case's inputs.
inline Tensor idx(const Tensor& like, std::vector<int64_t> v, Shape s = {}) {
  return from_vector<int64_t>(v, s).to(like.device());
}

// Every case, keyed by the op name it covers. The functions build any extra tensor on their
// inputs' device, so the CUDA suite runs the same table on cuda:0.
inline const std::map<std::string, Case>& cases() {
  static const std::map<std::string, Case> table = {
      {"add", {{{3, 4}, {4}}, [](const Inputs& x) { return add(x[0], x[1], 2.0); }}},
      {"sub", {{{3, 4}, {3, 1}}, [](const Inputs& x) { return sub(x[0], x[1], 0.5); }}},
      {"mul", {{{3, 4}, {4}}, [](const Inputs& x) { return mul(x[0], x[1]); }}},
      {"div", {{{3, 4}, {3, 1}}, [](const Inputs& x) { return div(x[0], x[1]); }, true}},
      {"pow", {{{3, 4}, {4}}, [](const Inputs& x) { return pow(x[0], x[1]); }, true}},
      {"maximum", {{{3, 4}, {4}}, [](const Inputs& x) { return maximum(x[0], x[1]); }}},
      {"minimum", {{{3, 4}, {4}}, [](const Inputs& x) { return minimum(x[0], x[1]); }}},
      {"add_scalar", {{{3, 4}}, [](const Inputs& x) { return add(x[0], 1.5); }}},
      {"sub_scalar", {{{3, 4}}, [](const Inputs& x) { return sub(x[0], 1.5); }}},
      {"mul_scalar", {{{3, 4}}, [](const Inputs& x) { return mul(x[0], -3.0); }}},
      {"div_scalar", {{{3, 4}}, [](const Inputs& x) { return div(x[0], 4.0); }}},
      {"pow_scalar", {{{3, 4}}, [](const Inputs& x) { return pow(x[0], 3.0); }}},
      {"rsub", {{{3, 4}}, [](const Inputs& x) { return rsub(x[0], 2.0); }}},
      {"rdiv", {{{3, 4}}, [](const Inputs& x) { return rdiv(x[0], 2.0); }, true}},
      {"where", {{{3, 4}, {4}}, [](const Inputs& x) {
         Tensor cond = gt(arange(12, kFloat64).view({3, 4}), 5.0).to(x[0].device());
         return where(cond, x[0], x[1]);
       }}},
      {"neg", {{{3, 4}}, [](const Inputs& x) { return neg(x[0]); }}},
      {"exp", {{{3, 4}}, [](const Inputs& x) { return exp(x[0]); }}},
      {"log", {{{3, 4}}, [](const Inputs& x) { return log(x[0]); }, true}},
      {"sqrt", {{{3, 4}}, [](const Inputs& x) { return sqrt(x[0]); }, true}},
      {"rsqrt", {{{3, 4}}, [](const Inputs& x) { return rsqrt(x[0]); }, true}},
      {"abs", {{{3, 4}}, [](const Inputs& x) { return abs(add(x[0], 0.05)); }}},
      {"relu", {{{3, 4}}, [](const Inputs& x) { return relu(add(x[0], 0.05)); }}},
      {"sigmoid", {{{3, 4}}, [](const Inputs& x) { return sigmoid(x[0]); }}},
      {"tanh", {{{3, 4}}, [](const Inputs& x) { return tanh(x[0]); }}},
      {"gelu", {{{3, 4}}, [](const Inputs& x) { return gelu(mul(x[0], 2.0)); }}},
      {"gelu_tanh", {{{3, 4}}, [](const Inputs& x) { return gelu(mul(x[0], 2.0), "tanh"); }}},
      {"masked_fill", {{{3, 4}}, [](const Inputs& x) {
         Tensor mask = gt(arange(4, kFloat64), 1.5).to(x[0].device());
         return masked_fill(x[0], mask, -2.5);
       }}},
      {"split", {{{5, 4}}, [](const Inputs& x) {
         std::vector<Tensor> parts = split(x[0], 2, 0);  // 2, 2 and 1 rows
         return cat({mul(parts[0], 3.0), parts[2], neg(parts[1])}, 0);
       }}},
      {"sign", {{{3, 4}}, [](const Inputs& x) { return mul(sign(add(x[0], 0.05)), x[0]); }}},
      {"clamp", {{{3, 4}}, [](const Inputs& x) { return clamp(x[0], -0.45, 0.55); }}},
      {"add_", {{{3, 4}, {4}}, [](const Inputs& x) { Tensor y = x[0].clone(); add_(y, x[1], 2.0); return y; }}},
      {"sub_", {{{3, 4}, {4}}, [](const Inputs& x) { Tensor y = x[0].clone(); sub_(y, x[1], 3.0); return y; }}},
      {"mul_", {{{3, 4}, {4}}, [](const Inputs& x) { Tensor y = x[0].clone(); mul_(y, x[1]); return y; }}},
      {"div_", {{{3, 4}, {4}}, [](const Inputs& x) { Tensor y = x[0].clone(); div_(y, x[1]); return y; }, true}},
      {"add_scalar_", {{{3, 4}}, [](const Inputs& x) { Tensor y = x[0].clone(); add_(y, 2.0); return y; }}},
      {"mul_scalar_", {{{3, 4}}, [](const Inputs& x) { Tensor y = x[0].clone(); mul_(y, 2.0); return y; }}},
      {"div_scalar_", {{{3, 4}}, [](const Inputs& x) { Tensor y = x[0].clone(); div_(y, 2.0); return y; }}},
      {"relu_", {{{3, 4}}, [](const Inputs& x) { Tensor y = add(x[0], 0.05); relu_(y); return y; }}},
      {"fill_", {{{3, 4}}, [](const Inputs& x) { Tensor y = mul(x[0], 2.0); fill_(y, 1.0); return add(y, x[0]); }}},
      {"zero_", {{{3, 4}}, [](const Inputs& x) { Tensor y = mul(x[0], 2.0); y.zero_(); return add(y, x[0]); }}},
      {"copy_", {{{3, 4}, {4}}, [](const Inputs& x) { Tensor y = mul(x[0], 2.0); copy_(y, x[1]); return mul(y, x[0]); }}},
      {"sum", {{{3, 4}}, [](const Inputs& x) { return sum(x[0], {1}); }}},
      {"max", {{{3, 4}}, [](const Inputs& x) { return max(x[0]); }}},
      {"min", {{{3, 4}}, [](const Inputs& x) { return min(x[0]); }}},
      {"mean", {{{3, 4}}, [](const Inputs& x) { return mean(x[0], {0}, true); }}},
      {"var", {{{3, 4}}, [](const Inputs& x) { return var(x[0], {1}); }}},
      {"max_dim", {{{3, 4}}, [](const Inputs& x) { return std::get<0>(max(x[0], 1)); }}},
      {"min_dim", {{{3, 4}}, [](const Inputs& x) { return std::get<0>(min(x[0], 0, true)); }}},
      {"mm", {{{3, 4}, {4, 2}}, [](const Inputs& x) { return mm(x[0], x[1]); }}},
      {"bmm", {{{2, 3, 4}, {2, 4, 2}}, [](const Inputs& x) { return bmm(x[0], x[1]); }}},
      {"addmm", {{{2}, {3, 4}, {4, 2}}, [](const Inputs& x) { return addmm(x[0], x[1], x[2], 0.5, 2.0); }}},
      {"matmul", {{{2, 3, 4}, {4, 2}}, [](const Inputs& x) { return matmul(x[0], x[1]); }}},
      {"view", {{{3, 4}}, [](const Inputs& x) { return mul(x[0], 1.0).view({2, 6}); }}},
      {"reshape", {{{3, 4}}, [](const Inputs& x) { return x[0].t().reshape({12}); }}},
      {"flatten", {{{2, 3, 2}}, [](const Inputs& x) { return x[0].flatten(1); }}},
      {"permute", {{{2, 3, 4}}, [](const Inputs& x) { return x[0].permute({2, 0, 1}); }}},
      {"transpose", {{{3, 4}}, [](const Inputs& x) { return x[0].transpose(0, 1); }}},
      {"t", {{{3, 4}}, [](const Inputs& x) { return x[0].t(); }}},
      {"slice", {{{5, 4}}, [](const Inputs& x) { return x[0].slice(0, 1, 5, 2); }}},
      {"narrow", {{{5, 4}}, [](const Inputs& x) { return x[0].narrow(1, 1, 2); }}},
      {"select", {{{3, 4}}, [](const Inputs& x) { return x[0].select(1, 2); }}},
      {"expand", {{{3, 1}}, [](const Inputs& x) { return x[0].expand({2, 3, 4}); }}},
      {"squeeze", {{{3, 1}}, [](const Inputs& x) { return x[0].squeeze(); }}},
      {"squeeze_dim", {{{3, 1}}, [](const Inputs& x) { return x[0].squeeze(1); }}},
      {"unsqueeze", {{{3, 4}}, [](const Inputs& x) { return x[0].unsqueeze(1); }}},
      {"as_strided", {{{3, 4}}, [](const Inputs& x) { return mul(x[0], 1.0).as_strided({2, 2}, {4, 1}, 1); }}},
      {"clone", {{{3, 4}}, [](const Inputs& x) { return x[0].clone(); }}},
      {"contiguous", {{{3, 4}}, [](const Inputs& x) { return x[0].t().contiguous(); }}},
      {"to_dtype", {{{3, 4}}, [](const Inputs& x) { return x[0].to(kFloat64, /*copy=*/true); }}},
      {"cat", {{{2, 4}, {0}, {3, 4}}, [](const Inputs& x) { return cat({x[0], x[1], x[2]}, 0); }}},
      {"stack", {{{3, 4}, {3, 4}}, [](const Inputs& x) { return stack({x[0], x[1]}, 1); }}},
      {"index_select", {{{4, 3}}, [](const Inputs& x) { return index_select(x[0], 0, idx(x[0], {3, 0, 3})); }}},
      {"gather", {{{3, 4}}, [](const Inputs& x) { return gather(x[0], 1, idx(x[0], {0, 3, 1, 1, 2, 2}, {3, 2})); }}},
      {"scatter_add", {{{3, 4}, {3, 2}}, [](const Inputs& x) {
         return scatter_add(x[0], 1, idx(x[0], {0, 3, 1, 1, 2, 2}, {3, 2}), x[1]);
       }}},
      {"index_add_", {{{4, 3}, {2, 3}}, [](const Inputs& x) {
         Tensor y = x[0].clone();
         index_add_(y, 0, idx(x[0], {1, 1}), x[1]);
         return y;
       }}},
      {"conv2d", {{{2, 4, 5, 5}, {4, 2, 3, 3}, {4}}, [](const Inputs& x) {
         Conv2dParams p;
         p.stride = {2, 1};
         p.padding = {1, 1};
         p.dilation = {1, 2};
         p.groups = 2;
         return conv2d(x[0], x[1], x[2], p);
       }}},
      {"conv2d_stride2", {{{2, 3, 7, 6}, {4, 3, 3, 3}, {4}}, [](const Inputs& x) {
         // Stride 2 both ways: the parity-plane im2col (Note [Stride-2 columns from parity
         // planes]), odd height, uneven padding.
         Conv2dParams p;
         p.stride = {2, 2};
         p.padding = {1, 0};
         return conv2d(x[0], x[1], x[2], p);
       }}},
      {"max_pool2d", {{{2, 2, 5, 5}}, [](const Inputs& x) { return max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}); }}},
      {"avg_pool2d", {{{2, 2, 5, 5}}, [](const Inputs& x) { return avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}); }}},
      {"adaptive_avg_pool2d", {{{2, 2, 5, 5}}, [](const Inputs& x) { return adaptive_avg_pool2d(x[0], {2, 3}); }}},
      {"batch_norm", {{{4, 3, 2, 2}, {3}, {3}}, [](const Inputs& x) {
         const TensorOptions like(kFloat64, x[0].device());
         Tensor rm = zeros({3}, like), rv = ones({3}, like);
         return batch_norm(x[0], x[1], x[2], rm, rv, /*training=*/true, 0.1, 1e-5);
       }}},
      {"batch_norm_relu", {{{4, 3, 2, 2}, {3}, {3}}, [](const Inputs& x) {
         const TensorOptions like(kFloat64, x[0].device());
         Tensor rm = zeros({3}, like), rv = ones({3}, like);
         return batch_norm_relu(x[0], x[1], x[2], rm, rv, /*training=*/true, 0.1, 1e-5);
       }}},
      {"batch_norm_relu_residual", {{{4, 3, 2, 2}, {3}, {3}, {4, 3, 2, 2}}, [](const Inputs& x) {
         const TensorOptions like(kFloat64, x[0].device());
         Tensor rm = zeros({3}, like), rv = ones({3}, like);
         return batch_norm_relu(x[0], x[1], x[2], rm, rv, /*training=*/true, 0.1, 1e-5, x[3]);
       }}},
      {"log_softmax", {{{3, 5}}, [](const Inputs& x) { return log_softmax(x[0], 1); }}},
      {"softmax", {{{3, 4}}, [](const Inputs& x) { return softmax(x[0], 0); }}},
      {"nll_loss", {{{4, 5}}, [](const Inputs& x) {
         return nll_loss(log_softmax(x[0], 1), idx(x[0], {1, 0, 4, 1}), Reduction::kMean);
       }}},
      {"embedding", {{{5, 3}}, [](const Inputs& x) { return embedding(x[0], idx(x[0], {0, 4, 4, 2}, {2, 2})); }}},
  };
  return table;
}

// A float64 input that requires grad, drawn on the CPU and moved to `device`.
inline Tensor make_input(const Shape& shape, bool positive, bool non_contiguous, Generator& gen,
                         Device device = kCPU) {
  Tensor t;
  if (non_contiguous && shape.size() >= 2) {
    Shape swapped = shape;
    std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
    t = randn(swapped, &gen, kFloat64).transpose(-1, -2);
  } else if (non_contiguous && shape.size() == 1) {
    t = randn({shape[0] * 2}, &gen, kFloat64).slice(0, 0, shape[0] * 2, 2);
  } else {
    t = randn(shape, &gen, kFloat64);
  }
  if (positive) {
    NoGradGuard g;
    Tensor u = add(mul(abs(t), 0.5), 0.5);
    copy_(t, u);
  }
  if (!device.is_cpu()) t = t.to(device);
  t.set_requires_grad(true);
  return t;
}

inline std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& kv : cases()) names.push_back(kv.first);
  return names;
}

}  // namespace ember::autograd
