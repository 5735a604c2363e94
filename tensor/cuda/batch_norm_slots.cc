// The CUDA table's batch-norm slots. Their contract (tensor/kernels.h) keeps the per-channel
// arrays in host memory, so each call moves C doubles to the device, or back, around the kernels
// of batch_norm_kernels.cu; the reads back synchronise with the device once per call (the price
// of the shared contract; tensor/cuda/README.md).
#include <cstring>
#include <vector>

#include "tensor/cuda/slot_glue.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::cuda {
namespace {

BatchNormDims dims_of(const BatchNormShape& s) { return BatchNormDims{s.N, s.C, s.inner}; }

// C host doubles as a device tensor (or an undefined tensor for a null array).
Tensor to_device(const double* values, int64_t C, Device device) {
  if (values == nullptr) return Tensor();
  return from_vector(std::vector<double>(values, values + C), {C}).to(device);
}

const double* device_ptr(const Tensor& t) {
  return t.defined() ? static_cast<const double*>(t.data_ptr()) : nullptr;
}

void to_host(const Tensor& t, double* out) {
  const Tensor host = t.cpu();
  std::memcpy(out, host.data_ptr(), host.nbytes());
}

void batch_norm_stats_cuda(const Tensor& input, const BatchNormShape& s, double* mean,
                           double* var) {
  DeviceGuard guard(input.device().index);
  const TensorOptions doubles(kFloat64, input.device());
  Tensor m = empty({s.C}, doubles), v = empty({s.C}, doubles);
  check_launch(launch_batch_norm_stats(dtype_of(input), input.data_ptr(), dims_of(s),
                                       static_cast<double*>(m.data_ptr()),
                                       static_cast<double*>(v.data_ptr()), stream_of(input)),
               "batch_norm", input);
  to_host(m, mean);
  to_host(v, var);
}

void batch_norm_transform_cuda(const Tensor& out, const Tensor& input, const BatchNormShape& s,
                               const double* scale, const double* shift) {
  DeviceGuard guard(out.device().index);
  const Tensor sc = to_device(scale, s.C, out.device()), sh = to_device(shift, s.C, out.device());
  check_launch(launch_batch_norm_transform(dtype_of(input), out.data_ptr(), input.data_ptr(),
                                           dims_of(s), device_ptr(sc), device_ptr(sh),
                                           stream_of(out)),
               "batch_norm", out);
}

void batch_norm_backward_reduce_cuda(const Tensor& grad_out, const Tensor& input,
                                     const BatchNormShape& s, const double* mean, double* sum_g,
                                     double* sum_gx) {
  DeviceGuard guard(input.device().index);
  const TensorOptions doubles(kFloat64, input.device());
  const Tensor mu = to_device(mean, s.C, input.device());
  Tensor a = empty({s.C}, doubles), b = empty({s.C}, doubles);
  check_launch(launch_batch_norm_backward_reduce(
                   dtype_of(input), grad_out.data_ptr(), input.data_ptr(), dims_of(s),
                   device_ptr(mu), static_cast<double*>(a.data_ptr()),
                   static_cast<double*>(b.data_ptr()), stream_of(input)),
               "batch_norm_backward", input);
  to_host(a, sum_g);
  to_host(b, sum_gx);
}

void batch_norm_backward_transform_cuda(const Tensor& grad_input, const Tensor& grad_out,
                                        const Tensor& input, const BatchNormShape& s,
                                        const BatchNormBackwardCoefficients& k) {
  DeviceGuard guard(grad_input.device().index);
  const Device device = grad_input.device();
  const Tensor a = to_device(k.a, s.C, device), b = to_device(k.b, s.C, device),
               d = to_device(k.d, s.C, device), mu = to_device(k.mean, s.C, device);
  check_launch(launch_batch_norm_backward_transform(
                   dtype_of(input), grad_input.data_ptr(), grad_out.data_ptr(), input.data_ptr(),
                   dims_of(s), device_ptr(a), device_ptr(b), device_ptr(d), device_ptr(mu),
                   stream_of(grad_input)),
               "batch_norm_backward", grad_input);
}

const bool kRegistered = [] {
  KernelTable& table = kernel_table(DeviceType::CUDA);
  table.batch_norm_stats = batch_norm_stats_cuda;
  table.batch_norm_transform = batch_norm_transform_cuda;
  table.batch_norm_backward_reduce = batch_norm_backward_reduce_cuda;
  table.batch_norm_backward_transform = batch_norm_backward_transform_cuda;
  return true;
}();

}  // namespace
}  // namespace ember::cuda
