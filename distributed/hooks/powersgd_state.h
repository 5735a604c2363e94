// PowerSGDState: hyper-parameters and per-bucket memory of the PowerSGD hooks (PyTorch's
// ddp_comm_hooks/powerSGD_hook.py PowerSGDState): error-feedback residuals, warm-start P/Q memory,
// the iteration counter, the Q-initialisation RNG and compression statistics. DESIGN.md step 10.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>

#include "distributed/hooks/grad_bucket.h"
#include "distributed/process_group.h"
#include "nn/state_dict.h"
#include "tensor/generator.h"

namespace ember::distributed {

// PowerSGDState's hyper-parameters: PyTorch's keyword arguments, with its defaults, set by name:
//   PowerSGDOptions().matrix_approximation_rank(4).start_powerSGD_iter(2)
class PowerSGDOptions {
 public:
  PowerSGDOptions& matrix_approximation_rank(int64_t v) {
    matrix_approximation_rank_ = v;
    return *this;
  }
  int64_t matrix_approximation_rank() const { return matrix_approximation_rank_; }
  PowerSGDOptions& start_powerSGD_iter(int64_t v) {
    start_powerSGD_iter_ = v;
    return *this;
  }
  int64_t start_powerSGD_iter() const { return start_powerSGD_iter_; }
  PowerSGDOptions& min_compression_rate(double v) {
    min_compression_rate_ = v;
    return *this;
  }
  double min_compression_rate() const { return min_compression_rate_; }
  PowerSGDOptions& use_error_feedback(bool v) {
    use_error_feedback_ = v;
    return *this;
  }
  bool use_error_feedback() const { return use_error_feedback_; }
  PowerSGDOptions& warm_start(bool v) {
    warm_start_ = v;
    return *this;
  }
  bool warm_start() const { return warm_start_; }
  PowerSGDOptions& orthogonalization_epsilon(double v) {
    orthogonalization_epsilon_ = v;
    return *this;
  }
  double orthogonalization_epsilon() const { return orthogonalization_epsilon_; }
  PowerSGDOptions& random_seed(uint64_t v) {
    random_seed_ = v;
    return *this;
  }
  uint64_t random_seed() const { return random_seed_; }
  PowerSGDOptions& compression_stats_logging_frequency(int64_t v) {
    compression_stats_logging_frequency_ = v;
    return *this;
  }
  int64_t compression_stats_logging_frequency() const { return compression_stats_logging_frequency_; }
  PowerSGDOptions& batch_tensors_with_same_shape(bool v) {
    batch_tensors_with_same_shape_ = v;
    return *this;
  }
  bool batch_tensors_with_same_shape() const { return batch_tensors_with_same_shape_; }

 private:
  int64_t matrix_approximation_rank_ = 1;
  int64_t start_powerSGD_iter_ = 1000;
  double min_compression_rate_ = 2;
  bool use_error_feedback_ = true;
  bool warm_start_ = true;
  double orthogonalization_epsilon_ = 0;
  uint64_t random_seed_ = 0;
  int64_t compression_stats_logging_frequency_ = 10000;
  bool batch_tensors_with_same_shape_ = false;
};

class PowerSGDState {
 public:
  // Throws when start_powerSGD_iter <= 1 while error feedback or warm start is on: DDP rebuilds
  // its buckets after the first iteration, so per-bucket memory is only meaningful from the second.
  explicit PowerSGDState(ProcessGroupPtr process_group, const PowerSGDOptions& options = PowerSGDOptions());

  ProcessGroup& process_group() const { return *process_group_; }
  // Counts iterations on the last bucket (every bucket has then been seen once this iteration).
  void maybe_increase_iter(const GradBucket& bucket);
  // (compression rate, numel before, numel after) accumulated since the start of PowerSGD.
  std::tuple<double, int64_t, int64_t> compression_stats() const;
  // Logs the statistics to stderr (rank 0) every compression_stats_logging_frequency iterations.
  void maybe_report_compression_stats(const GradBucket& bucket);

  // Everything but the process group (PyTorch's __getstate__): hyper-parameters, iteration,
  // statistics, RNG state, and per-bucket error / P / Q memory (cloned). Keys:
  // "error_dict.<bucket>", "p_memory_dict.<bucket>", "q_memory_dict.<bucket>", "rng.*", ...
  nn::StateDict state_dict() const;
  // Restores a state_dict() and re-attaches `process_group` (PyTorch's __setstate__ + the
  // process_group assignment). Tensors are cloned so the checkpoint stays untouched.
  void load_state_dict(const nn::StateDict& state, ProcessGroupPtr process_group);

  // Hyper-parameters (public like PyTorch's attributes; change them only before training).
  int64_t matrix_approximation_rank;
  int64_t start_powerSGD_iter;
  double min_compression_rate;
  bool use_error_feedback;
  bool warm_start;
  double orthogonalization_epsilon;
  int64_t compression_stats_logging_frequency;
  // Compress and decompress same-shape matrices of a bucket in one batched matmul ([b, n, m])
  // instead of one by one. Same results: only the number of (larger) matmuls changes.
  bool batch_tensors_with_same_shape;

  // Per-bucket memory, keyed by bucket index. Entries are created by the hook on the calling
  // thread before any collective is launched; the completion callback only touches tensors it
  // captured, never the maps, so the maps are never mutated concurrently.
  std::map<size_t, Tensor> error_dict, p_memory_dict, q_memory_dict;
  Generator rng;
  int64_t iter = 0;
  int64_t next_stats_report = 0;
  int64_t total_numel_before_compression = 0;
  int64_t total_numel_after_compression = 0;

 private:
  ProcessGroupPtr process_group_;
};

}  // namespace ember::distributed
