// DistributedSampler: torch.utils.data.DistributedSampler in C++. Each of num_replicas ranks gets a
// disjoint, equally long share of the (optionally shuffled) indices, so every rank runs the same number
// of steps per epoch, as DDP needs (docs/design.md: every rank must join every collective).
#pragma once

#include <cstdint>
#include <vector>

#include "data/samplers.h"

namespace ember::data {

// Semantics, exactly PyTorch's:
//  - shuffle: the permutation comes from a Generator seeded with seed + epoch, identical on every rank
//    (ember's randperm, so the order differs from torch's RNG, but not the rules below);
//  - !drop_last: num_samples = ceil(N / R); the list is padded to R * num_samples by repeating indices
//    from its start (cyclically, if N is smaller than the padding);
//  - drop_last: num_samples = floor(N / R); the tail beyond R * num_samples is dropped;
//  - rank r takes positions r, r + R, r + 2R, ... of the padded/truncated list;
//  - set_epoch(e) must be called before each epoch to reshuffle, as in PyTorch.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);

  std::vector<int64_t> indices() override;
  int64_t size() const override { return num_samples_; }
  void set_epoch(int64_t epoch) override { epoch_ = epoch; }

  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return total_size_; }
  int64_t epoch() const { return epoch_; }
  int64_t rank() const { return rank_; }
  int64_t num_replicas() const { return num_replicas_; }

 private:
  int64_t dataset_size_;
  int64_t num_replicas_;
  int64_t rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
  int64_t num_samples_ = 0;
  int64_t total_size_ = 0;
};

}  // namespace ember::data
