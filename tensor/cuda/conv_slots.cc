// The CUDA table's conv2d and conv2d_backward slots: im2col / col2im on the device
// (conv_kernels.cu) around batched GEMMs through the batched_gemm slot (cuBLAS), per group:
//   forward        out[n, g]   = W[g] @ cols[n, g]              (W broadcast over the batch)
//   grad_input     dcols[n, g] = W[g]^T @ grad_out[n, g], then col2im
//   grad_weight    dW[g]       = sum_n grad_out[n, g] @ cols[n, g]^T
//   grad_bias      = grad_out summed over N, H, W.
#include "tensor/cpu/conv_geometry.h"
#include "tensor/cuda/slot_glue.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::cuda {
namespace {

ConvShape shape_of(const cpu::ConvGeometry& g) {
  return ConvShape{g.N, g.C, g.H, g.W, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.Ho, g.Wo};
}

// [N, C * kh * kw, Ho * Wo] columns of a dense input.
Tensor columns(const Tensor& input, const cpu::ConvGeometry& g) {
  Tensor cols = empty({g.N, g.C * g.kh * g.kw, g.Ho * g.Wo},
                      TensorOptions(input.dtype(), input.device()));
  check_launch(launch_im2col(dtype_of(input), cols.data_ptr(), input.data_ptr(), shape_of(g),
                             stream_of(input)),
               "conv2d (im2col)", cols);
  return cols;
}

void gemm(const Tensor& out, const Tensor& a, const Tensor& b) {
  kernel_for(&KernelTable::batched_gemm, "conv2d", {&out, &a, &b})(out, a, b, 0.0, 1.0);
}

// Group `grp` of a [N, channels, L] tensor: [N, channels / groups, L].
Tensor group_of(const Tensor& t, int64_t groups, int64_t grp) {
  const int64_t per = t.size(1) / groups;
  return t.narrow(1, grp * per, per);
}

void conv2d_cuda(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                 const cpu::ConvGeometry& g, int64_t groups) {
  DeviceGuard guard(out.device().index);
  const Tensor cols = columns(input, g);
  const int64_t O = weight.size(0), K = weight.numel() / O;  // K = C / groups * kh * kw
  const Tensor w = weight.reshape({1, O, K});
  const Tensor out3 = out.view({g.N, O, g.Ho * g.Wo});
  for (int64_t grp = 0; grp < groups; ++grp) {
    const Tensor w_g = w.narrow(1, grp * (O / groups), O / groups).expand({g.N, O / groups, K});
    const Tensor cols_g = group_of(cols, groups, grp);
    if (groups == 1) {
      gemm(out3, w_g, cols_g);
    } else {
      Tensor part = empty({g.N, O / groups, g.Ho * g.Wo}, TensorOptions(out.dtype(), out.device()));
      gemm(part, w_g, cols_g);
      copy_(group_of(out3, groups, grp), part);
    }
  }
  if (bias.defined()) add_(out, bias.view({1, O, 1, 1}));
}

void conv2d_backward_cuda(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                          const cpu::ConvGeometry& g, int64_t groups, const Tensor& grad_input,
                          const Tensor& grad_weight, const Tensor& grad_bias) {
  DeviceGuard guard(grad_out.device().index);
  const TensorOptions like(input.dtype(), input.device());
  const int64_t O = weight.size(0), K = weight.numel() / O, Og = O / groups;
  const Tensor go = grad_out.view({g.N, O, g.Ho * g.Wo});
  if (grad_input.defined()) {
    Tensor dcols = empty({g.N, g.C * g.kh * g.kw, g.Ho * g.Wo}, like);
    const Tensor wt = weight.reshape({1, O, K}).transpose(1, 2);  // [1, K, O]
    for (int64_t grp = 0; grp < groups; ++grp) {
      const Tensor wt_g = wt.narrow(2, grp * Og, Og).expand({g.N, K, Og});
      const Tensor go_g = group_of(go, groups, grp);
      if (groups == 1) {
        gemm(dcols, wt_g, go_g);
      } else {
        Tensor part = empty({g.N, K, g.Ho * g.Wo}, like);
        gemm(part, wt_g, go_g);
        copy_(group_of(dcols, groups, grp), part);
      }
    }
    check_launch(launch_col2im(dtype_of(input), grad_input.data_ptr(), dcols.data_ptr(),
                               shape_of(g), stream_of(input)),
                 "conv2d_backward (col2im)", grad_input);
  }
  if (grad_weight.defined()) {
    const Tensor cols = columns(input, g);
    const Tensor gw = grad_weight.view({O, K});
    for (int64_t grp = 0; grp < groups; ++grp) {
      Tensor per_image = empty({g.N, Og, K}, like);
      gemm(per_image, group_of(go, groups, grp), group_of(cols, groups, grp).transpose(1, 2));
      copy_(gw.narrow(0, grp * Og, Og), sum(per_image, {0}));
    }
  }
  if (grad_bias.defined()) copy_(grad_bias, sum(grad_out, {0, 2, 3}));
}

const bool kRegistered = [] {
  KernelTable& table = kernel_table(DeviceType::kCUDA);
  table.conv2d = conv2d_cuda;
  table.conv2d_backward = conv2d_backward_cuda;
  return true;
}();

}  // namespace
}  // namespace ember::cuda
