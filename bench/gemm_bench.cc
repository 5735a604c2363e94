// GEMM throughput: ember::matmul against Eigen called directly on the same buffers, float32, Eigen
// built for the same CPU capability level as ember's kernels (bench/eigen_baselines.h), one thread.
// Eigen is the engine under ember's CPU GEMM, so the ratio measures ember's overhead (dispatch,
// checks, output allocation, Map setup, row blocks). --threads=N runs ember on N threads
// (the baseline stays on one: the ratio is then the speed-up over single-threaded Eigen).
#include <malloc.h>

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

// Eigen mallocs its packing buffers (up to kc x nc floats: 256 KiB for one 256^3 product) on
// every product and frees them. In this otherwise idle process glibc hands that memory back to the
// kernel on each free (heap-top trim, or munmap above the mmap threshold), so the next product
// page-faults it in again: a single 256^3 product took ~70 faults a call and ran at a fifth of its
// speed (docs/measurements.md, "Micro-benchmarks"), while ember's 128-row blocks, with buffers
// half that size, escaped it. Fixed thresholds keep freed memory in the process for both sides, so
// the ratio measures ember's overhead, not glibc's trimming. A training process, whose heap is
// busy, did not show the effect (bench/README.md).
void keep_freed_memory_mapped() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory_mapped();
  std::printf("baseline: Eigen built for %s\n", ember::bench::eigen_baselines().level);
  register_all();
  return ember::bench::run_with_ratio_table(argc, argv, kRate);
}
