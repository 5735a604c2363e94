// The CUDA table's indexing slots (index_select, index_add, gather, scatter_add), filled at static
// initialisation from indexing_kernels.cu. The accumulating two run in a type atomicAdd has:
// float16/bfloat16 through float32, uint8/bool through int32, copied back at the end.
#include "tensor/cuda/slot_glue.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::cuda {
namespace {

SliceShape slices_of(const Tensor& t, int64_t dim, int64_t n) {
  SliceShape s{1, t.size(dim), 1, n};
  for (int64_t d = 0; d < dim; ++d) s.outer *= t.size(d);
  for (int64_t d = dim + 1; d < t.dim(); ++d) s.inner *= t.size(d);
  return s;
}

ScalarType accumulation_dtype(ScalarType t) {
  switch (t) {
    case kFloat16:
    case kBFloat16: return kFloat32;
    case kUInt8:
    case kBool: return kInt32;
    default: return t;
  }
}

// Runs `accumulate(work)` on self, or on a dense copy in the accumulation dtype that is copied
// back.
template <typename F>
void accumulate_into(const Tensor& self, F accumulate) {
  const ScalarType acc = accumulation_dtype(self.dtype());
  if (acc == self.dtype() && self.is_contiguous()) {
    accumulate(self);
    return;
  }
  Tensor work = self.to(acc).contiguous();
  accumulate(work);
  copy_(self, work);
}

Indexer unmerged(const char* op, const Tensor& index, const Tensor& indexed, const Tensor& plain) {
  EMBER_CHECK(index.dim() <= kMaxDims, "no CUDA kernel for ", op, " over ", index.dim(),
              " dims (at most ", kMaxDims, ")");
  Indexer g;
  g.ndim = static_cast<int>(index.dim());
  for (int64_t d = 0; d < index.dim(); ++d) {
    g.sizes[d] = index.size(d);
    g.strides[0][d] = indexed.stride(d);
    g.strides[1][d] = plain.stride(d);
  }
  return g;
}

const int64_t* indices(const Tensor& index) {
  return static_cast<const int64_t*>(index.data_ptr());
}

void index_select_cuda(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  const Tensor src = in.contiguous();
  DeviceGuard guard(out.device().index);
  check_launch(launch_index_select(dtype_of(src), out.data_ptr(), src.data_ptr(), indices(index),
                                   slices_of(src, dim, index.numel()), stream_of(out)),
               "index_select", out);
}

void index_add_cuda(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  DeviceGuard guard(self.device().index);
  accumulate_into(self, [&](const Tensor& work) {
    const Tensor from = src.to(work.dtype()).contiguous();
    check_launch(launch_index_add(dtype_of(work), work.data_ptr(), from.data_ptr(), indices(index),
                                  slices_of(work, dim, index.numel()), stream_of(work)),
                 "index_add_", self);
  });
}

void gather_cuda(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  DeviceGuard guard(out.device().index);
  check_launch(launch_gather(dtype_of(in), out.data_ptr(), in.data_ptr(), indices(index),
                             unmerged("gather", index, in, out), static_cast<int>(dim),
                             in.size(dim), index.numel(), stream_of(out)),
               "gather", out);
}

void scatter_add_cuda(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  DeviceGuard guard(self.device().index);
  accumulate_into(self, [&](const Tensor& work) {
    const Tensor from = src.to(work.dtype());
    check_launch(
        launch_scatter_add(dtype_of(work), work.data_ptr(), from.data_ptr(), indices(index),
                           unmerged("scatter_add_", index, work, from), static_cast<int>(dim),
                           work.size(dim), index.numel(), stream_of(work)),
        "scatter_add_", self);
  });
}

const bool kRegistered = [] {
  KernelTable& table = kernel_table(DeviceType::kCUDA);
  table.index_select = index_select_cuda;
  table.index_add = index_add_cuda;
  table.gather = gather_cuda;
  table.scatter_add = scatter_add_cuda;
  return true;
}();

}  // namespace
}  // namespace ember::cuda
