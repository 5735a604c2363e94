// 3x3 convolution forward and its two gradients, float32, one thread, ResNet-20's three layer
// shapes on 28x28 input (batch 64, C = O = 16 / 32 / 64 at 28 / 14 / 7 pixels): ember::conv2d and
// ember::conv2d_backward (the direct kernels where they win, else im2col + GEMM) against im2col +
// Eigen GEMM (+ col2im for the input gradient) image by image, built for ember's CPU capability
// level (bench/eigen_baselines.h). The size argument is the feature map's side.
#include <tuple>
#include <vector>

#include "bench/eigen_baselines.h"
#include "bench/ratio_report.h"
#include "tensor/all.h"
#include "tensor/nn_ops.h"

namespace {

constexpr const char* kRate = "GFLOP";
constexpr int64_t kBatch = 64;

int64_t channels(int64_t side) { return side == 28 ? 16 : side == 14 ? 32 : 64; }

struct Layer {
  ember::Tensor x, w, grad_out;
  int64_t C, S;
  explicit Layer(int64_t side) : C(channels(side)), S(side) {
    ember::Generator gen(0);
    x = ember::randn({kBatch, C, S, S}, &gen);
    w = ember::randn({C, C, 3, 3}, &gen);
    grad_out = ember::randn({kBatch, C, S, S}, &gen);
  }
  double flops() const { return 2.0 * kBatch * C * C * 9 * S * S; }
};

void conv_ember(benchmark::State& state) {
  Layer l(state.range(0));
  ember::Conv2dParams p;
  p.padding = {1, 1};
  for (auto _ : state) {
    ember::Tensor y = ember::conv2d(l.x, l.w, ember::Tensor(), p);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  ember::bench::set_rate(state, kRate, l.flops());
}

// The input gradient alone, then the weight gradient alone (mask), as the backward pass asks.
template <bool kInput>
void conv_grad_ember(benchmark::State& state) {
  Layer l(state.range(0));
  ember::Conv2dParams p;
  p.padding = {1, 1};
  for (auto _ : state) {
    auto grads = ember::conv2d_backward(l.grad_out, l.x, l.w, p, {kInput, !kInput, false});
    benchmark::DoNotOptimize(kInput ? std::get<0>(grads).data_ptr() : std::get<1>(grads).data_ptr());
  }
  ember::bench::set_rate(state, kRate, l.flops());
}

// Both gradients in one call, as a training step asks (Winograd computes them in one pass).
void conv_grads_ember(benchmark::State& state) {
  Layer l(state.range(0));
  ember::Conv2dParams p;
  p.padding = {1, 1};
  for (auto _ : state) {
    auto grads = ember::conv2d_backward(l.grad_out, l.x, l.w, p, {true, true, false});
    benchmark::DoNotOptimize(std::get<0>(grads).data_ptr());
  }
  ember::bench::set_rate(state, kRate, 2 * l.flops());
}

void conv_grads_im2col_eigen(benchmark::State& state) {
  Layer l(state.range(0));
  const int64_t C = l.C, S = l.S, K = C * 9, P = S * S;
  std::vector<float> cols(static_cast<size_t>(K * P)), gi(static_cast<size_t>(kBatch * C * P));
  std::vector<float> gw(static_cast<size_t>(C * K));
  const auto& e = ember::bench::eigen_baselines();
  for (auto _ : state) {
    e.conv3x3_input_grad_f32(l.w.data_ptr<float>(), l.grad_out.data_ptr<float>(), cols.data(),
                             gi.data(), kBatch, C, C, S);
    e.conv3x3_weight_grad_f32(l.x.data_ptr<float>(), l.grad_out.data_ptr<float>(), cols.data(),
                              gw.data(), kBatch, C, C, S);
    benchmark::DoNotOptimize(gi.data());
    benchmark::DoNotOptimize(gw.data());
    benchmark::ClobberMemory();
  }
  ember::bench::set_rate(state, kRate, 2 * l.flops());
}

template <bool kInput>
void conv_grad_im2col_eigen(benchmark::State& state) {
  Layer l(state.range(0));
  const int64_t C = l.C, S = l.S, K = C * 9, P = S * S;
  std::vector<float> cols(static_cast<size_t>(K * P)), out(static_cast<size_t>(kBatch * C * P));
  const auto& e = ember::bench::eigen_baselines();
  for (auto _ : state) {
    if (kInput) {
      e.conv3x3_input_grad_f32(l.w.data_ptr<float>(), l.grad_out.data_ptr<float>(), cols.data(),
                               out.data(), kBatch, C, C, S);
    } else {
      e.conv3x3_weight_grad_f32(l.x.data_ptr<float>(), l.grad_out.data_ptr<float>(), cols.data(),
                                out.data(), kBatch, C, C, S);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  ember::bench::set_rate(state, kRate, l.flops());
}

// The textbook lowering: columns [C*9, S*S] of one image (zero padding 1), then W [C, C*9] x cols.
void conv_im2col_eigen(benchmark::State& state) {
  Layer l(state.range(0));
  const int64_t C = l.C, S = l.S, K = C * 9, P = S * S;
  std::vector<float> cols(static_cast<size_t>(K * P)), out(static_cast<size_t>(kBatch * C * P));
  const auto conv = ember::bench::eigen_baselines().conv3x3_f32;
  for (auto _ : state) {
    conv(l.x.data_ptr<float>(), l.w.data_ptr<float>(), cols.data(), out.data(), kBatch, C, C, S);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  ember::bench::set_rate(state, kRate, l.flops());
}

void register_all() {
  for (int64_t side : {28, 14, 7}) {
    benchmark::RegisterBenchmark("conv3x3_f32/ember", conv_ember)->Arg(side)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("conv3x3_f32/im2col_eigen", conv_im2col_eigen)->Arg(side)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("conv3x3_igrad_f32/ember", conv_grad_ember<true>)->Arg(side)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("conv3x3_igrad_f32/im2col_eigen", conv_grad_im2col_eigen<true>)->Arg(side)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("conv3x3_wgrad_f32/ember", conv_grad_ember<false>)->Arg(side)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("conv3x3_wgrad_f32/im2col_eigen", conv_grad_im2col_eigen<false>)->Arg(side)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("conv3x3_grads_f32/ember", conv_grads_ember)->Arg(side)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("conv3x3_grads_f32/im2col_eigen", conv_grads_im2col_eigen)->Arg(side)->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("baseline: im2col + Eigen built for %s, one thread\n", ember::bench::eigen_baselines().level);
  register_all();
  return ember::bench::run_with_ratio_table(argc, argv, kRate);
}
