#include "distributed/hooks/powersgd_state.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::distributed {
namespace {

Tensor int64_scalar(int64_t v) { return from_vector<int64_t>({v}); }
Tensor double_scalar(double v) { return from_vector<double>({v}); }

Tensor require(const nn::StateDict& sd, const std::string& key) {
  Tensor t = nn::find_in(sd, key);
  EMBER_CHECK(t.defined(), "PowerSGDState::load_state_dict: missing key '", key, "'");
  return t;
}
int64_t get_int(const nn::StateDict& sd, const std::string& key) {
  return require(sd, key).to(kInt64).item<int64_t>();
}
double get_double(const nn::StateDict& sd, const std::string& key) {
  return require(sd, key).to(kFloat64).item<double>();
}

// "error_dict.3" -> 3 when `key` starts with `prefix`.
bool bucket_key(const std::string& key, const std::string& prefix, size_t* bucket) {
  if (key.rfind(prefix, 0) != 0) return false;
  *bucket = static_cast<size_t>(std::stoull(key.substr(prefix.size())));
  return true;
}

}  // namespace

PowerSGDState::PowerSGDState(ProcessGroupPtr process_group, const PowerSGDOptions& options)
    : matrix_approximation_rank(options.matrix_approximation_rank()),
      start_powerSGD_iter(options.start_powerSGD_iter()),
      min_compression_rate(options.min_compression_rate()),
      use_error_feedback(options.use_error_feedback()),
      warm_start(options.warm_start()),
      orthogonalization_epsilon(options.orthogonalization_epsilon()),
      compression_stats_logging_frequency(std::max<int64_t>(1, options.compression_stats_logging_frequency())),
      batch_tensors_with_same_shape(options.batch_tensors_with_same_shape()),
      rng(options.random_seed()),
      process_group_(std::move(process_group)) {
  EMBER_CHECK(process_group_ != nullptr, "PowerSGDState: process_group is null");
  EMBER_CHECK(matrix_approximation_rank >= 1, "PowerSGDState: matrix_approximation_rank must be >= 1, got ",
              matrix_approximation_rank);
  // PyTorch's rule: DDP's buckets are rebuilt after the first iteration, so error feedback and
  // warm start (keyed by bucket index) can only be applied from the second.
  EMBER_CHECK(!((use_error_feedback || warm_start) && start_powerSGD_iter <= 1),
              "PowerSGDState: expect start_powerSGD_iter > 1 if use_error_feedback or warm_start is "
              "enabled, because PowerSGD can only be applied after the first two iterations in DDP "
              "(got start_powerSGD_iter=", start_powerSGD_iter, ")");
  next_stats_report = 0;
}

void PowerSGDState::maybe_increase_iter(const GradBucket& bucket) {
  if (!bucket.is_last()) return;
  ++iter;
  if (iter == start_powerSGD_iter && process_group_->rank() == 0) {
    std::fprintf(stderr, "PowerSGD: start to apply PowerSGD after %lld iterations.\n",
                 static_cast<long long>(iter));
  }
}

std::tuple<double, int64_t, int64_t> PowerSGDState::compression_stats() const {
  const double rate = total_numel_after_compression > 0
                          ? static_cast<double>(total_numel_before_compression) /
                                static_cast<double>(total_numel_after_compression)
                          : 0.0;
  return {rate, total_numel_before_compression, total_numel_after_compression};
}

void PowerSGDState::maybe_report_compression_stats(const GradBucket& bucket) {
  if (!bucket.is_last() || iter < next_stats_report) return;
  auto [rate, before, after] = compression_stats();
  if (process_group_->rank() == 0) {
    std::fprintf(stderr,
                 "PowerSGD: compression stats at iteration %lld: rate %.3f, numel before %lld, "
                 "after %lld\n",
                 static_cast<long long>(iter), rate, static_cast<long long>(before),
                 static_cast<long long>(after));
  }
  next_stats_report = iter + compression_stats_logging_frequency;
}

nn::StateDict PowerSGDState::state_dict() const {
  nn::StateDict sd;
  sd.emplace_back("matrix_approximation_rank", int64_scalar(matrix_approximation_rank));
  sd.emplace_back("start_powerSGD_iter", int64_scalar(start_powerSGD_iter));
  sd.emplace_back("min_compression_rate", double_scalar(min_compression_rate));
  sd.emplace_back("use_error_feedback", int64_scalar(use_error_feedback));
  sd.emplace_back("warm_start", int64_scalar(warm_start));
  sd.emplace_back("orthogonalization_epsilon", double_scalar(orthogonalization_epsilon));
  sd.emplace_back("compression_stats_logging_frequency", int64_scalar(compression_stats_logging_frequency));
  sd.emplace_back("batch_tensors_with_same_shape", int64_scalar(batch_tensors_with_same_shape));
  sd.emplace_back("iter", int64_scalar(iter));
  sd.emplace_back("next_stats_report", int64_scalar(next_stats_report));
  sd.emplace_back("total_numel_before_compression", int64_scalar(total_numel_before_compression));
  sd.emplace_back("total_numel_after_compression", int64_scalar(total_numel_after_compression));
  // The generator's words are uint64; stored bit for bit in int64 tensors.
  const Generator::State g = rng.get_state();
  std::vector<int64_t> words(4);
  std::memcpy(words.data(), g.s.data(), sizeof(uint64_t) * 4);
  int64_t seed = 0;
  std::memcpy(&seed, &g.seed, sizeof(seed));
  sd.emplace_back("rng.s", from_vector<int64_t>(words));
  sd.emplace_back("rng.seed", int64_scalar(seed));
  sd.emplace_back("rng.has_cached_normal", int64_scalar(g.has_cached_normal));
  sd.emplace_back("rng.cached_normal", double_scalar(g.cached_normal));
  for (const auto& [b, t] : error_dict) sd.emplace_back("error_dict." + std::to_string(b), t.clone());
  for (const auto& [b, t] : p_memory_dict) sd.emplace_back("p_memory_dict." + std::to_string(b), t.clone());
  for (const auto& [b, t] : q_memory_dict) sd.emplace_back("q_memory_dict." + std::to_string(b), t.clone());
  return sd;
}

void PowerSGDState::load_state_dict(const nn::StateDict& sd, ProcessGroupPtr process_group) {
  EMBER_CHECK(process_group != nullptr, "PowerSGDState::load_state_dict: process_group is null");
  matrix_approximation_rank = get_int(sd, "matrix_approximation_rank");
  start_powerSGD_iter = get_int(sd, "start_powerSGD_iter");
  min_compression_rate = get_double(sd, "min_compression_rate");
  use_error_feedback = get_int(sd, "use_error_feedback") != 0;
  warm_start = get_int(sd, "warm_start") != 0;
  orthogonalization_epsilon = get_double(sd, "orthogonalization_epsilon");
  compression_stats_logging_frequency = get_int(sd, "compression_stats_logging_frequency");
  batch_tensors_with_same_shape = get_int(sd, "batch_tensors_with_same_shape") != 0;
  iter = get_int(sd, "iter");
  next_stats_report = get_int(sd, "next_stats_report");
  total_numel_before_compression = get_int(sd, "total_numel_before_compression");
  total_numel_after_compression = get_int(sd, "total_numel_after_compression");
  Tensor words = require(sd, "rng.s").to(kInt64).contiguous();
  EMBER_CHECK(words.numel() == 4, "PowerSGDState::load_state_dict: 'rng.s' has ", words.numel(),
              " elements, expected 4");
  Generator::State g{};
  std::memcpy(g.s.data(), words.data_ptr<int64_t>(), sizeof(uint64_t) * 4);
  const int64_t seed = get_int(sd, "rng.seed");
  std::memcpy(&g.seed, &seed, sizeof(seed));
  g.has_cached_normal = get_int(sd, "rng.has_cached_normal") != 0;
  g.cached_normal = get_double(sd, "rng.cached_normal");
  rng.set_state(g);
  error_dict.clear();
  p_memory_dict.clear();
  q_memory_dict.clear();
  for (const auto& [key, t] : sd) {
    size_t b = 0;
    if (bucket_key(key, "error_dict.", &b)) error_dict[b] = t.clone();
    else if (bucket_key(key, "p_memory_dict.", &b)) p_memory_dict[b] = t.clone();
    else if (bucket_key(key, "q_memory_dict.", &b)) q_memory_dict[b] = t.clone();
  }
  process_group_ = std::move(process_group);
}

}  // namespace ember::distributed
