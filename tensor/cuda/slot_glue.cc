#include "tensor/cuda/slot_glue.h"

namespace ember::cuda {

static_assert(static_cast<int>(DType::kBool) == static_cast<int>(ScalarType::kBool) &&
                  static_cast<int>(DType::kFloat16) == static_cast<int>(ScalarType::kFloat16) &&
                  static_cast<int>(DType::kUInt8) == static_cast<int>(ScalarType::kUInt8),
              "launch.h's DType must follow ScalarType");

ScalarArg scalar_arg(const Scalar& s) {
  ScalarArg a;
  a.f = s.to_double();
  a.i = s.to<int64_t>();
  a.b = s.to<bool>();
  return a;
}

Indexer make_indexer(const char* op, const Shape& sizes, const std::vector<Shape>& strides) {
  Indexer ix;
  const int nops = static_cast<int>(strides.size());
  EMBER_INTERNAL_ASSERT(nops >= 1 && nops <= kMaxOperands);
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t size = sizes[d];
    if (size == 1) continue;
    bool merge = ix.ndim > 0;
    for (int k = 0; k < nops && merge; ++k) {
      merge = ix.strides[k][ix.ndim - 1] == strides[k][d] * size;
    }
    if (merge) {
      ix.sizes[ix.ndim - 1] *= size;
      for (int k = 0; k < nops; ++k) ix.strides[k][ix.ndim - 1] = strides[k][d];
      continue;
    }
    EMBER_CHECK(ix.ndim < kMaxDims, "no CUDA kernel for ", op, " over ", shape_to_string(sizes),
                ": more than ", kMaxDims, " dims that cannot be merged");
    ix.sizes[ix.ndim] = size;
    for (int k = 0; k < nops; ++k) ix.strides[k][ix.ndim] = strides[k][d];
    ++ix.ndim;
  }
  if (ix.ndim == 0) {  // a single element
    ix.sizes[0] = 1;
    for (int k = 0; k < nops; ++k) ix.strides[k][0] = 0;
    ix.ndim = 1;
  }
  return ix;
}

Indexer make_indexer(const char* op, std::initializer_list<const Tensor*> operands) {
  std::vector<Shape> strides;
  for (const Tensor* t : operands) strides.push_back(t->strides());
  return make_indexer(op, (*operands.begin())->sizes(), strides);
}

void check_launch(int error, const char* op, const Tensor& out) {
  CUDA_CHECK(static_cast<cudaError_t>(error), " launching ", op, " for ", out.describe());
}

}  // namespace ember::cuda
