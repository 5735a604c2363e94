// x + alpha * y for floating x, y, alpha, as every CPU kernel that computes it must round it
// (Note [Fused SGD], tensor/fused_sgd.cc): one fused multiply-add where this capability level has
// FMA (AVX2, AVX-512), as PyTorch's vectorised add does (vec::fmadd(b, alpha, a)); a multiply then
// an add at the baseline level. Written out rather than left to the compiler, whose contraction of
// `x + alpha * y` depends on the optimisation level (GCC forms FMAs only from -O2 on): the binary
// kernel's add and the fused SGD kernel then agree in every build, sanitizers' -O1 included.
// Include only from files in CPU_KERNEL_SRCS (Note [CPU capability namespaces]).
#pragma once

#include <cmath>

#include "tensor/cpu/capability_namespace.h"

namespace ember::cpu::CPU_CAPABILITY {

template <typename M>
inline M add_scaled(M x, M alpha, M y) {
#ifdef __FMA__
  return std::fma(alpha, y, x);
#else
  return x + alpha * y;
#endif
}

}  // namespace ember::cpu::CPU_CAPABILITY
