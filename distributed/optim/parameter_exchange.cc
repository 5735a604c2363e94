// ZeRO stage 1: the updated parameters to every rank (parameter_exchange.h).
#include "distributed/optim/parameter_exchange.h"

#include <utility>

#include "distributed/collective_helpers.h"
#include "distributed/optim/parameter_allgather.h"
#include "distributed/utils.h"
#include "tensor/autograd_interface.h"
#include "tensor/factories.h"

namespace ember::distributed {
namespace {

constexpr int64_t kDefaultAllgatherBucketBytes = 25LL * 1024 * 1024;  // DDP's default bucket

// One owner's parameters, broadcast in place (one collective each) or through one flat copy.
class OwnerBroadcast final : public ParameterExchange::Transfer {
 public:
  OwnerBroadcast(int owner, std::vector<Tensor> params, bool flat, const char* caller)
      : owner_(owner), params_(std::move(params)), flat_(flat), caller_(caller) {}

  std::vector<WorkPtr> start(ProcessGroup& group) override {
    NoGradGuard no_grad;
    rank_ = group.rank();
    std::vector<WorkPtr> works;
    auto launch = [&](Tensor t) {
      std::vector<Tensor> one{std::move(t)};
      works.push_back(group.broadcast(one, BroadcastOptions{owner_}));
    };
    if (flat_) {
      const int64_t n = check_same_dtype_device(params_, caller_);
      buffer_ = rank_ == owner_ ? flatten_dense_tensors(params_)
                                : empty({n}, TensorOptions(params_[0].dtype(), params_[0].device()));
      launch(buffer_);
      return works;
    }
    for (const Tensor& p : params_) {
      EMBER_CHECK(p.is_contiguous(), caller_, " (rank ", rank_, "): parameter ", p.describe(),
                  " is not contiguous; set broadcast_bucket_bytes to broadcast it through a copy");
      launch(p);
    }
    return works;
  }

  void finish() override {
    if (!buffer_.defined() || rank_ == owner_) return;
    NoGradGuard no_grad;
    copy_from_flat(buffer_, params_);
  }

 private:
  int owner_;
  std::vector<Tensor> params_;
  bool flat_;
  const char* caller_;
  int rank_ = 0;
  Tensor buffer_;
};

// A bucket of every rank's shares, by one allgather (Note [ZeRO parameters by allgather]).
class BucketAllgather final : public ParameterExchange::Transfer {
 public:
  BucketAllgather(const std::vector<Tensor>& params, const ParameterExchange::OwnerOf& owner_of,
                  const ProcessGroup& group)
      : allgather_(params, owner_of, group) {}
  std::vector<WorkPtr> start(ProcessGroup& group) override {
    WorkPtr work = allgather_.start(group);
    return work ? std::vector<WorkPtr>{work} : std::vector<WorkPtr>{};
  }
  void finish() override { allgather_.finish(); }

 private:
  ParameterAllgather allgather_;
};

// A future completed with `result`.
FuturePtr completed(const Tensor& result) {
  FuturePtr done = std::make_shared<Future>(std::vector<Device>{result.device()});
  done->mark_completed({result});
  return done;
}

}  // namespace

ParameterExchange::ParameterExchange(OwnerOf owner_of, ProcessGroupPtr group, ParameterExchangeOptions options)
    : owner_of_(std::move(owner_of)), group_(std::move(group)), options_(options) {
  EMBER_CHECK(group_ != nullptr, options_.caller, ": the parameter exchange's process group is null");
}

std::vector<std::unique_ptr<ParameterExchange::Transfer>> ParameterExchange::plan(
    const std::vector<Tensor>& params) const {
  return options_.mode == ParameterExchangeMode::kAllgather ? plan_allgathers(params) : plan_broadcasts(params);
}

std::vector<std::unique_ptr<ParameterExchange::Transfer>> ParameterExchange::plan_broadcasts(
    const std::vector<Tensor>& params) const {
  // Owner by owner in rank order, so every rank issues the same broadcasts in the same order.
  std::vector<std::unique_ptr<Transfer>> transfers;
  for (int r = 0; r < group_->size(); ++r) {
    std::vector<Tensor> owned;
    for (const Tensor& p : params) {
      if (owner_of_(p) == r) owned.push_back(p);
    }
    if (owned.empty()) continue;
    if (options_.bucket_bytes == 0) {
      transfers.push_back(std::make_unique<OwnerBroadcast>(r, std::move(owned), /*flat=*/false, options_.caller));
      continue;
    }
    for (const auto& indices : bucket_tensors_by_size(owned, options_.bucket_bytes)) {
      std::vector<Tensor> bucket;
      for (size_t i : indices) bucket.push_back(owned[i]);
      transfers.push_back(std::make_unique<OwnerBroadcast>(r, std::move(bucket), /*flat=*/true, options_.caller));
    }
  }
  return transfers;
}

std::vector<std::unique_ptr<ParameterExchange::Transfer>> ParameterExchange::plan_allgathers(
    const std::vector<Tensor>& params) const {
  // Buckets of consecutive parameters of one dtype and device, the same on every rank.
  const int64_t bytes = options_.bucket_bytes > 0 ? options_.bucket_bytes : kDefaultAllgatherBucketBytes;
  std::vector<std::unique_ptr<Transfer>> transfers;
  for (const auto& indices : bucket_tensors_by_size(params, bytes)) {
    std::vector<Tensor> bucket;
    for (size_t i : indices) bucket.push_back(params[i]);
    transfers.push_back(std::make_unique<BucketAllgather>(bucket, owner_of_, *group_));
  }
  return transfers;
}

void ParameterExchange::exchange(const std::vector<Tensor>& params) const {
  if (group_->size() == 1) return;
  Transfer* previous = nullptr;
  std::vector<WorkPtr> previous_works;
  auto retire = [&] {
    for (auto& w : previous_works) w->wait();
    if (previous != nullptr) previous->finish();
  };
  std::vector<std::unique_ptr<Transfer>> transfers = plan(params);
  for (auto& t : transfers) {
    std::vector<WorkPtr> works = t->start(*group_);
    retire();
    previous = t.get();
    previous_works = std::move(works);
  }
  retire();
}

FuturePtr ParameterExchange::exchange_async(const std::vector<Tensor>& params, const Tensor& result) const {
  if (group_->size() == 1) return completed(result);
  auto transfers = std::make_shared<std::vector<std::unique_ptr<Transfer>>>(plan(params));
  // Chained, so that the future completes after every collective and carries any one's error.
  FuturePtr all = completed(result);
  for (auto& t : *transfers) {
    for (const WorkPtr& w : t->start(*group_)) {
      FuturePtr f = w->get_future();
      all = all->then_future([f](Future&) { return f; });
    }
  }
  return all->then([transfers, result](Future&) {
    for (auto& t : *transfers) t->finish();
    return std::vector<Tensor>{result};
  });
}

}  // namespace ember::distributed
