// The CUDA table's pooling slots, filled at static initialisation from pooling_kernels.cu.
#include "tensor/cuda/slot_glue.h"

namespace ember::cuda {
namespace {

PoolShape shape_of(const PoolGeometry& g) {
  return PoolShape{g.planes, g.H, g.W, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.Ho, g.Wo};
}

void run(PoolKind kind, const char* op, const Tensor& out, int64_t* indices, const Tensor& in,
         const PoolGeometry& g) {
  DeviceGuard guard(out.device().index);
  check_launch(launch_pool(kind, dtype_of(out), out.data_ptr(), indices, in.data_ptr(), shape_of(g),
                           stream_of(out)),
               op, out);
}

void max_pool2d_cuda(const Tensor& out, const Tensor& indices, const Tensor& input,
                     const PoolGeometry& g) {
  run(PoolKind::kMax, "max_pool2d", out, static_cast<int64_t*>(indices.data_ptr()), input, g);
}
void avg_pool2d_cuda(const Tensor& out, const Tensor& input, const PoolGeometry& g) {
  run(PoolKind::kAvg, "avg_pool2d", out, nullptr, input, g);
}
void avg_pool2d_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                              const PoolGeometry& g) {
  run(PoolKind::kAvgBackward, "avg_pool2d_backward", grad_input, nullptr, grad_out, g);
}
void adaptive_avg_pool2d_cuda(const Tensor& out, const Tensor& input, const PoolGeometry& g) {
  run(PoolKind::kAdaptiveAvg, "adaptive_avg_pool2d", out, nullptr, input, g);
}
void adaptive_avg_pool2d_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                                       const PoolGeometry& g) {
  run(PoolKind::kAdaptiveAvgBackward, "adaptive_avg_pool2d_backward", grad_input, nullptr, grad_out,
      g);
}

const bool kRegistered = [] {
  KernelTable& table = kernel_table(DeviceType::kCUDA);
  table.max_pool2d = max_pool2d_cuda;
  table.avg_pool2d = avg_pool2d_cuda;
  table.avg_pool2d_backward = avg_pool2d_backward_cuda;
  table.adaptive_avg_pool2d = adaptive_avg_pool2d_cuda;
  table.adaptive_avg_pool2d_backward = adaptive_avg_pool2d_backward_cuda;
  return true;
}();

}  // namespace
}  // namespace ember::cuda
