// The stateless comm hooks under mpirun: allreduce_hook is bit-identical to DDP without a hook;
// fp16/bf16 hooks and wrappers stay within their format's tolerance; noop keeps local gradients;
// a throwing hook surfaces from backward naming the bucket; registration errors.
#include "distributed/hooks/default_hooks.h"

#include <iterator>
#include <string>
#include <vector>

#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

std::shared_ptr<nn::Module> mlp(uint64_t seed) {
  Generator g(seed);
  return nn::make_mlp({6, 16, 12, 4}, &g);
}

// Small buckets so several hooks run per iteration (and the in-order launch is exercised).
Scenario scenario(std::function<void(DistributedDataParallel&)> setup = nullptr) {
  Scenario sc;
  sc.make_model = mlp;
  sc.make_batch = random_batches({6}, 4);
  sc.options.bucket_cap_mb = 0.0005;
  sc.options.first_bucket_mb = 0.0005;
  sc.setup = std::move(setup);
  return sc;
}

std::vector<Tensor> train(const Scenario& sc, int rank, int world) {
  return train_ddp(sc, rank, world)->module()->parameters();
}

::testing::AssertionResult bit_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    if (!equal(a[i], b[i])) {
      return ::testing::AssertionFailure() << "parameter " << i << " differs by up to "
                                           << max(abs(sub(a[i], b[i]))).item<float>();
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult close(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double rtol,
                                 double atol) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (!allclose(a[i], b[i], rtol, atol)) {
      return ::testing::AssertionFailure() << "parameter " << i << " differs by up to "
                                           << max(abs(sub(a[i], b[i]))).item<float>();
    }
  }
  return ::testing::AssertionSuccess();
}

using HookFn = FuturePtr (*)(ProcessGroup&, GradBucket&);

std::function<void(DistributedDataParallel&)> with_hook(HookFn hook, const char* name) {
  return [hook, name](DistributedDataParallel& ddp) {
    ddp.register_comm_hook<ProcessGroup>(get_default_group(), hook, name);
  };
}

class DefaultHooks : public MpiTest {};

TEST_F(DefaultHooks, AllreduceHookBitIdenticalToNoHook) {
  auto plain = train(scenario(), rank_, world_);
  Scenario sc = scenario(with_hook(allreduce_hook, "allreduce_hook"));
  auto ddp = train_ddp(sc, rank_, world_);
  EXPECT_GT(ddp->get_ddp_logging_data().num_buckets, 1);
  EXPECT_EQ(ddp->get_ddp_logging_data().comm_hook, "allreduce_hook");
  EXPECT_TRUE(bit_identical(ddp->module()->parameters(), plain));
}

TEST_F(DefaultHooks, BuiltinAllreduceBitIdenticalToNoHook) {
  auto plain = train(scenario(), rank_, world_);
  auto hooked = train(scenario([](DistributedDataParallel& ddp) {
                        ddp.register_builtin_comm_hook(BuiltinCommHookType::kAllreduce);
                      }),
                      rank_, world_);
  EXPECT_TRUE(bit_identical(hooked, plain));
}

TEST_F(DefaultHooks, Fp16WithinHalfTolerance) {
  auto plain = train(scenario(), rank_, world_);
  auto hooked = train(scenario(with_hook(fp16_compress_hook, "fp16")), rank_, world_);
  EXPECT_TRUE(close(hooked, plain, 5e-3, 1e-3));
  auto builtin = train(scenario([](DistributedDataParallel& ddp) {
                         ddp.register_builtin_comm_hook(BuiltinCommHookType::kFp16Compress);
                       }),
                       rank_, world_);
  EXPECT_TRUE(bit_identical(builtin, hooked));
}

TEST_F(DefaultHooks, Bf16WithinBfloatTolerance) {
  auto plain = train(scenario(), rank_, world_);
  auto hooked = train(scenario(with_hook(bf16_compress_hook, "bf16")), rank_, world_);
  EXPECT_TRUE(close(hooked, plain, 4e-2, 1e-2));
  bool any_diff = false;
  for (size_t i = 0; i < plain.size(); ++i) any_diff = any_diff || !equal(plain[i], hooked[i]);
  EXPECT_TRUE(any_diff) << "bf16 compression changed nothing: was the hook run?";
}

TEST_F(DefaultHooks, CompressWrappersAroundAllreduce) {
  auto plain = train(scenario(), rank_, world_);
  auto fp16 = train(scenario([](DistributedDataParallel& ddp) {
                      ddp.register_comm_hook<ProcessGroup>(get_default_group(),
                                                           fp16_compress_wrapper(allreduce_hook), "fp16 wrap");
                    }),
                    rank_, world_);
  EXPECT_TRUE(close(fp16, plain, 5e-3, 1e-3));
  auto bf16 = train(scenario([](DistributedDataParallel& ddp) {
                      ddp.register_comm_hook<ProcessGroup>(get_default_group(),
                                                           bf16_compress_wrapper(allreduce_hook), "bf16 wrap");
                    }),
                    rank_, world_);
  EXPECT_TRUE(close(bf16, plain, 4e-2, 1e-2));
}

TEST_F(DefaultHooks, WrapperDirectlyOnABucket) {
  // Rank r holds (r + 1) * [1, 2, ..., 8]: the average is exact in half precision.
  Tensor buffer = mul(arange(1, 9), static_cast<double>(rank_ + 1));
  GradBucket bucket(0, 1, buffer, {0}, {8}, {{8}}, {});
  FuturePtr f = fp16_compress_wrapper(allreduce_hook)(*pg_, bucket);
  Tensor result = f->value().at(0);
  EXPECT_TRUE(result.is_same(buffer));
  EXPECT_EQ(result.dtype(), kFloat32);
  const double mean_factor = (world_ + 1) / 2.0;
  EXPECT_TRUE(allclose(result, mul(arange(1, 9), mean_factor), 1e-3, 1e-3));
}

TEST_F(DefaultHooks, NoopLeavesLocalGradientsUntouched) {
  auto model = mlp(1234);
  auto reference = mlp(1234);
  auto ddp = std::make_shared<DistributedDataParallel>(model);
  ddp->register_builtin_comm_hook(BuiltinCommHookType::kNoop);
  auto batch = random_batches({6}, 4)(0, world_ * 4);
  auto shard = rows(batch, rank_ * 4, 4);
  nn::functional::cross_entropy(ddp->forward(shard.first), shard.second).backward();
  nn::functional::cross_entropy(reference->forward(shard.first), shard.second).backward();
  auto got = model->parameters(), want = reference->parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].grad().defined());
    EXPECT_TRUE(equal(got[i].grad(), want[i].grad())) << "parameter " << i;
  }
  // The shards differ, so the local gradients differ across ranks: nothing was averaged.
  std::vector<Tensor> sum{got[0].grad().clone()};
  pg_->allreduce(sum)->wait();
  EXPECT_FALSE(equal(sum[0], mul(got[0].grad(), static_cast<double>(world_))));
}

TEST_F(DefaultHooks, NoopHookReturnsTheLocalBuffer) {
  Tensor buffer = full({5}, static_cast<double>(rank_));
  GradBucket bucket(0, 1, buffer, {0}, {5}, {{5}}, {});
  FuturePtr f = noop_hook(*pg_, bucket);
  ASSERT_TRUE(f->completed());
  EXPECT_TRUE(f->value().at(0).is_same(buffer));
  EXPECT_TRUE(equal(buffer, full({5}, static_cast<double>(rank_))));
}

TEST_F(DefaultHooks, ThrowingHookNamesTheBucket) {
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(1234));
  ddp->register_comm_hook<ProcessGroup>(
      pg_,
      [](ProcessGroup&, GradBucket& bucket) -> FuturePtr {
        EMBER_THROW("deliberate failure in bucket index ", bucket.index());
      },
      "throwing_hook");
  auto batch = random_batches({6}, 4)(0, world_ * 4);
  auto shard = rows(batch, rank_ * 4, 4);
  try {
    nn::functional::cross_entropy(ddp->forward(shard.first), shard.second).backward();
    ADD_FAILURE() << "backward did not throw";
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    EXPECT_THAT(msg, ::testing::HasSubstr("comm hook 'throwing_hook' failed on bucket 0"));
    EXPECT_THAT(msg, ::testing::HasSubstr("deliberate failure"));
  }
}

// Note [Built-in comm hooks]: the enum, the table, the names and the factory come from one list.
TEST_F(DefaultHooks, BuiltinTableGeneratesEnumNamesAndFactory) {
  const std::vector<std::string> expected{"allreduce", "fp16", "bf16", "noop"};
  ASSERT_EQ(std::size(kBuiltinCommHooks), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const BuiltinCommHookInfo& row = kBuiltinCommHooks[i];
    EXPECT_EQ(row.name, expected[i]);
    EXPECT_EQ(static_cast<size_t>(row.type), i);
    EXPECT_NE(std::string(row.help), "");
    EXPECT_EQ(make_builtin_comm_hook(row.type, pg_)->name(), builtin_comm_hook_name(row.type));
  }
  EXPECT_STREQ(builtin_comm_hook_name(BuiltinCommHookType::kFp16Compress), "builtin fp16_compress_hook");
  EXPECT_STREQ(builtin_comm_hook_name(BuiltinCommHookType::kNoop), "builtin noop_hook");
}

TEST_F(DefaultHooks, RegisteringTwiceOrLateIsAnError) {
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(1234));
  ddp->register_builtin_comm_hook(BuiltinCommHookType::kAllreduce);
  EXPECT_THROW(ddp->register_builtin_comm_hook(BuiltinCommHookType::kFp16Compress), Error);

  auto late = std::make_shared<DistributedDataParallel>(mlp(1234));
  auto batch = random_batches({6}, 4)(0, world_ * 4);
  auto shard = rows(batch, rank_ * 4, 4);
  nn::functional::cross_entropy(late->forward(shard.first), shard.second).backward();
  EXPECT_THROW(late->register_builtin_comm_hook(BuiltinCommHookType::kAllreduce), Error);
}

}  // namespace
}  // namespace ember::distributed::testing
