// Join for uneven inputs: Note [Join protocol] in join.h.
#include "distributed/join.h"

#include <algorithm>
#include <cstdio>

#include "tensor/factories.h"

namespace ember::distributed {
namespace {

// PyTorch warns once the skew passes this many shadowed iterations.
constexpr int64_t kSkewWarnThreshold = 1000;

double allreduce_scalar(ProcessGroup& group, double value) {
  Tensor t = full({1}, Scalar(value), kFloat64).to(group.collective_device());
  std::vector<Tensor> list{t};
  group.allreduce(list)->wait();
  return t.item<double>();
}

}  // namespace

Join::Join(std::vector<Joinable*> joinables, JoinOptions options)
    : joinables_(std::move(joinables)), options_(options) {
  EMBER_CHECK(!joinables_.empty(), "Join: the join context manager requires at least one joinable");
  for (size_t i = 0; i < joinables_.size(); ++i) {
    EMBER_CHECK(joinables_[i] != nullptr, "Join: joinable ", i, " is null");
    ProcessGroupPtr group = joinables_[i]->join_process_group();
    if (i == 0) {
      process_group_ = group;
    } else {
      EMBER_CHECK(group == process_group_, "Join: using the join context manager with multiple process groups ",
                  "(joinable 0 uses '", process_group_->group_name(), "', joinable ", i, " uses '",
                  group->group_name(), "')");
    }
  }
  // Async shadows' hooks first (see Joinable::is_async_shadow), each group in list order.
  for (bool async : {true, false}) {
    for (Joinable* j : joinables_) {
      if (j->is_async_shadow() == async) hooks_.push_back(j->join_hook(options_));
    }
  }
  auto first =
      std::find_if(joinables_.begin(), joinables_.end(), [](Joinable* j) { return !j->is_async_shadow(); });
  EMBER_CHECK(first != joinables_.end(),
              "Join: every joinable is an async shadow (e.g. SyncBatchNormJoinable); "
              "pass the joinable that drives the iterations (DistributedDataParallel) too");
  for (Joinable* j : joinables_) {
    j->join_config_ = JoinConfig{options_.enable, options_.throw_on_early_termination, j == *first};
  }
}

Join::~Join() {
  for (Joinable* j : joinables_) j->join_config_ = JoinConfig{};
}

void Join::run(std::vector<Joinable*> joinables, JoinOptions options, const std::function<void()>& body) {
  Join join(std::move(joinables), options);
  body();  // an exception skips finish(), as PyTorch's __exit__ propagates it without shadowing
  join.finish();
}

void Join::finish() {
  EMBER_CHECK(!finished_, "Join::finish: called twice");
  finished_ = true;
  if (!options_.enable) return;
  bool is_last_joiner = true;
  for (int64_t i = 0;; ++i) {
    if (i == kSkewWarnThreshold + 1) {
      std::fprintf(stderr,
                   "[rank %d] Join warning: detected uneven input skew of greater than %lld. This means "
                   "that rank %d has at least %lld fewer inputs than other currently-active ranks. This "
                   "level of skew could lead to performance degradation during training.\n",
                   process_group_->rank(), static_cast<long long>(kSkewWarnThreshold), process_group_->rank(),
                   static_cast<long long>(kSkewWarnThreshold));
    }
    if (num_nonjoined_procs() == 0) break;
    if (options_.throw_on_early_termination) notify_procs_to_terminate();
    for (auto& hook : hooks_) hook->main_hook();
    is_last_joiner = false;
  }
  for (auto& hook : hooks_) hook->post_hook(is_last_joiner);
}

// Step 1' of Note [Join protocol]: pairs with the ranks still training's allreduce of 1.
int64_t Join::num_nonjoined_procs() { return static_cast<int64_t>(allreduce_scalar(*process_group_, 0.0)); }

void Join::notify_procs_to_terminate() {
  allreduce_scalar(*process_group_, 1.0);
  EMBER_THROW("Join (rank ", process_group_->rank(), "): Rank ", process_group_->rank(),
              " exhausted all inputs (throw_on_early_termination=true).");
}

WorkPtr Join::notify_join_context(Joinable& joinable) {
  const JoinConfig& config = joinable.join_config();
  if (!config.is_first_joinable || !config.enable) return nullptr;
  ProcessGroupPtr group = joinable.join_process_group();
  std::vector<Tensor> one{full({1}, Scalar(1.0), kFloat64).to(group->collective_device())};
  WorkPtr work = group->allreduce(one);
  if (config.throw_on_early_termination && allreduce_scalar(*group, 0.0) != 0) {
    EMBER_THROW("Join (rank ", group->rank(),
                "): Detected at least one rank that exhausted inputs. "
                "Throwing across all ranks (throw_on_early_termination=true).");
  }
  return work;
}

}  // namespace ember::distributed
