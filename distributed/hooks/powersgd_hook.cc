#include "distributed/hooks/powersgd_hook.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>
#include <utility>

#include "distributed/hooks/default_hooks.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::distributed {
namespace {

template <typename T>
void orthogonalize_impl(T* a, int64_t n, int64_t r, int64_t rs, double epsilon) {
  for (int64_t i = 0; i < r; ++i) {
    double sq = 0;
    for (int64_t k = 0; k < n; ++k) sq += static_cast<double>(a[k * rs + i]) * a[k * rs + i];
    const double d = std::sqrt(sq) + epsilon;
    for (int64_t k = 0; k < n; ++k) a[k * rs + i] = d == 0 ? T(0) : static_cast<T>(a[k * rs + i] / d);
    // Remove the component along column i from the remaining columns.
    for (int64_t j = i + 1; j < r; ++j) {
      double dot = 0;
      for (int64_t k = 0; k < n; ++k) dot += static_cast<double>(a[k * rs + i]) * a[k * rs + j];
      for (int64_t k = 0; k < n; ++k) a[k * rs + j] = static_cast<T>(a[k * rs + j] - dot * a[k * rs + i]);
    }
  }
}

void check_bucket(const GradBucket& bucket, const char* hook) {
  const Tensor& b = bucket.buffer();
  EMBER_CHECK(!b.is_sparse(), hook, ": bucket ", bucket.index(), " is sparse; PowerSGD supports dense buckets only");
  EMBER_CHECK(is_floating_point(b.dtype()), hook, ": bucket ", bucket.index(), " has dtype ",
              dtype_name(b.dtype()), "; PowerSGD needs a floating-point bucket");
  EMBER_CHECK(b.is_contiguous(), hook, ": bucket ", bucket.index(), " buffer is not contiguous");
}

FuturePtr allreduce_async(ProcessGroup& group, const Tensor& t) {
  std::vector<Tensor> tensors{t};
  return group.allreduce(tensors)->get_future();
}

FuturePtr completed_future() {
  auto f = std::make_shared<Future>();
  f->mark_completed({});
  return f;
}

// Fresh random Qs (same on every rank: the RNG is seeded identically), as PyTorch: one seed drawn
// from the state's RNG per bucket and iteration, then standard normals drawn on the CPU and copied
// to the Qs' device, so CPU and GPU runs start from the same Qs.
void randomize(std::vector<Tensor>& qs, PowerSGDState& state, ScalarType dtype) {
  Generator g(state.rng.next_below(1000000000ull));
  for (Tensor& q : qs) copy_(q, randn(q.sizes(), &g, dtype));
}

}  // namespace

std::tuple<bool, int64_t, int64_t> should_compress(int64_t n, int64_t m, int64_t rank,
                                                   double min_compression_rate) {
  const int64_t uncompressed = n * m, compressed = (n + m) * rank;
  return {static_cast<double>(compressed) * min_compression_rate < static_cast<double>(uncompressed),
          uncompressed, compressed};
}

void orthogonalize(const Tensor& matrix, double epsilon) {
  EMBER_CHECK(matrix.dim() == 2 && matrix.stride(1) == 1, "orthogonalize: expected a row-major 2-d matrix, got ",
              matrix.describe());
  const int64_t n = matrix.size(0), r = matrix.size(1), rs = matrix.stride(0);
  if (!matrix.is_cpu()) {
    // Gram-Schmidt is sequential over r <= rank columns of an n x r matrix: staged through host
    // memory, since host code cannot read a GPU's (Note [Simulated device memory is not host memory]).
    Tensor host = matrix.cpu().contiguous();
    orthogonalize(host, epsilon);
    copy_(matrix, host);
    return;
  }
  if (matrix.dtype() == kFloat16 || matrix.dtype() == kBFloat16) {
    // Under fp16/bf16_compress_wrapper: Gram-Schmidt in float, rounded once on the way back.
    Tensor wide = matrix.to(kFloat32, /*copy=*/true);
    orthogonalize_impl(wide.data_ptr<float>(), n, r, r, epsilon);
    copy_(matrix, wide);
  } else if (matrix.dtype() == kFloat64) {
    orthogonalize_impl(matrix.data_ptr<double>(), n, r, rs, epsilon);
  } else {
    orthogonalize_impl(matrix.data_ptr<float>(), n, r, rs, epsilon);
  }
}

namespace {

// One batched matmul's worth of matrices to compress: a single [1, n, m] view of the bucket, or,
// with batch_tensors_with_same_shape, every n x m matrix of the bucket stacked into [b, n, m].
struct CompressionUnit {
  Tensor matrices;               // [b, n, m]
  std::vector<Tensor> sources;   // the bucket's views behind a stacked batch (empty for a view)
  int64_t b, n, m, r;

  // Writes the decompressed [b, n, m] approximation back into the bucket.
  void write_back(const Tensor& approx) const {
    if (sources.empty()) {
      copy_(matrices, approx);
      return;
    }
    for (size_t i = 0; i < sources.size(); ++i) copy_(sources[i], approx.select(0, static_cast<int64_t>(i)));
  }
};

// As PyTorch: the matrices are visited grouped by shape (first-seen order), which fixes the layout
// of the P and Q memory and the order random Qs are drawn in, batched or not.
std::vector<CompressionUnit> compression_units(const std::vector<Tensor>& to_compress, const PowerSGDState& state) {
  std::vector<std::vector<Tensor>> groups;
  for (const Tensor& t : to_compress) {
    auto same = std::find_if(groups.begin(), groups.end(),
                             [&](const std::vector<Tensor>& g) { return g.front().sizes() == t.sizes(); });
    if (same == groups.end()) {
      groups.push_back({t});
    } else {
      same->push_back(t);
    }
  }
  std::vector<CompressionUnit> units;
  for (const std::vector<Tensor>& g : groups) {
    const int64_t n = g.front().size(0), m = g.front().size(1);
    const int64_t r = std::min({n, m, state.matrix_approximation_rank});
    if (state.batch_tensors_with_same_shape && g.size() > 1) {
      units.push_back({stack(g, 0), g, static_cast<int64_t>(g.size()), n, m, r});
    } else {
      for (const Tensor& t : g) units.push_back({t.view({1, n, m}), {}, 1, n, m, r});
    }
  }
  return units;
}

// Gram-Schmidt on each [n, r] matrix of a [b, n, r] batch.
void orthogonalize_batch(const Tensor& batch, double epsilon) {
  for (int64_t i = 0; i < batch.size(0); ++i) orthogonalize(batch.select(0, i), epsilon);
}

}  // namespace

namespace {

// Error feedback: adds bucket b's residual from the last iteration to `flat` (in place) and returns
// a copy of the result (to measure this iteration's residual) and the residual buffer itself.
// Both are undefined when error feedback is off.
std::pair<Tensor, Tensor> apply_error_feedback(PowerSGDState& state, size_t b, const Tensor& flat) {
  if (!state.use_error_feedback) return {Tensor(), Tensor()};
  auto it = state.error_dict.find(b);
  if (it != state.error_dict.end() && it->second.numel() == flat.numel()) {
    add_(flat, it->second);
  } else {
    state.error_dict[b] = zeros_like(flat);
  }
  return {flat.clone(), state.error_dict[b]};
}

// What both hooks read of the bucket once it is past the plain-allreduce iterations.
struct CompressedBucket {
  Tensor input;          // the bucket's flat buffer, written with the result in place
  size_t index;
  int64_t total;
  TensorOptions on_device;  // the bucket's dtype and device (CPU or CUDA)
  double world;
};

// Until start_powerSGD_iter the hooks are plain allreduces (PyTorch's warm-up): returns that
// allreduce's future then, or nullptr once compression starts (with the bucket checked).
FuturePtr allreduce_before_start(PowerSGDState& state, GradBucket& bucket, const char* hook) {
  if (state.iter < state.start_powerSGD_iter) {
    state.maybe_increase_iter(bucket);
    return allreduce_hook(state.process_group(), bucket);
  }
  check_bucket(bucket, hook);
  return nullptr;
}

CompressedBucket compressed_bucket(PowerSGDState& state, GradBucket& bucket) {
  const Tensor input = bucket.buffer();
  state.total_numel_before_compression += input.numel();
  return {input, bucket.index(), input.numel(), TensorOptions(input.dtype(), input.device()),
          static_cast<double>(state.process_group().size())};
}

// The bucket's gradients as n x m matrices worth compressing and the rest (vectors, small
// matrices), counted into the state's compression statistics.
std::pair<std::vector<Tensor>, std::vector<Tensor>> split_for_compression(PowerSGDState& state,
                                                                           const GradBucket& bucket) {
  std::vector<Tensor> to_compress, uncompressed;
  for (const Tensor& t : bucket.gradients()) {
    const int64_t n = t.dim() == 0 ? 1 : t.size(0);
    const int64_t m = n == 0 ? 0 : t.numel() / n;
    const int64_t r = std::min({n, m, state.matrix_approximation_rank});
    auto [compress, plain_numel, compressed_numel] = should_compress(n, m, r, state.min_compression_rate);
    if (compress) {
      to_compress.push_back(t.view({n, m}));
      state.total_numel_after_compression += compressed_numel;
    } else {
      uncompressed.push_back(t);
      state.total_numel_after_compression += plain_numel;
    }
  }
  state.maybe_report_compression_stats(bucket);
  return {std::move(to_compress), std::move(uncompressed)};
}

// The P and Q memory of a bucket's units, flat, with a [b, n, r] and a [b, m, r] view per unit.
struct LowRankFactors {
  Tensor p_memory, q_memory;
  std::vector<Tensor> ps, qs;
};

// P and Q memory: kept per bucket for warm start, fresh otherwise; the Qs random when fresh, and
// orthogonalised either way.
LowRankFactors low_rank_factors(PowerSGDState& state, const CompressedBucket& in,
                                const std::vector<CompressionUnit>& units) {
  int64_t ps_size = 0, qs_size = 0;
  for (const CompressionUnit& u : units) {
    ps_size += u.b * u.n * u.r;
    qs_size += u.b * u.m * u.r;
  }
  const size_t b = in.index;
  const bool have_memory = state.warm_start && state.p_memory_dict.count(b) &&
                           state.p_memory_dict[b].numel() == ps_size && state.q_memory_dict[b].numel() == qs_size;
  LowRankFactors f;
  f.p_memory = have_memory ? state.p_memory_dict[b] : empty({ps_size}, in.on_device);
  f.q_memory = have_memory ? state.q_memory_dict[b] : empty({qs_size}, in.on_device);
  if (state.warm_start) {
    state.p_memory_dict[b] = f.p_memory;
    state.q_memory_dict[b] = f.q_memory;
  }
  for (size_t i = 0, p_idx = 0, q_idx = 0; i < units.size(); ++i) {
    const CompressionUnit& u = units[i];
    f.ps.push_back(f.p_memory.narrow(0, static_cast<int64_t>(p_idx), u.b * u.n * u.r).view({u.b, u.n, u.r}));
    f.qs.push_back(f.q_memory.narrow(0, static_cast<int64_t>(q_idx), u.b * u.m * u.r).view({u.b, u.m, u.r}));
    p_idx += static_cast<size_t>(u.b * u.n * u.r);
    q_idx += static_cast<size_t>(u.b * u.m * u.r);
  }
  if (!have_memory) randomize(f.qs, state, in.on_device.dtype);
  for (Tensor& q : f.qs) orthogonalize_batch(q, state.orthogonalization_epsilon);
  return f;
}

// The uncompressed tensors' allreduce, issued now; `next` (the Ps' allreduce, issued after it)
// follows once their averages are copied back.
FuturePtr allreduce_uncompressed(ProcessGroup& group, const std::vector<Tensor>& uncompressed, double world,
                                 const std::function<FuturePtr()>& issue_next) {
  if (uncompressed.empty()) return issue_next();
  std::vector<Tensor> flat;
  for (const Tensor& t : uncompressed) flat.push_back(t.reshape({-1}));
  Tensor flat_uncompressed = cat(flat, 0);
  FuturePtr uncompressed_future = allreduce_async(group, flat_uncompressed);
  FuturePtr next = issue_next();
  return uncompressed_future->then_future([uncompressed, flat_uncompressed, world, next](Future&) {
    NoGradGuard guard;
    div_(flat_uncompressed, world);
    int64_t idx = 0;
    for (const Tensor& t : uncompressed) {
      copy_(t, flat_uncompressed.narrow(0, idx, t.numel()).view(t.sizes()));
      idx += t.numel();
    }
    return next;
  });
}

}  // namespace

FuturePtr powerSGD_hook(PowerSGDState& state, GradBucket& bucket) {
  if (FuturePtr plain = allreduce_before_start(state, bucket, "powerSGD_hook")) return plain;
  NoGradGuard no_grad;
  const CompressedBucket in = compressed_bucket(state, bucket);
  // Error feedback: compress gradient + last iteration's local residual.
  Tensor input_copy, error;  // plain variables: lambdas below capture them
  std::tie(input_copy, error) = apply_error_feedback(state, in.index, in.input);
  auto [to_compress, uncompressed] = split_for_compression(state, bucket);
  const std::vector<CompressionUnit> units = compression_units(to_compress, state);
  const LowRankFactors f = low_rank_factors(state, in, units);

  // P = M Q. The uncompressed tensors and the Ps go out back to back from this thread; every later
  // step is chained on their futures (see the header), continuations attached before this thread
  // issues anything else (Note [Collectives issued from callbacks run inline]).
  for (size_t i = 0; i < units.size(); ++i) copy_(f.ps[i], bmm(units[i].matrices, f.qs[i]));
  ProcessGroup* pg = &state.process_group();
  const Tensor p_memory = f.p_memory;
  FuturePtr chain = allreduce_uncompressed(*pg, uncompressed, in.world, [pg, p_memory] {
    return p_memory.numel() > 0 ? allreduce_async(*pg, p_memory) : completed_future();
  });
  if (f.p_memory.numel() > 0) {
    // Q = M^T P with P orthogonalised (identical on every rank after the allreduce), then the Qs'
    // allreduce: issued from the callback, on the worker, right after the Ps' one.
    const double epsilon = state.orthogonalization_epsilon;
    chain = chain->then_future([pg, units, f, epsilon](Future&) {
      NoGradGuard guard;
      for (size_t i = 0; i < units.size(); ++i) {
        orthogonalize_batch(f.ps[i], epsilon);
        copy_(f.qs[i], bmm(transpose(units[i].matrices, 1, 2), f.ps[i]));
      }
      return allreduce_async(*pg, f.q_memory);
    });
  }
  state.maybe_increase_iter(bucket);
  // The callbacks touch only captured tensors (never the state's maps): M ~ P Q^T / world.
  return chain->then([in, input_copy, error, units, f](Future&) {
    NoGradGuard guard;
    if (f.q_memory.numel() > 0) div_(f.q_memory, in.world);
    for (size_t i = 0; i < units.size(); ++i) units[i].write_back(bmm(f.ps[i], transpose(f.qs[i], 1, 2)));
    if (error.defined()) copy_(error, sub(input_copy, in.input));
    return std::vector<Tensor>{in.input};
  });
}

FuturePtr batched_powerSGD_hook(PowerSGDState& state, GradBucket& bucket) {
  if (FuturePtr plain = allreduce_before_start(state, bucket, "batched_powerSGD_hook")) return plain;
  NoGradGuard no_grad;
  const CompressedBucket in = compressed_bucket(state, bucket);
  const Tensor input = in.input;
  const size_t b = in.index;
  const int64_t total = in.total;
  const TensorOptions on_device = in.on_device;
  const double world = in.world;
  const auto side = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(total))));
  const int64_t padded_total = side * side;
  const int64_t r = std::min(state.matrix_approximation_rank, side);
  state.total_numel_after_compression += side * r * 2;
  state.maybe_report_compression_stats(bucket);

  // ember tensors cannot be resized in place: the square matrix lives in a zero-padded copy.
  Tensor padded = zeros({padded_total}, on_device);
  copy_(padded.narrow(0, 0, total), input);
  Tensor input_copy, error;  // plain variables: lambdas below capture them
  std::tie(input_copy, error) = apply_error_feedback(state, b, padded);
  Tensor matrix = padded.view({side, side});

  const bool have_memory = state.warm_start && state.p_memory_dict.count(b) &&
                           state.q_memory_dict[b].numel() == side * r;
  Tensor p = have_memory ? state.p_memory_dict[b] : empty({side, r}, on_device);
  Tensor q = have_memory ? state.q_memory_dict[b] : empty({side, r}, on_device);
  if (!have_memory) {
    std::vector<Tensor> qs{q};
    randomize(qs, state, on_device.dtype);
  }
  // As PyTorch's batched hook: Q is orthogonalised every iteration, a warm-started one included.
  orthogonalize(q, state.orthogonalization_epsilon);
  if (state.warm_start) {
    state.p_memory_dict[b] = p;
    state.q_memory_dict[b] = q;
  }
  copy_(p, mm(matrix, q));
  // As in powerSGD_hook: the Q round is chained, issued from the P allreduce's callback.
  ProcessGroup* pg = &state.process_group();
  const double epsilon = state.orthogonalization_epsilon;
  FuturePtr q_future = allreduce_async(*pg, p)->then_future([pg, matrix, p, q, epsilon](Future&) {
    NoGradGuard guard;
    orthogonalize(p, epsilon);
    copy_(q, mm(transpose(matrix, 0, 1), p));
    return allreduce_async(*pg, q);
  });
  state.maybe_increase_iter(bucket);
  return q_future->then([input, padded, matrix, input_copy, error, p, q, total, world](Future&) {
    NoGradGuard guard;
    div_(q, world);
    copy_(matrix, mm(p, transpose(q, 0, 1)));
    if (error.defined()) copy_(error, sub(input_copy, padded));
    copy_(input, padded.narrow(0, 0, total));
    return std::vector<Tensor>{input};
  });
}

}  // namespace ember::distributed
