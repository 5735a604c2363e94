// DistributedDataParallel on CUDA tensors under mpirun: bucket buffers on the device, allreduce on
// ProcessGroupNCCL's communication stream, comm hooks on device buffers, and the MPI backend staging
// device buckets; each against one CPU process training on the global batch (or, for the lossy
// hooks, against the same hook in CPU DDP over MPI). Runs on the CUDA simulator with the simulated
// NCCL (--config=cudasim), or on GPUs (--config=cuda).
#include "distributed/backends/nccl/process_group_nccl.h"

#include <mutex>
#include <thread>

#include "distributed/hooks/default_hooks.h"
#include "distributed/hooks/powersgd_hook.h"
#include "distributed/diagnostics/trace.h"
#include "tensor/cuda_stream.h"
#include "tensor/device_backend.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

// The device's kernels (cuBLAS's summation order, the simulator's double-accumulating reference
// GEMM) differ from the CPU's in the last bits; 5 SGD steps keep that within 1e-4.
constexpr double kRtol = 1e-4;

// DDP on this rank's GPU; the MPI backend's staging needs only that, and ranks may share one.
using DdpCuda = MpiCudaTest;

// ... and over ProcessGroupNCCL, where this host has a GPU per rank (the simulator always does).
class DdpNccl : public DdpCuda {
 protected:
  void SetUp() override {
    DdpCuda::SetUp();
    if (IsSkipped()) return;
    if (const std::string why = ProcessGroupNCCL::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    ProcessGroup::Options options;
    options.backend = "nccl";
    options.timeout = std::chrono::seconds(90);
    options.group_name = "ddp_nccl";
    nccl_ = std::make_shared<ProcessGroupNCCL>(pg_, options);
    EXPECT_EQ(cuda_.index, std::static_pointer_cast<ProcessGroupNCCL>(nccl_)->device_index());
  }
  void TearDown() override {
    nccl_.reset();
    DdpCuda::TearDown();
  }
  Scenario on_nccl(Scenario sc) const {
    sc.device = cuda_;
    sc.options.process_group = nccl_;
    return sc;
  }

  ProcessGroupPtr nccl_;
};

TEST_F(DdpNccl, NcclMatchesOneCpuProcessOnTheGlobalBatch) {
  Scenario sc = on_nccl(mlp_scenario());
  sc.options.first_bucket_mb = 0.0002;  // several buckets, so several allreduces per step
  sc.options.bucket_cap_mb = 0.001;
  auto ddp = train_ddp(sc, rank_, world_);
  for (const Tensor& p : ddp->parameters()) EXPECT_TRUE(p.is_cuda());
  EXPECT_TRUE(parameters_match(ddp->parameters(), reference_parameters(sc, world_), kRtol));
}

TEST_F(DdpNccl, BatchNormBuffersAreBroadcastFromRankZero) {
  Scenario sc = on_nccl(mlp_scenario());
  sc.make_model = mlp_with_batch_norm;
  auto ddp = train_ddp(sc, rank_, world_);
  EXPECT_TRUE(parameters_match(ddp->parameters(), reference_parameters(sc, world_), kRtol));
}

TEST_F(DdpNccl, FindUnusedParametersOnTheDevice) {
  Scenario sc = on_nccl(mlp_scenario());
  sc.make_model = [](uint64_t seed) {
    auto m = std::make_shared<Branchy>(seed);
    m->use_branch_on = 1;  // only shard 0 uses the branch; "never" is unused everywhere
    return m;
  };
  sc.options.find_unused_parameters = true;
  auto ddp = train_ddp(sc, rank_, world_);
  EXPECT_TRUE(parameters_match(ddp->parameters(), reference_parameters(sc, world_), kRtol));
}

TEST_F(DdpCuda, MpiBackendStagesDeviceBuckets) {
  Scenario sc = mlp_scenario();
  sc.device = cuda_;  // the default group: ProcessGroupMPI, buckets copied through the host
  auto ddp = train_ddp(sc, rank_, world_);
  EXPECT_TRUE(parameters_match(ddp->parameters(), reference_parameters(sc, world_), kRtol));
}

// The trace's GPU lane: every bucket's allreduce appears as a span timed by the communication
// stream's events, named after its bucket and placed on the host's timeline after its launch.
TEST_F(DdpNccl, TraceRecordsEachBucketOnTheCommunicationStream) {
  struct Event {
    std::string name;
    double ts_us;
    int lane;
  };
  std::mutex mutex;
  std::vector<Event> events;
  Trace::get().set_listener([&](const std::string& name, double ts, int lane) {
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back({name, ts, lane});
  });
  Scenario sc = on_nccl(mlp_scenario());
  sc.options.first_bucket_mb = 0.0002;
  sc.options.bucket_cap_mb = 0.001;
  const double before_us = Trace::now_us();
  auto ddp = train_ddp(sc, rank_, world_);
  const int64_t buckets = ddp->get_ddp_logging_data().num_buckets;
  ASSERT_GE(buckets, 2);
  // The watchdog records a span when it sees the end event, a few milliseconds later at most.
  auto gpu_span_of = [&](int64_t bucket, double* ts) {
    const std::string label = " bucket " + std::to_string(bucket) + " (GPU)";
    std::lock_guard<std::mutex> lock(mutex);
    for (const Event& e : events) {
      if (e.lane == 2 && e.name.rfind("allreduce #", 0) == 0 && e.name.find(label) != std::string::npos) {
        *ts = e.ts_us;
        return true;
      }
    }
    return false;
  };
  for (int64_t b = 0; b < buckets; ++b) {
    double ts = 0;
    for (int i = 0; i < 200 && !gpu_span_of(b, &ts); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(gpu_span_of(b, &ts)) << "no GPU span for bucket " << b;
    EXPECT_GT(ts, before_us);
    EXPECT_LT(ts, Trace::now_us());
  }
  Trace::get().set_listener(nullptr);
}

// A lossy hook on device buffers against the same hook in CPU DDP over MPI.
void expect_hook_matches_cpu(const Scenario& device_sc, const Scenario& cpu_sc, int rank, int world,
                             double rtol, double atol = 1e-6) {
  auto on_device = train_ddp(device_sc, rank, world);
  auto on_cpu = train_ddp(cpu_sc, rank, world);
  EXPECT_TRUE(parameters_match(on_device->parameters(), on_cpu->parameters(), rtol, atol));
}

TEST_F(DdpNccl, CompressionHooksRunOnDeviceBuffers) {
  // NCCL (and the simulated one) sums 16-bit buckets in float32 and rounds once; the MPI backend's
  // 16-bit reduction rounds after every pairwise add: at 3+ ranks a gradient element may differ by
  // an ulp (2^-11 relative in float16, 2^-8 in bfloat16), which 5 SGD steps with momentum carry
  // into the parameters, relatively most in the smallest ones: in bfloat16 at 4 ranks, 1.8e-4
  // absolute in a parameter element near zero, hence its absolute tolerance.
  struct Tolerance {
    BuiltinCommHookType type;
    double rtol, atol;
  };
  const Tolerance hooks[] = {{BuiltinCommHookType::kFp16Compress, 5e-3, 1e-6},
                             {BuiltinCommHookType::kBf16Compress, 4e-2, 1e-3}};
  for (const Tolerance& t : hooks) {
    Scenario cpu = mlp_scenario();
    cpu.setup = [type = t.type](DistributedDataParallel& ddp) { ddp.register_builtin_comm_hook(type); };
    SCOPED_TRACE(builtin_comm_hook_name(t.type));
    expect_hook_matches_cpu(on_nccl(cpu), cpu, rank_, world_, t.rtol, t.atol);
  }
}

// Note [Bucket copies on the communication stream]: with backward on a stream of the user's, every
// bucket's hook (and so its collective) is launched from the Reducer's bucket stream, and the
// result still matches one CPU process. (The simulator's streams are synchronous, so this shows
// which stream the work is queued on, not that the events order it: a GPU run does.)
TEST_F(DdpNccl, HooksRunOnTheBucketStreamWhileBackwardRunsOnTheUsers) {
  struct Seen {
    ProcessGroupPtr group;
    std::vector<void*> streams;
  };
  auto seen = std::make_shared<Seen>(Seen{nccl_, {}});
  Scenario sc = on_nccl(mlp_scenario());
  sc.options.first_bucket_mb = 0.0002;
  sc.options.bucket_cap_mb = 0.001;
  const int device = cuda_.index;
  sc.setup = [seen, device](DistributedDataParallel& ddp) {
    ddp.register_comm_hook<Seen>(
        seen,
        [device](Seen& s, GradBucket& bucket) {
          s.streams.push_back(CudaStream::current(device).handle());
          return allreduce_hook(*s.group, bucket);
        },
        "stream_recorder");
  };
  const CudaStream compute = CudaStream::create(device);
  std::shared_ptr<DistributedDataParallel> ddp;
  {
    CudaStreamGuard on_compute(compute);
    ddp = train_ddp(sc, rank_, world_);
  }
  // The optimizer's last updates ran on `compute`, which the default stream does not wait for.
  compute.synchronize();
  ASSERT_FALSE(seen->streams.empty());
  for (void* stream : seen->streams) {
    EXPECT_NE(stream, compute.handle()) << "a hook ran on the compute stream";
    EXPECT_NE(stream, nullptr) << "a hook ran on the default stream";
    EXPECT_EQ(stream, seen->streams[0]) << "one bucket stream per Reducer";
  }
  sc.setup = nullptr;  // the reference: one CPU process, no hook (allreduce_hook's average)
  EXPECT_TRUE(parameters_match(ddp->parameters(), reference_parameters(sc, world_), kRtol));
}

using Hook = FuturePtr (*)(PowerSGDState&, GradBucket&);

TEST_F(DdpNccl, PowerSgdRunsOnDeviceBuffers) {
  for (Hook hook : {powerSGD_hook, batched_powerSGD_hook}) {
    auto make = [&](ProcessGroupPtr group) {
      Scenario sc = mlp_scenario();
      sc.setup = [group, hook](DistributedDataParallel& ddp) {
        auto state = std::make_shared<PowerSGDState>(group, PowerSGDOptions().start_powerSGD_iter(2));
        ddp.register_comm_hook<PowerSGDState>(state, hook, "powerSGD");
      };
      return sc;
    };
    expect_hook_matches_cpu(on_nccl(make(nccl_)), make(pg_), rank_, world_, 1e-3);
  }
}

}  // namespace
}  // namespace ember::distributed::testing
