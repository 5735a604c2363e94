// The raw-Eigen baselines of gemm_bench and conv_bench, compiled once per CPU capability level
// like ember's kernels (Note [CPU capability namespaces]), so each ratio compares ember with Eigen
// built for the same ISA: the level ember chose (EMBER_CPU_CAPABILITY lowers both).
#pragma once

#include <cstdint>

namespace ember::bench {

struct EigenBaselines {
  const char* level;
  // c [n, m] = a [n, k] x b [k, m], row-major, one thread.
  void (*gemm_f32)(const float* a, const float* b, float* c, int64_t n, int64_t k, int64_t m);
  // The textbook 3x3, pad 1, stride 1 lowering, image by image: im2col into cols [C*9, S*S], then
  // out(n) [O, S*S] = w [O, C*9] x cols.
  void (*conv3x3_f32)(const float* x, const float* w, float* cols, float* out, int64_t N, int64_t C,
                      int64_t O, int64_t S);
  // Its gradients by the same lowering: grad_x(n) = col2im(w^T x grad_out(n)) with cols as the
  // [C*9, S*S] buffer; grad_w [O, C*9] = sum over n of grad_out(n) x im2col(x(n))^T.
  void (*conv3x3_input_grad_f32)(const float* w, const float* grad_out, float* cols, float* grad_x,
                                 int64_t N, int64_t C, int64_t O, int64_t S);
  void (*conv3x3_weight_grad_f32)(const float* x, const float* grad_out, float* cols,
                                  float* grad_w, int64_t N, int64_t C, int64_t O, int64_t S);
};

// The baselines of cpu_capability_level().
const EigenBaselines& eigen_baselines();

}  // namespace ember::bench
