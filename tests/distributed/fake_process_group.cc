#include "tests/distributed/fake_process_group.h"

#include <utility>

#include "tensor/error.h"

namespace ember::distributed::testing {
namespace {

void complete(Work& work, const std::function<void()>& apply, const std::string& failure) {
  if (!failure.empty()) {
    work.finish(std::make_exception_ptr(Error(failure)));
  } else {
    apply();
    work.finish();
  }
}

}  // namespace

FakeProcessGroup::FakeProcessGroup(int rank, int size)
    : ProcessGroup(rank, size, [] {
        Options o;
        o.backend = "fake";
        o.group_name = "fake_pg";
        return o;
      }()) {}

WorkPtr FakeProcessGroup::issue(Call call, std::vector<Tensor> outputs, std::function<void()> apply) {
  std::unique_lock<std::mutex> lock(mutex_);
  const OpType op = call.op;
  calls_.push_back(std::move(call));
  auto work = std::make_shared<Work>(op, next_sequence_number_++, std::move(outputs));
  std::string failure;
  for (auto it = failures_.begin(); it != failures_.end(); ++it) {
    if (it->op != op) continue;
    if (it->skip > 0) {
      --it->skip;
      break;
    }
    failure = it->message;
    failures_.erase(it);
    break;
  }
  if (holding_) {
    pending_.push_back({work, std::move(apply), std::move(failure)});
    return work;
  }
  lock.unlock();
  complete(*work, apply, failure);
  return work;
}

WorkPtr FakeProcessGroup::run_broadcast(std::vector<Tensor>& tensors, const BroadcastOptions&) {
  return issue({OpType::kBroadcast, tensors}, tensors, [] {});
}

WorkPtr FakeProcessGroup::run_allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts) {
  const int world = size();
  std::vector<Tensor> list = tensors;
  return issue({OpType::kAllreduce, tensors, opts.reduce_op}, tensors, [list, world, op = opts.reduce_op] {
    // Every rank holds the same values: SUM is world times them, AVG/MIN/MAX leave them.
    for (const Tensor& t : list) {
      if (op == ReduceOp::kSum) {
        t.mul_(Scalar(static_cast<int64_t>(world)));
      } else if (op == ReduceOp::kProduct) {
        const Tensor once = t.clone();
        for (int r = 1; r < world; ++r) t.mul_(once);
      }
    }
  });
}

WorkPtr FakeProcessGroup::run_allgather(std::vector<std::vector<Tensor>>& output_tensors,
                                        std::vector<Tensor>& input_tensors, const AllgatherOptions&) {
  std::vector<Tensor> outs = output_tensors[0];
  const Tensor in = input_tensors[0];
  return issue({OpType::kAllgather, input_tensors}, outs, [outs, in] {
    for (const Tensor& o : outs) o.copy_(in);
  });
}

WorkPtr FakeProcessGroup::run_allgather_base(Tensor& output, Tensor& input, const AllgatherOptions&) {
  const Tensor out = output, in = input;
  const int world = size();
  return issue({OpType::kAllgatherBase, {input}}, {output}, [out, in, world] {
    const Tensor flat = out.reshape({world, in.numel()});
    for (int r = 0; r < world; ++r) flat.select(0, r).copy_(in.reshape({in.numel()}));
  });
}

WorkPtr FakeProcessGroup::run_barrier(const BarrierOptions&) { return issue({OpType::kBarrier, {}}, {}, [] {}); }

std::vector<FakeProcessGroup::Call> FakeProcessGroup::calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_;
}

size_t FakeProcessGroup::count(OpType op) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const Call& c : calls_) n += c.op == op;
  return n;
}

void FakeProcessGroup::clear_calls() {
  std::lock_guard<std::mutex> lock(mutex_);
  calls_.clear();
}

void FakeProcessGroup::hold() {
  std::lock_guard<std::mutex> lock(mutex_);
  holding_ = true;
}

void FakeProcessGroup::release_held() {
  std::vector<Pending> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    holding_ = false;
    pending.swap(pending_);
  }
  for (const Pending& p : pending) complete(*p.work, p.apply, p.failure);
}

size_t FakeProcessGroup::held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

void FakeProcessGroup::fail_next(OpType op, std::string message, size_t skip) {
  std::lock_guard<std::mutex> lock(mutex_);
  failures_.push_back({op, std::move(message), skip});
}

}  // namespace ember::distributed::testing
