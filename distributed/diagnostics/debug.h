// The collective fingerprint that DETAIL exchanges before every collective (Note [DETAIL
// fingerprints]), so a desynchronised program reports which rank called what instead of corrupting
// data or hanging. The levels themselves are distributed/debug_level.h.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "distributed/debug_level.h"
#include "distributed/work.h"
#include "tensor/tensor.h"

namespace ember::distributed {

// What one rank is about to run, packed into a fixed-size POD so every rank can allgather it.
// Only the first tensor's sizes are kept (up to kMaxDims); numel covers all the tensors.
struct CollectiveFingerprint {
  static constexpr int kMaxDims = 6;
  int32_t op = static_cast<int32_t>(OpType::kUnknown);
  int32_t dtype = -1;       // ScalarType of the first tensor, -1 for none
  int32_t reduce_op = -1;   // ReduceOp, -1 when not a reduction
  int32_t root = -1;        // root rank, -1 when not rooted
  int32_t num_tensors = 0;
  int32_t ndim = 0;
  uint64_t sequence_number = 0;
  int64_t numel = 0;
  std::array<int64_t, kMaxDims> sizes{};
  // allgather/gather inputs may legitimately differ in size between ranks.
  int32_t sizes_may_differ = 0;
  int32_t padding = 0;

  static CollectiveFingerprint make(OpType op, uint64_t sequence_number,
                                    const std::vector<Tensor>& tensors, int reduce_op = -1,
                                    int root = -1, bool sizes_may_differ = false);
  // "allreduce #3 (SUM, float32 [4, 5], 1 tensor)"
  std::string str() const;
  // Equal in every field that must agree across ranks.
  bool matches(const CollectiveFingerprint& other) const;
};

// Compares every rank's fingerprint with this rank's; throws an ember::Error listing what each
// rank called when they disagree. `all` is indexed by group rank.
void check_fingerprints(const std::vector<CollectiveFingerprint>& all, int rank,
                        const std::string& group_name);

}  // namespace ember::distributed
