// CPU kernels for elementwise ops. The op switch sits outside the loops; each case instantiates a
// strided loop (tensor/cpu/loops.h) whose contiguous path is a plain loop the compiler vectorises.
// Half/BFloat16 compute in float (opmath_t).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/cpu/add_scaled.h"
#include "tensor/cpu/convert.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/cpu/loops.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

template <typename T>
bool is_negative(T x) {
  if constexpr (std::is_unsigned_v<T>) {
    (void)x;
    return false;
  } else {
    return x < T(0);
  }
}

template <typename T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    (void)x;
    return false;
  }
}

// Signed overflow is undefined behaviour in C++, but PyTorch's integer ops wrap (two's complement):
// integers compute in the unsigned type of their width and convert back. Floats and bool as usual.
template <typename M>
constexpr bool wraps_v = std::is_integral_v<M> && !std::is_same_v<M, bool>;

template <typename M>
M add_w(M x, M y) {
  if constexpr (wraps_v<M>) {
    using U = std::make_unsigned_t<M>;
    return static_cast<M>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  } else {
    return x + y;
  }
}
template <typename M>
M sub_w(M x, M y) {
  if constexpr (wraps_v<M>) {
    using U = std::make_unsigned_t<M>;
    return static_cast<M>(static_cast<U>(static_cast<U>(x) - static_cast<U>(y)));
  } else {
    return x - y;
  }
}
template <typename M>
M mul_w(M x, M y) {
  if constexpr (wraps_v<M>) {
    using U = std::make_unsigned_t<M>;
    return static_cast<M>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
  } else if constexpr (std::is_same_v<M, bool>) {
    return x && y;
  } else {
    return x * y;
  }
}
template <typename M>
M neg_w(M x) {
  return sub_w<M>(M(0), x);
}

template <typename T>
T int_pow(T base, T exp) {
  if (is_negative(exp)) {
    // Integer to a negative power: only 1 and -1 survive truncation.
    if (base == T(1)) return T(1);
    if constexpr (std::is_signed_v<T>) {
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

template <typename T>
void comparison(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  using M = opmath_t<T>;
  switch (op) {
    case BinaryOp::kEq: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return M(x) == M(y); });
    case BinaryOp::kNe: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return M(x) != M(y); });
    case BinaryOp::kLt: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return M(x) < M(y); });
    case BinaryOp::kLe: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return M(x) <= M(y); });
    case BinaryOp::kGt: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return M(x) > M(y); });
    case BinaryOp::kGe: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return M(x) >= M(y); });
    default: break;
  }
  EMBER_INTERNAL_ASSERT(false, "not a comparison: ", binary_op_name(op));
}

template <typename T>
void arithmetic(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                const Scalar& alpha) {
  using M = opmath_t<T>;
  const char* name = binary_op_name(op);
  check_binary_operands(op, a.dtype(), alpha);
  const M al = alpha.to<M>();
  const bool unit_alpha = alpha.to_double() == 1.0;
  switch (op) {
    case BinaryOp::kAdd:
      if (unit_alpha) return binary_loop<T, T>(out, a, b, [](T x, T y) { return T(add_w(M(x), M(y))); });
      if constexpr (std::is_floating_point_v<M>) {  // rounded as add_scaled.h says
        return binary_loop<T, T>(out, a, b,
                                 [al](T x, T y) { return T(add_scaled(M(x), al, M(y))); });
      }
      return binary_loop<T, T>(out, a, b,
                               [al](T x, T y) { return T(add_w(M(x), mul_w(al, M(y)))); });
    case BinaryOp::kSub:
      if (unit_alpha) return binary_loop<T, T>(out, a, b, [](T x, T y) { return T(sub_w(M(x), M(y))); });
      return binary_loop<T, T>(out, a, b,
                               [al](T x, T y) { return T(sub_w(M(x), mul_w(al, M(y)))); });
    case BinaryOp::kMul:
      return binary_loop<T, T>(out, a, b, [](T x, T y) { return T(mul_w(M(x), M(y))); });
    case BinaryOp::kDiv:
      if constexpr (std::is_floating_point_v<M>) {
        return binary_loop<T, T>(out, a, b, [](T x, T y) { return T(M(x) / M(y)); });
      }
      break;
    case BinaryOp::kPow:
      if constexpr (std::is_floating_point_v<M>) {
        return binary_loop<T, T>(out, a, b, [](T x, T y) { return T(std::pow(M(x), M(y))); });
      } else {
        return binary_loop<T, T>(out, a, b, [](T x, T y) { return int_pow<T>(x, y); });
      }
    case BinaryOp::kMaximum:
      return binary_loop<T, T>(out, a, b, [](T x, T y) {
        return is_nan(M(x)) ? x : is_nan(M(y)) ? y : (M(x) > M(y) ? x : y);
      });
    case BinaryOp::kMinimum:
      return binary_loop<T, T>(out, a, b, [](T x, T y) {
        return is_nan(M(x)) ? x : is_nan(M(y)) ? y : (M(x) < M(y) ? x : y);
      });
    case BinaryOp::kThresholdBackward:
      return binary_loop<T, T>(out, a, b, [al](T g, T x) { return M(x) <= al ? T(M(0)) : g; });
    default:
      break;
  }
  EMBER_INTERNAL_ASSERT(false, "unhandled binary op ", name, " for dtype ", a.dtype());
}

void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                   const Scalar& alpha) {
  const char* name = binary_op_name(op);
  if (op >= BinaryOp::kEq) {
    EMBER_DISPATCH_ALL_TYPES(a.dtype(), name, [&] { comparison<scalar_t>(op, out, a, b); });
    return;
  }
  EMBER_DISPATCH_ALL_TYPES(a.dtype(), name, [&] { arithmetic<scalar_t>(op, out, a, b, alpha); });
}

// GELU as PyTorch computes it: x * Phi(x) with the erf form of the normal CDF, or the tanh
// approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); and their derivatives in x.
constexpr double kSqrtHalf = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kGeluCubic = 0.044715;

template <typename M>
M gelu_erf(M x) {
  return x * M(0.5) * (M(1) + std::erf(x * M(kSqrtHalf)));
}
template <typename M>
M gelu_erf_derivative(M x) {
  return M(0.5) * (M(1) + std::erf(x * M(kSqrtHalf))) + x * M(kInvSqrt2Pi) * std::exp(M(-0.5) * x * x);
}
template <typename M>
M gelu_tanh(M x) {
  return M(0.5) * x * (M(1) + std::tanh(M(kSqrt2OverPi) * (x + M(kGeluCubic) * x * x * x)));
}
template <typename M>
M gelu_tanh_derivative(M x) {
  const M t = std::tanh(M(kSqrt2OverPi) * (x + M(kGeluCubic) * x * x * x));
  const M du = M(kSqrt2OverPi) * (M(1) + M(3 * kGeluCubic) * x * x);
  return M(0.5) * (M(1) + t) + M(0.5) * x * (M(1) - t * t) * du;
}

template <typename T>
void floating_unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  using M = opmath_t<T>;
  switch (op) {
    case UnaryOp::kExp: return unary_loop<T, T>(out, in, [](T x) { return T(std::exp(M(x))); });
    case UnaryOp::kLog: return unary_loop<T, T>(out, in, [](T x) { return T(std::log(M(x))); });
    case UnaryOp::kSqrt: return unary_loop<T, T>(out, in, [](T x) { return T(std::sqrt(M(x))); });
    case UnaryOp::kRsqrt:
      return unary_loop<T, T>(out, in, [](T x) { return T(M(1) / std::sqrt(M(x))); });
    case UnaryOp::kSigmoid:
      return unary_loop<T, T>(out, in, [](T x) { return T(M(1) / (M(1) + std::exp(-M(x)))); });
    case UnaryOp::kTanh: return unary_loop<T, T>(out, in, [](T x) { return T(std::tanh(M(x))); });
    case UnaryOp::kGelu: return unary_loop<T, T>(out, in, [](T x) { return T(gelu_erf(M(x))); });
    case UnaryOp::kGeluTanh:
      return unary_loop<T, T>(out, in, [](T x) { return T(gelu_tanh(M(x))); });
    case UnaryOp::kGeluDerivative:
      return unary_loop<T, T>(out, in, [](T x) { return T(gelu_erf_derivative(M(x))); });
    case UnaryOp::kGeluTanhDerivative:
      return unary_loop<T, T>(out, in, [](T x) { return T(gelu_tanh_derivative(M(x))); });
    default: break;
  }
  EMBER_INTERNAL_ASSERT(false, "unhandled unary op ", unary_op_name(op));
}

template <typename T>
void numeric_unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  using M = opmath_t<T>;
  switch (op) {
    case UnaryOp::kNeg: return unary_loop<T, T>(out, in, [](T x) { return T(neg_w(M(x))); });
    case UnaryOp::kAbs:
      return unary_loop<T, T>(out, in, [](T x) { return is_negative(M(x)) ? T(neg_w(M(x))) : x; });
    case UnaryOp::kRelu:
      // `x < 0 ? 0 : x` keeps NaN as NaN, like PyTorch.
      return unary_loop<T, T>(out, in, [](T x) { return is_negative(M(x)) ? T(M(0)) : x; });
    case UnaryOp::kSign:
      return unary_loop<T, T>(out, in, [](T x) {
        const M v = M(x);
        if (is_nan(v)) return T(M(0));  // PyTorch: sign(NaN) == 0
        return T(is_negative(v) ? M(-1) : (v > M(0) ? M(1) : v));
      });
    default: break;
  }
  EMBER_INTERNAL_ASSERT(false, "unhandled unary op ", unary_op_name(op));
}

void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in) {
  const char* name = unary_op_name(op);
  if (op >= UnaryOp::kExp) {
    EMBER_DISPATCH_FLOATING_TYPES(in.dtype(), name, [&] { floating_unary<scalar_t>(op, out, in); });
    return;
  }
  EMBER_DISPATCH_NUMERIC_TYPES(in.dtype(), name, [&] { numeric_unary<scalar_t>(op, out, in); });
}

void clamp_kernel(const Tensor& out, const Tensor& in, const std::optional<Scalar>& lo,
                  const std::optional<Scalar>& hi) {
  EMBER_DISPATCH_NUMERIC_TYPES(in.dtype(), "clamp", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const bool has_lo = lo.has_value(), has_hi = hi.has_value();
    const M l = has_lo ? lo->to<M>() : M(0);
    const M h = has_hi ? hi->to<M>() : M(0);
    // Comparisons with NaN are false, so NaN passes through unchanged.
    unary_loop<T, T>(out, in, [=](T x) {
      M v = M(x);
      if (has_lo && v < l) v = l;
      if (has_hi && v > h) v = h;
      return T(v);
    });
  });
}

template <typename T>
using SameSizeUint = std::conditional_t<
    sizeof(T) == 8, uint64_t,
    std::conditional_t<sizeof(T) == 4, uint32_t, std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>>;

// out = cond ? a : b, split across threads like every elementwise loop. The dense cases (a or b may
// be a broadcast scalar, as in ReLU's backward, Note [ReLU backward]) are plain loops the compiler
// vectorises; the constant 0/1 steps keep them free of gathers.
template <typename T>
void where_loop(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  parallel_for_each_strided<4>(
      out.sizes(), {&out, &cond, &a, &b}, [](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t n) {
        T* o = reinterpret_cast<T*>(p[0]);
        const uint8_t* c = reinterpret_cast<const uint8_t*>(p[1]);  // bools: 0 or 1
        const T* x = reinterpret_cast<const T*>(p[2]);
        const T* y = reinterpret_cast<const T*>(p[3]);
        constexpr int64_t st = sizeof(T);
        // A select on the bits: GCC compiles `c[i] ? x[i] : y[i]` to a branch per element, which a
        // ReLU mask mispredicts half the time (20% of a ResNet step when it was written so).
        auto dense = [&](auto xstep, auto ystep) {
          using U = SameSizeUint<T>;
          for (int64_t i = 0; i < n; ++i) {
            U xv, yv;
            std::memcpy(&xv, x + i * xstep, sizeof(T));
            std::memcpy(&yv, y + i * ystep, sizeof(T));
            const U pick_x = U(0) - U(c[i]);  // all ones or all zeros
            const U r = (xv & pick_x) | (yv & ~pick_x);
            std::memcpy(static_cast<void*>(o + i), &r, sizeof(T));
          }
        };
        using One = std::integral_constant<int64_t, 1>;
        using Zero = std::integral_constant<int64_t, 0>;
        if (s[0] == st && s[1] == 1 && (s[2] == st || s[2] == 0) && (s[3] == st || s[3] == 0)) {
          if (s[2] == st && s[3] == st) return dense(One{}, One{});
          if (s[2] == st) return dense(One{}, Zero{});
          if (s[3] == st) return dense(Zero{}, One{});
          return dense(Zero{}, Zero{});
        }
        for (int64_t i = 0; i < n; ++i) {
          const bool pick_a = *reinterpret_cast<const bool*>(p[1] + i * s[1]);
          *reinterpret_cast<T*>(p[0] + i * s[0]) = pick_a ? *reinterpret_cast<const T*>(p[2] + i * s[2])
                                                          : *reinterpret_cast<const T*>(p[3] + i * s[3]);
        }
      });
}

void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  EMBER_DISPATCH_ALL_TYPES(out.dtype(), "where", [&] { where_loop<scalar_t>(out, cond, a, b); });
}

}  // namespace

void register_elementwise_kernels(KernelTable& table) {
  table.binary = binary_kernel;
  table.unary = unary_kernel;
  table.clamp = clamp_kernel;
  table.where = where_kernel;
}

}  // namespace ember::cpu::CPU_CAPABILITY
