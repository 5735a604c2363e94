// docs/design.md step 10: comm hooks with several collective rounds chained on futures (Note
// [Collectives issued from callbacks run inline]): ranks that reach each step at different times still pair the same
// collectives (checked by DETAIL fingerprints), a callback that waits on a queued collective gets a
// clear error instead of a deadlock, and the sparse path returns without blocking its caller.
#include <chrono>
#include <numeric>
#include <thread>

#include "distributed/hooks/comm_hook.h"
#include "tensor/sparse.h"
#include "tests/distributed/mpi_test_util.h"

namespace ember::distributed::testing {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

void sleep_ms(int ms) { std::this_thread::sleep_for(milliseconds(ms)); }

// sum over ranks of rank_input(shape, ., rank), in float64.
Tensor expected_sum(const Shape& shape, int world) {
  Tensor sum = zeros(shape, kFloat64);
  for (int r = 0; r < world; ++r) add_(sum, rank_input(shape, kFloat64, r));
  return sum;
}

// A user hook with two rounds: allreduce `first`, then, from its callback, allreduce `second`;
// the returned future completes with the second round. `slow_rank` dawdles in the callback so the
// caller has time to issue the next bucket meanwhile. Written with add_callback, which predates
// then_future, so the test also runs against the old backend.
FuturePtr two_round_hook(ProcessGroup& pg, const Tensor& first, const Tensor& second, int slow_rank) {
  auto result = std::make_shared<Future>();
  std::vector<Tensor> list{first};
  pg.allreduce(list)->get_future()->add_callback([&pg, second, slow_rank, result](Future& f) {
    if (f.has_error()) {
      result->set_error(f.exception());
      return;
    }
    if (pg.rank() == slow_rank) sleep_ms(5);
    std::vector<Tensor> list2{second};
    pg.allreduce(list2)->get_future()->add_callback([result](Future& g) {
      if (g.has_error()) {
        result->set_error(g.exception());
      } else {
        result->mark_completed(g.const_value());
      }
    });
  });
  return result;
}

class ChainedCollectives : public MpiTest {
 protected:
  // A copy of the world group with DETAIL fingerprints: a mismatched pairing fails loudly.
  ProcessGroupPtr detail_group() {
    ProcessGroup::Options o;
    o.timeout = std::chrono::seconds(60);
    o.has_debug_level = true;
    o.debug_level = DebugLevel::kDetail;
    o.group_name = "detail_group";
    std::vector<int> all(world_);
    std::iota(all.begin(), all.end(), 0);
    return pg_->new_subgroup(all, o);
  }
};

TEST_F(ChainedCollectives, SecondRoundFromACallbackPairsUpOnEveryRankWhateverTheTiming) {
  ProcessGroupPtr pg = detail_group();
  const int buckets = 8;
  std::vector<Tensor> firsts, seconds;
  std::vector<FuturePtr> futures;
  for (int i = 0; i < buckets; ++i) {
    // Every bucket's two rounds have their own sizes: any cross-rank mix-up is a fingerprint mismatch.
    firsts.push_back(rank_input({10 + i}, kFloat32, rank_));
    seconds.push_back(rank_input({100 + i}, kFloat32, rank_));
    // Rank i % world is late to issue bucket i; rank 0 is also slow inside every callback.
    if (rank_ == i % world_) sleep_ms(5);
    futures.push_back(two_round_hook(*pg, firsts[i], seconds[i], /*slow_rank=*/0));
  }
  for (int i = 0; i < buckets; ++i) {
    ASSERT_TRUE(futures[i]->wait_for(milliseconds(30000))) << "bucket " << i << " hung";
    EXPECT_EQ(error_of([&] { futures[i]->wait(); }), "") << "bucket " << i;
    EXPECT_TRUE(close_to(firsts[i], expected_sum({10 + i}, world_))) << "bucket " << i;
    EXPECT_TRUE(close_to(seconds[i], expected_sum({100 + i}, world_))) << "bucket " << i;
  }
}

// ZeRO's overlap hook issues on a group of its own from a callback of DDP's group. At DETAIL both
// are wrapped: the callback's collective is checked without waiting on the worker, and neither
// caller blocks (Note [DETAIL fingerprints]).
TEST_F(ChainedCollectives, DetailChecksACollectiveIssuedOnAnotherGroupFromACallback) {
  ProcessGroupPtr first = detail_group();
  ProcessGroupPtr second = detail_group();
  Tensor a = rank_input({7}, kFloat32, rank_), b = rank_input({11}, kFloat32, rank_);
  // Rank 0 starts first: were either exchange waited for, its calls would last until the peers join.
  if (rank_ != 0) sleep_ms(300);
  const auto begin = std::chrono::steady_clock::now();
  std::vector<Tensor> la{a};
  FuturePtr both = first->allreduce(la)->get_future()->then_future([second, b](Future&) {
    std::vector<Tensor> lb{b};
    return second->allreduce(lb)->get_future();
  });
  const auto elapsed = std::chrono::steady_clock::now() - begin;
  ASSERT_TRUE(both->wait_for(milliseconds(30000))) << "the chained collectives hung";
  EXPECT_EQ(error_of([&] { both->wait(); }), "");
  EXPECT_TRUE(close_to(a, expected_sum({7}, world_)));
  EXPECT_TRUE(close_to(b, expected_sum({11}, world_)));
  if (rank_ == 0 && world_ > 1) {
    EXPECT_LT(std::chrono::duration_cast<milliseconds>(elapsed).count(), 150) << "the DETAIL check blocked its caller";
  }
}

TEST_F(ChainedCollectives, WaitInsideACallbackIsAClearErrorNotADeadlock) {
  Tensor a = rank_input({8}, kFloat32, rank_), b = rank_input({9}, kFloat32, rank_);
  // Rank 0's first allreduce cannot finish before its peers join, so its callback is attached in
  // time and runs on the worker, where the second allreduce is still queued behind it.
  if (rank_ != 0) sleep_ms(200);
  std::vector<Tensor> la{a}, lb{b};
  WorkPtr first = pg_->allreduce(la);
  WorkPtr second = pg_->allreduce(lb);
  FuturePtr user = first->get_future()->then([second](Future& f) {
    second->wait();  // what a user might write; must chain with then() instead
    return f.value();
  });
  ASSERT_TRUE(user->wait_for(milliseconds(20000))) << "the callback deadlocked";
  second->wait();
  EXPECT_TRUE(close_to(b, expected_sum({9}, world_)));
  const std::string error = error_of([&] { user->wait(); });
  if (rank_ == 0) {
    EXPECT_THAT(error, HasSubstr("Work::wait: called on the mpi communication thread on allreduce"));
    EXPECT_THAT(error, HasSubstr("Future callbacks (then(), add_callback) run on the communication thread"));
    EXPECT_THAT(error, HasSubstr("chain the next step with then()"));
  } else if (!error.empty()) {  // a peer's callback may have run on the caller's thread instead
    EXPECT_THAT(error, HasSubstr("communication thread"));
  }
  // A collective issued inside a callback runs inline and is complete: waiting on it is fine.
  Tensor c = rank_input({5}, kFloat32, rank_), d = rank_input({6}, kFloat32, rank_);
  std::vector<Tensor> lc{c};
  ProcessGroupPtr pg = pg_;
  FuturePtr ok = pg_->allreduce(lc)->get_future()->then([pg, d](Future&) {
    std::vector<Tensor> ld{d};
    pg->allreduce(ld)->wait();
    return ld;
  });
  ASSERT_TRUE(ok->wait_for(milliseconds(20000))) << "the callback deadlocked";
  EXPECT_EQ(error_of([&] { ok->wait(); }), "");
  EXPECT_TRUE(close_to(d, expected_sum({6}, world_)));
}

TEST_F(ChainedCollectives, SparseAllreduceDoesNotBlockTheCaller) {
  // Rank r holds rows r and r + 1 of a [world + 1, 3] gradient.
  Tensor indices = from_vector<int64_t>({rank_, rank_ + 1}, {1, 2});
  Tensor values = full({2, 3}, Scalar(1.0 + rank_), kFloat32);
  Tensor sparse = sparse_coo_tensor(indices, values, {world_ + 1, 3});
  Tensor want = zeros({world_ + 1, 3}, kFloat64);
  for (int r = 0; r < world_; ++r) {
    add_(want.narrow(0, r, 2), full({2, 3}, Scalar(1.0 + r), kFloat64));
  }
  // Rank 0 starts first: if any round were waited for, its call would last until the peers join.
  if (rank_ != 0) sleep_ms(500);
  const auto begin = std::chrono::steady_clock::now();
  FuturePtr f = allreduce_sparse(*pg_, sparse);
  const auto elapsed = std::chrono::steady_clock::now() - begin;
  const bool completed_on_return = f->completed();
  EXPECT_TRUE(close_to(to_dense(f->value().at(0)), want));
  if (rank_ == 0) {
    EXPECT_FALSE(completed_on_return);
    EXPECT_LT(std::chrono::duration_cast<milliseconds>(elapsed).count(), 250) << "allreduce_sparse blocked its caller";
  }
}

}  // namespace
}  // namespace ember::distributed::testing
