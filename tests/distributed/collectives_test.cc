// Every collective of ProcessGroupMPI against values computed locally, over dtypes, ranks 1..4,
// empty and odd-sized tensors, non-contiguous inputs, and sub-groups.
#include <mpi.h>

#include <algorithm>
#include <numeric>
#include <tuple>

#include "tests/distributed/mpi_test_util.h"

namespace ember::distributed::testing {
namespace {

const std::vector<ScalarType> kDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64};
const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProduct, ReduceOp::kMin,
                                    ReduceOp::kMax};

// The reduction over ranks [0, world) of input_value, element i, in double.
double reduced(ReduceOp op, int world, int64_t i) {
  double acc = input_value(0, i);
  for (int r = 1; r < world; ++r) {
    const double v = input_value(r, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v; break;
      case ReduceOp::kProduct: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
    }
  }
  return op == ReduceOp::kAvg ? acc / world : acc;
}

Tensor expected_reduction(ReduceOp op, int world, const Shape& shape) {
  const int64_t n = shape_numel(shape);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = reduced(op, world, i);
  return from_vector<double>(v, shape);
}

// ---- allreduce: every op x every dtype x a few shapes -------------------------------------------
class AllreduceTest : public MpiTest,
                      public ::testing::WithParamInterface<std::tuple<ScalarType, ReduceOp>> {};

TEST_P(AllreduceTest, MatchesLocalReduction) {
  const auto [dtype, op] = GetParam();
  for (const Shape& shape : {Shape{17}, Shape{3, 5}, Shape{0}, Shape{}, Shape{1001}}) {
    Tensor t = rank_input(shape, dtype, rank_);
    std::vector<Tensor> list{t};
    AllreduceOptions opts;
    opts.reduce_op = op;
    if (op == ReduceOp::kAvg && !is_floating_point(dtype)) {
      EXPECT_THAT(error_of([&] { pg_->allreduce(list, opts); }),
                  ::testing::HasSubstr("AVG needs a floating-point tensor"));
      continue;
    }
    WorkPtr work = pg_->allreduce(list, opts);
    work->wait();
    EXPECT_TRUE(work->is_completed());
    EXPECT_TRUE(work->is_success());
    EXPECT_EQ(work->exception(), nullptr);
    EXPECT_TRUE(close_to(t, expected_reduction(op, world_, shape))) << "shape " << shape_to_string(shape);
    EXPECT_TRUE(work->result()[0].is_same(t));
  }
}

INSTANTIATE_TEST_SUITE_P(
    DtypesAndOps, AllreduceTest, ::testing::Combine(::testing::ValuesIn(kDtypes), ::testing::ValuesIn(kOps)),
    [](const auto& info) {
      return std::string(dtype_name(std::get<0>(info.param))) + "_" +
             reduce_op_name(std::get<1>(info.param));
    });

// ---- the other collectives, per dtype ------------------------------------------------------------
class CollectiveTest : public MpiTest, public ::testing::WithParamInterface<ScalarType> {};

TEST_P(CollectiveTest, Broadcast) {
  const ScalarType dtype = GetParam();
  for (int root = 0; root < world_; ++root) {
    Tensor t = rank_input({7, 3}, dtype, rank_);
    std::vector<Tensor> list{t};
    BroadcastOptions opts;
    opts.root_rank = root;
    pg_->broadcast(list, opts)->wait();
    EXPECT_TRUE(close_to(t, rank_input({7, 3}, kFloat64, root))) << "root " << root;
  }
}

TEST_P(CollectiveTest, Reduce) {
  const ScalarType dtype = GetParam();
  const int root = world_ - 1;
  Tensor t = rank_input({13}, dtype, rank_);
  std::vector<Tensor> list{t};
  ReduceOptions opts;
  opts.root_rank = root;
  opts.reduce_op = ReduceOp::kMax;
  pg_->reduce(list, opts)->wait();
  if (rank_ == root) {
    EXPECT_TRUE(close_to(t, expected_reduction(ReduceOp::kMax, world_, {13})));
  } else {
    EXPECT_TRUE(close_to(t, rank_input({13}, kFloat64, rank_)));  // untouched off the root
  }
}

TEST_P(CollectiveTest, AllgatherEqualSizes) {
  const ScalarType dtype = GetParam();
  Tensor in = rank_input({2, 3}, dtype, rank_);
  std::vector<std::vector<Tensor>> out(1);
  for (int r = 0; r < world_; ++r) out[0].push_back(zeros({2, 3}, dtype));
  std::vector<Tensor> inputs{in};
  pg_->allgather(out, inputs)->wait();
  for (int r = 0; r < world_; ++r) EXPECT_TRUE(close_to(out[0][r], rank_input({2, 3}, kFloat64, r)));
}

TEST_P(CollectiveTest, AllgatherDifferentSizesPerRank) {
  // Rank r contributes r + 1 elements (the sparse-gradient case).
  const ScalarType dtype = GetParam();
  Tensor in = rank_input({rank_ + 1}, dtype, rank_);
  std::vector<std::vector<Tensor>> out(1);
  for (int r = 0; r < world_; ++r) out[0].push_back(zeros({r + 1}, dtype));
  std::vector<Tensor> inputs{in};
  pg_->allgather(out, inputs)->wait();
  for (int r = 0; r < world_; ++r) EXPECT_TRUE(close_to(out[0][r], rank_input({r + 1}, kFloat64, r)));
}

TEST_P(CollectiveTest, AllgatherBase) {
  const ScalarType dtype = GetParam();
  Tensor in = rank_input({5}, dtype, rank_);
  Tensor out = zeros({world_ * 5}, dtype);
  pg_->allgather_base(out, in)->wait();
  for (int r = 0; r < world_; ++r) {
    EXPECT_TRUE(close_to(out.narrow(0, r * 5, 5), rank_input({5}, kFloat64, r)));
  }
}

TEST_P(CollectiveTest, GatherToEveryRoot) {
  const ScalarType dtype = GetParam();
  for (int root = 0; root < world_; ++root) {
    std::vector<Tensor> inputs{rank_input({3}, dtype, rank_)};
    std::vector<std::vector<Tensor>> out;
    if (rank_ == root) {
      out.resize(1);
      for (int r = 0; r < world_; ++r) out[0].push_back(zeros({3}, dtype));
    }
    GatherOptions opts;
    opts.root_rank = root;
    pg_->gather(out, inputs, opts)->wait();
    if (rank_ == root) {
      for (int r = 0; r < world_; ++r) EXPECT_TRUE(close_to(out[0][r], rank_input({3}, kFloat64, r)));
    }
  }
}

TEST_P(CollectiveTest, ScatterFromEveryRoot) {
  const ScalarType dtype = GetParam();
  for (int root = 0; root < world_; ++root) {
    std::vector<Tensor> out{zeros({4}, dtype)};
    std::vector<std::vector<Tensor>> inputs;
    if (rank_ == root) {
      inputs.resize(1);
      for (int r = 0; r < world_; ++r) inputs[0].push_back(rank_input({4}, dtype, 10 * r + root));
    }
    ScatterOptions opts;
    opts.root_rank = root;
    pg_->scatter(out, inputs, opts)->wait();
    EXPECT_TRUE(close_to(out[0], rank_input({4}, kFloat64, 10 * rank_ + root)));
  }
}

TEST_P(CollectiveTest, ReduceScatter) {
  const ScalarType dtype = GetParam();
  // Rank r's chunk j holds input_value(r, j * 6 + i): the result on rank j is the SUM over ranks.
  Tensor full_in = rank_input({world_ * 6}, dtype, rank_);
  std::vector<std::vector<Tensor>> inputs(1);
  for (int j = 0; j < world_; ++j) inputs[0].push_back(full_in.narrow(0, j * 6, 6));
  std::vector<Tensor> out{zeros({6}, dtype)};
  pg_->reduce_scatter(out, inputs)->wait();
  Tensor expected = expected_reduction(ReduceOp::kSum, world_, {world_ * 6}).narrow(0, rank_ * 6, 6);
  EXPECT_TRUE(close_to(out[0], expected));
}

TEST_P(CollectiveTest, ReduceScatterBaseIntoOneTensor) {
  const ScalarType dtype = GetParam();
  // One flat input of world x 7 elements; rank j keeps chunk j of the reduction, for each op.
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    if (op == ReduceOp::kAvg && !is_floating_point(dtype)) continue;
    Tensor in = rank_input({world_ * 7}, dtype, rank_);
    Tensor out = zeros({7}, dtype);
    ReduceScatterOptions opts;
    opts.reduce_op = op;
    WorkPtr work = pg_->reduce_scatter_base(out, in, opts);
    work->wait();
    EXPECT_EQ(work->name(), "reduce_scatter_base #" + std::to_string(work->sequence_number()));
    Tensor expected = expected_reduction(op, world_, {world_ * 7}).narrow(0, rank_ * 7, 7);
    EXPECT_TRUE(close_to(out, expected)) << reduce_op_name(op);
  }
  // A non-contiguous output is written through; sizes that do not fit name both tensors.
  Tensor in = rank_input({world_ * 4}, dtype, rank_);
  Tensor out = zeros({4, 2}, dtype).select(1, 0);
  pg_->reduce_scatter_base(out, in)->wait();
  EXPECT_TRUE(close_to(out, expected_reduction(ReduceOp::kSum, world_, {world_ * 4}).narrow(0, rank_ * 4, 4)));
  Tensor odd = zeros({world_ * 4 + 1}, dtype);
  EXPECT_THAT(error_of([&] { pg_->reduce_scatter_base(out, odd); }),
              ::testing::HasSubstr("ProcessGroupMPI::reduce_scatter_base: input"));
}

TEST_P(CollectiveTest, AlltoallBaseEqualSplits) {
  const ScalarType dtype = GetParam();
  // Row j of rank r's input is 10 * r + j (exact in bfloat16); after alltoall, rank r's row j came from rank j.
  std::vector<double> v;
  for (int j = 0; j < world_ * 2; ++j) v.push_back(10 * rank_ + j);
  Tensor in = from_vector<double>(v, {world_ * 2}).to(dtype);
  Tensor out = zeros({world_ * 2}, dtype);
  pg_->alltoall_base(out, in, {}, {})->wait();
  std::vector<double> e;
  for (int j = 0; j < world_; ++j) {
    e.push_back(10 * j + 2 * rank_);
    e.push_back(10 * j + 2 * rank_ + 1);
  }
  EXPECT_TRUE(close_to(out, from_vector<double>(e)));
}

TEST_P(CollectiveTest, AlltoallUnevenLists) {
  const ScalarType dtype = GetParam();
  // Rank r sends (r + j + 1) copies of value r + 2 j to rank j.
  std::vector<Tensor> in, out;
  for (int j = 0; j < world_; ++j) {
    in.push_back(full({rank_ + j + 1}, Scalar(rank_ + 2 * j), dtype));
    out.push_back(zeros({j + rank_ + 1}, dtype));
  }
  pg_->alltoall(out, in)->wait();
  for (int j = 0; j < world_; ++j) {
    EXPECT_TRUE(close_to(out[j], full({j + rank_ + 1}, Scalar(j + 2 * rank_), kFloat64)));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CollectiveTest, ::testing::ValuesIn(kDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---- shapes, layouts, coalesced forms --------------------------------------------------------------
using ProcessGroupMPITest = MpiTest;

TEST_F(ProcessGroupMPITest, NonContiguousTensorsAreStagedAndWrittenBack) {
  Tensor base = rank_input({4, 6}, kFloat32, rank_);
  Tensor t = base.t();  // [6, 4], not contiguous
  ASSERT_FALSE(t.is_contiguous());
  std::vector<Tensor> list{t};
  pg_->allreduce(list)->wait();
  EXPECT_TRUE(close_to(base, expected_reduction(ReduceOp::kSum, world_, {4, 6})));
}

TEST_F(ProcessGroupMPITest, PayloadBytesCountWhatThisRankHandsToCollectives) {
  const uint64_t before = pg_->payload_bytes();
  std::vector<Tensor> f{zeros({1000}, kFloat32)};
  pg_->allreduce(f)->wait();
  EXPECT_EQ(pg_->payload_bytes() - before, 4000u);
  std::vector<Tensor> h{zeros({10}, kFloat16), zeros({6}, kFloat16)};
  pg_->allreduce_coalesced(h)->wait();
  EXPECT_EQ(pg_->payload_bytes() - before, 4000u + 32u);
  pg_->barrier()->wait();
  EXPECT_EQ(pg_->payload_bytes() - before, 4032u);
}

TEST_F(ProcessGroupMPITest, AlltoallBaseWithSplitSizes) {
  // Rank r sends j + 1 rows of width 3 to rank j, each row filled with 10 r + j.
  std::vector<int64_t> in_splits, out_splits;
  std::vector<Tensor> rows;
  for (int j = 0; j < world_; ++j) {
    in_splits.push_back(j + 1);
    out_splits.push_back(rank_ + 1);
    rows.push_back(full({j + 1, 3}, Scalar(10 * rank_ + j), kFloat64));
  }
  Tensor in = cat(rows, 0);
  Tensor out = zeros({world_ * (rank_ + 1), 3}, kFloat64);
  pg_->alltoall_base(out, in, out_splits, in_splits)->wait();
  for (int j = 0; j < world_; ++j) {
    EXPECT_TRUE(close_to(out.narrow(0, j * (rank_ + 1), rank_ + 1),
                         full({rank_ + 1, 3}, Scalar(10 * j + rank_), kFloat64)));
  }
}

TEST_F(ProcessGroupMPITest, AllreduceCoalescedMatchesSeparateAllreduces) {
  std::vector<Tensor> tensors{rank_input({3}, kFloat32, rank_), rank_input({2, 2}, kFloat32, rank_ + 1),
                              rank_input({0}, kFloat32, rank_), rank_input({5}, kFloat32, rank_ + 2)};
  std::vector<Tensor> expected;
  for (auto& t : tensors) {
    expected.push_back(t.clone());
    std::vector<Tensor> one{expected.back()};
    pg_->allreduce(one)->wait();
  }
  AllreduceCoalescedOptions opts;
  pg_->allreduce_coalesced(tensors, opts)->wait();
  for (size_t i = 0; i < tensors.size(); ++i) EXPECT_TRUE(close_to(tensors[i], expected[i])) << i;
}

TEST_F(ProcessGroupMPITest, AllreduceCoalescedRejectsMixedDtypes) {
  std::vector<Tensor> tensors{zeros({2}, kFloat32), zeros({2}, kFloat64)};
  EXPECT_THAT(error_of([&] { pg_->allreduce_coalesced(tensors); }),
              ::testing::HasSubstr("same dtype and device"));
}

TEST_F(ProcessGroupMPITest, ManyOutstandingCollectivesCompleteInOrder) {
  std::vector<Tensor> tensors;
  std::vector<WorkPtr> works;
  for (int i = 0; i < 50; ++i) {
    tensors.push_back(full({i + 1}, Scalar(i), kFloat32));
    std::vector<Tensor> list{tensors.back()};
    works.push_back(pg_->allreduce(list));
  }
  for (int i = 0; i < 50; ++i) {
    works[i]->wait();
    EXPECT_EQ(works[i]->sequence_number(), works[0]->sequence_number() + i);
    EXPECT_TRUE(close_to(tensors[i], full({i + 1}, Scalar(i * world_), kFloat64)));
  }
}

TEST_F(ProcessGroupMPITest, LargeOddSizedAllreduce) {
  const int64_t n = (1 << 20) + 3;  // 4 MiB + 12 bytes: exercises the pipelined algorithms
  Tensor t = rank_input({n}, kFloat32, rank_);
  std::vector<Tensor> list{t};
  pg_->allreduce(list)->wait();
  EXPECT_TRUE(close_to(t, expected_reduction(ReduceOp::kSum, world_, {n})));
}

TEST_F(ProcessGroupMPITest, LargeAllreducesOfEveryDtypeAndOp) {
  // >= 64 KiB: libnbc's ring algorithm (Note [Allreduce algorithm]), with the 16-bit user ops.
  for (ScalarType dtype : kDtypes) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct}) {
      const Shape shape{40001};
      Tensor t = rank_input(shape, dtype, rank_);
      std::vector<Tensor> list{t};
      AllreduceOptions opts;
      opts.reduce_op = op;
      pg_->allreduce(list, opts)->wait();
      EXPECT_TRUE(close_to(t, expected_reduction(op, world_, shape)))
          << dtype_name(dtype) << " " << reduce_op_name(op);
    }
  }
}

TEST_F(ProcessGroupMPITest, BarrierAndFreeFunctions) {
  EXPECT_EQ(get_rank(), rank_);
  EXPECT_EQ(get_world_size(), world_);
  int mpi_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  EXPECT_EQ(world_, mpi_size);
  EXPECT_TRUE(is_initialized());
  barrier();
  pg_->barrier()->wait();
  EXPECT_EQ(pg_->backend_name(), "mpi");
}

TEST_F(ProcessGroupMPITest, UnsupportedCallsNameTheBackend) {
  std::vector<Tensor> list{zeros({1})};
  EXPECT_THAT(error_of([&] { pg_->send(list, 0, 0); }),
              ::testing::HasSubstr("backend 'mpi' does not support send"));
  std::vector<std::vector<Tensor>> out(1);
  EXPECT_THAT(error_of([&] { pg_->allgather_coalesced(out, list); }),
              ::testing::HasSubstr("backend 'mpi' does not support allgather_coalesced"));
}

TEST_F(ProcessGroupMPITest, BadArgumentsThrowAtTheCall) {
  std::vector<Tensor> two{zeros({1}), zeros({1})};
  EXPECT_THAT(error_of([&] { pg_->allreduce(two); }), ::testing::HasSubstr("exactly one tensor"));
  std::vector<Tensor> one{zeros({1})};
  BroadcastOptions opts;
  opts.root_rank = world_;
  EXPECT_THAT(error_of([&] { pg_->broadcast(one, opts); }), ::testing::HasSubstr("out of range"));
  EXPECT_THAT(error_of([] { init_process_group("mpi"); }), ::testing::HasSubstr("already initialized"));
}

// ---- sub-groups -----------------------------------------------------------------------------------
TEST_F(ProcessGroupMPITest, SubGroupOfEvenRanks) {
  std::vector<int> evens;
  for (int r = 0; r < world_; r += 2) evens.push_back(r);
  ProcessGroupPtr group = new_group(evens);
  if (rank_ % 2 != 0) {
    EXPECT_EQ(group, nullptr);
    return;
  }
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->size(), static_cast<int>(evens.size()));
  EXPECT_EQ(group->rank(), rank_ / 2);
  Tensor t = full({4}, Scalar(rank_ + 1), kInt64);
  std::vector<Tensor> list{t};
  group->allreduce(list)->wait();
  int64_t expected = 0;
  for (int r : evens) expected += r + 1;
  EXPECT_TRUE(close_to(t, full({4}, Scalar(expected), kFloat64)));
}

TEST_F(ProcessGroupMPITest, SubGroupsRunIndependentlyOfTheWorld) {
  // The last rank alone forms a group; its collectives complete without the others.
  ProcessGroupPtr solo = new_group({world_ - 1});
  if (rank_ == world_ - 1) {
    ASSERT_NE(solo, nullptr);
    EXPECT_EQ(solo->size(), 1);
    Tensor t = full({3}, Scalar(5.0), kFloat32);
    std::vector<Tensor> list{t};
    solo->allreduce(list)->wait();
    EXPECT_TRUE(close_to(t, full({3}, Scalar(5.0), kFloat64)));
  }
  Tensor w = full({1}, Scalar(1.0), kFloat32);
  std::vector<Tensor> list{w};
  pg_->allreduce(list)->wait();
  EXPECT_TRUE(close_to(w, full({1}, Scalar(static_cast<double>(world_)), kFloat64)));
}

}  // namespace
}  // namespace ember::distributed::testing
