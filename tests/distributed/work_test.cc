// Future and Work without any process group: completion, chaining with then(), errors raised by a
// collective or by a callback surfacing from wait()/value(), and wait() timeouts.
#include <thread>

#include "distributed/work.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/factories.h"

namespace ember::distributed {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(FutureTest, ValueAfterMarkCompleted) {
  auto f = std::make_shared<Future>();
  EXPECT_FALSE(f->completed());
  Tensor t = full({2}, Scalar(3.0));
  f->mark_completed({t});
  EXPECT_TRUE(f->completed());
  EXPECT_FALSE(f->has_error());
  ASSERT_EQ(f->value().size(), 1u);
  EXPECT_TRUE(f->value()[0].is_same(t));
}

TEST(FutureTest, ThenChainsAndRunsOnCompletion) {
  auto f = std::make_shared<Future>();
  auto g = f->then([](Future& p) { return std::vector<Tensor>{p.value()[0].mul(2.0)}; });
  auto h = g->then([](Future& p) { return std::vector<Tensor>{p.value()[0].add(1.0)}; });
  EXPECT_FALSE(h->completed());
  f->mark_completed({full({3}, Scalar(5.0))});
  EXPECT_TRUE(h->completed());
  EXPECT_EQ(h->value()[0].data_ptr<float>()[2], 11.0f);
}

TEST(FutureTest, ThenOnCompletedFutureRunsImmediately) {
  auto f = std::make_shared<Future>();
  f->mark_completed({full({1}, Scalar(1.0))});
  bool ran = false;
  auto g = f->then([&](Future& p) {
    ran = true;
    return p.value();
  });
  EXPECT_TRUE(ran);
  EXPECT_TRUE(g->completed());
}

TEST(FutureTest, CallbackExceptionSurfacesFromWaitAndSkipsLaterCallbacks) {
  auto f = std::make_shared<Future>();
  bool later_ran = false;
  auto g = f->then([](Future&) -> std::vector<Tensor> { EMBER_THROW("hook failed: bucket 3"); });
  auto h = g->then([&](Future& p) {
    later_ran = true;
    return p.value();
  });
  f->mark_completed({});
  EXPECT_THAT(error_of([&] { h->wait(); }), HasSubstr("hook failed: bucket 3"));
  EXPECT_THAT(error_of([&] { h->value(); }), HasSubstr("hook failed: bucket 3"));
  EXPECT_FALSE(later_ran);
  EXPECT_TRUE(g->has_error());
  EXPECT_FALSE(f->has_error());
}

TEST(FutureTest, ErrorPropagatesThroughChain) {
  auto f = std::make_shared<Future>();
  auto g = f->then([](Future& p) { return p.value(); });
  f->set_error(std::make_exception_ptr(Error("allreduce #4 failed on rank 1")));
  EXPECT_THAT(error_of([&] { g->wait(); }), HasSubstr("allreduce #4 failed on rank 1"));
  EXPECT_NE(g->exception(), nullptr);
}

TEST(FutureTest, CompletionFromAnotherThreadWakesWaiter) {
  auto f = std::make_shared<Future>();
  std::thread t([f] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    f->mark_completed({full({1}, Scalar(7.0))});
  });
  EXPECT_EQ(f->value()[0].item<float>(), 7.0f);
  t.join();
}

TEST(FutureTest, WaitTimeoutThrows) {
  auto f = std::make_shared<Future>();
  EXPECT_FALSE(f->wait_for(std::chrono::milliseconds(5)));
  EXPECT_THAT(error_of([&] { f->wait(std::chrono::milliseconds(5)); }), HasSubstr("timed out"));
}

TEST(WorkTest, FinishCompletesFutureWithOutputs) {
  Tensor t = zeros({4});
  auto work = std::make_shared<Work>(OpType::kAllreduce, 12, std::vector<Tensor>{t});
  EXPECT_FALSE(work->is_completed());
  EXPECT_EQ(work->name(), "allreduce #12");
  EXPECT_EQ(work->devices().size(), 1u);
  EXPECT_TRUE(work->devices()[0].is_cpu());
  auto chained = work->get_future()->then([](Future& p) { return p.value(); });
  work->finish();
  EXPECT_TRUE(work->wait());
  EXPECT_TRUE(work->is_success());
  EXPECT_TRUE(work->result()[0].is_same(t));
  EXPECT_TRUE(chained->value()[0].is_same(t));
}

TEST(WorkTest, ErrorSurfacesFromWait) {
  auto work = std::make_shared<Work>(OpType::kBroadcast, 3, std::vector<Tensor>{});
  work->finish(std::make_exception_ptr(Error("broadcast #3 failed: MPI_ERR_TRUNCATE")));
  EXPECT_TRUE(work->is_completed());
  EXPECT_FALSE(work->is_success());
  EXPECT_NE(work->exception(), nullptr);
  EXPECT_THAT(error_of([&] { work->wait(); }), HasSubstr("MPI_ERR_TRUNCATE"));
}

TEST(WorkTest, WaitTimeoutNamesTheCollective) {
  auto work = std::make_shared<Work>(OpType::kAllgather, 9, std::vector<Tensor>{});
  EXPECT_THAT(error_of([&] { work->wait(std::chrono::milliseconds(5)); }),
              HasSubstr("allgather #9: Work::wait timed out after 5 ms"));
  work->finish();
}

TEST(WorkTest, CompletedWorkHelper) {
  auto work = completed_work(OpType::kBarrier, 0, {});
  EXPECT_TRUE(work->is_success());
  EXPECT_EQ(std::string(op_type_name(work->op_type())), "barrier");
}

}  // namespace
}  // namespace ember::distributed
