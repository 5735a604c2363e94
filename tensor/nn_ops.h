// Neural-network primitives on NCHW tensors (PyTorch's torch.nn.functional / ATen native ops):
// conv2d, pooling, batch_norm, log_softmax, nll_loss, embedding, with their raw backward kernels.
// The autograd formulas (autograd/functions/nn.cc) call the *_backward functions; CPU kernels live
// in tensor/cpu/ (im2col + GEMM for convolution).
#pragma once

#include <array>
#include <string>
#include <tuple>

#include "tensor/tensor.h"

namespace ember {

using Pair = std::array<int64_t, 2>;

// conv2d's stride, padding and dilation ({height, width} each) and groups, with
// torch.nn.functional.conv2d's defaults.
struct Conv2dParams {
  Pair stride{1, 1};
  Pair padding{0, 0};
  Pair dilation{1, 1};
  int64_t groups = 1;
};

// input [N, C, H, W], weight [O, C / groups, kH, kW], bias [O] or undefined.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dParams& p = {});
// Gradients for (input, weight, bias); `mask` says which to compute.
std::tuple<Tensor, Tensor, Tensor> conv2d_backward(const Tensor& grad_out, const Tensor& input,
                                                   const Tensor& weight, const Conv2dParams& p,
                                                   std::array<bool, 3> mask);

// Max pooling; indices are flat positions within each input plane (as PyTorch's).
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Pair kernel, Pair stride,
                                                   Pair padding);
Tensor max_pool2d(const Tensor& input, Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0});
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& input, const Tensor& indices);

// Average pooling with count_include_pad=true (PyTorch's default).
Tensor avg_pool2d(const Tensor& input, Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0});
Tensor avg_pool2d_backward(const Tensor& grad_out, const Tensor& input, Pair kernel, Pair stride,
                           Pair padding);
Tensor adaptive_avg_pool2d(const Tensor& input, Pair output_size);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& input);

// Batch norm over [N, C, ...]: in training, normalises with batch statistics and updates
// running_mean/var in place (unbiased variance, PyTorch's momentum convention); in eval, uses them.
Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum, double eps);
// Raw forward: output plus the per-channel mean and 1/sqrt(var + eps) used.
std::tuple<Tensor, Tensor, Tensor> batch_norm_forward(const Tensor& input, const Tensor& weight,
                                                      const Tensor& bias, const Tensor& running_mean,
                                                      const Tensor& running_var, bool training,
                                                      double momentum, double eps);
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const Tensor& weight, const Tensor& mean,
                                                       const Tensor& invstd, bool training,
                                                       std::array<bool, 3> mask);

// relu(batch_norm(...) + residual) in one pass (Note [Batch norm + ReLU], tensor/batch_norm.cc),
// residual optional (input's shape, dtype and device): the same values as batch_norm, add_ and
// relu_ one after the other to the bit, and the same gradients, with the residual's and ReLU's
// passes over the data folded into batch norm's (ResNet's blocks).
Tensor batch_norm_relu(const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, bool training,
                       double momentum, double eps, const Tensor& residual = Tensor());
// Raw forward: the output, the per-channel mean and 1/sqrt(var + eps) used, and, without a
// residual, the per-channel scale and shift ([C] float64) the output was computed with, which the
// backward recomputes the output from for ReLU's mask.
struct BatchNormReluForward {
  Tensor out, mean, invstd, relu_scale, relu_shift;
};
BatchNormReluForward batch_norm_relu_forward(const Tensor& input, const Tensor& weight,
                                             const Tensor& bias, const Tensor& running_mean,
                                             const Tensor& running_var, bool training,
                                             double momentum, double eps,
                                             const Tensor& residual = Tensor());
// batch_norm_backward for grad_out, the gradient of the output of batch_norm_relu without a
// residual.
std::tuple<Tensor, Tensor, Tensor> batch_norm_relu_backward(const Tensor& grad_out,
                                                            const Tensor& input,
                                                            const Tensor& weight,
                                                            const BatchNormReluForward& forward,
                                                            bool training,
                                                            std::array<bool, 3> mask);

// GELU (torch.nn.functional.gelu): approximate "none" is x * Phi(x) with the erf form of the
// normal CDF, "tanh" is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Floating inputs only.
enum class GeluApproximation { kNone, kTanh };
GeluApproximation gelu_approximation(const std::string& approximate);  // throws for other names
Tensor gelu(const Tensor& input, const std::string& approximate = "none");
Tensor gelu(const Tensor& input, GeluApproximation approximate);
// grad_out * d gelu(input) / d input.
Tensor gelu_backward(const Tensor& grad_out, const Tensor& input, GeluApproximation approximate);

Tensor log_softmax(const Tensor& input, int64_t dim);
Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& output, int64_t dim);
Tensor softmax(const Tensor& input, int64_t dim);

enum class Reduction { kNone, kMean, kSum };
// log_probs [N, C], target int64 [N]; entries equal to ignore_index contribute nothing.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::kMean,
                int64_t ignore_index = -100);
Tensor nll_loss_backward(const Tensor& grad_out, const Tensor& log_probs, const Tensor& target,
                         Reduction reduction, int64_t ignore_index);

// Rows of weight [V, D] picked by int64 indices of any shape -> [..., D]. With sparse=true the
// weight's gradient is a sparse COO tensor touching only the used rows.
Tensor embedding(const Tensor& weight, const Tensor& indices, bool sparse = false);

}  // namespace ember
