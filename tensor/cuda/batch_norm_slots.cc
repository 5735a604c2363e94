// The CUDA table's batch-norm slots: the kernels of batch_norm_kernels.cu on the input's stream.
// Per-channel arrays are device doubles (Note [Per-channel batch-norm values stay on the device],
// tensor/batch_norm.cc), so nothing here waits for the device.
#include "tensor/cuda/slot_glue.h"
#include "tensor/factories.h"

namespace ember::cuda {
namespace {

BatchNormDims dims_of(const BatchNormShape& s) { return BatchNormDims{s.N, s.C, s.inner}; }

// Device scratch for the partial sums of stats and backward_reduce.
Tensor workspace(const BatchNormShape& s, Device device) {
  return empty({batch_norm_workspace_doubles(dims_of(s))}, TensorOptions(kFloat64, device));
}

void batch_norm_stats_cuda(const Tensor& input, const BatchNormShape& s, double* mean,
                           double* var) {
  DeviceGuard guard(input.device().index);
  const Tensor scratch = workspace(s, input.device());
  check_launch(launch_batch_norm_stats(dtype_of(input), input.data_ptr(), dims_of(s),
                                       scratch.data_ptr<double>(), mean, var, stream_of(input)),
               "batch_norm", input);
}

void batch_norm_transform_cuda(const Tensor& out, const Tensor& input, const BatchNormShape& s,
                               const double* scale, const double* shift, const Tensor& residual,
                               bool relu) {
  DeviceGuard guard(out.device().index);
  const void* r = residual.defined() ? residual.data_ptr() : nullptr;
  check_launch(launch_batch_norm_transform(dtype_of(input), out.data_ptr(), input.data_ptr(),
                                           dims_of(s), scale, shift, r, relu, stream_of(out)),
               "batch_norm", out);
}

void batch_norm_backward_reduce_cuda(const Tensor& grad_out, const Tensor& input,
                                     const BatchNormShape& s, const double* mean,
                                     const BatchNormRelu& relu, double* sum_g, double* sum_gx) {
  DeviceGuard guard(input.device().index);
  const Tensor scratch = workspace(s, input.device());
  check_launch(launch_batch_norm_backward_reduce(dtype_of(input), grad_out.data_ptr(),
                                                 input.data_ptr(), dims_of(s), mean, relu.scale,
                                                 relu.shift, scratch.data_ptr<double>(), sum_g,
                                                 sum_gx, stream_of(input)),
               "batch_norm_backward", input);
}

void batch_norm_backward_transform_cuda(const Tensor& grad_input, const Tensor& grad_out,
                                        const Tensor& input, const BatchNormShape& s,
                                        const BatchNormBackwardCoefficients& k) {
  DeviceGuard guard(grad_input.device().index);
  check_launch(launch_batch_norm_backward_transform(
                   dtype_of(input), grad_input.data_ptr(), grad_out.data_ptr(), input.data_ptr(),
                   dims_of(s), k.a, k.b, k.d, k.mean, k.relu.scale, k.relu.shift,
                   stream_of(grad_input)),
               "batch_norm_backward", grad_input);
}

const bool kRegistered = [] {
  KernelTable& table = kernel_table(DeviceType::kCUDA);
  table.batch_norm_stats = batch_norm_stats_cuda;
  table.batch_norm_transform = batch_norm_transform_cuda;
  table.batch_norm_backward_reduce = batch_norm_backward_reduce_cuda;
  table.batch_norm_backward_transform = batch_norm_backward_transform_cuda;
  return true;
}();

}  // namespace
}  // namespace ember::cuda
