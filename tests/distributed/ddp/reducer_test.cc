// The Reducer's bookkeeping in one process, on a FakeProcessGroup that plays two ranks holding the
// same data (tests/distributed/fake_process_group.h): what it launches, in which order, what it
// reports, and what it does when a reduction fails. The mpirun suites check the same DDP against
// real ranks; these check its decisions where a test can see every collective.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/ddp/distributed_data_parallel.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tensor/all.h"
#include "tests/distributed/ddp/reentrant_net.h"
#include "tests/distributed/fake_process_group.h"
#include "tests/common/error_matchers.h"

namespace ember::distributed::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

using ::ember::testing::error_of;

// Parameters 0..5: fc0.weight (32 elements), fc0.bias (8), fc1.weight (48), fc1.bias (6),
// fc2.weight (12), fc2.bias (2): every bucket of one parameter is known by its size.
std::shared_ptr<nn::Module> mlp(uint64_t seed) {
  Generator g(seed);
  return nn::make_mlp({4, 8, 6, 2}, &g);
}

Tensor batch() { return arange(0, 20, 1, kFloat32).reshape({5, 4}).div(Scalar(10.0)); }

class ReducerTest : public ::testing::Test {
 protected:
  std::shared_ptr<FakeProcessGroup> group_ = std::make_shared<FakeProcessGroup>(0, 2);

  std::shared_ptr<DistributedDataParallel> ddp(std::shared_ptr<nn::Module> module, DDPOptions options = {}) {
    options.process_group = group_;
    return std::make_shared<DistributedDataParallel>(std::move(module), options);
  }

  // The sizes of the allreduces issued since the last clear_calls(), in issue order.
  std::vector<int64_t> allreduce_sizes() const {
    std::vector<int64_t> sizes;
    for (const auto& call : group_->calls()) {
      if (call.op == OpType::kAllreduce) sizes.push_back(call.tensors.at(0).numel());
    }
    return sizes;
  }
};

// Two ranks with the same batch average to that batch's gradient: DDP's parameters after k steps
// are a single process's, bit for bit (the fake's SUM doubles, DDP halves: both exact).
TEST_F(ReducerTest, TwoIdenticalRanksTrainAsOneProcess) {
  auto reference = mlp(7);
  auto wrapped = ddp(mlp(7));
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD ddp_opt(wrapped->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    ref_opt.zero_grad();
    sum(reference->forward(batch())).backward();
    ref_opt.step();
    ddp_opt.zero_grad();
    sum(wrapped->forward(batch())).backward();
    ddp_opt.step();
  }
  const auto expected = reference->parameters(), got = wrapped->parameters();
  ASSERT_EQ(expected.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(equal(expected[i], got[i])) << "parameter " << i;
}

// The constructor's model check (rank 0's parameter metadata broadcast in two parts, then one
// allreduce of who failed) and its state broadcast come before any bucket.
TEST_F(ReducerTest, ConstructionChecksTheModelAndBroadcastsItsState) {
  auto wrapped = ddp(mlp(1));
  EXPECT_GE(group_->count(OpType::kBroadcast), 3u);
  EXPECT_EQ(group_->count(OpType::kAllreduce), 1u);
  EXPECT_EQ(group_->calls().at(2).op, OpType::kAllreduce);
}

// Until the rebuild, one bucket per dtype; after the first iteration the buckets follow the order
// the gradients became ready in (step 13), within the limits.
TEST_F(ReducerTest, RebuildsBucketsInTheOrderGradientsBecameReady) {
  DDPOptions options;
  options.bucket_cap_mb = 1e-6;  // one parameter per bucket after the rebuild
  options.first_bucket_mb = 1e-6;
  auto wrapped = ddp(mlp(2), options);
  group_->clear_calls();
  sum(wrapped->forward(batch())).backward();
  EXPECT_THAT(allreduce_sizes(), ElementsAre(108));  // every parameter in one bucket
  EXPECT_TRUE(wrapped->reducer().will_rebuild_buckets());

  group_->clear_calls();
  sum(wrapped->forward(batch())).backward();
  const DDPLoggingData data = wrapped->reducer().logging_data();
  EXPECT_TRUE(data.has_rebuilt_buckets);
  ASSERT_EQ(data.num_buckets, 6);
  // The last layer's gradients are ready first, so they launch first.
  const std::vector<int64_t> sizes = allreduce_sizes();
  ASSERT_EQ(sizes.size(), 6u);
  EXPECT_TRUE(sizes[0] == 12 || sizes[0] == 2) << sizes[0];
  EXPECT_TRUE(sizes[5] == 32 || sizes[5] == 8) << sizes[5];
}

// A layout whose first bucket becomes ready last: the others wait for it, and the collectives go
// out strictly in bucket order, as every rank must issue them.
TEST_F(ReducerTest, LaunchesBucketsInOrderWhateverOrderTheyBecomeReady) {
  auto wrapped = ddp(mlp(3));
  wrapped->reducer().load_rebuilt_buckets({{0}, {1}, {2}, {3}, {4}, {5}});
  group_->clear_calls();
  group_->hold();
  // finalize_backward waits for the held reductions: release them from another thread.
  std::thread releaser([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (group_->held() < 6 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    group_->release_held();
  });
  sum(wrapped->forward(batch())).backward();
  releaser.join();
  EXPECT_THAT(allreduce_sizes(), ElementsAre(32, 8, 48, 6, 12, 2));
}

// find_unused_parameters: the used-parameter map is one more allreduce, and the unused
// parameters are named.
struct WithUnused : nn::Module {
  std::shared_ptr<nn::Linear> fc, unused;
  WithUnused() : nn::Module("WithUnused") {
    Generator g(4);
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 2, true, &g));
    unused = register_module("unused", std::make_shared<nn::Linear>(4, 3, true, &g));
  }
  Tensor forward(const Tensor& x) override { return fc->forward(x); }
};

TEST_F(ReducerTest, FindUnusedParametersReducesTheUsedMapAndNamesTheUnused) {
  DDPOptions options;
  options.find_unused_parameters = true;
  auto wrapped = ddp(std::make_shared<WithUnused>(), options);
  group_->clear_calls();
  sum(wrapped->forward(batch())).backward();
  const DDPLoggingData data = wrapped->reducer().logging_data();
  EXPECT_THAT(data.unused_parameter_names, ElementsAre("unused.weight", "unused.bias"));
  // The bucket and the used map (one int per parameter: 4 of them).
  std::vector<int64_t> sizes = allreduce_sizes();
  std::sort(sizes.begin(), sizes.end());
  EXPECT_THAT(sizes, ElementsAre(4, 25));
}

// skip_all_reduce_unused_params with static_graph: after the first iteration the buckets of the
// branch no rank uses issue no allreduce, and the gradients are those the allreduces would give.
TEST_F(ReducerTest, SkipAllReduceUnusedParamsSkipsTheUnusedBranchesBuckets) {
  struct Run {
    std::shared_ptr<FakeProcessGroup> group = std::make_shared<FakeProcessGroup>(0, 2);
    std::shared_ptr<DistributedDataParallel> ddp;
    std::vector<int64_t> allreduces_per_step, reduced_per_step;
  };
  auto train = [](bool skip) {
    Run run;
    DDPOptions options;
    options.process_group = run.group;
    options.static_graph = true;
    options.skip_all_reduce_unused_params = skip;
    options.bucket_cap_mb = 1e-6;  // one parameter per bucket after the rebuild
    options.first_bucket_mb = 1e-6;
    run.ddp = std::make_shared<DistributedDataParallel>(std::make_shared<WithUnused>(), options);
    for (int step = 0; step < 4; ++step) {
      run.group->clear_calls();
      for (auto& p : run.ddp->parameters()) p.mutable_grad() = Tensor();
      sum(run.ddp->forward(batch())).backward();
      run.allreduces_per_step.push_back(static_cast<int64_t>(run.group->count(OpType::kAllreduce)));
      run.reduced_per_step.push_back(run.ddp->reducer().logging_data().num_buckets_reduced);
    }
    return run;
  };
  const Run off = train(false), on = train(true);
  // The constructor's one bucket serves step 1 (static_graph's first, which records nothing) and
  // step 2 (which records the gradient order); the forward of step 3 rebuilds the buckets to one
  // parameter each, four in all, two of them the unused branch's.
  EXPECT_THAT(off.reduced_per_step, ElementsAre(1, 1, 4, 4));
  EXPECT_THAT(on.reduced_per_step, ElementsAre(1, 1, 2, 2));
  EXPECT_EQ(on.allreduces_per_step[1], off.allreduces_per_step[1]);
  EXPECT_EQ(on.allreduces_per_step[3] + 2, off.allreduces_per_step[3]);
  const auto a = off.ddp->named_parameters(), b = on.ddp->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor ga = a[i].second.grad(), gb = b[i].second.grad();
    ASSERT_EQ(ga.defined(), gb.defined()) << a[i].first;
    if (ga.defined()) {
      EXPECT_TRUE(equal(ga, gb)) << a[i].first;
    }
  }
}

// A parameter with sparse gradients needs a bucket of its own (sparse tensors do not flatten into
// a dense bucket): a layout that groups it with others is refused, naming it.
struct SparseAndDense : nn::Module {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::Linear> fc;
  SparseAndDense() : nn::Module("SparseAndDense") {
    Generator g(8);
    emb = register_module("emb", std::make_shared<nn::Embedding>(10, 4, /*sparse=*/true, &g));
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 2, true, &g));
  }
  Tensor forward(const Tensor& x) override { return fc->forward(emb->forward(x)); }
};

TEST_F(ReducerTest, ASparseGradientParameterSharingABucketIsRefused) {
  auto wrapped = ddp(std::make_shared<SparseAndDense>());
  try {
    wrapped->reducer().load_rebuilt_buckets({{0, 1}, {2}});
    FAIL() << "a sparse parameter was put in a bucket with another";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("bucket 0 holds parameter 'emb.weight', which expects a sparse gradient, "
                                    "with 1 others: a parameter with sparse gradients needs a bucket of its own"));
  }
  wrapped->reducer().load_rebuilt_buckets({{0}, {1, 2}});  // on its own: accepted
}

// A parameter whose gradient never came leaves the last reduction unfinished; the next forward
// says so, with advice that fits the configuration (PyTorch's three messages).
struct TwoHeads : nn::Module {
  std::shared_ptr<nn::Linear> a, b;
  bool use_b = true;
  TwoHeads() : nn::Module("TwoHeads") {
    Generator g(9);
    a = register_module("a", std::make_shared<nn::Linear>(4, 2, true, &g));
    b = register_module("b", std::make_shared<nn::Linear>(4, 2, true, &g));
  }
  Tensor forward(const Tensor& x) override { return use_b ? add(a->forward(x), b->forward(x)) : a->forward(x); }
};

TEST_F(ReducerTest, AnUnfinishedReductionsAdviceFitsTheConfiguration) {
  auto heads = std::make_shared<TwoHeads>();
  {  // Neither option: suggest find_unused_parameters.
    heads->use_b = false;
    auto wrapped = ddp(heads);
    sum(wrapped->forward(batch())).backward();
    const std::string msg = error_of([&] { wrapped->forward(batch()); });
    EXPECT_THAT(msg, HasSubstr("You can enable unused parameter detection by setting find_unused_parameters=true"));
    EXPECT_THAT(msg, HasSubstr("Parameters which did not receive grad for rank 0: b.weight, b.bias"));
  }
  {  // find_unused_parameters on: a loss not made from DDP's outputs is the likely cause (here a
     // backward through head a alone, though the outputs reach both heads).
    heads->use_b = true;
    DDPOptions options;
    options.find_unused_parameters = true;
    auto wrapped = ddp(heads, options);
    wrapped->forward(batch());
    sum(heads->a->forward(batch())).backward();
    const std::string msg = error_of([&] { wrapped->forward(batch()); });
    EXPECT_THAT(msg, HasSubstr("Since find_unused_parameters=true is enabled, this likely means that not all "
                               "forward outputs participate in computing loss"));
    EXPECT_THAT(msg, Not(HasSubstr("You can enable unused parameter detection")));
  }
  {  // static_graph: the graph changed after the first iteration.
    heads->use_b = true;
    DDPOptions options;
    options.static_graph = true;
    auto wrapped = ddp(heads, options);
    sum(wrapped->forward(batch())).backward();
    heads->use_b = false;
    sum(wrapped->forward(batch())).backward();
    const std::string msg = error_of([&] { wrapped->forward(batch()); });
    EXPECT_THAT(msg, HasSubstr("your training graph has changed in this iteration"));
    EXPECT_THAT(msg, HasSubstr("not compatible with static_graph=true"));
    EXPECT_THAT(msg, Not(HasSubstr("find_unused_parameters=true")));
  }
}

// A reduction that fails names its bucket and parameters, and says the step must be skipped.
TEST_F(ReducerTest, AFailedReductionNamesItsBucket) {
  auto wrapped = ddp(mlp(5));
  group_->fail_next(OpType::kAllreduce, "injected failure");
  try {
    sum(wrapped->forward(batch())).backward();
    FAIL() << "backward succeeded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("DistributedDataParallel (rank 0): the reduction of bucket 0 of 1"));
    EXPECT_THAT(e.what(), HasSubstr("injected failure"));
    EXPECT_THAT(e.what(), HasSubstr("skip this optimizer step"));
  }
}

// A failure half-way through the buckets: the third of six fails, the others still complete and
// are waited for, the error names the third, no gradient is written back, and the next iteration
// runs clean with every bucket (finalize resets the state whatever happened).
TEST_F(ReducerTest, AFailureHalfWayLeavesTheNextIterationClean) {
  auto wrapped = ddp(mlp(5));
  wrapped->reducer().load_rebuilt_buckets({{5}, {4}, {3}, {2}, {1}, {0}});
  group_->clear_calls();
  group_->fail_next(OpType::kAllreduce, "injected failure", /*skip=*/2);
  const std::string msg = error_of([&] { sum(wrapped->forward(batch())).backward(); });
  EXPECT_THAT(msg, HasSubstr("the reduction of bucket 2 of 6 (1 parameters: 2.bias) did not complete"));
  EXPECT_THAT(msg, HasSubstr("injected failure"));
  EXPECT_EQ(group_->count(OpType::kAllreduce), 6u);  // every bucket was launched
  for (const Tensor& p : wrapped->parameters()) {  // the local, unreduced gradients stay
    EXPECT_TRUE(p.grad().defined());
  }
  // The next iteration: all six reduce, and the result is the two identical ranks' average.
  group_->clear_calls();
  for (Tensor& p : wrapped->parameters()) p.mutable_grad() = Tensor();
  sum(wrapped->forward(batch())).backward();
  EXPECT_EQ(group_->count(OpType::kAllreduce), 6u);
  EXPECT_EQ(wrapped->reducer().logging_data().num_buckets_reduced, 6);
  auto reference = mlp(5);
  sum(reference->forward(batch())).backward();
  const auto want = reference->parameters(), got = wrapped->parameters();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(equal(got[i].grad(), want[i].grad())) << "parameter " << i;
}

// A parameter whose gradient hook fires twice in one backward (reentrant_net.h).
TEST_F(ReducerTest, AParameterMarkedReadyTwiceIsNamed) {
  Generator g(6);
  auto wrapped = ddp(std::make_shared<ReentrantNet>(&g));
  group_->clear_calls();
  Tensor loss = sum(wrapped->forward(batch()));
  try {
    loss.backward();
    FAIL() << "backward succeeded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("Expected to mark a variable ready only once"));
    EXPECT_THAT(e.what(), HasSubstr("'fc2.weight' has been marked as ready twice"));
  }
  EXPECT_EQ(group_->count(OpType::kAllreduce), 0u);
}

}  // namespace
}  // namespace ember::distributed::testing
