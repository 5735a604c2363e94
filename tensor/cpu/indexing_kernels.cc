// CPU kernels for index_select, index_add, gather and scatter_add (tensor/indexing.cc checks the
// arguments and the index range first).
#include <cstring>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/cpu/loops.h"
#include "tensor/ops.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

int64_t wrapped(int64_t idx, int64_t size) { return idx < 0 ? idx + size : idx; }

// `t` viewed with `shape` and a zero stride along `dim`: the base address for each position.
Tensor base_view(const Tensor& t, const Shape& shape, int64_t dim) {
  Shape strides = t.strides();
  strides[dim] = 0;
  return t.as_strided(shape, strides, t.storage_offset());
}

void index_select_kernel(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  const int64_t n = index.numel(), size = in.sizes()[dim];
  const int64_t* ip = index.data_ptr<int64_t>();
  if (dim == 0 && in.is_contiguous()) {
    // Rows are contiguous blocks: one memcpy each (the Embedding lookup path).
    const size_t row = in.numel() == 0 ? 0 : in.nbytes() / static_cast<size_t>(size);
    const char* src = static_cast<const char*>(in.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    for (int64_t i = 0; i < n; ++i) {
      if (row) std::memcpy(dst + i * row, src + wrapped(ip[i], size) * row, row);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) copy_(out.select(dim, i), in.select(dim, wrapped(ip[i], size)));
}

void index_add_kernel(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t* ip = index.data_ptr<int64_t>();
  const int64_t size = self.sizes()[dim];
  for (int64_t i = 0; i < index.numel(); ++i) {
    add_(self.select(dim, wrapped(ip[i], size)), src.select(dim, i));
  }
}

void gather_kernel(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  Tensor base = base_view(in, index.sizes(), dim);
  const int64_t size = in.sizes()[dim];
  const int64_t step = in.strides()[dim] * static_cast<int64_t>(in.element_size());
  const size_t es = in.element_size();
  for_each_strided<3>(index.sizes(), {&out, &index, &base},
                      [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
                        for (int64_t i = 0; i < n; ++i) {
                          const int64_t j =
                              wrapped(*reinterpret_cast<int64_t*>(p[1] + i * s[1]), size);
                          std::memcpy(p[0] + i * s[0], p[2] + i * s[2] + j * step, es);
                        }
                      });
}

void scatter_add_kernel(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor base = base_view(self, index.sizes(), dim);
  Tensor src_v = src.as_strided(index.sizes(), src.strides(), src.storage_offset());
  const int64_t size = self.sizes()[dim];
  const int64_t step = self.strides()[dim] * static_cast<int64_t>(self.element_size());
  EMBER_DISPATCH_NUMERIC_TYPES(self.dtype(), "scatter_add_", [&] {
    using T = scalar_t;
    for_each_strided<3>(index.sizes(), {&base, &index, &src_v},
                        [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
                          for (int64_t i = 0; i < n; ++i) {
                            const int64_t j =
                                wrapped(*reinterpret_cast<int64_t*>(p[1] + i * s[1]), size);
                            T* o = reinterpret_cast<T*>(p[0] + i * s[0] + j * step);
                            *o = T(opmath_t<T>(*o) +
                                   opmath_t<T>(*reinterpret_cast<T*>(p[2] + i * s[2])));
                          }
                        });
  });
}

}  // namespace

void register_indexing_kernels(KernelTable& table) {
  table.index_select = index_select_kernel;
  table.index_add = index_add_kernel;
  table.gather = gather_kernel;
  table.scatter_add = scatter_add_kernel;
}

}  // namespace ember::cpu::CPU_CAPABILITY
