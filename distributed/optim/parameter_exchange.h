// ZeRO stage 1 (docs/zero.md): after the sharded step, each rank's freshly stepped parameters reach
// every rank. One ParameterExchange does it for ZeroRedundancyOptimizer::step() (every parameter,
// blocking) and for ZeroStepCommHook (one DDP bucket's, as a future), by broadcasts from each owner
// (PyTorch's way) or by allgathers (Note [ZeRO parameters by allgather], parameter_allgather.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "distributed/process_group.h"
#include "tensor/tensor.h"

namespace ember::distributed {

// How the updated parameters reach every rank after the sharded step.
enum class ParameterExchangeMode {
  kBroadcast,  // each owner broadcasts its parameters (PyTorch's ZeroRedundancyOptimizer)
  kAllgather,  // one allgather per bucket, every rank's share at once (Note [ZeRO parameters by allgather])
};

struct ParameterExchangeOptions {
  ParameterExchangeMode mode = ParameterExchangeMode::kBroadcast;
  // kBroadcast: 0, one in-place broadcast per parameter (no copy); > 0, each owner's parameters
  // flattened into buckets of at most this many bytes. kAllgather: the bucket size (25 MiB when 0).
  int64_t bucket_bytes = 0;
  // Who is asking, for error messages ("ZeroRedundancyOptimizer", "ZeroStepCommHook").
  const char* caller = "ParameterExchange";
};

class ParameterExchange {
 public:
  // The owning rank of a parameter (ZeRO's partition), or -1 for one that no rank steps.
  using OwnerOf = std::function<int(const Tensor&)>;
  ParameterExchange(OwnerOf owner_of, ProcessGroupPtr group, ParameterExchangeOptions options);

  // Sends each owner's values of `params` (the same list, in the same order, on every rank) to
  // every rank and returns when every parameter holds them; two buckets in flight, so one bucket's
  // copies overlap the next one's transfer and the transient memory stays at two buckets.
  void exchange(const std::vector<Tensor>& params) const;
  // The same without blocking: every bucket's transfer is issued now, and the future completes
  // with `result` once every parameter holds its owner's values (or with the first error).
  FuturePtr exchange_async(const std::vector<Tensor>& params, const Tensor& result) const;

  // One bucket's transfer: start() issues its collectives, finish() copies the received values
  // into the parameters once they completed.
  class Transfer {
   public:
    virtual ~Transfer() = default;
    virtual std::vector<WorkPtr> start(ProcessGroup& group) = 0;
    virtual void finish() = 0;
  };

 private:
  // The transfers of `params`, in the order every rank issues them.
  std::vector<std::unique_ptr<Transfer>> plan(const std::vector<Tensor>& params) const;
  std::vector<std::unique_ptr<Transfer>> plan_broadcasts(const std::vector<Tensor>& params) const;
  std::vector<std::unique_ptr<Transfer>> plan_allgathers(const std::vector<Tensor>& params) const;

  OwnerOf owner_of_;
  ProcessGroupPtr group_;
  ParameterExchangeOptions options_;
};

}  // namespace ember::distributed
