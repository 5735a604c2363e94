// Errors inside an iteration are reported and leave the DDP usable: a reduction
// that fails half-way through finalize_backward, and a failed allreduce of the used-parameter map,
// which used to be dropped when no parameter was locally unused.
#include "distributed/hooks/default_hooks.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

using ::testing::HasSubstr;

class DdpFailures : public MpiTest {};

// allreduce_hook, except that bucket `fail_bucket` of iteration `fail_iteration` fails without
// communicating (on every rank, so the collectives stay matched).
struct FlakyHookState {
  ProcessGroupPtr group;
  int iteration = 0;
  int fail_iteration = -1;
  size_t fail_bucket = 0;
};

FuturePtr flaky_hook(FlakyHookState& s, GradBucket& bucket) {
  const bool fail = s.iteration == s.fail_iteration && bucket.index() == s.fail_bucket;
  if (bucket.is_last()) ++s.iteration;
  if (!fail) return allreduce_hook(*s.group, bucket);
  auto f = std::make_shared<Future>();
  f->set_error(std::make_exception_ptr(Error("injected failure")));
  return f;
}

// Iteration 1 fails in its second bucket. The error names the bucket; the user skips that step;
// iteration 2 does not use the branch on any rank, so its .grad must stay undefined -- which it
// did not when the failed finalize left iteration 1's used map behind.
TEST_F(DdpFailures, FailedReductionIsReportedAndTheNextIterationStartsClean) {
  auto model = std::make_shared<Branchy>(1234 + rank_);
  DDPOptions o;
  o.find_unused_parameters = true;
  o.bucket_cap_mb = 1e-6;  // one parameter per bucket: bucket 1 fails, buckets 2.. are in flight
  o.first_bucket_mb = 1e-6;
  auto ddp = std::make_shared<DistributedDataParallel>(model, o);
  auto state = std::make_shared<FlakyHookState>();
  state->group = pg_;
  state->fail_iteration = 1;
  state->fail_bucket = 1;
  ddp->register_comm_hook<FlakyHookState>(state, flaky_hook, "flaky");
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1));
  Generator g(7 + rank_);
  for (int it = 0; it < 4; ++it) {
    model->use_branch_on = it < 2 ? world_ : 0;  // the branch on every rank, then on none
    opt.zero_grad();
    Tensor loss = sum(ddp->forward(randn({3, 6}, &g)));
    const std::string msg = error_of([&] { loss.backward(); });
    if (it == 1) {
      EXPECT_THAT(msg, HasSubstr("DistributedDataParallel (rank " + std::to_string(rank_) +
                                 "): the reduction of bucket 1 of 8"));
      EXPECT_THAT(msg, HasSubstr("injected failure"));
      continue;  // skip this optimizer step
    }
    EXPECT_EQ(msg, "") << "iteration " << it;
    if (it >= 2) {
      EXPECT_FALSE(model->branch->weight().grad().defined()) << "iteration " << it;
      EXPECT_TRUE(model->trunk->weight().grad().defined()) << "iteration " << it;
    }
    opt.step();
  }
  // Ranks still agree after the failure.
  for (const Tensor& p : model->parameters()) {
    Tensor c = p.detach().clone();
    std::vector<Tensor> v{c.clone()};
    pg_->broadcast(v)->wait();
    EXPECT_TRUE(equal(c, v[0]));
  }
}

// A real group whose int32 allreduces (DDP's used-parameter map) fail while `fail_int_allreduce`
// is set, without communicating (on every rank alike).
class FailingUsedMapGroup : public ProcessGroup {
 public:
  explicit FailingUsedMapGroup(ProcessGroupPtr inner)
      : ProcessGroup(inner->rank(), inner->size(), inner->options()), inner_(std::move(inner)) {}
  std::string backend_name() const override { return "failing-used-map(" + inner_->backend_name() + ")"; }
  WorkPtr run_broadcast(std::vector<Tensor>& t, const BroadcastOptions& o) override { return inner_->broadcast(t, o); }
  WorkPtr run_allreduce(std::vector<Tensor>& t, const AllreduceOptions& o) override {
    if (fail_int_allreduce && t.at(0).dtype() == kInt32) {
      return completed_work(OpType::kAllreduce, 0, t, std::make_exception_ptr(Error("injected used-map failure")));
    }
    return inner_->allreduce(t, o);
  }
  WorkPtr run_allgather(std::vector<std::vector<Tensor>>& out, std::vector<Tensor>& in,
                    const AllgatherOptions& o) override {
    return inner_->allgather(out, in, o);
  }
  bool fail_int_allreduce = false;

 private:
  ProcessGroupPtr inner_;
};

TEST_F(DdpFailures, UsedMapAllreduceFailureIsNotDropped) {
  auto group = std::make_shared<FailingUsedMapGroup>(pg_);
  Generator g(3);
  auto model = nn::make_mlp({6, 8, 4}, &g);
  DDPOptions o;
  o.process_group = group;
  o.find_unused_parameters = true;  // every parameter is used: the map is never needed locally
  auto ddp = std::make_shared<DistributedDataParallel>(model, o);
  sum(ddp->forward(ones({2, 6}))).backward();
  group->fail_int_allreduce = true;
  const std::string msg = error_of([&] { sum(ddp->forward(ones({2, 6}))).backward(); });
  EXPECT_THAT(msg, HasSubstr("DistributedDataParallel (rank " + std::to_string(rank_) +
                             "): the allreduce of the used-parameter map (find_unused_parameters) "
                             "failed: injected used-map failure"));
  group->fail_int_allreduce = false;
  EXPECT_EQ(error_of([&] { sum(ddp->forward(ones({2, 6}))).backward(); }), "");
}

}  // namespace
}  // namespace ember::distributed::testing
