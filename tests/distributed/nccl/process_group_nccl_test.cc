// ProcessGroupNCCL under mpirun: every collective on CUDA tensors against the MPI backend's result on
// the same inputs (collectives_test.cc checks that one against local arithmetic), bad input, the
// Future's callbacks, the watchdog's timeout, and the MPI backend staging CUDA tensors. Runs on the
// CUDA simulator with the simulated NCCL (--config=cudasim), or on GPUs (--config=cuda).
#include <chrono>
#include <string>

#include "distributed/backends/nccl/process_group_nccl.h"
#include "distributed/process_group_wrapper.h"
#include "tensor/device_backend.h"
#include "tests/distributed/mpi_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;

const std::vector<ScalarType> kDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kByte};
const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProduct, ReduceOp::kMin,
                                    ReduceOp::kMax};

// The MPI backend's staging needs only a GPU, which ranks may share.
using CudaRankTest = MpiCudaTest;

// ... and an NCCL group over every rank, where this host has a GPU per rank (the simulator always
// does).
class NcclTest : public CudaRankTest {
 protected:
  void SetUp() override {
    CudaRankTest::SetUp();
    if (IsSkipped()) return;
    if (const std::string why = ProcessGroupNCCL::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    nccl_ = make_group(std::chrono::seconds(90), "nccl_test");
    EXPECT_EQ(cuda_.index, std::static_pointer_cast<ProcessGroupNCCL>(nccl_)->device_index());
  }
  void TearDown() override {
    nccl_.reset();
    CudaRankTest::TearDown();
  }
  // An NCCL group over every rank, bootstrapped over the world's MPI group.
  ProcessGroupPtr make_group(std::chrono::milliseconds timeout, const std::string& name) {
    ProcessGroup::Options options;
    options.backend = "nccl";
    options.timeout = timeout;
    options.group_name = name;
    return std::make_shared<ProcessGroupNCCL>(pg_, options);
  }

  ProcessGroupPtr nccl_;
};

TEST_F(NcclTest, AllreduceMatchesTheMpiBackendForEveryDtypeAndOp) {
  for (ScalarType dtype : kDtypes) {
    for (ReduceOp op : kOps) {
      if (op == ReduceOp::kAvg && !is_floating_point(dtype)) continue;
      for (const Shape& shape : {Shape{17}, Shape{3, 5}, Shape{0}, Shape{1001}}) {
        Tensor host = rank_input(shape, dtype, rank_);
        Tensor device = on_device(host);
        AllreduceOptions opts;
        opts.reduce_op = op;
        std::vector<Tensor> h{host}, d{device};
        pg_->allreduce(h, opts)->wait();
        WorkPtr work = nccl_->allreduce(d, opts);
        work->wait();
        EXPECT_TRUE(work->is_success());
        EXPECT_TRUE(work->result()[0].is_same(device));
        EXPECT_TRUE(close_to(device.to(kCPU), host.to(kFloat64)))
            << dtype_name(dtype) << " " << reduce_op_name(op) << " " << shape_numel(shape);
      }
    }
  }
}

TEST_F(NcclTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < world_; ++root) {
    Tensor d = on_device(rank_input({4, 3}, kFloat32, rank_));
    std::vector<Tensor> list{d};
    BroadcastOptions opts;
    opts.root_rank = root;
    nccl_->broadcast(list, opts)->wait();
    EXPECT_TRUE(close_to(d.to(kCPU), rank_input({4, 3}, kFloat64, root))) << "root " << root;
  }
}

TEST_F(NcclTest, ReduceToEveryRoot) {
  for (int root = 0; root < world_; ++root) {
    Tensor host = rank_input({9}, kFloat64, rank_);
    Tensor device = on_device(host);
    ReduceOptions opts;
    opts.root_rank = root;
    std::vector<Tensor> h{host}, d{device};
    pg_->reduce(h, opts)->wait();
    nccl_->reduce(d, opts)->wait();
    if (rank_ == root) {
      EXPECT_TRUE(close_to(device.to(kCPU), host)) << "root " << root;
    }
  }
}

TEST_F(NcclTest, AllgatherAndAllgatherBase) {
  Tensor input = on_device(rank_input({5}, kFloat32, rank_));
  std::vector<Tensor> inputs{input};
  std::vector<std::vector<Tensor>> outputs(1);
  for (int r = 0; r < world_; ++r) outputs[0].push_back(empty({5}, TensorOptions(kFloat32, cuda_)));
  nccl_->allgather(outputs, inputs)->wait();
  for (int r = 0; r < world_; ++r) {
    EXPECT_TRUE(close_to(outputs[0][r].to(kCPU), rank_input({5}, kFloat64, r))) << "from rank " << r;
  }
  Tensor flat = empty({world_ * 5}, TensorOptions(kFloat32, cuda_));
  nccl_->allgather_base(flat, input)->wait();
  for (int r = 0; r < world_; ++r) {
    EXPECT_TRUE(close_to(flat.narrow(0, r * 5, 5).to(kCPU), rank_input({5}, kFloat64, r)));
  }
}

TEST_F(NcclTest, ReduceScatterMatchesTheMpiBackend) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    std::vector<std::vector<Tensor>> h_in(1), d_in(1);
    for (int r = 0; r < world_; ++r) {
      h_in[0].push_back(rank_input({6}, kFloat32, rank_ + r));
      d_in[0].push_back(on_device(h_in[0].back()));
    }
    std::vector<Tensor> h_out{empty({6})}, d_out{empty({6}, TensorOptions(kFloat32, cuda_))};
    ReduceScatterOptions opts;
    opts.reduce_op = op;
    pg_->reduce_scatter(h_out, h_in, opts)->wait();
    nccl_->reduce_scatter(d_out, d_in, opts)->wait();
    EXPECT_TRUE(close_to(d_out[0].to(kCPU), h_out[0].to(kFloat64))) << reduce_op_name(op);
  }
}

TEST_F(NcclTest, ReduceScatterBaseMatchesTheMpiBackend) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin}) {
    Tensor h_in = rank_input({world_ * 5}, kFloat32, rank_);
    Tensor d_in = on_device(h_in);
    Tensor h_out = empty({5}), d_out = empty({5}, TensorOptions(kFloat32, cuda_));
    ReduceScatterOptions opts;
    opts.reduce_op = op;
    pg_->reduce_scatter_base(h_out, h_in, opts)->wait();
    nccl_->reduce_scatter_base(d_out, d_in, opts)->wait();
    EXPECT_TRUE(close_to(d_out.to(kCPU), h_out.to(kFloat64))) << reduce_op_name(op);
  }
}

TEST_F(NcclTest, AllreduceCoalescedWritesEveryTensor) {
  std::vector<Tensor> host{rank_input({3}, kFloat32, rank_), rank_input({2, 2}, kFloat32, rank_ + 1)};
  std::vector<Tensor> device{on_device(host[0]), on_device(host[1])};
  pg_->allreduce_coalesced(host)->wait();
  nccl_->allreduce_coalesced(device)->wait();
  for (size_t i = 0; i < host.size(); ++i) EXPECT_TRUE(close_to(device[i].to(kCPU), host[i].to(kFloat64)));
}

TEST_F(NcclTest, AlltoallBaseExchangesEqualChunks) {
  std::vector<double> mine(world_ * 2);
  for (int p = 0; p < world_; ++p) mine[2 * p] = mine[2 * p + 1] = rank_ * 100 + p;
  Tensor input = on_device(from_vector<double>(mine, {world_ * 2}));
  Tensor output = empty({world_ * 2}, TensorOptions(kFloat64, cuda_));
  nccl_->alltoall_base(output, input, {}, {})->wait();
  std::vector<double> expected(world_ * 2);
  for (int p = 0; p < world_; ++p) expected[2 * p] = expected[2 * p + 1] = p * 100 + rank_;
  EXPECT_TRUE(close_to(output.to(kCPU), from_vector<double>(expected, {world_ * 2})));
}

TEST_F(NcclTest, BarrierAndSequenceNumbers) {
  WorkPtr first = nccl_->barrier();
  first->wait();
  std::vector<Tensor> list{on_device(ones({2}))};
  WorkPtr second = nccl_->allreduce(list);
  second->wait();
  EXPECT_EQ(first->sequence_number() + 1, second->sequence_number());
  EXPECT_EQ(second->name(), "allreduce #" + std::to_string(second->sequence_number()));
}

TEST_F(NcclTest, ThenCallbacksSeeTheReducedValue) {
  std::vector<Tensor> list{on_device(full({4}, Scalar(1.0), kFloat32))};
  FuturePtr chained = nccl_->allreduce(list)->get_future()->then([](Future& f) {
    return std::vector<Tensor>{mul(f.const_value()[0], Scalar(2.0))};
  });
  const Tensor doubled = chained->value()[0];
  EXPECT_TRUE(doubled.is_cuda());
  EXPECT_TRUE(close_to(doubled.to(kCPU), full({4}, Scalar(2.0 * world_), kFloat64)));
}

TEST_F(NcclTest, BadInputNamesTheOpTheTensorAndTheRank) {
  std::vector<Tensor> cpu{ones({3})};
  const std::string on_cpu = error_of([&] { nccl_->allreduce(cpu); });
  EXPECT_THAT(on_cpu, HasSubstr("ProcessGroupNCCL::allreduce"));
  EXPECT_THAT(on_cpu, HasSubstr("rank " + std::to_string(rank_)));
  EXPECT_THAT(on_cpu, HasSubstr("cpu"));
  std::vector<Tensor> strided{on_device(ones({4, 4})).transpose(0, 1)};
  EXPECT_THAT(error_of([&] { nccl_->allreduce(strided); }), HasSubstr("contiguous"));
  std::vector<Tensor> two{on_device(ones({1})), on_device(ones({1}))};
  EXPECT_THAT(error_of([&] { nccl_->broadcast(two); }), HasSubstr("exactly one tensor"));
  std::vector<Tensor> one{on_device(ones({1}))};
  BroadcastOptions bad_root;
  bad_root.root_rank = world_;
  EXPECT_THAT(error_of([&] { nccl_->broadcast(one, bad_root); }), HasSubstr("root rank"));
}

TEST_F(NcclTest, SkippedCollectiveTimesOutAndAbortsTheCommunicator) {
  if (world_ < 2) GTEST_SKIP() << "needs a peer to skip the collective";
  ProcessGroupPtr group = make_group(std::chrono::milliseconds(500), "nccl_timeout_group");
  if (rank_ != 0) {
    // Rank 0 never joins: the watchdog aborts the communicator instead of hanging forever.
    std::vector<Tensor> list{on_device(ones({8}))};
    const auto start = std::chrono::steady_clock::now();
    const std::string msg = error_of([&] { group->allreduce(list)->wait(); });
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
    EXPECT_THAT(msg, HasSubstr("allreduce #0"));
    EXPECT_THAT(msg, HasSubstr("float32 [8]"));
    EXPECT_THAT(msg, HasSubstr("timed out after 500 ms"));
    EXPECT_THAT(msg, HasSubstr("rank " + std::to_string(rank_) + " of " + std::to_string(world_)));
    EXPECT_THAT(msg, HasSubstr("nccl_timeout_group"));
    // The stall inspector names who is missing, as the MPI backend's timeouts do.
    EXPECT_THAT(msg, HasSubstr("rank 0 did not arrive (rank 0 has not arrived: it has entered no collective on "
                               "this group yet)"));
    EXPECT_EQ(group->stall_report().not_arrived, std::vector<int>{0});
    std::vector<Tensor> again{on_device(ones({2}))};
    EXPECT_THAT(error_of([&] { group->allreduce(again)->wait(); }), HasSubstr("unusable: allreduce #0"));
    EXPECT_NE(std::static_pointer_cast<ProcessGroupNCCL>(group)->broken_reason(), "");
  }
  // Everyone carries on in the test's own NCCL group.
  std::vector<Tensor> list{on_device(ones({3}))};
  nccl_->allreduce(list)->wait();
  EXPECT_TRUE(close_to(list[0].to(kCPU), full({3}, Scalar(static_cast<double>(world_)), kFloat64)));
}

// Note [DETAIL fingerprints]: the check sits in front of any backend, NCCL's included.
TEST_F(NcclTest, DetailReportsMismatchedCollectivesInFrontOfNccl) {
  ProcessGroup::Options options;
  options.backend = "nccl";
  options.timeout = std::chrono::seconds(60);
  options.group_name = "nccl_detail_group";
  options.has_debug_level = true;
  options.debug_level = DebugLevel::kDetail;
  ProcessGroupPtr group = with_debug_wrapper(std::make_shared<ProcessGroupNCCL>(pg_, options));
  ASSERT_NE(dynamic_cast<ProcessGroupWrapper*>(group.get()), nullptr);
  EXPECT_EQ(group->backend_name(), "nccl");
  EXPECT_EQ(group->collective_device(), cuda_);
  std::vector<Tensor> same{on_device(ones({3}))};
  group->allreduce(same)->wait();
  EXPECT_TRUE(close_to(same[0].to(kCPU), full({3}, Scalar(static_cast<double>(world_)), kFloat64)));
  if (world_ < 2) return;
  std::vector<Tensor> list{on_device(ones({rank_ == 1 ? 5 : 4}))};
  const std::string msg = error_of([&] { group->allreduce(list)->wait(); });
  EXPECT_THAT(msg, HasSubstr("collective mismatch in process group nccl_detail_group"));
  EXPECT_THAT(msg, HasSubstr("rank 0 called allreduce #3 (SUM, float32 [4]"));
  EXPECT_THAT(msg, HasSubstr("rank 1 called allreduce #3 (SUM, float32 [5]"));
  // No payload moved.
  EXPECT_TRUE(close_to(list[0].to(kCPU), ones({rank_ == 1 ? 5 : 4}).to(kFloat64)));
}

// Note [CUDA tensors through the MPI backend]: the same collectives, from device memory.
TEST_F(CudaRankTest, MpiBackendStagesCudaTensorsThroughTheHost) {
  Tensor host = rank_input({7}, kFloat32, rank_);
  Tensor device = on_device(host);
  std::vector<Tensor> h{host}, d{device};
  pg_->allreduce(h)->wait();
  pg_->allreduce(d)->wait();
  EXPECT_TRUE(device.is_cuda());
  EXPECT_TRUE(close_to(device.to(kCPU), host.to(kFloat64)));
  std::vector<Tensor> coalesced{on_device(rank_input({2}, kFloat64, rank_)), on_device(rank_input({3}, kFloat64, rank_))};
  pg_->allreduce_coalesced(coalesced)->wait();
  std::vector<Tensor> expected{rank_input({2}, kFloat64, rank_), rank_input({3}, kFloat64, rank_)};
  pg_->allreduce_coalesced(expected)->wait();
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(close_to(coalesced[i].to(kCPU), expected[i]));
  Tensor gathered = empty({world_ * 7}, TensorOptions(kFloat32, cuda_));
  Tensor input = on_device(rank_input({7}, kFloat32, rank_));
  pg_->allgather_base(gathered, input)->wait();
  for (int r = 0; r < world_; ++r) {
    EXPECT_TRUE(close_to(gathered.narrow(0, r * 7, 7).to(kCPU), rank_input({7}, kFloat64, r)));
  }
}

// The staging buffers are pinned and come from the pinned host cache: after the first collective of
// a size, the next ones allocate nothing (PyTorch's CachingHostAllocator does the same for gloo).
TEST_F(CudaRankTest, MpiBackendStagesThroughCachedPinnedBuffers) {
  Tensor device = on_device(rank_input({1000}, kFloat32, rank_));
  Tensor gathered = empty({world_ * 1000}, TensorOptions(kFloat32, cuda_));
  std::vector<Tensor> d{device};
  std::vector<std::vector<Tensor>> outputs(1);
  for (int r = 0; r < world_; ++r) outputs[0].push_back(gathered.narrow(0, r * 1000, 1000));
  const Tensor input = rank_input({1000}, kFloat32, rank_);
  const auto round = [&] {
    device.copy_(input);
    pg_->allreduce(d)->wait();
    pg_->allgather(outputs, d)->wait();
  };
  round();  // the first round may allocate its pinned blocks
  const DeviceMemoryStats before = cuda_host_memory_stats();
  constexpr int kRounds = 10;
  for (int i = 0; i < kRounds; ++i) round();
  const DeviceMemoryStats after = cuda_host_memory_stats();
  EXPECT_GE(after.num_allocs - before.num_allocs, 3 * kRounds)
      << "each round stages the input twice and lands the allgather's result in pinned memory";
  // The worker drops a finished collective's buffers just after wait() returns, so a round may
  // find the previous round's block still taken and allocate one more -- a couple at most.
  EXPECT_LE(after.num_device_mallocs - before.num_device_mallocs, 2);
  EXPECT_GE(after.num_cache_hits - before.num_cache_hits, 3 * kRounds - 2)
      << "the blocks came from the cache";
  // The values survived the trips: every rank holds the sum, and gathered it from every rank.
  Tensor sum = rank_input({1000}, kFloat64, 0);
  for (int r = 1; r < world_; ++r) sum = add(sum, rank_input({1000}, kFloat64, r));
  EXPECT_TRUE(close_to(device.to(kCPU), sum));
  for (int r = 0; r < world_; ++r) EXPECT_TRUE(close_to(outputs[0][r].to(kCPU), sum));
}

}  // namespace
}  // namespace ember::distributed::testing
