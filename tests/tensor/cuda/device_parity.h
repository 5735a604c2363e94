// The CUDA op suites' yardstick: run an op on CPU tensors and on copies of them on cuda:0, and
// compare the results (shape, dtype, values; NaN equals NaN) within a tolerance per dtype.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensor/all.h"
#include "tests/tensor/test_util.h"

namespace ember::testing {

inline const Device kCuda0(DeviceType::kCUDA, 0);

// Relative tolerance (|cpu - cuda| <= tol * max(1, |cpu|)) of a device result against the CPU.
// The simulator computes with the host's libm and should match exactly; a real GPU's exp, log,
// tanh and pow differ from glibc by a few ulp, and its reductions and GEMMs sum in another order.
inline double device_tolerance(ScalarType dtype) {
  switch (dtype) {
    case kFloat32: return 2e-5;
    case kFloat64: return 1e-12;
    case kFloat16: return 2e-3;
    case kBFloat16: return 1.6e-2;
    default: return 0;
  }
}

// Inputs that every dtype can hold: small integers for integral types, 0/1 for bool, normal
// values for floats; `positive` keeps them > 0 (log, sqrt, division).
inline Tensor parity_input(const Shape& shape, ScalarType dtype, uint64_t seed,
                           bool positive = false) {
  Generator gen(seed);
  if (dtype == kBool) return randint(0, 2, shape, &gen).to(kBool);
  if (!is_floating_point(dtype)) {
    const int64_t lo = positive ? 1 : (dtype == kUInt8 ? 0 : -6);
    return randint(lo, 7, shape, &gen).to(dtype);
  }
  Tensor t = randn(shape, &gen, TensorOptions(kFloat64));
  if (positive) t = t.abs() + 0.25;
  return t.to(dtype);
}

inline ::testing::AssertionResult matches_cpu(
    const std::function<Tensor(const std::vector<Tensor>&)>& op,
    const std::vector<Tensor>& cpu_inputs, double tolerance) {
  std::vector<Tensor> device_inputs;
  for (const Tensor& t : cpu_inputs) device_inputs.push_back(t.to(kCuda0));
  const Tensor expected = op(cpu_inputs);
  const Tensor got = op(device_inputs);
  if (!got.is_cuda()) return ::testing::AssertionFailure() << "result is on " << got.device().str();
  if (got.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure() << "dtype " << got.dtype() << ", CPU gives "
                                         << expected.dtype();
  }
  return tensor_is(got.cpu(), expected.sizes(), values(expected), tolerance);
}

}  // namespace ember::testing
