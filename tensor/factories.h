// Tensor factories: empty/zeros/ones/full/arange/linspace/eye, wrapping existing memory, and the
// random ones driven by a seedable Generator (same seed -> same numbers on every machine and rank).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace ember {

// The dtype and device of a new tensor (PyTorch's TensorOptions): float32 on the CPU unless given.
// Converts implicitly from a ScalarType or a Device, so zeros({2, 3}, kInt64) works.
struct TensorOptions {
  ScalarType dtype = kFloat32;
  Device device = kCPU;

  TensorOptions() = default;
  TensorOptions(ScalarType t) : dtype(t) {}  // NOLINT: implicit, like PyTorch's
  TensorOptions(Device d) : device(d) {}     // NOLINT
  TensorOptions(ScalarType t, Device d) : dtype(t), device(d) {}
};

Tensor empty(const Shape& sizes, TensorOptions options = {});
Tensor empty_strided(const Shape& sizes, const Shape& strides, TensorOptions options = {});
Tensor zeros(const Shape& sizes, TensorOptions options = {});
Tensor ones(const Shape& sizes, TensorOptions options = {});
Tensor full(const Shape& sizes, const Scalar& value, TensorOptions options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& value);
// A 0-dim tensor holding one value.
Tensor scalar_tensor(const Scalar& value, TensorOptions options = {});

// [start, end) in steps of `step`; dtype float32 unless given.
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
Tensor arange(double end, TensorOptions options = {});
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m = -1, TensorOptions options = {});

// Copies the values into a new tensor of the given shape (empty shape = 1-d of values.size()).
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes = {});
// Wraps caller-owned memory without copying; `deleter` (may be empty) runs when the last view dies.
Tensor from_blob(void* data, const Shape& sizes, ScalarType dtype,
                 std::function<void(void*)> deleter = nullptr, Device device = kCPU);
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, ScalarType dtype,
                 std::function<void(void*)> deleter = nullptr, Device device = kCPU);

// Uniform in [0, 1), standard normal, and integers uniform in [low, high).
Tensor rand(const Shape& sizes, Generator* gen = nullptr, TensorOptions options = {});
Tensor randn(const Shape& sizes, Generator* gen = nullptr, TensorOptions options = {});
Tensor randint(int64_t low, int64_t high, const Shape& sizes, Generator* gen = nullptr,
               TensorOptions options = kInt64);
// A random permutation of 0..n-1 (int64), Fisher-Yates on the generator.
Tensor randperm(int64_t n, Generator* gen = nullptr);

// In-place random fills (nn::init builds on these).
const Tensor& uniform_(const Tensor& t, double low, double high, Generator* gen = nullptr);
const Tensor& normal_(const Tensor& t, double mean, double std, Generator* gen = nullptr);

}  // namespace ember
