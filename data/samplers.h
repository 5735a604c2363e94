// Samplers decide which dataset indices an epoch visits and in what order (PyTorch's Sampler):
// SequentialSampler (0..N-1) and RandomSampler (a seeded permutation per epoch). DistributedSampler,
// which shards the indices across ranks, lives in distributed_sampler.h.
#pragma once

#include <cstdint>
#include <vector>

namespace ember::data {

// The base of the samplers (PyTorch's torch.utils.data.Sampler): the dataset indices of an epoch,
// in order. DataLoader calls indices() once per epoch and passes its own set_epoch on.
class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices of one epoch, in order. Called once per epoch, on the thread that iterates.
  virtual std::vector<int64_t> indices() = 0;
  // How many indices indices() returns (PyTorch's __len__).
  virtual int64_t size() const = 0;
  // Selects the epoch whose order the next indices() returns; a no-op for order-free samplers.
  virtual void set_epoch(int64_t epoch) {}
};

// PyTorch's SequentialSampler: 0, 1, ..., size - 1 every epoch. Throws on a negative size.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t size);
  std::vector<int64_t> indices() override;
  int64_t size() const override { return size_; }

 private:
  int64_t size_;
};

// A permutation of 0..N-1 drawn from a Generator seeded with seed_for_epoch(seed, epoch), so the order
// depends only on (seed, epoch). Every indices() call advances the epoch by one afterwards, so a loop
// that never calls set_epoch still reshuffles each epoch; set_epoch(e) makes the next call use e.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t size, uint64_t seed = 0);
  std::vector<int64_t> indices() override;
  int64_t size() const override { return size_; }
  void set_epoch(int64_t epoch) override { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

 private:
  int64_t size_;
  uint64_t seed_;
  int64_t epoch_ = 0;
};

// A random permutation of 0..n-1 from ember's Generator seeded with `seed` (ember::randperm).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);

}  // namespace ember::data
