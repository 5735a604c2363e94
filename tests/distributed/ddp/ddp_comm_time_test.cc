// Note [Communication time] (distributed/ddp_reports/logging.h) on real runs: every communication time DDP
// reports -- comm_wall_ms, exposed_comm_ms and PyTorch's backward_comm_time and its mean -- is at
// most the wall time of the iteration it describes, measured around forward and backward here,
// with several buckets, a compressing hook, static_graph and find_unused_parameters.
#include <chrono>
#include <string>
#include <vector>

#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

class DdpCommTime : public MpiTest {
 protected:
  struct Case {
    std::string name;
    DDPOptions options;
    BuiltinCommHookType hook = BuiltinCommHookType::kAllreduce;
  };

  // Trains `steps` iterations and checks each one's reported times against its measured wall time.
  void check(const Case& c, int steps = 6) {
    SCOPED_TRACE(c.name + " on rank " + std::to_string(rank_) + " of " + std::to_string(world_));
    Generator g(11);
    auto model = nn::make_mlp({32, 64, 64, 64, 64, 10}, &g);
    auto ddp = std::make_shared<DistributedDataParallel>(model, c.options);
    ddp->register_builtin_comm_hook(c.hook);
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.01));
    Generator data(100 + rank_);
    double longest_ms = 0;
    for (int step = 0; step < steps; ++step) {
      const Tensor x = randn({16, 32}, &data), y = randint(0, 10, {16}, &data);
      opt.zero_grad();
      const auto t0 = std::chrono::steady_clock::now();
      nn::functional::cross_entropy(ddp->forward(x), y).backward();
      const double wall_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      opt.step();
      longest_ms = std::max(longest_ms, wall_ms);
      const DDPLoggingData d = ddp->get_ddp_logging_data();
      const IterationStats& s = d.last;
      SCOPED_TRACE("iteration " + std::to_string(step + 1) + ": wall " + std::to_string(wall_ms) + " ms");
      EXPECT_GT(s.comm_wall_ms, 0.0);
      EXPECT_LE(s.comm_wall_ms, wall_ms);
      EXPECT_LE(s.comm_wall_ms, s.backward_ms);
      EXPECT_GE(s.exposed_comm_ms, 0.0);
      EXPECT_LE(s.exposed_comm_ms, wall_ms);
      EXPECT_LE(s.exposed_comm_ms, s.backward_ms);
      EXPECT_LE(s.exposed_comm_ms, s.comm_wall_ms);
      EXPECT_GE(s.overlap, 0.0);
      EXPECT_LE(s.overlap, 1.0);
      EXPECT_LE(s.forward_ms + s.backward_ms, wall_ms);
      const RuntimeStats& r = d.runtime;
      EXPECT_EQ(r.num_iterations_stats_recorded, step + 1);
      EXPECT_GT(r.backward_comm_time, 0);
      EXPECT_LE(r.backward_comm_time / 1e6, wall_ms);
      // One interval from the first launch to the last reduction covers the union of the spans.
      EXPECT_GE(r.backward_comm_time / 1e6, s.comm_wall_ms - 1e-3);
      EXPECT_LE(r.backward_compute_comm_overlap_time, r.backward_comm_time);
      EXPECT_LE((r.forward_compute_time + r.backward_compute_time) / 1e6, wall_ms);
      EXPECT_LE(r.avg_backward_comm_time / 1e6, longest_ms);
      EXPECT_LE(r.avg_backward_compute_comm_overlap_time, r.avg_backward_comm_time + 1);
    }
    EXPECT_GE(ddp->get_ddp_logging_data().num_buckets, 2);
  }

  static DDPOptions small_buckets() {
    DDPOptions o;
    o.bucket_cap_mb = 0.01;
    o.first_bucket_mb = 0.005;
    return o;
  }
};

TEST_F(DdpCommTime, SeveralBuckets) { check({"several buckets", small_buckets()}); }

TEST_F(DdpCommTime, Float16Hook) {
  check({"fp16 hook", small_buckets(), BuiltinCommHookType::kFp16Compress});
}

TEST_F(DdpCommTime, StaticGraph) {
  DDPOptions o = small_buckets();
  o.static_graph = true;  // iteration 1 launches every bucket from finalize (delay_all_reduce)
  check({"static_graph", o});
}

TEST_F(DdpCommTime, FindUnusedParameters) {
  DDPOptions o = small_buckets();
  o.find_unused_parameters = true;
  check({"find_unused_parameters", o});
}

}  // namespace
}  // namespace ember::distributed::testing
