// GPU benchmark (run by bench/gpu_bench.sh on a machine with a GPU, built with --config=cuda):
//   GEMM      ember's matmul on cuda:0 vs cuBLAS called directly on the same buffers, TFLOP/s
//   ResNet-20 training steps on cuda:0 (SGD momentum, cross-entropy), ms/step and peak memory
// One RESULT line per measurement, for the script to pair with PyTorch's (gpu_bench_torch.py).
// --smoke runs tiny sizes once: under --config=cudasim it checks that the benchmark itself works.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "examples/common/flags.h"
#include "nn/functional.h"
#include "nn/models/resnet.h"
#include "optim/sgd.h"
#include "tensor/all.h"
#include "tensor/device_backend.h"

namespace ember {
namespace {

const Device kCuda0(DeviceType::kCUDA, 0);

void sync() { device_backend(DeviceType::kCUDA, "gpu_bench").synchronize(kCuda0); }

template <typename F>
double seconds(F f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  sync();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void gemm(int64_t n, int iters) {
  Generator gen(1);
  const TensorOptions f32(kFloat32, kCuda0);
  const Tensor a = randn({n, n}, &gen, f32), b = randn({n, n}, &gen, f32);
  Tensor c = empty({n, n}, f32);
  matmul(a, b);  // warm-up: cuBLAS handle, allocator
  const double ember_s = seconds([&] {
    for (int i = 0; i < iters; ++i) c = matmul(a, b);
  });
  cublasHandle_t h;
  cublasCreate(&h);
  const float one = 1.0f, zero = 0.0f;
  const int ni = static_cast<int>(n);
  // Row-major c = a @ b is column-major c^T = b^T a^T: the call ember's slot makes.
  auto raw = [&] {
    cublasSgemm(
        h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, static_cast<const float*>(b.data_ptr()), ni,
        static_cast<const float*>(a.data_ptr()), ni, &zero, static_cast<float*>(c.data_ptr()), ni);
  };
  raw();
  const double raw_s = seconds([&] {
    for (int i = 0; i < iters; ++i) raw();
  });
  cublasDestroy(h);
  const double flops = 2.0 * n * n * n * iters;
  std::printf("RESULT gemm n=%ld ember_tflops=%.2f cublas_tflops=%.2f ratio=%.3f\n",
              static_cast<long>(n), flops / ember_s / 1e12, flops / raw_s / 1e12, raw_s / ember_s);
}

// ms_per_step is the step's wall time including the device finishing it; host_ms is the time
// the host took to issue it (forward, backward, optimizer step) before waiting for the device:
// near ms_per_step, the step is bound by the host (launches, allocations, synchronisations).
void resnet(int64_t batch, int steps, int warmup) {
  Generator gen(0);
  nn::ResNet model(nn::ResNetOptions{}, &gen);
  model.to(kCuda0);
  optim::SGD opt(model.parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4));
  const Tensor x = randn({batch, 1, 28, 28}, &gen, TensorOptions(kFloat32, kCuda0));
  const Tensor y = randint(0, 10, {batch}, &gen, TensorOptions(kInt64, kCuda0));
  cuda_reset_peak_memory_stats();
  std::vector<double> ms, host_ms;
  for (int s = 0; s < warmup + steps; ++s) {
    double issued = 0;
    const double t = seconds([&] {
      const auto t0 = std::chrono::steady_clock::now();
      Tensor loss = nn::functional::cross_entropy(model.forward(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      issued = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    if (s >= warmup) {
      ms.push_back(1e3 * t);
      host_ms.push_back(1e3 * issued);
    }
  }
  const DeviceMemoryStats m = cuda_memory_stats();
  std::printf(
      "RESULT resnet20 batch=%ld ms_per_step=%.3f host_ms=%.3f peak_allocated_mb=%.1f "
      "peak_reserved_mb=%.1f\n",
      static_cast<long>(batch), median(ms), median(host_ms), m.peak_allocated_bytes / 1048576.0,
      m.peak_reserved_bytes / 1048576.0);
}

int run(int argc, char** argv) {
  bool smoke = false, no_gemm = false;
  int64_t steps = 30, warmup = 5;
  flags::CommandLine cli("GPU benchmark: GEMM against cuBLAS and ResNet-20 training steps on cuda:0.", "gpu_bench");
  cli.add_flag("--smoke", smoke, "tiny sizes, once: checks the benchmark itself works (e.g. on the simulator)");
  cli.add_flag("--no_gemm", no_gemm, "only the ResNet-20 steps (e.g. under a kernel profiler)");
  cli.add_option("--steps", steps, "timed ResNet-20 steps")->check(flags::positive_integer());
  cli.add_option("--warmup", warmup, "untimed ResNet-20 steps first")->check(flags::non_negative_integer());
  if (cli.parse(argc, argv) == flags::Parsed::kHelp) return 0;
  if (!cuda_is_available()) {
    std::printf("gpu_bench: no usable CUDA device here (built with --config=cuda?); nothing run\n");
    return 0;
  }
  const std::vector<int64_t> sizes =
      smoke ? std::vector<int64_t>{48} : std::vector<int64_t>{1024, 2048, 4096, 8192};
  if (!no_gemm) {
    for (int64_t n : sizes) gemm(n, smoke ? 1 : std::max<int>(3, static_cast<int>(20 * 1024 / n)));
  }
  resnet(smoke ? 4 : 256, smoke ? 1 : steps, smoke ? 0 : warmup);
  return 0;
}

}  // namespace
}  // namespace ember

int main(int argc, char** argv) {
  try {
    return ember::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
}
