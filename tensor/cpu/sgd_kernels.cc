// The CPU kernel of fused_sgd_ (Note [Fused SGD], tensor/fused_sgd.cc): all parameters' elements
// are cut into chunks and the chunks split across threads in one parallel region, so a model of
// many small parameters is updated by every thread instead of one op at a time on the caller's.
#include <type_traits>
#include <vector>

#include "tensor/cpu/add_scaled.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/parallel.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

// The hyperparameters as the op-by-op update rounds them: each op converts its scalar to T.
template <typename T>
struct SgdScalars {
  T weight_decay, momentum, one_minus_dampening, minus_lr;
  explicit SgdScalars(const SgdHyperparameters& h)
      : weight_decay(T(h.weight_decay)),
        momentum(T(h.momentum)),
        one_minus_dampening(T(1 - h.dampening)),
        minus_lr(T(-h.lr)) {}
};

// One run of elements. The flags are template arguments so that each combination is a branch-free
// loop the compiler vectorises.
template <typename T, bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_run(T* param, const T* grad, T* buf, int64_t n, const SgdScalars<T>& s) {
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i];
    if constexpr (kDecay) g = add_scaled(g, s.weight_decay, param[i]);
    if constexpr (kMomentum) {
      T b;
      if constexpr (kFirst) {
        b = g;
      } else {
        const T decayed = buf[i] * s.momentum;  // buf.mul_(momentum), rounded to T
        b = add_scaled(decayed, s.one_minus_dampening, g);
      }
      buf[i] = b;
      g = kNesterov ? add_scaled(g, s.momentum, b) : b;
    }
    param[i] = add_scaled(param[i], s.minus_lr, g);
  }
}

template <typename T>
void sgd_chunk(const SgdParameter& p, int64_t begin, int64_t end, const SgdHyperparameters& h) {
  const SgdScalars<T> s(h);
  T* param = p.param.data_ptr<T>() + begin;
  const T* grad = p.grad.data_ptr<T>() + begin;
  T* buf = p.momentum_buffer.defined() ? p.momentum_buffer.data_ptr<T>() + begin : nullptr;
  const int64_t n = end - begin;
  const bool decay = h.weight_decay != 0;
  auto with_decay = [&](auto... flags) {
    if (decay) {
      sgd_run<T, true, decltype(flags)::value...>(param, grad, buf, n, s);
    } else {
      sgd_run<T, false, decltype(flags)::value...>(param, grad, buf, n, s);
    }
  };
  using yes = std::true_type;
  using no = std::false_type;
  if (h.momentum == 0) return with_decay(no(), no(), no());
  // The flags after decay: momentum, first step, Nesterov.
  if (p.first_step) {
    return h.nesterov ? with_decay(yes(), yes(), yes()) : with_decay(yes(), yes(), no());
  }
  return h.nesterov ? with_decay(yes(), no(), yes()) : with_decay(yes(), no(), no());
}

// Chunks of at most kChunkElements of one parameter: small enough that a model's parameters make
// several pieces a thread, large enough that a chunk's loop dwarfs taking it.
constexpr int64_t kChunkElements = 4096;

struct Chunk {
  size_t param;
  int64_t begin, end;
};

void fused_sgd_kernel(const std::vector<SgdParameter>& params, const SgdHyperparameters& h) {
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t n = params[i].param.numel();
    for (int64_t b = 0; b < n; b += kChunkElements) {
      chunks.push_back({i, b, std::min(n, b + kChunkElements)});
    }
  }
  const ScalarType dtype = params.front().param.dtype();
  // Below ~16K elements in all, one thread does it (parallel_for's grain, in chunks).
  parallel_for(0, static_cast<int64_t>(chunks.size()), 16384 / kChunkElements,
               [&](int64_t begin, int64_t end) {
                 for (int64_t c = begin; c < end; ++c) {
                   const Chunk& k = chunks[c];
                   EMBER_DISPATCH_FLOAT_AND_DOUBLE(dtype, "fused_sgd_", [&] {
                     sgd_chunk<scalar_t>(params[k.param], k.begin, k.end, h);
                   });
                 }
               });
}

}  // namespace

void register_sgd_kernels(KernelTable& table) { table.fused_sgd = fused_sgd_kernel; }

}  // namespace ember::cpu::CPU_CAPABILITY
