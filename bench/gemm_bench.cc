// GEMM throughput: ember::matmul against Eigen called directly on the same buffers, float32, Eigen
// built for the same CPU capability level as ember's kernels (bench/eigen_baselines.h), one thread.
// Eigen is the engine under ember's CPU GEMM, so the ratio measures ember's overhead (dispatch,
// checks, output allocation, Map setup, row blocks). --threads=N runs ember on N threads
// (the baseline stays on one: the ratio is then the speed-up over single-threaded Eigen).
#include "bench/eigen_baselines.h"
#include "bench/ratio_report.h"
#include "tensor/all.h"

namespace {

constexpr const char* kRate = "GFLOP";  // a rate counter: shown per second

struct Operands {
  ember::Tensor a, b, out;
  explicit Operands(int64_t n) {
    ember::Generator gen(0);
    a = ember::randn({n, n}, &gen);
    b = ember::randn({n, n}, &gen);
    out = ember::zeros({n, n});
  }
};

double flops(int64_t n) { return 2.0 * static_cast<double>(n) * n * n; }

void gemm_ember(benchmark::State& state) {
  const int64_t n = state.range(0);
  Operands op(n);
  for (auto _ : state) {
    ember::Tensor c = ember::matmul(op.a, op.b);
    benchmark::DoNotOptimize(c.data_ptr());
    benchmark::ClobberMemory();
  }
  ember::bench::set_rate(state, kRate, flops(n));
}

void gemm_eigen(benchmark::State& state) {
  const int64_t n = state.range(0);
  Operands op(n);
  const auto gemm = ember::bench::eigen_baselines().gemm_f32;
  for (auto _ : state) {
    gemm(op.a.data_ptr<float>(), op.b.data_ptr<float>(), op.out.data_ptr<float>(), n, n, n);
    benchmark::DoNotOptimize(op.out.data_ptr());
    benchmark::ClobberMemory();
  }
  ember::bench::set_rate(state, kRate, flops(n));
}

void register_all() {
  // Interleaved by size, so ember and its baseline run back to back under the same conditions.
  for (int64_t n : {64, 256, 512, 1024}) {
    benchmark::RegisterBenchmark("matmul_f32/ember", gemm_ember)->Arg(n)->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("matmul_f32/eigen", gemm_eigen)->Arg(n)->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("baseline: Eigen built for %s\n", ember::bench::eigen_baselines().level);
  register_all();
  return ember::bench::run_with_ratio_table(argc, argv, kRate);
}
