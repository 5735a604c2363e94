// The CUDA table's fused_sgd slot: one kernel per parameter on the parameter's stream.
#include "tensor/cuda/slot_glue.h"

namespace ember::cuda {
namespace {

void fused_sgd_cuda(const std::vector<SgdParameter>& params, const SgdHyperparameters& h) {
  DeviceGuard guard(params.front().param.device().index);
  for (const SgdParameter& p : params) {
    const SgdArgs args{h.lr, h.momentum, h.dampening, h.weight_decay, h.nesterov, p.first_step};
    void* buf = p.momentum_buffer.defined() ? p.momentum_buffer.data_ptr() : nullptr;
    check_launch(launch_fused_sgd(dtype_of(p.param), p.param.data_ptr(), p.grad.data_ptr(), buf,
                                  p.param.numel(), args, stream_of(p.param)),
                 "fused_sgd_", p.param);
  }
}

const bool kRegistered = [] {
  kernel_table(DeviceType::kCUDA).fused_sgd = fused_sgd_cuda;
  return true;
}();

}  // namespace
}  // namespace ember::cuda
