#include "tensor/dtype.h"

namespace ember {

size_t element_size(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32: return 4;
    case ScalarType::kFloat64: return 8;
    case ScalarType::kFloat16: return 2;
    case ScalarType::kBFloat16: return 2;
    case ScalarType::kInt32: return 4;
    case ScalarType::kInt64: return 8;
    case ScalarType::kUInt8: return 1;
    case ScalarType::kBool: return 1;
  }
  EMBER_THROW("element_size: unknown dtype ", static_cast<int>(t));
}

const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32: return "float32";
    case ScalarType::kFloat64: return "float64";
    case ScalarType::kFloat16: return "float16";
    case ScalarType::kBFloat16: return "bfloat16";
    case ScalarType::kInt32: return "int32";
    case ScalarType::kInt64: return "int64";
    case ScalarType::kUInt8: return "uint8";
    case ScalarType::kBool: return "bool";
  }
  return "unknown";
}

bool is_floating_point(ScalarType t) {
  return t == ScalarType::kFloat32 || t == ScalarType::kFloat64 || t == ScalarType::kFloat16 ||
         t == ScalarType::kBFloat16;
}

bool is_integral(ScalarType t, bool include_bool) {
  return t == ScalarType::kInt32 || t == ScalarType::kInt64 || t == ScalarType::kUInt8 ||
         (include_bool && t == ScalarType::kBool);
}

ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == b) return a;
  if (a == ScalarType::kBool) return b;
  if (b == ScalarType::kBool) return a;
  const bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    if (a == ScalarType::kFloat64 || b == ScalarType::kFloat64) return ScalarType::kFloat64;
    // f16+bf16, f16+f32, bf16+f32 all land on f32.
    return ScalarType::kFloat32;
  }
  // Both integral (no bool): the wider signed type; uint8 with a signed type gives the signed one.
  auto rank = [](ScalarType t) {
    switch (t) {
      case ScalarType::kUInt8: return 0;
      case ScalarType::kInt32: return 1;
      case ScalarType::kInt64: return 2;
      default: return -1;
    }
  };
  return rank(a) >= rank(b) ? a : b;
}

std::ostream& operator<<(std::ostream& os, ScalarType t) { return os << dtype_name(t); }

}  // namespace ember
