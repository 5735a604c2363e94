// CPU GEMM through Eigen on the tensors' own buffers (Eigen::Map, no copies for row- or
// column-major operands). Half/BFloat16 compute in float; other strided layouts are made dense first.
// Integer products are a plain loop (gemm_2d_integer).
#include <type_traits>

#include <Eigen/Core>

#include "tensor/cpu/kernels_cpu.h"
#include "tensor/factories.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using OuterStride = Eigen::OuterStride<Eigen::Dynamic>;

// A 2-d operand is mappable if one of its dims has unit stride (row- or column-major) and the
// other steps over whole rows/columns: an expanded operand (stride 0, or rows that overlap) is not.
bool row_major(const Tensor& m) {
  return (m.strides()[1] == 1 || m.sizes()[1] == 1) &&
         (m.sizes()[0] == 1 || m.strides()[0] >= m.sizes()[1]);
}
bool col_major(const Tensor& m) {
  return (m.strides()[0] == 1 || m.sizes()[0] == 1) &&
         (m.sizes()[1] == 1 || m.strides()[1] >= m.sizes()[0]);
}

// Calls f with an Eigen map of the 2-d matrix m (row- or column-major as its strides allow).
template <typename T, typename F>
void with_map(const Tensor& m, F f) {
  const int64_t r = m.sizes()[0], c = m.sizes()[1];
  const T* p = static_cast<const T*>(m.data_ptr());
  if (row_major(m)) {
    Eigen::Map<const RowMat<T>, 0, OuterStride> map(p, r, c, OuterStride(std::max<int64_t>(m.strides()[0], c)));
    f(map);
  } else {
    Eigen::Map<const ColMat<T>, 0, OuterStride> map(p, r, c, OuterStride(std::max<int64_t>(m.strides()[1], r)));
    f(map);
  }
}

// o = beta * o + alpha * am * bm for the output rows [r0, r0 + rows). One product expression per
// operand layout, `dst += alpha * (lhs * bm)`, is what Eigen compiles its blocked kernel for:
// `dst = lhs * bm` is evaluated as zero-then-accumulate with alpha 1 anyway, so the zero fill is
// spelled out here and one expression is instantiated instead of three, with the same bits.
template <typename T, typename A, typename B, typename O>
void gemm_rows(O& o, const A& am, const B& bm, double beta, double alpha, int64_t r0, int64_t rows) {
  auto dst = o.middleRows(r0, rows);
  if (beta == 0) {
    dst.setZero();  // beta 0 ignores what out held, NaN included, as BLAS does
  } else if (beta != 1) {
    dst *= static_cast<T>(beta);
  }
  dst.noalias() += static_cast<T>(alpha) * (am.middleRows(r0, rows) * bm);
}

// The output is computed in fixed blocks of rows whatever the thread count, so that the bits do
// not change with it (Note [Deterministic parallel kernels]; checked in
// tests/tensor/parallel_test.cc). Eigen's result for a row depends on the product it is part of
// only where Eigen leaves its blocked kernel: one row goes through GEMV, and a product with
// rows + cols + depth < 20 is evaluated coefficient by coefficient. Whole blocks never do, so a
// thread multiplies its run of whole blocks as one product -- the same bits as block by block
// (checked for float and double, row- and column-major operands, beta 0 and 1, at every capability
// level), with b packed once per run instead of once per block (a tenth of a 1024^3 product at
// AVX-512) -- and the short last block is always a product of its own.
constexpr int64_t kGemmRowBlock = 128;

template <typename T>
void gemm_2d(const Tensor& out, const Tensor& a, const Tensor& b, double beta, double alpha) {
  const int64_t n = out.sizes()[0], m = out.sizes()[1];
  Eigen::Map<RowMat<T>> o(static_cast<T*>(out.data_ptr()), n, m);
  with_map<T>(a, [&](const auto& am) {
    with_map<T>(b, [&](const auto& bm) {
      const int64_t whole = n / kGemmRowBlock;
      const int64_t blocks = whole + (n % kGemmRowBlock != 0 ? 1 : 0);
      parallel_for_static(0, blocks, 1, [&](int64_t begin, int64_t end) {
        const int64_t whole_end = std::min(end, whole);
        if (begin < whole_end) {
          gemm_rows<T>(o, am, bm, beta, alpha, begin * kGemmRowBlock,
                       (whole_end - begin) * kGemmRowBlock);
        }
        if (end > whole) {
          gemm_rows<T>(o, am, bm, beta, alpha, whole * kGemmRowBlock, n - whole * kGemmRowBlock);
        }
      });
    });
  });
}

// Integer products (rare: PyTorch allows them, nothing in ember's training uses them) go through
// a plain loop on the strides rather than Eigen's blocked kernel, whose instantiations for two more
// scalar types would double this file's compile time at every level. They wrap, as PyTorch's do
// (computed in the unsigned type of the same width, as the elementwise kernels do), and integer
// sums are exact in any order, so the loop needs no fixed blocking to be deterministic.
template <typename T>
void gemm_2d_integer(const Tensor& out, const Tensor& a, const Tensor& b, double beta, double alpha) {
  using U = std::make_unsigned_t<T>;
  const int64_t n = out.sizes()[0], m = out.sizes()[1], k = a.sizes()[1];
  const U al = static_cast<U>(static_cast<T>(alpha)), be = static_cast<U>(static_cast<T>(beta));
  const T* ap = static_cast<const T*>(a.data_ptr());
  const T* bp = static_cast<const T*>(b.data_ptr());
  T* op = static_cast<T*>(out.data_ptr());
  const int64_t as0 = a.strides()[0], as1 = a.strides()[1], bs0 = b.strides()[0], bs1 = b.strides()[1];
  const int64_t os0 = out.strides()[0], os1 = out.strides()[1];
  parallel_for_static(0, n, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        U sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          sum += static_cast<U>(ap[i * as0 + p * as1]) * static_cast<U>(bp[p * bs0 + j * bs1]);
        }
        T& o = op[i * os0 + j * os1];
        o = static_cast<T>((beta == 0 ? U(0) : be * static_cast<U>(o)) + al * sum);
      }
    }
  });
}

Tensor mappable(const Tensor& m) {
  return (m.numel() == 0 || row_major(m) || col_major(m)) ? m : m.contiguous();
}

template <typename T>
void batched(const Tensor& out, const Tensor& a, const Tensor& b, double beta, double alpha) {
  const int64_t batch = out.sizes()[0];
  for (int64_t i = 0; i < batch; ++i) {
    Tensor oi = out.select(0, i);
    if (a.sizes()[2] == 0) {  // empty inner dimension: the product is zero
      if (beta == 0) {
        zero_(oi);
      } else {
        // An integer out takes beta cast to its type, as the products below do.
        mul_(oi, is_floating_point(oi.dtype()) ? Scalar(beta) : Scalar(static_cast<int64_t>(beta)));
      }
      continue;
    }
    if constexpr (std::is_integral_v<T>) {
      gemm_2d_integer<T>(oi, a.select(0, i), b.select(0, i), beta, alpha);
    } else {
      gemm_2d<T>(oi, mappable(a.select(0, i)), mappable(b.select(0, i)), beta, alpha);
    }
  }
}

void batched_gemm_kernel(const Tensor& out, const Tensor& a, const Tensor& b, double beta,
                         double alpha) {
  if (out.numel() == 0) return;
  switch (a.dtype()) {
    case kFloat32: return batched<float>(out, a, b, beta, alpha);
    case kFloat64: return batched<double>(out, a, b, beta, alpha);
    case kInt32: return batched<int32_t>(out, a, b, beta, alpha);
    case kInt64: return batched<int64_t>(out, a, b, beta, alpha);
    case kFloat16:
    case kBFloat16: {
      // Reduced precision: multiply in float, round once at the end.
      Tensor of = out.to(kFloat32);
      batched<float>(of, a.to(kFloat32), b.to(kFloat32), beta, alpha);
      copy_(out, of);
      return;
    }
    default: break;
  }
  EMBER_THROW("matmul: not supported for dtype ", a.dtype());
}

}  // namespace

void register_gemm_kernels(KernelTable& table) { table.batched_gemm = batched_gemm_kernel; }

}  // namespace ember::cpu::CPU_CAPABILITY
