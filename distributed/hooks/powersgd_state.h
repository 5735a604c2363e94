// PowerSGDState: hyper-parameters and per-bucket memory of the PowerSGD hooks (PyTorch's
// ddp_comm_hooks/powerSGD_hook.py PowerSGDState): error-feedback residuals, warm-start P/Q memory,
// the iteration counter, the Q-initialisation RNG and compression statistics. docs/design.md step 10.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>

#include "distributed/hooks/grad_bucket.h"
#include "distributed/process_group.h"
#include "nn/state_dict.h"
#include "tensor/generator.h"

namespace ember::distributed {

// A named option: a chainable setter `name(value)`, a getter `name()`, and a default.
#define EMBER_POWERSGD_ARG(T, name, default_value) \
 public:                                            \
  PowerSGDOptions& name(T value) {                  \
    name##_ = value;                                \
    return *this;                                   \
  }                                                 \
  T name() const { return name##_; }                \
                                                    \
 private:                                           \
  T name##_ = default_value

// PowerSGDState's hyper-parameters: PyTorch's keyword arguments, with its defaults, set by name:
//   PowerSGDOptions().matrix_approximation_rank(4).start_powerSGD_iter(2)
class PowerSGDOptions {
  EMBER_POWERSGD_ARG(int64_t, matrix_approximation_rank, 1);
  EMBER_POWERSGD_ARG(int64_t, start_powerSGD_iter, 1000);
  EMBER_POWERSGD_ARG(double, min_compression_rate, 2);
  EMBER_POWERSGD_ARG(bool, use_error_feedback, true);
  EMBER_POWERSGD_ARG(bool, warm_start, true);
  EMBER_POWERSGD_ARG(double, orthogonalization_epsilon, 0);
  EMBER_POWERSGD_ARG(uint64_t, random_seed, 0);
  EMBER_POWERSGD_ARG(int64_t, compression_stats_logging_frequency, 10000);
  EMBER_POWERSGD_ARG(bool, batch_tensors_with_same_shape, false);
};
#undef EMBER_POWERSGD_ARG

// The state PowerSGD's hooks share (PyTorch's PowerSGDState): hyper-parameters, per-bucket error
// feedback and P/Q memory, the iteration counter and RNG. state_dict() checkpoints it.
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
