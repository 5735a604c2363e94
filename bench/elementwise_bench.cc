// Elementwise throughput: ember ops against a plain C++ loop over the same buffers (float32, one
// thread). ember's ops are out-of-place, so its figure includes allocating the output; the loop
// writes into a preallocated one. Bytes counted = bytes read + bytes written.
#include <cmath>

#include "bench/ratio_report.h"
#include "tensor/all.h"

namespace {

using ember::Tensor;
constexpr const char* kRate = "GB";  // a rate counter: shown per second

Tensor input(int64_t n, uint64_t seed) {
  ember::Generator gen(seed);
  return ember::randn({n}, &gen);
}

template <typename Op>
void run_ember(benchmark::State& state, double bytes, Op op) {
  for (auto _ : state) {
    Tensor out = op();
    benchmark::DoNotOptimize(out.data_ptr());
    benchmark::ClobberMemory();
  }
  ember::bench::set_rate(state, kRate, bytes);
}

template <typename Loop>
void run_loop(benchmark::State& state, double bytes, Loop loop) {
  for (auto _ : state) {
    loop();
    benchmark::ClobberMemory();
  }
  ember::bench::set_rate(state, kRate, bytes);
}

// ---- binary, same shape ---------------------------------------------------------------------
void add_ember(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1), b = input(n, 2);
  run_ember(s, 12.0 * n, [&] { return ember::add(a, b); });
}
void add_loop(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1), b = input(n, 2), out = ember::empty({n});
  const float *x = a.data_ptr<float>(), *y = b.data_ptr<float>();
  float* o = out.data_ptr<float>();
  run_loop(s, 12.0 * n, [&] {
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
  });
}
void mul_ember(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1), b = input(n, 2);
  run_ember(s, 12.0 * n, [&] { return ember::mul(a, b); });
}
void mul_loop(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1), b = input(n, 2), out = ember::empty({n});
  const float *x = a.data_ptr<float>(), *y = b.data_ptr<float>();
  float* o = out.data_ptr<float>();
  run_loop(s, 12.0 * n, [&] {
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] * y[i];
  });
}

// In place: no allocation on either side.
void add_inplace_ember(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1), b = input(n, 2);
  run_ember(s, 12.0 * n, [&] { return a.add_(b); });
}
void add_inplace_loop(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1), b = input(n, 2);
  float* x = a.data_ptr<float>();
  const float* y = b.data_ptr<float>();
  run_loop(s, 12.0 * n, [&] {
    for (int64_t i = 0; i < n; ++i) x[i] += y[i];
  });
}

// ---- broadcasting: [n / 1024, 1024] + [1024] (a bias row) -------------------------------------
constexpr int64_t kCols = 1024;
void add_row_ember(benchmark::State& s) {
  const int64_t n = s.range(0), rows = n / kCols;
  Tensor a = input(n, 1).view({rows, kCols}), row = input(kCols, 2);
  run_ember(s, 8.0 * n, [&] { return ember::add(a, row); });
}
void add_row_loop(benchmark::State& s) {
  const int64_t n = s.range(0), rows = n / kCols;
  Tensor a = input(n, 1), row = input(kCols, 2), out = ember::empty({n});
  const float *x = a.data_ptr<float>(), *y = row.data_ptr<float>();
  float* o = out.data_ptr<float>();
  run_loop(s, 8.0 * n, [&] {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) o[r * kCols + c] = x[r * kCols + c] + y[c];
    }
  });
}

// ---- unary ----------------------------------------------------------------------------------
void relu_ember(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1);
  run_ember(s, 8.0 * n, [&] { return ember::relu(a); });
}
void relu_loop(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1), out = ember::empty({n});
  const float* x = a.data_ptr<float>();
  float* o = out.data_ptr<float>();
  run_loop(s, 8.0 * n, [&] {
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] < 0.0f ? 0.0f : x[i];
  });
}
void exp_ember(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1);
  run_ember(s, 8.0 * n, [&] { return ember::exp(a); });
}
void exp_loop(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1), out = ember::empty({n});
  const float* x = a.data_ptr<float>();
  float* o = out.data_ptr<float>();
  run_loop(s, 8.0 * n, [&] {
    for (int64_t i = 0; i < n; ++i) o[i] = std::exp(x[i]);
  });
}

// ---- dtype conversion -----------------------------------------------------------------------
void to_f64_ember(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1);
  run_ember(s, 12.0 * n, [&] { return a.to(ember::kFloat64); });
}
void to_f64_loop(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1), out = ember::empty({n}, ember::kFloat64);
  const float* x = a.data_ptr<float>();
  double* o = out.data_ptr<double>();
  run_loop(s, 12.0 * n, [&] {
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<double>(x[i]);
  });
}
// copy_ into an existing float64 tensor: the conversion without the allocation.
void copy_f64_ember(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1), out = ember::empty({n}, ember::kFloat64);
  run_ember(s, 12.0 * n, [&] { return out.copy_(a); });
}
void to_bf16_ember(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1);
  run_ember(s, 6.0 * n, [&] { return a.to(ember::kBFloat16); });
}
void to_bf16_loop(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = input(n, 1), out = ember::empty({n}, ember::kBFloat16);
  const float* x = a.data_ptr<float>();
  ember::BFloat16* o = out.data_ptr<ember::BFloat16>();
  run_loop(s, 6.0 * n, [&] {
    for (int64_t i = 0; i < n; ++i) o[i] = ember::BFloat16(x[i]);
  });
}
// A strided copy_: the transpose of a square matrix into a contiguous one.
void copy_t_ember(benchmark::State& s) {
  const int64_t n = s.range(0), side = static_cast<int64_t>(std::sqrt(double(n)));
  Tensor a = input(side * side, 1).view({side, side}), out = ember::empty({side, side});
  run_ember(s, 8.0 * side * side, [&] { return out.copy_(a.t()); });
}
void copy_t_loop(benchmark::State& s) {
  const int64_t n = s.range(0), side = static_cast<int64_t>(std::sqrt(double(n)));
  Tensor a = input(side * side, 1), out = ember::empty({side * side});
  const float* x = a.data_ptr<float>();
  float* o = out.data_ptr<float>();
  run_loop(s, 8.0 * side * side, [&] {
    for (int64_t r = 0; r < side; ++r) {
      for (int64_t c = 0; c < side; ++c) o[r * side + c] = x[c * side + r];
    }
  });
}

void register_pair(const char* op, void (*ember_fn)(benchmark::State&),
                   void (*loop_fn)(benchmark::State&)) {
  // 64 Ki floats (256 KiB per operand) stay in L2; 4 Mi floats (16 MiB) stream from memory.
  for (int64_t n : {int64_t{1} << 16, int64_t{1} << 22}) {
    const std::string name(op);
    benchmark::RegisterBenchmark((name + "/ember").c_str(), ember_fn)->Arg(n);
    benchmark::RegisterBenchmark((name + "/loop").c_str(), loop_fn)->Arg(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_pair("add", add_ember, add_loop);
  register_pair("mul", mul_ember, mul_loop);
  register_pair("add_", add_inplace_ember, add_inplace_loop);
  register_pair("add_row_broadcast", add_row_ember, add_row_loop);
  register_pair("relu", relu_ember, relu_loop);
  register_pair("exp", exp_ember, exp_loop);
  register_pair("to_float64", to_f64_ember, to_f64_loop);
  register_pair("copy_to_float64", copy_f64_ember, to_f64_loop);
  register_pair("to_bfloat16", to_bf16_ember, to_bf16_loop);
  register_pair("copy_transposed", copy_t_ember, copy_t_loop);
  return ember::bench::run_with_ratio_table(argc, argv, kRate);
}
