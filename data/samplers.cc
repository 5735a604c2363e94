#include "data/samplers.h"

#include <numeric>

#include "tensor/error.h"
#include "tensor/factories.h"

namespace ember::data {

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  Generator gen(seed);
  const Tensor perm = randperm(n, &gen);
  const int64_t* p = perm.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + n);
}

SequentialSampler::SequentialSampler(int64_t size) : size_(size) {
  EMBER_CHECK(size >= 0, "SequentialSampler: dataset size must be non-negative, got ", size);
}

std::vector<int64_t> SequentialSampler::indices() {
  std::vector<int64_t> out(static_cast<size_t>(size_));
  std::iota(out.begin(), out.end(), int64_t{0});
  return out;
}

RandomSampler::RandomSampler(int64_t size, uint64_t seed) : size_(size), seed_(seed) {
  EMBER_CHECK(size >= 0, "RandomSampler: dataset size must be non-negative, got ", size);
}

std::vector<int64_t> RandomSampler::indices() {
  // seed + epoch as in DistributedSampler: the order is a pure function of (seed, epoch).
  std::vector<int64_t> out = seeded_permutation(size_, seed_ + static_cast<uint64_t>(epoch_));
  ++epoch_;
  return out;
}

}  // namespace ember::data
