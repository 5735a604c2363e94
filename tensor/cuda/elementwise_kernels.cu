// Strided, broadcasting elementwise kernels: binary arithmetic and comparisons, unary math, clamp
// and where, at every dtype the CPU backend has, with the CPU's semantics (tensor/cpu/
// elementwise_kernels.cc): integers wrap, NaN propagates through maximum/minimum, relu keeps NaN,
// sign(NaN) == 0, 16-bit floats compute in float.
#include <cmath>

#include "tensor/cuda/device_types.h"

namespace ember::cuda {
namespace {

template <typename M>
constexpr bool wraps_v = std::is_integral<M>::value && !std::is_same<M, bool>::value;

template <typename M>
__device__ M add_w(M x, M y) {
  if constexpr (wraps_v<M>) {
    using U = std::make_unsigned_t<M>;
    return static_cast<M>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  } else if constexpr (std::is_same<M, bool>::value) {
    return x || y;
  } else {
    return x + y;
  }
}
template <typename M>
__device__ M sub_w(M x, M y) {
  if constexpr (wraps_v<M>) {
    using U = std::make_unsigned_t<M>;
    return static_cast<M>(static_cast<U>(static_cast<U>(x) - static_cast<U>(y)));
  } else {
    return x - y;
  }
}
template <typename M>
__device__ M mul_w(M x, M y) {
  if constexpr (wraps_v<M>) {
    using U = std::make_unsigned_t<M>;
    return static_cast<M>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
  } else if constexpr (std::is_same<M, bool>::value) {
    return x && y;
  } else {
    return x * y;
  }
}
template <typename M>
__device__ bool is_negative(M x) {
  if constexpr (std::is_unsigned<M>::value) {
    return false;
  } else {
    return x < M(0);
  }
}
template <typename M>
__device__ bool is_nan(M x) {
  if constexpr (std::is_floating_point<M>::value) {
    return x != x;
  } else {
    return false;
  }
}
template <typename T>
__device__ T int_pow(T base, T exp) {
  if (is_negative(exp)) {
    if (base == T(1)) return T(1);
    if constexpr (std::is_signed<T>::value) {
      if (base == T(-1)) return (exp % 2 == 0) ? T(1) : T(-1);
    }
    return T(0);
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = mul_w<T>(result, base);
    base = mul_w<T>(base, base);
    exp = static_cast<T>(exp >> 1);
  }
  return result;
}

template <typename Out, typename In, typename F>
__global__ void binary_kernel(Out* out, const In* a, const In* b, Indexer ix, int64_t n, F f) {
  for (int64_t i = global_thread_index(); i < n; i += grid_stride()) {
    const Offsets<3> o = offsets_of<3>(ix, i);
    out[o.of[0]] = f(a[o.of[1]], b[o.of[2]]);
  }
}

template <typename Out, typename In, typename F>
__global__ void unary_kernel(Out* out, const In* in, Indexer ix, int64_t n, F f) {
  for (int64_t i = global_thread_index(); i < n; i += grid_stride()) {
    const Offsets<2> o = offsets_of<2>(ix, i);
    out[o.of[0]] = f(in[o.of[1]]);
  }
}

template <typename T>
__global__ void where_kernel(T* out, const bool* cond, const T* a, const T* b, Indexer ix,
                             int64_t n) {
  for (int64_t i = global_thread_index(); i < n; i += grid_stride()) {
    const Offsets<4> o = offsets_of<4>(ix, i);
    out[o.of[0]] = cond[o.of[1]] ? a[o.of[2]] : b[o.of[3]];
  }
}

template <typename Out, typename In, typename F>
int run_binary(void* out, const void* a, const void* b, const Indexer& ix, int64_t n, F f,
               cudaStream_t stream) {
  const auto kernel = binary_kernel<Out, In, F>;
  EMBER_LAUNCH(kernel, blocks_for(n), kThreadsPerBlock, 0, stream, static_cast<Out*>(out),
               static_cast<const In*>(a), static_cast<const In*>(b), ix, n, f);
  return static_cast<int>(cudaGetLastError());
}

template <typename T, typename F>
int run_unary(void* out, const void* in, const Indexer& ix, int64_t n, F f, cudaStream_t stream) {
  const auto kernel = unary_kernel<T, T, F>;
  EMBER_LAUNCH(kernel, blocks_for(n), kThreadsPerBlock, 0, stream, static_cast<T*>(out),
               static_cast<const T*>(in), ix, n, f);
  return static_cast<int>(cudaGetLastError());
}

// The functors are structs, not lambdas: nvcc needs --extended-lambda for device lambdas in
// host code, and named types keep kernel names readable in the simulator's messages.
template <typename T>
struct Comparison {
  BinaryKind op;
  __device__ bool operator()(T x, T y) const {
    using M = opmath_t<T>;
    const M a = M(x), b = M(y);
    switch (op) {
      case BinaryKind::kEq: return a == b;
      case BinaryKind::kNe: return a != b;
      case BinaryKind::kLt: return a < b;
      case BinaryKind::kLe: return a <= b;
      case BinaryKind::kGt: return a > b;
      default: return a >= b;
    }
  }
};

template <typename T>
struct Arithmetic {
  BinaryKind op;
  opmath_t<T> alpha;
  __device__ T operator()(T x, T y) const {
    using M = opmath_t<T>;
    const M a = M(x), b = M(y);
    switch (op) {
      case BinaryKind::kAdd: return T(add_w(a, mul_w(alpha, b)));
      case BinaryKind::kSub: return T(sub_w(a, mul_w(alpha, b)));
      case BinaryKind::kMul: return T(mul_w(a, b));
      case BinaryKind::kDiv:
        if constexpr (std::is_floating_point<M>::value) return T(a / b);
        return T(M(0));  // not reached: the op promotes integer division to float32
      case BinaryKind::kPow:
        if constexpr (std::is_floating_point<M>::value) {
          return T(std::pow(a, b));
        } else if constexpr (std::is_same<M, bool>::value) {
          return T(a || !b);
        } else {
          return int_pow<M>(a, b);
        }
      case BinaryKind::kMaximum: return is_nan(a) ? x : is_nan(b) ? y : (a > b ? x : y);
      case BinaryKind::kMinimum: return is_nan(a) ? x : is_nan(b) ? y : (a < b ? x : y);
      case BinaryKind::kThresholdBackward: return b <= alpha ? T(M(0)) : x;
      default: return x;
    }
  }
};

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)

template <typename T>
struct FloatingUnary {
  UnaryKind op;
  __device__ T operator()(T x) const {
    using M = opmath_t<T>;
    const M v = M(x);
    switch (op) {
      case UnaryKind::kExp: return T(std::exp(v));
      case UnaryKind::kLog: return T(std::log(v));
      case UnaryKind::kSqrt: return T(std::sqrt(v));
      case UnaryKind::kRsqrt: return T(M(1) / std::sqrt(v));
      case UnaryKind::kSigmoid: return T(M(1) / (M(1) + std::exp(-v)));
      case UnaryKind::kTanh: return T(std::tanh(v));
      // GELU and its derivative: the formulas of tensor/cpu/elementwise_kernels.cc.
      case UnaryKind::kGelu: return T(v * M(0.5) * (M(1) + std::erf(v * M(kSqrtHalf))));
      case UnaryKind::kGeluTanh: {
        const M t = std::tanh(M(kSqrt2OverPi) * (v + M(0.044715) * v * v * v));
        return T(M(0.5) * v * (M(1) + t));
      }
      case UnaryKind::kGeluDerivative:
        return T(M(0.5) * (M(1) + std::erf(v * M(kSqrtHalf))) +
                 v * M(kInvSqrt2Pi) * std::exp(M(-0.5) * v * v));
      case UnaryKind::kGeluTanhDerivative: {
        const M t = std::tanh(M(kSqrt2OverPi) * (v + M(0.044715) * v * v * v));
        const M du = M(kSqrt2OverPi) * (M(1) + M(3 * 0.044715) * v * v);
        return T(M(0.5) * (M(1) + t) + M(0.5) * v * (M(1) - t * t) * du);
      }
      default: return x;
    }
  }
};

template <typename T>
struct NumericUnary {
  UnaryKind op;
  __device__ T operator()(T x) const {
    using M = opmath_t<T>;
    const M v = M(x);
    switch (op) {
      case UnaryKind::kNeg: return T(sub_w(M(0), v));
      case UnaryKind::kAbs: return is_negative(v) ? T(sub_w(M(0), v)) : x;
      case UnaryKind::kRelu: return is_negative(v) ? T(M(0)) : x;  // keeps NaN, as PyTorch
      case UnaryKind::kSign:
        if (is_nan(v)) return T(M(0));
        return T(is_negative(v) ? M(-1) : (v > M(0) ? M(1) : v));
      default: return x;
    }
  }
};

template <typename T>
struct Clamp {
  bool has_lo, has_hi;
  opmath_t<T> lo, hi;
  __device__ T operator()(T x) const {
    opmath_t<T> v = opmath_t<T>(x);
    if (has_lo && v < lo) v = lo;  // comparisons with NaN are false: NaN passes through
    if (has_hi && v > hi) v = hi;
    return T(v);
  }
};

}  // namespace

int launch_binary(BinaryKind op, DType dtype, void* out, const void* a, const void* b,
                  const Indexer& ix, int64_t n, ScalarArg alpha, cudaStream_t stream) {
  if (n == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (op >= BinaryKind::kEq) {
      return run_binary<bool, T>(out, a, b, ix, n, Comparison<T>{op}, stream);
    }
    return run_binary<T, T>(out, a, b, ix, n, Arithmetic<T>{op, scalar_as<opmath_t<T>>(alpha)},
                            stream);
  });
}

int launch_unary(UnaryKind op, DType dtype, void* out, const void* in, const Indexer& ix,
                 int64_t n, cudaStream_t stream) {
  if (n == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_floating_v<T>) {
      if (op >= UnaryKind::kExp) return run_unary<T>(out, in, ix, n, FloatingUnary<T>{op}, stream);
    }
    if constexpr (std::is_same<T, bool>::value) {
      return static_cast<int>(cudaErrorInvalidValue);  // the glue rejects bool first
    } else {
      return run_unary<T>(out, in, ix, n, NumericUnary<T>{op}, stream);
    }
  });
}

int launch_clamp(DType dtype, void* out, const void* in, const Indexer& ix, int64_t n,
                 bool has_lo, ScalarArg lo, bool has_hi, ScalarArg hi, cudaStream_t stream) {
  if (n == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    return run_unary<T>(out, in, ix, n,
                        Clamp<T>{has_lo, has_hi, scalar_as<M>(lo), scalar_as<M>(hi)}, stream);
  });
}

int launch_where(DType dtype, void* out, const bool* cond, const void* a, const void* b,
                 const Indexer& ix, int64_t n, cudaStream_t stream) {
  if (n == 0) return 0;
  return dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = where_kernel<T>;
    EMBER_LAUNCH(kernel, blocks_for(n), kThreadsPerBlock, 0, stream, static_cast<T*>(out), cond,
                 static_cast<const T*>(a), static_cast<const T*>(b), ix, n);
    return static_cast<int>(cudaGetLastError());
  });
}

}  // namespace ember::cuda
