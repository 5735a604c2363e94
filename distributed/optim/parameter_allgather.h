// ZeRO stage 1 (docs/design.md, distributed/optim/): the updated parameters exchanged by one allgather
// instead of a broadcast from each owner (ZeroRedundancyOptimizerOptions::parameter_exchange).
//
// Note [ZeRO parameters by allgather]
// Broadcasts from each owner in turn move rank r's parameters one way, then rank r+1's: over a
// link, one direction at a time. An allgather has every rank send its share and receive the others'
// together, so both directions of every link are busy at once; it is how DeepSpeed and llm.c move
// ZeRO's parameters. ZeRO's partition gives each rank whole tensors, so the shares are uneven and
// scattered through the model: each rank packs the parameters of a bucket it owns into a flat slot
// the size of the largest rank's share (padding the rest), one allgather_base exchanges the slots,
// and each rank copies the other ranks' slots back into their parameters. Every rank computes the
// same plan from the shapes and the partition, so nothing but the slots is communicated.
// Measured (docs/zero.md, `bench/zero_bench.sh paired`), it is within a few per cent of the
// broadcasts on shared memory and over a 1 Gbit link, so broadcasts stay the default.
#pragma once

#include <functional>
#include <vector>

#include "distributed/process_group.h"
#include "tensor/tensor.h"

namespace ember::distributed {

// One bucket's exchange: the parameters (one dtype and device) each rank owns, and the flat
// buffers the allgather runs on.
class ParameterAllgather {
 public:
  // `params`: the bucket's parameters, in the same order on every rank; `owner_of` gives each one's
  // rank (-1: none, left out). Packs this rank's share.
  ParameterAllgather(const std::vector<Tensor>& params, const std::function<int(const Tensor&)>& owner_of,
                     const ProcessGroup& group);

  // Starts the allgather on `group` (none when no rank owns anything here: then nullptr).
  WorkPtr start(ProcessGroup& group);
  // After the allgather: copies every other rank's share into its parameters.
  void finish() const;

 private:
  int rank_;
  std::vector<std::vector<Tensor>> owned_by_rank_;
  int64_t slot_ = 0;
  Tensor input_, output_;
};

}  // namespace ember::distributed
