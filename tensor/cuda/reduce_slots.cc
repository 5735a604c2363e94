// The CUDA table's reduce slot (sum, max, min, argmax, argmin), filled at static initialisation
// from reduce_kernels.cu: the input is viewed as [kept dims, reduced dims], the kernel writes one
// value per kept position to a dense buffer, and copy_ puts it into `out` in out's dtype.
#include "tensor/cuda/slot_glue.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::cuda {
namespace {

struct RowsAndCols {
  Indexer kept, reduced;
  int64_t rows = 1, cols = 1;
};

RowsAndCols split(const char* op, const Tensor& in, const std::vector<bool>& mask) {
  Shape kept_sizes, kept_strides, reduced_sizes, reduced_strides;
  RowsAndCols rc;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (mask[d]) {
      reduced_sizes.push_back(in.size(d));
      reduced_strides.push_back(in.stride(d));
      rc.cols *= in.size(d);
    } else {
      kept_sizes.push_back(in.size(d));
      kept_strides.push_back(in.stride(d));
      rc.rows *= in.size(d);
    }
  }
  rc.kept = make_indexer(op, kept_sizes, {kept_strides});
  rc.reduced = make_indexer(op, reduced_sizes, {reduced_strides});
  return rc;
}

void reduce_cuda(ReduceKind op, const Tensor& out, const Tensor& in, const std::vector<bool>& mask) {
  const char* name = op == ReduceKind::kSum      ? "sum"
                     : op == ReduceKind::kMax    ? "max"
                     : op == ReduceKind::kMin    ? "min"
                     : op == ReduceKind::kArgMax ? "argmax"
                                              : "argmin";
  const RowsAndCols rc = split(name, in, mask);
  // A pointer to the input's first element: Indexer offsets are relative to it.
  const void* first = in.data_ptr();
  const Device device = in.device();
  DeviceGuard guard(in.device().index);
  Tensor dense;
  if (op == ReduceKind::kSum) {
    dense = empty(out.sizes(),
                  TensorOptions(is_floating_point(in.dtype()) ? kFloat64 : kInt64, device));
    check_launch(launch_sum(dtype_of(in), dense.data_ptr(), first, rc.kept, rc.reduced, rc.rows,
                            rc.cols, stream_of(in)),
                 name, out);
  } else {
    EMBER_CHECK(rc.cols > 0 || rc.rows == 0, name, ": cannot reduce over an empty dimension of ",
                in.describe());
    const bool want_values = op == ReduceKind::kMax || op == ReduceKind::kMin;
    dense = empty(out.sizes(), TensorOptions(want_values ? in.dtype() : kInt64, device));
    const bool is_max = op == ReduceKind::kMax || op == ReduceKind::kArgMax;
    check_launch(launch_extreme(dtype_of(in), is_max, want_values ? dense.data_ptr() : nullptr,
                                want_values ? nullptr : static_cast<int64_t*>(dense.data_ptr()),
                                first, rc.kept, rc.reduced, rc.rows, rc.cols, stream_of(in)),
                 name, out);
  }
  copy_(out, dense);
}

const bool kRegistered = [] {
  kernel_table(DeviceType::kCUDA).reduce = reduce_cuda;
  return true;
}();

}  // namespace
}  // namespace ember::cuda
