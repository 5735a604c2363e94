#include "tensor/dtype.h"

namespace ember {

size_t element_size(ScalarType t) {
  switch (t) {
    case ScalarType::Float32: return 4;
    case ScalarType::Float64: return 8;
    case ScalarType::Float16: return 2;
    case ScalarType::BFloat16: return 2;
    case ScalarType::Int32: return 4;
    case ScalarType::Int64: return 8;
    case ScalarType::UInt8: return 1;
    case ScalarType::Bool: return 1;
  }
  EMBER_THROW("element_size: unknown dtype ", static_cast<int>(t));
}

const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Float32: return "float32";
    case ScalarType::Float64: return "float64";
    case ScalarType::Float16: return "float16";
    case ScalarType::BFloat16: return "bfloat16";
    case ScalarType::Int32: return "int32";
    case ScalarType::Int64: return "int64";
    case ScalarType::UInt8: return "uint8";
    case ScalarType::Bool: return "bool";
  }
  return "unknown";
}

bool is_floating_point(ScalarType t) {
  return t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::Float16 ||
         t == ScalarType::BFloat16;
}

bool is_integral(ScalarType t, bool include_bool) {
  return t == ScalarType::Int32 || t == ScalarType::Int64 || t == ScalarType::UInt8 ||
         (include_bool && t == ScalarType::Bool);
}

ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == b) return a;
  if (a == ScalarType::Bool) return b;
  if (b == ScalarType::Bool) return a;
  const bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    if (a == ScalarType::Float64 || b == ScalarType::Float64) return ScalarType::Float64;
    // f16+bf16, f16+f32, bf16+f32 all land on f32.
    return ScalarType::Float32;
  }
  // Both integral (no bool): the wider signed type; uint8 with a signed type gives the signed one.
  auto rank = [](ScalarType t) {
    switch (t) {
      case ScalarType::UInt8: return 0;
      case ScalarType::Int32: return 1;
      case ScalarType::Int64: return 2;
      default: return -1;
    }
  };
  return rank(a) >= rank(b) ? a : b;
}

std::ostream& operator<<(std::ostream& os, ScalarType t) { return os << dtype_name(t); }

}  // namespace ember
