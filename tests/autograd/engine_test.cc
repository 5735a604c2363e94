// The engine and its seams: leaf/non-leaf basics, deterministic ready order, post-accumulate hooks,
// tensor hooks, final callbacks, accumulation, graph traversal, sparse gradients, error paths.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autograd/autograd.h"
#include "tensor/all.h"
#include "tensor/sparse.h"
#include "tests/common/error_matchers.h"

namespace ember::autograd {
namespace {

using ::testing::HasSubstr;

Tensor leaf(std::vector<float> v, Shape s = {}) {
  Tensor t = from_vector<float>(v, s);
  t.set_requires_grad(true);
  return t;
}

using ::ember::testing::error_of;

TEST(AutogradBasics, LeafGradFnDetachNoGrad) {
  Tensor x = leaf({1, 2, 3});
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(x.grad_fn(), nullptr);
  Tensor y = mul(x, x);
  EXPECT_FALSE(y.is_leaf());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward");
  EXPECT_FALSE(y.detach().requires_grad());
  EXPECT_TRUE(y.detach().is_alias_of(y));
  {
    NoGradGuard g;
    EXPECT_FALSE(mul(x, x).requires_grad());
  }
  sum(y).backward();
  EXPECT_TRUE(allclose(x.grad(), from_vector<float>({2, 4, 6})));
}

TEST(AutogradBasics, NonLeafGradIsRetainedOnlyOnRequest) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 3.0);
  y.retain_grad();
  Tensor z = mul(y, y);
  sum(z).backward();
  EXPECT_TRUE(allclose(y.grad(), from_vector<float>({6, 12})));
  EXPECT_TRUE(allclose(x.grad(), from_vector<float>({18, 36})));
  EXPECT_FALSE(z.grad().defined());
}

TEST(AutogradBasics, GradientsAccumulateOverTwoBackwards) {
  Tensor x = leaf({1, 2});
  sum(mul(x, 2.0)).backward();
  sum(mul(x, 3.0)).backward();
  EXPECT_TRUE(allclose(x.grad(), from_vector<float>({5, 5})));
}

TEST(AutogradBasics, SharedLeafUsedTwiceGetsSummedGradAndOneAccumulatorCall) {
  Tensor w = leaf({2});
  int calls = 0;
  register_post_accumulate_grad_hook(w, [&](const Tensor&) { ++calls; });
  Tensor y = add(mul(w, 3.0), mul(w, w));  // d/dw = 3 + 2w = 7
  y.backward();
  EXPECT_EQ(calls, 1);
  EXPECT_FLOAT_EQ(w.grad().item<float>(), 7.0f);
}

// Note [In-place gradient accumulation]: w = u + exp(u) passes w's gradient on to u unchanged;
// exp's share is added into that very tensor when nothing else holds it, and into a fresh one when
// something does (here a hook that keeps w's gradient), which must not change.
TEST(AutogradAccumulation, SumsIntoTheFirstGradientOnlyWhenNothingElseHoldsIt) {
  for (bool keep : {false, true}) {
    Tensor x = leaf({0.5f, 1.0f});
    Tensor u = mul(x, 2.0);
    Tensor w = add(u, exp(u));
    Tensor kept;
    const void* w_grad_data = nullptr;
    const void* u_grad_data = nullptr;
    w.register_hook([&](const Tensor& g) {
      w_grad_data = g.data_ptr();
      if (keep) kept = g;
      return Tensor();
    });
    u.register_hook([&](const Tensor& g) { u_grad_data = g.data_ptr(); return Tensor(); });
    sum(mul(w, 3.0)).backward();
    EXPECT_EQ(u_grad_data == w_grad_data, !keep) << "keep " << keep;
    if (keep) {
      EXPECT_TRUE(allclose(kept, from_vector<float>({3, 3})));
    }
    const std::vector<float> expected = {6 * (1 + std::exp(1.0f)), 6 * (1 + std::exp(2.0f))};
    EXPECT_TRUE(allclose(x.grad(), from_vector<float>(expected))) << "keep " << keep;
  }
}

TEST(AutogradHooks, PostAccumulateHooksFollowDeterministicReadyOrder) {
  // A 3-layer chain: gradients become ready from the last layer to the first.
  Tensor w1 = leaf({1}), w2 = leaf({2}), w3 = leaf({3});
  std::vector<std::string> order;
  register_post_accumulate_grad_hook(w1, [&](const Tensor&) { order.push_back("w1"); });
  register_post_accumulate_grad_hook(w2, [&](const Tensor&) { order.push_back("w2"); });
  register_post_accumulate_grad_hook(w3, [&](const Tensor&) { order.push_back("w3"); });
  Tensor x = from_vector<float>({1.5f});
  Tensor y = mul(mul(mul(x, w1), w2), w3);
  y.backward();
  EXPECT_EQ(order, (std::vector<std::string>{"w3", "w2", "w1"}));
  // Same graph built again: same order (the queue is keyed by sequence_nr, not by addresses).
  order.clear();
  mul(mul(mul(x, w1), w2), w3).backward();
  EXPECT_EQ(order, (std::vector<std::string>{"w3", "w2", "w1"}));
}

TEST(AutogradHooks, HookSeesAccumulatedGradRunsInRegistrationOrderAndCanBeRemoved) {
  Tensor w = leaf({1, 1});
  std::vector<std::string> seen;
  register_post_accumulate_grad_hook(w, [&](const Tensor& p) {
    seen.push_back("a:" + std::to_string(p.grad().sum().item<float>()));
  });
  uint64_t h = register_post_accumulate_grad_hook(w, [&](const Tensor&) { seen.push_back("b"); });
  sum(mul(w, 2.0)).backward();
  EXPECT_EQ(seen, (std::vector<std::string>{"a:4.000000", "b"}));
  remove_post_accumulate_grad_hook(w, h);
  seen.clear();
  sum(mul(w, 2.0)).backward();  // accumulated: 4 + 4
  EXPECT_EQ(seen, (std::vector<std::string>{"a:8.000000"}));
}

TEST(AutogradHooks, TensorHookCanReplaceTheGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 2.0);
  uint64_t h = y.register_hook([](const Tensor& g) { return mul(g, 10.0); });
  sum(y).backward();
  EXPECT_TRUE(allclose(x.grad(), from_vector<float>({20, 20})));
  y.remove_hook(h);
  x.mutable_grad() = Tensor();
  Tensor z = mul(x, 2.0);
  x.register_hook([](const Tensor& g) { return add(g, 1.0); });  // on the leaf's accumulator
  sum(z).backward();
  EXPECT_TRUE(allclose(x.grad(), from_vector<float>({3, 3})));
}

TEST(AutogradHooks, FinalCallbackQueuedFromHookRunsAfterAllNodes) {
  Tensor w1 = leaf({1}), w2 = leaf({2});
  std::vector<std::string> events;
  register_post_accumulate_grad_hook(w2, [&](const Tensor&) {
    events.push_back("hook w2");
    Engine::get_default_engine().queue_callback([&] {
      events.push_back("callback");
      EXPECT_TRUE(w1.grad().defined());  // the whole graph has run
    });
  });
  register_post_accumulate_grad_hook(w1, [&](const Tensor&) { events.push_back("hook w1"); });
  mul(mul(from_vector<float>({3}), w1), w2).backward();
  EXPECT_EQ(events, (std::vector<std::string>{"hook w2", "hook w1", "callback"}));
  EXPECT_THAT(error_of([] { Engine::get_default_engine().queue_callback([] {}); }),
              HasSubstr("only be queued during backward"));
}

TEST(AutogradHooks, ExceptionFromHookNamesTheNode) {
  Tensor w = leaf({1});
  register_post_accumulate_grad_hook(w, [](const Tensor&) { EMBER_THROW("boom"); });
  EXPECT_THAT(error_of([&] { mul(w, 2.0).backward(); }), HasSubstr("AccumulateGrad"));
  EXPECT_THAT(error_of([&] { mul(w, 2.0).backward(); }), HasSubstr("boom"));
}

TEST(GraphTraversal, FindsReachableAccumulators) {
  Tensor a = leaf({1}), b = leaf({2}), unused = leaf({3});
  Tensor y = add(mul(a, 2.0), exp(b));
  ReachableGraph g = collect_reachable({y});
  ASSERT_EQ(g.leaves.size(), 2u);
  EXPECT_TRUE(g.reaches(impl::grad_accumulator(a).get()));
  EXPECT_TRUE(g.reaches(impl::grad_accumulator(b).get()));
  EXPECT_FALSE(g.reaches(impl::grad_accumulator(unused).get()));
}

TEST(SparseGradients, AccumulateIntoDenseAndSparse) {
  Tensor w = zeros({4, 2});
  w.set_requires_grad(true);
  Tensor s1 = sparse_coo_tensor(from_vector<int64_t>({1, 3}, {1, 2}), ones({2, 2}), {4, 2});
  Tensor s2 = sparse_coo_tensor(from_vector<int64_t>({1}, {1, 1}), full({1, 2}, 2.0), {4, 2});
  AccumulateGrad::accumulate(w, Tensor(s1));
  ASSERT_TRUE(w.grad().is_sparse());
  AccumulateGrad::accumulate(w, Tensor(s2));
  Tensor c = coalesce(w.grad());
  EXPECT_EQ(sparse_nnz(c), 2);
  EXPECT_TRUE(allclose(to_dense(c), from_vector<float>({0, 0, 3, 3, 0, 0, 1, 1}, {4, 2})));
  AccumulateGrad::accumulate(w, ones({4, 2}));  // sparse + dense = dense
  EXPECT_FALSE(w.grad().is_sparse());
  EXPECT_TRUE(allclose(w.grad(), from_vector<float>({1, 1, 4, 4, 1, 1, 2, 2}, {4, 2})));
}

TEST(AutogradErrors, BackwardTwiceWithoutRetainGraph) {
  Tensor x = leaf({1, 2});
  Tensor y = sum(mul(x, x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();  // allowed: the first kept the graph
  EXPECT_THAT(error_of([&] { y.backward(); }), HasSubstr("backward through the graph a second time"));
  EXPECT_THAT(error_of([&] { y.backward(); }), HasSubstr("retain_graph=true"));
}

TEST(AutogradErrors, NonScalarWithoutGradOutput) {
  Tensor x = leaf({1, 2});
  EXPECT_THAT(error_of([&] { mul(x, 2.0).backward(); }),
              HasSubstr("grad can be implicitly created only for scalar outputs"));
  EXPECT_THAT(error_of([&] { mul(x, 2.0).backward(); }), HasSubstr("float32[2]"));
}

TEST(AutogradErrors, InPlaceModificationOfSavedTensor) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 2.0);
  Tensor z = mul(y, y);  // saves y
  add_(y, 1.0);          // y's version changes
  const std::string msg = error_of([&] { sum(z).backward(); });
  EXPECT_THAT(msg, HasSubstr("modified by an in-place operation"));
  EXPECT_THAT(msg, HasSubstr("MulBackward"));
  EXPECT_THAT(msg, HasSubstr("is at version 1; expected version 0"));
  EXPECT_THAT(msg, HasSubstr("[float32[2] on cpu]"));  // the saved tensor, as PyTorch names it
}

TEST(AutogradErrors, LeafInPlaceAndRequiresGradOnIntegers) {
  Tensor x = leaf({1, 2});
  EXPECT_THAT(error_of([&] { add_(x, 1.0); }), HasSubstr("leaf tensor that requires grad"));
  EXPECT_THAT(error_of([] { from_vector<int64_t>({1}).set_requires_grad(true); }),
              HasSubstr("floating point"));
  EXPECT_THAT(error_of([] { from_vector<float>({1}).backward(); }), HasSubstr("does not require grad"));
}

TEST(AutogradInPlace, InPlaceOnNonLeafRebasesHistory) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 2.0);
  mul_(y, 3.0);
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward");
  sum(y).backward();
  EXPECT_TRUE(allclose(x.grad(), from_vector<float>({6, 6})));
}

TEST(AutogradViews, GradientFlowsBackThroughViewChains) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = x.t().slice(0, 1, 3).reshape({4});  // elements 2,5,3,6
  sum(mul(v, from_vector<float>({1, 2, 3, 4}))).backward();
  EXPECT_TRUE(allclose(x.grad(), from_vector<float>({0, 1, 3, 0, 2, 4}, {2, 3})));
}

}  // namespace
}  // namespace ember::autograd
