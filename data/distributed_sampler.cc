#include "data/distributed_sampler.h"

#include <numeric>

#include "tensor/error.h"

namespace ember::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  EMBER_CHECK(dataset_size >= 0, "DistributedSampler: dataset size must be non-negative, got ",
              dataset_size);
  EMBER_CHECK(num_replicas > 0, "DistributedSampler: num_replicas must be positive, got ", num_replicas);
  EMBER_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: invalid rank ", rank,
              ", rank should be in the interval [0, ", num_replicas - 1, "]");
  // PyTorch writes the drop_last case as ceil((N - R) / R) when N % R != 0, which equals floor(N / R).
  num_samples_ = drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
  total_size_ = num_samples_ * num_replicas;
}

std::vector<int64_t> DistributedSampler::indices() {
  std::vector<int64_t> all;
  if (shuffle_) {
    all = seeded_permutation(dataset_size_, seed_ + static_cast<uint64_t>(epoch_));
  } else {
    all.resize(static_cast<size_t>(dataset_size_));
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  if (!drop_last_) {
    // Pad with indices from the start, wrapping around when the padding exceeds the dataset
    // (PyTorch's `(indices * ceil(padding / len))[:padding]`).
    const int64_t n = dataset_size_;
    for (int64_t i = 0; static_cast<int64_t>(all.size()) < total_size_; ++i) {
      const int64_t repeat = all[i % n];  // a copy: push_back may reallocate
      all.push_back(repeat);
    }
  } else {
    all.resize(static_cast<size_t>(total_size_));
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total_size_; i += num_replicas_) mine.push_back(all[i]);
  return mine;
}

}  // namespace ember::data
