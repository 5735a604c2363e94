// Table-driven gradcheck: every differentiable op (autograd::differentiable_op_names()) must have a
// case here, run on contiguous and on non-contiguous inputs; many cases also broadcast.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "autograd/autograd.h"
#include "autograd/functions/function_node.h"
#include "autograd/gradcheck.h"
#include "tensor/all.h"
#include "tensor/nn_ops.h"

namespace ember::autograd {
namespace {

using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

struct Case {
  std::vector<Shape> shapes;
  Fn fn;
  bool positive = false;  // inputs in [0.5, 2): for log, sqrt, division, pow bases
};

Tensor idx(std::vector<int64_t> v, Shape s = {}) { return from_vector<int64_t>(v, s); }

// Every case, keyed by the op name it covers.
const std::map<std::string, Case>& cases() {
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
         Tensor cond = gt(arange(12, kFloat64).view({3, 4}), 5.0);
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
      {"sign", {{{3, 4}}, [](const Inputs& x) { return mul(sign(add(x[0], 0.05)), x[0]); }}},
      {"clamp", {{{3, 4}}, [](const Inputs& x) { return clamp(x[0], -0.45, 0.55); }}},
      {"add_", {{{3, 4}, {4}}, [](const Inputs& x) { Tensor y = x[0].clone(); add_(y, x[1], 2.0); return y; }}},
      {"sub_", {{{3, 4}, {4}}, [](const Inputs& x) { Tensor y = x[0].clone(); sub_(y, x[1], 3.0); return y; }}},
      {"mul_", {{{3, 4}, {4}}, [](const Inputs& x) { Tensor y = x[0].clone(); mul_(y, x[1]); return y; }}},
      {"div_", {{{3, 4}, {4}}, [](const Inputs& x) { Tensor y = x[0].clone(); div_(y, x[1]); return y; }, true}},
      {"add_scalar_", {{{3, 4}}, [](const Inputs& x) { Tensor y = x[0].clone(); add_(y, 2.0); return y; }}},
      {"mul_scalar_", {{{3, 4}}, [](const Inputs& x) { Tensor y = x[0].clone(); mul_(y, 2.0); return y; }}},
      {"div_scalar_", {{{3, 4}}, [](const Inputs& x) { Tensor y = x[0].clone(); div_(y, 2.0); return y; }}},
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
      {"index_select", {{{4, 3}}, [](const Inputs& x) { return index_select(x[0], 0, idx({3, 0, 3})); }}},
      {"gather", {{{3, 4}}, [](const Inputs& x) { return gather(x[0], 1, idx({0, 3, 1, 1, 2, 2}, {3, 2})); }}},
      {"scatter_add", {{{3, 4}, {3, 2}}, [](const Inputs& x) {
         return scatter_add(x[0], 1, idx({0, 3, 1, 1, 2, 2}, {3, 2}), x[1]);
       }}},
      {"index_add_", {{{4, 3}, {2, 3}}, [](const Inputs& x) {
         Tensor y = x[0].clone();
         index_add_(y, 0, idx({1, 1}), x[1]);
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
      {"max_pool2d", {{{2, 2, 5, 5}}, [](const Inputs& x) { return max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}); }}},
      {"avg_pool2d", {{{2, 2, 5, 5}}, [](const Inputs& x) { return avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}); }}},
      {"adaptive_avg_pool2d", {{{2, 2, 5, 5}}, [](const Inputs& x) { return adaptive_avg_pool2d(x[0], {2, 3}); }}},
      {"batch_norm", {{{4, 3, 2, 2}, {3}, {3}}, [](const Inputs& x) {
         Tensor rm = zeros({3}, kFloat64), rv = ones({3}, kFloat64);
         return batch_norm(x[0], x[1], x[2], rm, rv, /*training=*/true, 0.1, 1e-5);
       }}},
      {"log_softmax", {{{3, 5}}, [](const Inputs& x) { return log_softmax(x[0], 1); }}},
      {"softmax", {{{3, 4}}, [](const Inputs& x) { return softmax(x[0], 0); }}},
      {"nll_loss", {{{4, 5}}, [](const Inputs& x) {
         return nll_loss(log_softmax(x[0], 1), idx({1, 0, 4, 1}), Reduction::Mean);
       }}},
      {"embedding", {{{5, 3}}, [](const Inputs& x) { return embedding(x[0], idx({0, 4, 4, 2}, {2, 2})); }}},
  };
  return table;
}

Tensor make_input(const Shape& shape, bool positive, bool non_contiguous, Generator& gen) {
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
  t.set_requires_grad(true);
  return t;
}

class GradcheckTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GradcheckTest, ContiguousAndStrided) {
  const Case& c = cases().at(GetParam());
  for (bool non_contiguous : {false, true}) {
    Generator gen(42);
    Inputs inputs;
    for (const Shape& s : c.shapes) inputs.push_back(make_input(s, c.positive, non_contiguous, gen));
    GradcheckResult r = gradcheck(c.fn, inputs);
    EXPECT_TRUE(r.ok) << GetParam() << (non_contiguous ? " (non-contiguous)" : "") << ": " << r.message;
  }
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& kv : cases()) names.push_back(kv.first);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllOps, GradcheckTest, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

// Adding a differentiable op without a gradcheck case fails here.
TEST(GradcheckCoverage, EveryDifferentiableOpHasACase) {
  std::set<std::string> missing;
  for (const std::string& op : differentiable_op_names()) {
    if (!cases().count(op)) missing.insert(op);
  }
  EXPECT_TRUE(missing.empty()) << "ops without a gradcheck case: " << ::testing::PrintToString(missing);
  std::cout << "gradcheck coverage: " << differentiable_op_names().size() - missing.size() << " / "
            << differentiable_op_names().size() << " differentiable ops\n";
}

// gradcheck itself can fail: detach() hides half of d(x*x)/dx from the analytic gradient.
TEST(GradcheckSelfTest, DetectsAWrongGradient) {
  Generator gen(1);
  Tensor x = randn({3}, &gen, kFloat64);
  x.set_requires_grad(true);
  GradcheckResult r = gradcheck([](const Inputs& in) { return mul(in[0], in[0].detach()); }, {x});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("analytic"), std::string::npos);
}

// Every slot the tensor library exposes to autograd is filled (no op silently loses its graph).
TEST(GradcheckCoverage, EveryAutogradSlotIsRegistered) {
  const AutogradKernels& k = autograd_kernels();
  const auto* begin = reinterpret_cast<void* const*>(&k);
  const size_t n = sizeof(AutogradKernels) / sizeof(void*);
  for (size_t i = 0; i < n; ++i) EXPECT_NE(begin[i], nullptr) << "autograd slot " << i << " is empty";
}

}  // namespace
}  // namespace ember::autograd
