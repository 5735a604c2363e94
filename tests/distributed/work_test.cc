// Future and Work without any process group: completion, chaining with then() and then_future(),
// errors raised by a collective or by a callback surfacing from wait()/value(), every callback
// running when one throws, wait() timeouts, and wait() refusing to block a communication thread.
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

TEST(FutureTest, EveryCallbackRunsWhenOneThrowsAndTheFirstErrorIsRethrown) {
  // Note [Callbacks run on the worker]: a throwing callback must not strand the ones after it
  // (here a then() child that someone may be waiting on).
  auto f = std::make_shared<Future>();
  std::vector<int> ran;
  f->add_callback([&](Future&) { ran.push_back(1); });
  f->add_callback([&](Future&) {
    ran.push_back(2);
    EMBER_THROW("callback 2 failed");
  });
  f->add_callback([&](Future&) {
    ran.push_back(3);
    EMBER_THROW("callback 3 failed");
  });
  auto g = f->then([&](Future& p) {
    ran.push_back(4);
    return p.value();
  });
  const std::string error = error_of([&] { f->mark_completed({full({1}, Scalar(2.0))}); });
  EXPECT_THAT(error, HasSubstr("callback 2 failed"));
  EXPECT_THAT(error, ::testing::Not(HasSubstr("callback 3")));
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_TRUE(f->completed());
  EXPECT_FALSE(f->has_error());  // the future itself succeeded; its callbacks failed
  ASSERT_TRUE(g->completed());
  EXPECT_EQ(g->value()[0].item<float>(), 2.0f);
  // The same from set_error: every callback sees the error, all of them run.
  auto e = std::make_shared<Future>();
  int seen = 0;
  e->add_callback([&](Future&) { EMBER_THROW("first"); });
  e->add_callback([&](Future& p) { seen += p.has_error() ? 1 : 0; });
  EXPECT_THAT(error_of([&] { e->set_error(std::make_exception_ptr(Error("boom"))); }), HasSubstr("first"));
  EXPECT_EQ(seen, 1);
}

TEST(FutureTest, ThenFutureCompletesWithTheInnerFuture) {
  auto f = std::make_shared<Future>();
  auto inner = std::make_shared<Future>();
  auto g = f->then_future([&](Future&) { return inner; });
  auto h = g->then([](Future& p) { return std::vector<Tensor>{p.value()[0].add(1.0)}; });
  f->mark_completed({});
  EXPECT_FALSE(g->completed());  // waits for the inner future, not for the callback
  inner->mark_completed({full({1}, Scalar(4.0))});
  EXPECT_EQ(h->value()[0].item<float>(), 5.0f);
  // Errors: of the parent, of the callback, of the inner future, and a null inner future.
  auto failed = std::make_shared<Future>();
  auto a = failed->then_future([](Future&) -> FuturePtr { ADD_FAILURE() << "must not run"; return nullptr; });
  failed->set_error(std::make_exception_ptr(Error("allreduce #1 failed")));
  EXPECT_THAT(error_of([&] { a->wait(); }), HasSubstr("allreduce #1 failed"));
  auto ok = std::make_shared<Future>();
  ok->mark_completed({});
  EXPECT_THAT(error_of([&] { ok->then_future([](Future&) -> FuturePtr { EMBER_THROW("round 2 failed"); })->wait(); }),
              HasSubstr("round 2 failed"));
  auto bad_inner = std::make_shared<Future>();
  auto b = ok->then_future([&](Future&) { return bad_inner; });
  bad_inner->set_error(std::make_exception_ptr(Error("allreduce #2 failed")));
  EXPECT_THAT(error_of([&] { b->wait(); }), HasSubstr("allreduce #2 failed"));
  EXPECT_THAT(error_of([&] { ok->then_future([](Future&) { return FuturePtr(); })->wait(); }),
              HasSubstr("returned no future"));
}

TEST(FutureTest, WaitOnACommunicationThreadThrowsInsteadOfDeadlocking) {
  auto pending = std::make_shared<Future>();
  auto done = std::make_shared<Future>();
  done->mark_completed({});
  auto work = std::make_shared<Work>(OpType::kAllreduce, kUnassignedSequenceNumber, std::vector<Tensor>{});
  auto chained = work->get_future()->then([](Future& p) { return p.value(); });
  std::string pending_error, work_error, chained_error, done_error = "not run";
  std::thread worker([&] {
    mark_comm_thread("mpi");
    pending_error = error_of([&] { pending->wait(); });
    work_error = error_of([&] { work->wait(); });
    chained_error = error_of([&] { chained->value(); });
    done_error = error_of([&] { done->wait(); });  // a completed future never blocks: fine
  });
  worker.join();
  EXPECT_THAT(pending_error, HasSubstr("Future::wait: called on the mpi communication thread on a future"));
  EXPECT_THAT(work_error, HasSubstr("Work::wait: called on the mpi communication thread on allreduce "
                                    "(not started yet), which has not completed"));
  EXPECT_THAT(work_error, HasSubstr("chain the next step with then()"));
  EXPECT_THAT(chained_error, HasSubstr("then() of allreduce"));
  EXPECT_EQ(done_error, "");
  EXPECT_EQ(comm_thread_backend(), nullptr);  // only the marked thread
  // Numbered later (as the MPI backend does when the collective starts): the name follows.
  work->set_sequence_number(7);
  EXPECT_EQ(work->name(), "allreduce #7");
  EXPECT_EQ(work->get_future()->name(), "allreduce #7");
  work->finish();
  EXPECT_TRUE(chained->completed());
}

TEST(FutureTest, ErrorPropagatesThroughChain) {
  auto f = std::make_shared<Future>();
  auto g = f->then([](Future& p) { return p.value(); });
  f->set_error(std::make_exception_ptr(Error("allreduce #4 failed on rank 1")));
  EXPECT_THAT(error_of([&] { g->wait(); }), HasSubstr("allreduce #4 failed on rank 1"));
  EXPECT_NE(g->exception(), nullptr);
}

// Note [A waiter throws its own copy of the error]: the worker completes the parent with an error
// and, later, frees the parent; meanwhile the caller has read the child's error and dropped the
// child. Nothing the caller does is ordered before the worker's free, so under ThreadSanitizer this
// fails if the child shares the parent's exception object (as a collective's then() child did).
TEST(FutureTest, AChildsErrorIsNotFreedWithItsParent) {
  auto parent = std::make_shared<Future>();
  FuturePtr child = parent->then([](Future& p) { return p.value(); });
  std::thread worker([parent = std::move(parent)]() mutable {
    parent->set_error(std::make_exception_ptr(Error("allreduce #2: collective mismatch")));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    parent.reset();  // the worker dropping its queue entry
  });
  EXPECT_THAT(error_of([&] { child->value(); }), HasSubstr("collective mismatch"));
  child.reset();
  worker.join();
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
