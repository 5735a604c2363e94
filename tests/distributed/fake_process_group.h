// A process group inside one process, for tests of DDP's bookkeeping without mpirun (PyTorch's
// FakeProcessGroup): it plays `size` ranks that all hold this rank's tensors, so an allreduce SUM
// multiplies by the size, broadcast and barrier change nothing, and an allgather hands every rank
// this rank's input. Every collective is recorded with its tensors; each completes at once or,
// while the group is held, when the test releases it; one can be made to fail. The real mpirun
// suites stay: this checks the Reducer's decisions, not communication.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/process_group.h"

namespace ember::distributed::testing {

class FakeProcessGroup : public ProcessGroup {
 public:
  struct Call {
    OpType op;
    std::vector<Tensor> tensors;  // the inputs, as passed (allreduce's are its outputs too)
    ReduceOp reduce_op = ReduceOp::kSum;
  };

  FakeProcessGroup(int rank, int size);
  std::string backend_name() const override { return "fake"; }

  std::vector<Call> calls() const;
  size_t count(OpType op) const;
  void clear_calls();
  // While held, collectives are recorded but complete (and change their tensors) only when
  // release_held() runs them, in the order they were issued.
  void hold();
  void release_held();
  size_t held() const;
  // The next collective of kind `op` after `skip` more of that kind fails with `message` (an
  // ember::Error from wait()); the skipped ones complete normally.
  void fail_next(OpType op, std::string message, size_t skip = 0);

 protected:
  WorkPtr run_broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts) override;
  WorkPtr run_allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts) override;
  WorkPtr run_allgather(std::vector<std::vector<Tensor>>& output_tensors, std::vector<Tensor>& input_tensors,
                        const AllgatherOptions& opts) override;
  WorkPtr run_allgather_base(Tensor& output, Tensor& input, const AllgatherOptions& opts) override;
  WorkPtr run_barrier(const BarrierOptions& opts) override;
  std::string class_name() const override { return "FakeProcessGroup"; }

 private:
  // Records the call and runs `apply` (the data movement) now or at release.
  WorkPtr issue(Call call, std::vector<Tensor> outputs, std::function<void()> apply);

  mutable std::mutex mutex_;
  std::vector<Call> calls_;
  bool holding_ = false;
  struct Pending {
    WorkPtr work;
    std::function<void()> apply;
    std::string failure;
  };
  std::vector<Pending> pending_;
  struct Failure {
    OpType op;
    std::string message;
    size_t skip;
  };
  std::vector<Failure> failures_;
  uint64_t next_sequence_number_ = 0;
};

}  // namespace ember::distributed::testing
