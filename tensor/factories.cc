#include "tensor/factories.h"

#include <cmath>
#include <cstring>

#include "tensor/cpu/convert.h"
#include "tensor/device_backend.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"

namespace ember {
namespace {

void check_sizes(const char* op, const Shape& sizes) {
  for (int64_t s : sizes) {
    EMBER_CHECK(s >= 0, op, ": negative dimension in size ", shape_to_string(sizes));
  }
}

Generator& pick(Generator* gen) { return gen ? *gen : default_generator(); }

// A dense tensor of draws from `gen` by the device's random kernel (tensor/kernels.h, RandomSpec).
Tensor random_tensor(const char* op, const Shape& sizes, Generator* gen, TensorOptions options,
                     const RandomSpec& spec) {
  check_sizes(op, sizes);
  Tensor t = empty(sizes, options);
  if (t.numel() > 0) kernel_for(&KernelTable::random, op, {&t})(t, spec, pick(gen));
  return t;
}

}  // namespace

Tensor empty(const Shape& sizes, TensorOptions options) {
  check_sizes("empty", sizes);
  const size_t nbytes = static_cast<size_t>(shape_numel(sizes)) * element_size(options.dtype);
  return Tensor(std::make_shared<TensorImpl>(Storage(nbytes, options.device), sizes,
                                             contiguous_strides(sizes), 0, options.dtype));
}

Tensor empty_strided(const Shape& sizes, const Shape& strides, TensorOptions options) {
  check_sizes("empty_strided", sizes);
  EMBER_CHECK(sizes.size() == strides.size(), "empty_strided: sizes ", shape_to_string(sizes),
              " and strides ", shape_to_string(strides), " differ in length");
  int64_t extent = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) {
      extent = 0;
      break;
    }
    extent += (sizes[i] - 1) * strides[i];
  }
  const size_t nbytes = static_cast<size_t>(extent) * element_size(options.dtype);
  return Tensor(std::make_shared<TensorImpl>(Storage(nbytes, options.device), sizes, strides, 0,
                                             options.dtype));
}

Tensor zeros(const Shape& sizes, TensorOptions options) {
  Tensor t = empty(sizes, options);
  if (t.is_cpu()) {
    // All-zero bytes are 0 for every dtype. A zero-size tensor has no data (nullptr), and memset
    // on a null pointer is undefined even for 0 bytes.
    if (t.nbytes() > 0) std::memset(t.data_ptr(), 0, t.nbytes());
  } else {
    zero_(t);
  }
  return t;
}

Tensor ones(const Shape& sizes, TensorOptions options) { return full(sizes, 1, options); }

Tensor full(const Shape& sizes, const Scalar& value, TensorOptions options) {
  Tensor t = empty(sizes, options);
  fill_(t, value);
  return t;
}

Tensor empty_like(const Tensor& t) { return empty(t.sizes(), TensorOptions(t.dtype(), t.device())); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), TensorOptions(t.dtype(), t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), TensorOptions(t.dtype(), t.device())); }
Tensor full_like(const Tensor& t, const Scalar& v) {
  return full(t.sizes(), v, TensorOptions(t.dtype(), t.device()));
}

Tensor scalar_tensor(const Scalar& value, TensorOptions options) { return full({}, value, options); }

Tensor arange(double start, double end, double step, TensorOptions options) {
  EMBER_CHECK(step != 0, "arange: step must be non-zero");
  EMBER_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), "arange: upper bound (",
              end, ") and lower bound (", start, ") inconsistent with step sign (", step, ")");
  const int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  Tensor t = empty({n}, TensorOptions(options.dtype, kCPU));
  EMBER_DISPATCH_ALL_TYPES(options.dtype, "arange", [&] {
    scalar_t* p = t.data_ptr<scalar_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = cpu::convert<scalar_t>(start + step * static_cast<double>(i));
  });
  return options.device.is_cpu() ? t : t.to(options.device);
}

Tensor arange(double end, TensorOptions options) { return arange(0, end, 1, options); }

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  EMBER_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  Tensor t = empty({steps}, TensorOptions(options.dtype, kCPU));
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  EMBER_DISPATCH_ALL_TYPES(options.dtype, "linspace", [&] {
    scalar_t* p = t.data_ptr<scalar_t>();
    // Fill from both ends (as PyTorch does) so the last value is exactly `end`.
    const int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; ++i) {
      // A single step is `start` (half == 0 would otherwise pick `end`).
      const double v = steps == 1 || i < half ? start + step * static_cast<double>(i)
                                              : end - step * static_cast<double>(steps - 1 - i);
      p[i] = cpu::convert<scalar_t>(v);
    }
  });
  return options.device.is_cpu() ? t : t.to(options.device);
}

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  if (m < 0) m = n;
  EMBER_CHECK(n >= 0, "eye: n must be non-negative, got ", n);
  Tensor t = zeros({n, m}, TensorOptions(options.dtype, kCPU));
  EMBER_DISPATCH_ALL_TYPES(options.dtype, "eye", [&] {
    scalar_t* p = t.data_ptr<scalar_t>();
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = cpu::convert<scalar_t>(1);
  });
  return options.device.is_cpu() ? t : t.to(options.device);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes) {
  Shape s = sizes.empty() ? Shape{static_cast<int64_t>(values.size())} : sizes;
  EMBER_CHECK(shape_numel(s) == static_cast<int64_t>(values.size()), "from_vector: ",
              values.size(), " values do not fill shape ", shape_to_string(s));
  Tensor t = empty(s, dtype_of<T>());
  T* p = t.data_ptr<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];  // loop: std::vector<bool> has no data()
  return t;
}
template Tensor from_vector(const std::vector<float>&, const Shape&);
template Tensor from_vector(const std::vector<double>&, const Shape&);
template Tensor from_vector(const std::vector<Half>&, const Shape&);
template Tensor from_vector(const std::vector<BFloat16>&, const Shape&);
template Tensor from_vector(const std::vector<int32_t>&, const Shape&);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&);
template Tensor from_vector(const std::vector<uint8_t>&, const Shape&);
template Tensor from_vector(const std::vector<bool>&, const Shape&);

Tensor from_blob(void* data, const Shape& sizes, ScalarType dtype, std::function<void(void*)> deleter,
                 Device device) {
  return from_blob(data, sizes, contiguous_strides(sizes), dtype, std::move(deleter), device);
}

Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, ScalarType dtype,
                 std::function<void(void*)> deleter, Device device) {
  check_sizes("from_blob", sizes);
  EMBER_CHECK(sizes.size() == strides.size(), "from_blob: sizes ", shape_to_string(sizes),
              " and strides ", shape_to_string(strides), " differ in length");
  int64_t extent = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) {
      extent = 0;
      break;
    }
    extent += (sizes[i] - 1) * strides[i];
  }
  EMBER_CHECK(data != nullptr || extent == 0, "from_blob: null data pointer for shape ",
              shape_to_string(sizes));
  Storage st = Storage::from_blob(data, static_cast<size_t>(extent) * element_size(dtype), device,
                                  std::move(deleter));
  return Tensor(std::make_shared<TensorImpl>(std::move(st), sizes, strides, 0, dtype));
}

Tensor rand(const Shape& sizes, Generator* gen, TensorOptions options) {
  EMBER_CHECK(is_floating_point(options.dtype), "rand: expected a floating dtype, got ",
              options.dtype);
  // Draw only as many bits as the dtype's significand holds, so rounding to the dtype can never
  // turn a value just below 1 into 1 (float16 keeps 11 bits, bfloat16 8, float32 24).
  RandomSpec spec;
  spec.bits = 24;
  if (options.dtype == kFloat64) spec.bits = 53;
  if (options.dtype == kFloat16) spec.bits = 11;
  if (options.dtype == kBFloat16) spec.bits = 8;
  return random_tensor("rand", sizes, gen, options, spec);
}

Tensor randn(const Shape& sizes, Generator* gen, TensorOptions options) {
  EMBER_CHECK(is_floating_point(options.dtype), "randn: expected a floating dtype, got ",
              options.dtype);
  RandomSpec spec;
  spec.kind = RandomSpec::Kind::kNormal;
  return random_tensor("randn", sizes, gen, options, spec);
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, Generator* gen, TensorOptions options) {
  EMBER_CHECK(low < high, "randint: low (", low, ") must be less than high (", high, ")");
  RandomSpec spec;
  spec.kind = RandomSpec::Kind::kInteger;
  spec.low = low;
  spec.range = static_cast<uint64_t>(high - low);
  return random_tensor("randint", sizes, gen, options, spec);
}

Tensor randperm(int64_t n, Generator* gen) {
  EMBER_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  Tensor t = arange(0, static_cast<double>(n), 1, kInt64);
  int64_t* p = t.data_ptr<int64_t>();
  Generator& g = pick(gen);
  std::lock_guard<std::mutex> lock(g.mutex());
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(g.next_below(static_cast<uint64_t>(i + 1)));
    std::swap(p[i], p[j]);
  }
  return t;
}

const Tensor& uniform_(const Tensor& t, double low, double high, Generator* gen) {
  EMBER_CHECK(low <= high, "uniform_: low (", low, ") must not exceed high (", high, ")");
  const Tensor r = rand(t.sizes(), gen, TensorOptions(kFloat64, t.device()));
  copy_(t, add(mul(r, high - low), low));
  return t;
}

const Tensor& normal_(const Tensor& t, double mean, double std, Generator* gen) {
  EMBER_CHECK(std >= 0, "normal_: std must be non-negative, got ", std);
  const Tensor r = randn(t.sizes(), gen, TensorOptions(kFloat64, t.device()));
  copy_(t, add(mul(r, std), mean));
  return t;
}

}  // namespace ember
