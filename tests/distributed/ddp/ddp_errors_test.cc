// Errors users hit with DistributedDataParallel, each with a clear message, under mpirun
// with 2, 3 and 4 ranks. Every case is built so that all ranks take the same path: either the error
// is raised on every rank before any collective is in flight (nothing launched yet), or the failing
// check is itself behind a collective every rank joins (verify_params_across_processes). A fresh
// DDP is built for each test, and the fixture's TearDown keeps the ranks in step between tests.
// Uneven iteration counts (the collective timeout) live in ddp_uneven_test.cc: they break a group.
#include <string>

#include "tests/distributed/ddp/ddp_test_util.h"
#include "tests/distributed/ddp/reentrant_net.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class DdpErrors : public MpiTest {};

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

std::shared_ptr<nn::Sequential> small_mlp(uint64_t seed) {
  Generator g(seed);
  return nn::make_mlp({4, 8, 2}, &g);
}

Tensor input() { return ones({3, 4}); }

TEST_F(DdpErrors, ParameterMarkedReadyTwiceByReentrantBackward) {
  Generator g(1);
  auto ddp = std::make_shared<DistributedDataParallel>(std::make_shared<ReentrantNet>(&g));
  Tensor loss = sum(ddp->forward(input()));
  const std::string msg = error_of([&] { loss.backward(); });
  EXPECT_THAT(msg, HasSubstr("DistributedDataParallel (rank " + std::to_string(rank_) +
                             "): Expected to mark a variable ready only once"));
  EXPECT_THAT(msg, HasSubstr("Parameter at index 2 with name 'fc2.weight' has been marked as ready twice"));
  // The likely causes, as PyTorch lists them.
  EXPECT_THAT(msg, HasSubstr("Reused parameters in multiple reentrant backward passes"));
  EXPECT_THAT(msg, HasSubstr("static_graph=true"));
}

// `unused` never takes part in forward.
struct WithUnused : nn::Module {
  std::shared_ptr<nn::Linear> fc, unused;
  explicit WithUnused(Generator* g) : nn::Module("WithUnused") {
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 2, true, g));
    unused = register_module("unused", std::make_shared<nn::Linear>(4, 2, true, g));
  }
  Tensor forward(const Tensor& x) override { return fc->forward(x); }
};

TEST_F(DdpErrors, UnusedParametersWithoutFindUnusedFailTheNextForward) {
  Generator g(2);
  auto ddp = std::make_shared<DistributedDataParallel>(std::make_shared<WithUnused>(&g));
  // The bucket holding `unused` never completes: nothing is launched, nothing finalized.
  sum(ddp->forward(input())).backward();
  const std::string msg = error_of([&] { ddp->forward(input()); });
  const std::string r = std::to_string(rank_);
  EXPECT_THAT(msg, HasSubstr("Expected to have finished reduction in the prior iteration"));
  EXPECT_THAT(msg, HasSubstr("find_unused_parameters=true"));
  EXPECT_THAT(msg, HasSubstr("Parameter indices which did not receive grad for rank " + r + ": 2 3"));
  EXPECT_THAT(msg, HasSubstr("Parameters which did not receive grad for rank " + r +
                             ": unused.weight, unused.bias"));
  EXPECT_THAT(msg, Not(HasSubstr("fc.weight")));
  // As in PyTorch, the check comes before the one-time bucket rebuild (and its broadcast).
  EXPECT_FALSE(ddp->get_ddp_logging_data().has_rebuilt_buckets);
}

TEST_F(DdpErrors, DifferentParameterCountAcrossRanksFailsEveryRank) {
  const int odd = world_ - 1;
  Generator g(3);
  auto model = rank_ == odd ? nn::make_mlp({4, 8, 8, 2}, &g) : nn::make_mlp({4, 8, 2}, &g);
  const std::string msg = error_of([&] { DistributedDataParallel ddp(model); });
  if (rank_ == odd) {
    EXPECT_THAT(msg, HasSubstr("rank " + std::to_string(odd) + " has 6 parameters, rank 0 has 4"));
  } else {
    EXPECT_THAT(msg, HasSubstr("the parameters on rank(s) " + std::to_string(odd) +
                               " do not match rank 0's"));
  }
  EXPECT_THAT(msg, HasSubstr("verify_params_across_processes"));
}

TEST_F(DdpErrors, DifferentShapeAcrossRanksNamesParameterAndShapes) {
  const int odd = world_ - 1;
  Generator g(4);
  auto model = rank_ == odd ? nn::make_mlp({4, 9, 2}, &g) : nn::make_mlp({4, 8, 2}, &g);
  const std::string msg = error_of([&] { DistributedDataParallel ddp(model); });
  if (rank_ == odd) {
    EXPECT_THAT(msg, HasSubstr("parameter 0 ('0.weight') on rank " + std::to_string(odd) +
                               " has shape float32[9, 4], but on rank 0 it has shape float32[8, 4]"));
  } else {
    EXPECT_THAT(msg, HasSubstr("the parameters on rank(s) " + std::to_string(odd) +
                               " do not match rank 0's"));
  }
}

TEST_F(DdpErrors, FindUnusedWithNothingUnusedWarnsOnce) {
  DDPOptions options;
  options.find_unused_parameters = true;
  auto ddp = std::make_shared<DistributedDataParallel>(small_mlp(5), options);
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) sum(ddp->forward(input())).backward();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(err, "find_unused_parameters=true was specified, but no unused parameters"), 1)
      << err;
  EXPECT_THAT(err, HasSubstr("[rank " + std::to_string(rank_) + "] DistributedDataParallel warning"));
  EXPECT_THAT(err, HasSubstr("extra traversal of the autograd graph every iteration"));
}

TEST_F(DdpErrors, GradientDtypeMismatchNamesParameterAndDtypes) {
  auto model = small_mlp(6);
  auto ddp = std::make_shared<DistributedDataParallel>(model);
  model->named_parameters()[2].second.register_hook([](const Tensor& g) { return g.to(kFloat64); });
  ASSERT_EQ(model->named_parameters()[2].first, "2.weight");
  Tensor loss = sum(ddp->forward(input()));
  const std::string msg = error_of([&] { loss.backward(); });
  EXPECT_THAT(msg, HasSubstr("DistributedDataParallel (rank " + std::to_string(rank_) +
                             "): the gradient of parameter '2.weight' (index 2) is float64[2, 8]"));
  EXPECT_THAT(msg, HasSubstr("but its bucket view is float32[2, 8]"));
}

// PyTorch copies a gradient whose strides differ from its bucket view (and warns): results must
// not change. The gradients are zeroed each step as transposed tensors, and AccumulateGrad adds
// into them in place, so every 2-D gradient DDP sees is column-major.
TEST_F(DdpErrors, DifferentlyStridedGradientIsReducedCorrectlyAndWarnsOnce) {
  Scenario sc;
  sc.make_model = [](uint64_t seed) -> std::shared_ptr<nn::Module> {
    Generator g(seed);
    return nn::make_mlp({6, 16, 12, 4}, &g);
  };
  sc.make_batch = random_batches({6}, 4);
  auto model = sc.make_model(rank_ == 0 ? 1234 : 77 + rank_);
  auto ddp = std::make_shared<DistributedDataParallel>(model, sc.options);
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(sc.lr).momentum(sc.momentum));
  ::testing::internal::CaptureStderr();
  for (int step = 0; step < sc.steps; ++step) {
    for (const Tensor& p : model->parameters()) {
      p.mutable_grad() = p.dim() == 2 ? zeros({p.size(1), p.size(0)}).t() : zeros_like(p);
    }
    auto shard = rows(sc.make_batch(step, world_ * sc.per_rank), rank_ * sc.per_rank, sc.per_rank);
    sc.loss(ddp->forward(shard.first), shard.second).backward();
    EXPECT_FALSE(model->parameters()[0].grad().is_contiguous());
    opt.step();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(err, "but its bucket view has"), 1) << err;
  EXPECT_THAT(err, HasSubstr("it is copied correctly, but this may hurt performance"));
  EXPECT_TRUE(parameters_match(model->parameters(), reference_parameters(sc, world_), 1e-5));
}

// A stride on a dimension of size 1 says nothing about the layout: a [1, 16] weight whose gradient
// arrives as a transposed [16, 1] (strides (1, 1) instead of (16, 1)) is laid out as its bucket view,
// so there is nothing to warn about.
TEST_F(DdpErrors, StridesOfSizeOneDimensionsDoNotWarn) {
  Generator g(7);
  auto model = nn::make_mlp({6, 16, 1}, &g);
  auto ddp = std::make_shared<DistributedDataParallel>(model);
  ::testing::internal::CaptureStderr();
  for (int step = 0; step < 2; ++step) {
    for (const Tensor& p : model->parameters()) {
      p.mutable_grad() = p.dim() == 2 && p.size(0) == 1 ? zeros({p.size(1), p.size(0)}).t() : zeros_like(p);
    }
    Tensor x = randn({4, 6}, &g);
    sum(ddp->forward(x)).backward();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(err, "but its bucket view has"), 0) << err;
}

struct NoState {};
FuturePtr never_called(NoState&, GradBucket&) { return nullptr; }

TEST_F(DdpErrors, RegisterCommHookTwice) {
  auto ddp = std::make_shared<DistributedDataParallel>(small_mlp(7));
  ddp->register_comm_hook<NoState>(std::make_shared<NoState>(), never_called, "first hook");
  const std::string msg = error_of([&] {
    ddp->register_comm_hook<NoState>(std::make_shared<NoState>(), never_called, "second hook");
  });
  EXPECT_THAT(msg, HasSubstr("a communication hook ('first hook') is already registered; "
                             "register_comm_hook can only be called once"));
  EXPECT_EQ(ddp->get_ddp_logging_data().comm_hook, "first hook");
}

TEST_F(DdpErrors, RegisterCommHookAfterFirstBackward) {
  auto ddp = std::make_shared<DistributedDataParallel>(small_mlp(8));
  sum(ddp->forward(input())).backward();
  const std::string msg = error_of([&] {
    ddp->register_comm_hook<NoState>(std::make_shared<NoState>(), never_called, "late hook");
  });
  EXPECT_THAT(msg, HasSubstr("register_comm_hook: must be called before the first forward/backward"));
  EXPECT_EQ(ddp->get_ddp_logging_data().comm_hook, "allreduce_by_sum (default)");
}

TEST_F(DdpErrors, ModuleWithoutTrainableParameters) {
  const std::string expected =
      "DistributedDataParallel is not needed when a module doesn't have any parameter that requires "
      "a gradient (rank " + std::to_string(rank_) + ")";
  EXPECT_THAT(error_of([] { DistributedDataParallel ddp(std::make_shared<nn::ReLU>()); }),
              HasSubstr(expected));
  auto frozen = small_mlp(9);
  for (const Tensor& p : frozen->parameters()) p.set_requires_grad(false);
  EXPECT_THAT(error_of([&] { DistributedDataParallel ddp(frozen); }), HasSubstr(expected));
  DDPOptions ignore_all;
  ignore_all.parameters_to_ignore = {"0.weight", "0.bias", "2.weight", "2.bias"};
  EXPECT_THAT(error_of([&] { DistributedDataParallel ddp(small_mlp(9), ignore_all); }),
              HasSubstr(expected));
}

}  // namespace
}  // namespace ember::distributed::testing
