// Generator: a seedable random stream (xoshiro256**, seeded through splitmix64). Its output and the
// float/normal transforms are defined here bit for bit, so the same seed gives the same numbers on
// every machine, compiler and rank (unlike std::normal_distribution).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace ember {

// A seedable random stream (PyTorch's torch.Generator, with its default seed). Not thread-safe by
// itself: ops that draw from a generator lock its mutex(), and so must other code sharing one.
class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) { manual_seed(seed); }

  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const { return seed_; }

  uint64_t next_u64();
  // Uniform double in [0, 1) with 53 random bits.
  double next_double();
  // Uniform float in [0, 1) with 24 random bits.
  float next_float();
  // Standard normal by Box-Muller (both values used, the second cached).
  double next_normal();
  // Uniform integer in [0, n), unbiased (rejection sampling).
  uint64_t next_below(uint64_t n);

  // The full state, for checkpoints (e.g. PowerSGD's RNG state).
  struct State {
    std::array<uint64_t, 4> s;
    uint64_t seed;
    bool has_cached_normal;
    double cached_normal;
  };
  State get_state() const;
  void set_state(const State& state);

  std::mutex& mutex() { return mutex_; }

 private:
  std::array<uint64_t, 4> s_{};
  uint64_t seed_ = 0;
  bool has_cached_normal_ = false;
  double cached_normal_ = 0.0;
  std::mutex mutex_;
};

// The process-wide default generator (used when an op is given none).
Generator& default_generator();
// Reseeds the default generator (PyTorch's torch::manual_seed).
void manual_seed(uint64_t seed);

}  // namespace ember
