// PowerSGD under mpirun: exact reconstruction of rank <= r gradients, vanilla allreduce before
// start_powerSGD_iter (bit-identical to allreduce_hook through DDP), error feedback bounding the
// accumulated error, the uncompressed path, state save/restore continuing bit-identically, the
// batched hook on a zero-padded bucket, the batched hook re-orthogonalising a warm-started Q, both
// hooks under the fp16/bf16 compression wrappers, and both returning without blocking the caller.
#include "distributed/hooks/powersgd_hook.h"

#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <thread>

#include "distributed/hooks/default_hooks.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

// A fresh single bucket holding `grads` back to back (what the Reducer would hand a hook).
GradBucket make_bucket(const std::vector<Tensor>& grads) {
  std::vector<size_t> offsets, lengths;
  std::vector<Shape> sizes;
  std::vector<Tensor> flat;
  size_t off = 0;
  for (const Tensor& g : grads) {
    offsets.push_back(off);
    lengths.push_back(static_cast<size_t>(g.numel()));
    sizes.push_back(g.sizes());
    flat.push_back(g.reshape({-1}));
    off += static_cast<size_t>(g.numel());
  }
  return GradBucket(0, 1, cat(flat, 0).contiguous(), offsets, lengths, sizes, {});
}

Tensor flat_of(const std::vector<Tensor>& grads) {
  std::vector<Tensor> flat;
  for (const Tensor& g : grads) flat.push_back(g.reshape({-1}));
  return cat(flat, 0);
}

using Hook = FuturePtr (*)(PowerSGDState&, GradBucket&);

Tensor run(Hook hook, PowerSGDState& state, const std::vector<Tensor>& grads) {
  GradBucket bucket = make_bucket(grads);
  return hook(state, bucket)->value().at(0).clone();
}

// Rank r's gradients: a rank-`k` matrix U V_r^T (U shared by all ranks, so the sum has rank k too)
// and a vector.
std::vector<Tensor> low_rank_grads(int rank, int64_t k) {
  Generator gu(7), gv(100 + rank), gb(200 + rank);
  return {mm(randn({16, k}, &gu), transpose(randn({12, k}, &gv), 0, 1)), randn({5}, &gb)};
}

// The average over ranks of per-rank gradients, computed locally.
template <typename F>
Tensor average(int world, F grads_of_rank) {
  Tensor sum;
  for (int r = 0; r < world; ++r) {
    Tensor f = flat_of(grads_of_rank(r));
    sum = sum.defined() ? add(sum, f) : f;
  }
  return div(sum, static_cast<double>(world));
}

double rel_error(const Tensor& got, const Tensor& want) {
  return max(abs(sub(got, want))).item<float>() / std::max(1e-12f, max(abs(want)).item<float>());
}

class PowerSGD : public MpiTest {};

TEST_F(PowerSGD, MinimumStartRule) {
  EXPECT_THROW(PowerSGDState(pg_, PowerSGDOptions().start_powerSGD_iter(1)), Error);
  EXPECT_THROW(PowerSGDState(pg_, PowerSGDOptions().start_powerSGD_iter(0).warm_start(false)), Error);
  EXPECT_THROW(PowerSGDState(pg_, PowerSGDOptions().start_powerSGD_iter(1).use_error_feedback(false)), Error);
  EXPECT_NO_THROW(PowerSGDState(pg_,
      PowerSGDOptions().start_powerSGD_iter(0).use_error_feedback(false).warm_start(false)));
  EXPECT_NO_THROW(PowerSGDState(pg_, PowerSGDOptions().start_powerSGD_iter(2)));
  EXPECT_THROW(PowerSGDState(pg_,
      PowerSGDOptions().matrix_approximation_rank(0).start_powerSGD_iter(2)), Error);
}

TEST_F(PowerSGD, OrthogonalizeGivesOrthonormalColumns) {
  Generator g(3);
  Tensor m = randn({10, 3}, &g);
  orthogonalize(m);
  EXPECT_TRUE(allclose(mm(transpose(m, 0, 1), m), eye(3), 1e-5, 1e-5));
  Tensor z = zeros({4, 2});
  orthogonalize(z);
  EXPECT_TRUE(equal(z, zeros({4, 2})));  // no NaN from a zero column
}

TEST_F(PowerSGD, ExactForGradientsOfRankAtMostR) {
  for (int64_t k : {1, 2}) {
    PowerSGDState state(pg_,
        PowerSGDOptions().matrix_approximation_rank(k).start_powerSGD_iter(0).use_error_feedback(false).warm_start(false));
    Tensor got = run(powerSGD_hook, state, low_rank_grads(rank_, k));
    Tensor want = average(world_, [k](int r) { return low_rank_grads(r, k); });
    EXPECT_LT(rel_error(got, want), 1e-5) << "rank " << k;
    auto [rate, before, after] = state.compression_stats();
    EXPECT_EQ(before, 16 * 12 + 5);
    EXPECT_EQ(after, (16 + 12) * k + 5);
    EXPECT_NEAR(rate, static_cast<double>(before) / after, 1e-12);
  }
}

TEST_F(PowerSGD, ExactWithErrorFeedbackAndWarmStart) {
  PowerSGDState state(pg_, PowerSGDOptions().start_powerSGD_iter(2));
  Tensor want = average(world_, [](int r) { return low_rank_grads(r, 1); });
  for (int step = 0; step < 5; ++step) {
    Tensor got = run(powerSGD_hook, state, low_rank_grads(rank_, 1));
    EXPECT_LT(rel_error(got, want), 1e-5) << "step " << step;
    EXPECT_EQ(state.iter, step + 1);
    // Error feedback and warm-start memory exist from the first PowerSGD step on.
    EXPECT_EQ(state.error_dict.count(0), step >= 2 ? 1u : 0u);
    EXPECT_EQ(state.q_memory_dict.count(0), step >= 2 ? 1u : 0u);
  }
}

TEST_F(PowerSGD, VanillaAllreduceBeforeStartIteration) {
  // Before start_powerSGD_iter the hook is allreduce_hook: bit-identical to it through DDP.
  auto make = [](std::function<void(DistributedDataParallel&)> setup) {
    Scenario sc;
    sc.make_model = [](uint64_t seed) {
      Generator g(seed);
      return nn::make_mlp({6, 16, 12, 4}, &g);
    };
    sc.make_batch = random_batches({6}, 4);
    sc.setup = std::move(setup);
    return sc;
  };
  auto reference = train_ddp(make([](DistributedDataParallel& ddp) {
                               ddp.register_builtin_comm_hook(BuiltinCommHookType::kAllreduce);
                             }),
                             rank_, world_)->module()->parameters();
  for (Hook hook : {powerSGD_hook, batched_powerSGD_hook}) {
    auto state = std::make_shared<PowerSGDState>(pg_, PowerSGDOptions().start_powerSGD_iter(1000));
    auto got = train_ddp(make([state, hook](DistributedDataParallel& ddp) {
                           ddp.register_comm_hook<PowerSGDState>(state, hook, "powerSGD");
                         }),
                         rank_, world_)->module()->parameters();
    ASSERT_EQ(got.size(), reference.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(equal(got[i], reference[i])) << "parameter " << i;
    EXPECT_EQ(state->iter, 5);
    EXPECT_TRUE(state->error_dict.empty());
  }
}

TEST_F(PowerSGD, ErrorFeedbackReducesAccumulatedError) {
  auto grads = [](int rank) {
    Generator g(50 + rank);
    return std::vector<Tensor>{randn({20, 16}, &g)};
  };
  const Tensor avg = average(world_, grads);
  const int steps = 40, start = 2;
  double accumulated[2];
  for (int ef = 0; ef < 2; ++ef) {
    PowerSGDState state(pg_, PowerSGDOptions().start_powerSGD_iter(start).use_error_feedback(ef == 1));
    Tensor sum = zeros({avg.numel()});
    for (int step = 0; step < steps; ++step) {
      Tensor got = run(powerSGD_hook, state, grads(rank_));
      if (step >= start) add_(sum, got);
    }
    accumulated[ef] = rel_error(sum, mul(avg, static_cast<double>(steps - start)));
  }
  // Without error feedback the rank-1 bias accumulates linearly; with it, the residual is
  // re-injected and the accumulated update tracks the true one.
  EXPECT_LT(accumulated[1], 0.5 * accumulated[0])
      << "with error feedback " << accumulated[1] << ", without " << accumulated[0];
}

TEST_F(PowerSGD, UncompressedPathForVectorsAndSmallMatrices) {
  auto grads = [](int rank) {
    Generator g(300 + rank);
    // A vector, a 2x3 and a 3x3 matrix: (n + m) * 1 * 2 >= n * m for both matrices.
    return std::vector<Tensor>{randn({10}, &g), randn({2, 3}, &g), randn({3, 3}, &g)};
  };
  const Tensor want = average(world_, grads);
  PowerSGDState plain(pg_,
      PowerSGDOptions().start_powerSGD_iter(0).use_error_feedback(false).warm_start(false));
  EXPECT_LT(rel_error(run(powerSGD_hook, plain, grads(rank_)), want), 1e-6);
  auto [rate, before, after] = plain.compression_stats();
  EXPECT_EQ(before, 25);
  EXPECT_EQ(after, 25);
  EXPECT_DOUBLE_EQ(rate, 1.0);
  // With error feedback the residual of an exactly averaged tensor sums to zero over ranks.
  PowerSGDState ef(pg_, PowerSGDOptions().start_powerSGD_iter(2));
  for (int step = 0; step < 4; ++step) EXPECT_LT(rel_error(run(powerSGD_hook, ef, grads(rank_)), want), 1e-5);
  ASSERT_EQ(ef.p_memory_dict.count(0), 1u);
  EXPECT_EQ(ef.p_memory_dict[0].numel(), 0);
}

// Gradients that change every step, for the checkpoint tests.
std::vector<Tensor> step_grads(int step, int rank) {
  Generator g(1000 * step + rank);
  return {randn({24, 10}, &g), randn({7}, &g), randn({12, 12}, &g)};
}

void check_save_restore(Hook hook, bool warm_start, ProcessGroupPtr pg, int rank) {
  const int steps = 10, save_at = 5;
  PowerSGDState a(pg,
      PowerSGDOptions().matrix_approximation_rank(2).start_powerSGD_iter(2).warm_start(warm_start).random_seed(42));
  nn::StateDict saved;
  std::vector<Tensor> after_save;
  for (int step = 0; step < steps; ++step) {
    if (step == save_at) saved = a.state_dict();
    Tensor got = run(hook, a, step_grads(step, rank));
    if (step >= save_at) after_save.push_back(got);
  }
  // A state built with other settings: load_state_dict restores everything but the group.
  PowerSGDState b(pg, PowerSGDOptions().start_powerSGD_iter(1000).min_compression_rate(4).random_seed(7));
  b.load_state_dict(saved, pg);
  EXPECT_EQ(b.iter, save_at);
  EXPECT_EQ(b.matrix_approximation_rank, 2);
  EXPECT_EQ(b.warm_start, warm_start);
  for (int step = save_at; step < steps; ++step) {
    Tensor got = run(hook, b, step_grads(step, rank));
    EXPECT_TRUE(equal(got, after_save[step - save_at])) << "step " << step << " warm_start " << warm_start;
  }
  EXPECT_EQ(b.compression_stats(), a.compression_stats());
}

TEST_F(PowerSGD, StateSaveRestoreContinuesBitIdentically) {
  check_save_restore(powerSGD_hook, /*warm_start=*/true, pg_, rank_);
  check_save_restore(powerSGD_hook, /*warm_start=*/false, pg_, rank_);  // RNG state matters
  check_save_restore(batched_powerSGD_hook, true, pg_, rank_);
  check_save_restore(batched_powerSGD_hook, false, pg_, rank_);
}

TEST_F(PowerSGD, BatchedOnAPaddedBucket) {
  // 20 + 10 = 30 elements -> a 6x6 matrix with 6 zeros of padding. The 30 elements are rows 0-4
  // of u v_r^T; with u[5] = 0 the padded matrix is rank-1 too, so rank 1 reconstructs exactly.
  auto grads = [](int rank) {
    Generator gu(11), gv(400 + rank);
    Tensor flat = mm(randn({5, 1}, &gu), randn({1, 6}, &gv)).reshape({-1});
    return std::vector<Tensor>{flat.narrow(0, 0, 20).reshape({4, 5}), flat.narrow(0, 20, 10)};
  };
  PowerSGDState state(pg_,
      PowerSGDOptions().start_powerSGD_iter(0).use_error_feedback(false).warm_start(false));
  Tensor got = run(batched_powerSGD_hook, state, grads(rank_));
  ASSERT_EQ(got.numel(), 30);
  EXPECT_LT(rel_error(got, average(world_, grads)), 1e-5);
  auto [rate, before, after] = state.compression_stats();
  EXPECT_EQ(before, 30);
  EXPECT_EQ(after, 6 * 1 * 2);
  // The padded 6x6 matrix of any 30-element bucket has a zero last row, so rank 5 reconstructs
  // any bucket exactly.
  auto random = [](int rank) {
    Generator g(500 + rank);
    return std::vector<Tensor>{randn({30}, &g)};
  };
  PowerSGDState five(pg_,
      PowerSGDOptions().matrix_approximation_rank(5).start_powerSGD_iter(0).use_error_feedback(false).warm_start(false));
  EXPECT_LT(rel_error(run(batched_powerSGD_hook, five, random(rank_)), average(world_, random)), 1e-4);
  EXPECT_EQ(std::get<2>(five.compression_stats()), 6 * 5 * 2);
  // A rank above the side is clamped to it.
  PowerSGDState big(pg_,
      PowerSGDOptions().matrix_approximation_rank(8).start_powerSGD_iter(0).use_error_feedback(false).warm_start(false));
  run(batched_powerSGD_hook, big, random(rank_));
  EXPECT_EQ(std::get<2>(big.compression_stats()), 6 * 6 * 2);
}

TEST_F(PowerSGD, BatchedReorthogonalisesAWarmStartedQ) {
  // As PyTorch's batched hook, a warm-started Q is orthogonalised every iteration, not only when
  // freshly drawn. Give it two nearly parallel columns: P = M Q without that step loses the second
  // direction to float rounding, and a rank-2 gradient is no longer reconstructed exactly.
  auto grads = [](int rank) {  // 36 elements: the 6x6 square itself, rank 2 summed over ranks
    Generator gu(21), gv(700 + rank);
    return std::vector<Tensor>{mm(randn({6, 2}, &gu), transpose(randn({6, 2}, &gv), 0, 1))};
  };
  const Tensor want = average(world_, grads);
  PowerSGDState state(pg_,
      PowerSGDOptions().matrix_approximation_rank(2).start_powerSGD_iter(2).use_error_feedback(false));
  for (int step = 0; step < 2; ++step) run(batched_powerSGD_hook, state, grads(rank_));  // vanilla
  EXPECT_LT(rel_error(run(batched_powerSGD_hook, state, grads(rank_)), want), 1e-5);  // fresh Q
  Generator gq(9);
  Tensor v = randn({6, 1}, &gq), w = randn({6, 1}, &gq);
  ASSERT_EQ(state.q_memory_dict.at(0).sizes(), (Shape{6, 2}));
  copy_(state.q_memory_dict.at(0), cat({v, add(v, mul(w, 1e-5))}, 1));
  EXPECT_LT(rel_error(run(batched_powerSGD_hook, state, grads(rank_)), want), 1e-4)
      << "the warm-started Q was not orthogonalised before P = M Q";
}

TEST_F(PowerSGD, HooksReturnWithoutBlockingTheCaller) {
  // Every round is chained on futures: rank 0's hook returns while its peers have not even called
  // theirs (the old hooks waited for the P allreduce, i.e. for the slowest rank).
  for (Hook hook : {powerSGD_hook, batched_powerSGD_hook}) {
    PowerSGDState state(pg_,
        PowerSGDOptions().start_powerSGD_iter(0).use_error_feedback(false).warm_start(false));
    GradBucket bucket = make_bucket(low_rank_grads(rank_, 1));
    if (rank_ != 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const auto begin = std::chrono::steady_clock::now();
    FuturePtr f = hook(state, bucket);
    const auto elapsed = std::chrono::steady_clock::now() - begin;
    const bool completed_on_return = f->completed();
    Tensor got = f->value().at(0);
    if (rank_ == 0) {
      EXPECT_FALSE(completed_on_return);
      EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count(), 250) << "the hook blocked its caller";
    }
    if (hook == powerSGD_hook) {  // exact for a rank-1 matrix (the batched square is not rank 1)
      EXPECT_LT(rel_error(got, average(world_, [](int r) { return low_rank_grads(r, 1); })), 1e-5);
    }
    EXPECT_EQ(state.iter, 1);
  }
}

TEST_F(PowerSGD, GroupsMatricesByShapeAndBatchesThem) {
  // Three 8x6 matrices around a 5x7 one and a vector. As PyTorch, P and Q memory is laid out by
  // shape group in first-seen order (8x6: a, c, d; then 5x7: b), batched or not, so
  // batch_tensors_with_same_shape changes how the matmuls run, not what they compute.
  auto grads = [](int rank) {
    Generator g(600 + rank);
    return std::vector<Tensor>{randn({8, 6}, &g), randn({5, 7}, &g), randn({8, 6}, &g), randn({4}, &g),
                               randn({8, 6}, &g)};
  };
  PowerSGDState one_by_one(pg_, PowerSGDOptions().start_powerSGD_iter(2).random_seed(3));
  PowerSGDState batched(pg_,
      PowerSGDOptions().start_powerSGD_iter(2).random_seed(3).batch_tensors_with_same_shape(true));
  for (int step = 0; step < 4; ++step) {
    Tensor a = run(powerSGD_hook, one_by_one, grads(rank_));
    Tensor b = run(powerSGD_hook, batched, grads(rank_));
    EXPECT_LT(rel_error(b, a), 1e-5) << "step " << step;  // full-rank inputs: same random Qs needed
  }
  EXPECT_TRUE(allclose(batched.p_memory_dict.at(0), one_by_one.p_memory_dict.at(0), 1e-5, 1e-6));
  EXPECT_TRUE(allclose(batched.q_memory_dict.at(0), one_by_one.q_memory_dict.at(0), 1e-5, 1e-6));
  EXPECT_EQ(one_by_one.compression_stats(), batched.compression_stats());

  // The layout: rank-1 matrices u_i v_i^T (u_i shared by the ranks) leave P_i = +-u_i / |u_i|.
  Generator gu(77);
  const std::vector<Tensor> us = {randn({8, 1}, &gu), randn({5, 1}, &gu), randn({8, 1}, &gu), randn({8, 1}, &gu)};
  auto rank_one = [&us](int rank) {
    Generator gv(700 + rank);
    auto outer = [&](const Tensor& u, int64_t m) { return mm(u, randn({1, m}, &gv)); };
    return std::vector<Tensor>{outer(us[0], 6), outer(us[1], 7), outer(us[2], 6), randn({4}, &gv),
                               outer(us[3], 6)};
  };
  for (bool batch : {false, true}) {
    // Warm start keeps P; it needs start_powerSGD_iter >= 2, so two vanilla steps come first.
    PowerSGDState state(pg_,
        PowerSGDOptions().start_powerSGD_iter(2).use_error_feedback(false).batch_tensors_with_same_shape(batch));
    for (int step = 0; step < 3; ++step) run(powerSGD_hook, state, rank_one(rank_));
    const Tensor p = state.p_memory_dict.at(0);
    ASSERT_EQ(p.numel(), 8 + 8 + 8 + 5);
    const int64_t offsets[] = {0, 24, 8, 16};  // a, b, c, d
    for (size_t i = 0; i < us.size(); ++i) {
      const int64_t n = us[i].size(0);
      Tensor u = div(us[i].reshape({-1}), std::sqrt(sum(mul(us[i], us[i])).item<double>()));
      const double cosine = sum(mul(p.narrow(0, offsets[i], n), u)).item<double>();
      EXPECT_NEAR(std::abs(cosine), 1.0, 1e-4) << "matrix " << i << " batch " << batch;
    }
  }
}

TEST_F(PowerSGD, RunsUnderCompressWrappers) {
  // As PyTorch's fp16_compress_wrapper(powerSGD_hook): the hook sees a half-precision bucket, so P,
  // Q, the residual and every allreduce are in that format (half the bytes), and a rank-1 gradient
  // is still reconstructed, to the format's precision, with error feedback and warm start on.
  using AnyHook = std::function<FuturePtr(PowerSGDState&, GradBucket&)>;
  struct Case {
    const char* name;
    AnyHook wrapped;
    ScalarType dtype;
    double tolerance;
  };
  const std::vector<Case> cases = {
      {"fp16", fp16_compress_wrapper(powerSGD_hook), kFloat16, 1e-2},
      {"bf16", bf16_compress_wrapper(powerSGD_hook), kBFloat16, 5e-2},
      {"fp16 batched", fp16_compress_wrapper(batched_powerSGD_hook), kFloat16, 1e-2},
  };
  const Tensor want = average(world_, [](int r) { return low_rank_grads(r, 1); });
  for (const Case& c : cases) {
    const bool batched = std::string(c.name).find("batched") != std::string::npos;
    PowerSGDState plain(pg_,
        PowerSGDOptions().start_powerSGD_iter(2)), wrapped(pg_, PowerSGDOptions().start_powerSGD_iter(2));
    for (int step = 0; step < 5; ++step) {
      GradBucket bucket = make_bucket(low_rank_grads(rank_, 1));
      const uint64_t before = pg_->payload_bytes();
      Tensor got = c.wrapped(wrapped, bucket)->value().at(0);
      const uint64_t wrapped_bytes = pg_->payload_bytes() - before;
      EXPECT_EQ(got.dtype(), kFloat32) << c.name;
      // The batched hook pads the 197-element bucket to 15x15; rank 1 of that is not exact.
      if (!batched) {
        EXPECT_LT(rel_error(got, want), c.tolerance) << c.name << " step " << step;
      }
      const uint64_t mark = pg_->payload_bytes();
      Tensor full = run(batched ? batched_powerSGD_hook : powerSGD_hook, plain, low_rank_grads(rank_, 1));
      EXPECT_EQ(2 * wrapped_bytes, pg_->payload_bytes() - mark) << c.name << " step " << step;
      // Same seed, same random Q: the wrapped run tracks the float32 one.
      EXPECT_LT(rel_error(got, full), c.tolerance) << c.name << " step " << step;
    }
    EXPECT_EQ(wrapped.error_dict.at(0).dtype(), c.dtype) << c.name;
    EXPECT_EQ(wrapped.q_memory_dict.at(0).dtype(), c.dtype) << c.name;
    EXPECT_EQ(wrapped.compression_stats(), plain.compression_stats()) << c.name;
  }
}

TEST_F(PowerSGD, TrainsThroughDdpAndKeepsRanksInSync) {
  Scenario sc;
  sc.make_model = [](uint64_t seed) {
    Generator g(seed);
    return nn::make_mlp({6, 16, 12, 4}, &g);
  };
  sc.make_batch = random_batches({6}, 4);
  sc.steps = 6;
  const std::vector<std::function<FuturePtr(PowerSGDState&, GradBucket&)>> hooks = {
      powerSGD_hook, batched_powerSGD_hook, fp16_compress_wrapper(powerSGD_hook)};
  for (const auto& hook : hooks) {
    auto state = std::make_shared<PowerSGDState>(pg_, PowerSGDOptions().start_powerSGD_iter(2));
    sc.setup = [state, hook](DistributedDataParallel& ddp) {
      ddp.register_comm_hook<PowerSGDState>(state, hook, "powerSGD");
    };
    auto ddp = train_ddp(sc, rank_, world_);
    EXPECT_EQ(state->iter, 6);
    EXPECT_GT(std::get<0>(state->compression_stats()), 1.0);
    for (const Tensor& p : ddp->module()->parameters()) {
      std::vector<Tensor> lo{p.clone()}, hi{p.clone()};
      pg_->allreduce(lo, {ReduceOp::kMin})->wait();
      pg_->allreduce(hi, {ReduceOp::kMax})->wait();
      EXPECT_TRUE(equal(lo[0], hi[0])) << "parameters diverged across ranks";
      EXPECT_TRUE(std::isfinite(sum(abs(p)).item<float>()));
    }
  }
}

}  // namespace
}  // namespace ember::distributed::testing
