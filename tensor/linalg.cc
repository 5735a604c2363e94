// Matrix products: mm, bmm, addmm and PyTorch's matmul (1-d, 2-d and broadcast batched cases).
#include "tensor/autograd_dispatch.h"
#include "tensor/factories.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"

namespace ember {
namespace {

using BatchedGemmKernel = decltype(KernelTable::batched_gemm);

BatchedGemmKernel gemm_kernel(const char* op, const Tensor& a, const Tensor& b) {
  const BatchedGemmKernel kernel = kernel_for(&KernelTable::batched_gemm, op, {&a, &b});
  EMBER_CHECK(a.dtype() == b.dtype(), op, ": expected both operands to have the same dtype, got ",
              a.describe(), " and ", b.describe());
  return kernel;
}

// [B, n, k] x [B, k, m] -> [B, n, m]
Tensor batched_product(const char* op, const Tensor& a, const Tensor& b) {
  const BatchedGemmKernel gemm = gemm_kernel(op, a, b);
  Tensor out = empty({a.sizes()[0], a.sizes()[1], b.sizes()[2]}, TensorOptions(a.dtype(), a.device()));
  gemm(out, a, b, 0.0, 1.0);
  return out;
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  if (auto f = autograd_kernel(&AutogradKernels::mm, {&a, &b})) return f(a, b);
  EMBER_CHECK(a.defined() && b.defined(), "mm: undefined tensor");
  EMBER_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-d tensors, got ", a.describe(), " and ",
              b.describe());
  // Checked here so the message shows the caller's shapes, not the batched ones below.
  EMBER_CHECK(a.dtype() == b.dtype(), "mm: expected both operands to have the same dtype, got ",
              a.describe(), " and ", b.describe());
  EMBER_CHECK(a.sizes()[1] == b.sizes()[0], "mm: mat1 and mat2 shapes cannot be multiplied (",
              a.sizes()[0], "x", a.sizes()[1], " and ", b.sizes()[0], "x", b.sizes()[1], ")");
  return batched_product("mm", a.unsqueeze(0), b.unsqueeze(0)).squeeze(0);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (auto f = autograd_kernel(&AutogradKernels::bmm, {&a, &b})) return f(a, b);
  EMBER_CHECK(a.defined() && b.defined(), "bmm: undefined tensor");
  EMBER_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-d tensors, got ", a.describe(),
              " and ", b.describe());
  EMBER_CHECK(a.sizes()[0] == b.sizes()[0], "bmm: batch sizes differ: ", a.describe(), " and ",
              b.describe());
  EMBER_CHECK(a.sizes()[2] == b.sizes()[1], "bmm: shapes cannot be multiplied (", a.shape_str(),
              " and ", b.shape_str(), ")");
  return batched_product("bmm", a, b);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.defined() && b.defined(), "matmul: undefined tensor");
  EMBER_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got ",
              a.describe(), " and ", b.describe());
  const int64_t da = a.dim(), db = b.dim();
  EMBER_CHECK(a.sizes()[da - 1] == b.sizes()[db == 1 ? 0 : db - 2], "matmul: shapes ",
              a.shape_str(), " and ", b.shape_str(), " cannot be multiplied");
  if (da == 1 && db == 1) return mm(a.unsqueeze(0), b.unsqueeze(1)).view({});
  if (da == 2 && db == 1) return mm(a, b.unsqueeze(1)).squeeze(1);
  if (da == 1 && db == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (da == 2 && db == 2) return mm(a, b);
  // Batched: a 1-d operand becomes a matrix, batch dims broadcast, then one bmm.
  Tensor A = da == 1 ? a.unsqueeze(0) : a;
  Tensor B = db == 1 ? b.unsqueeze(1) : b;
  const Shape batch_a(A.sizes().begin(), A.sizes().end() - 2);
  const Shape batch_b(B.sizes().begin(), B.sizes().end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  const int64_t n = A.sizes()[A.dim() - 2], k = A.sizes()[A.dim() - 1], m = B.sizes()[B.dim() - 1];
  Shape ea = batch, eb = batch;
  ea.insert(ea.end(), {n, k});
  eb.insert(eb.end(), {k, m});
  const int64_t nb = shape_numel(batch);
  Tensor out = bmm(A.expand(ea).reshape({nb, n, k}), B.expand(eb).reshape({nb, k, m}));
  Shape out_shape = batch;
  if (da > 1) out_shape.push_back(n);
  if (db > 1) out_shape.push_back(m);
  return out.view(out_shape);
}

Tensor addmm(const Tensor& self, const Tensor& m1, const Tensor& m2, const Scalar& beta,
             const Scalar& alpha) {
  if (auto f = autograd_kernel(&AutogradKernels::addmm, {&self, &m1, &m2})) return f(self, m1, m2, beta, alpha);
  EMBER_CHECK(self.defined() && m1.defined() && m2.defined(), "addmm: undefined tensor");
  EMBER_CHECK(m1.dim() == 2 && m2.dim() == 2, "addmm: expected 2-d matrices, got ", m1.describe(),
              " and ", m2.describe());
  EMBER_CHECK(m1.sizes()[1] == m2.sizes()[0], "addmm: mat1 and mat2 shapes cannot be multiplied (",
              m1.sizes()[0], "x", m1.sizes()[1], " and ", m2.sizes()[0], "x", m2.sizes()[1], ")");
  const BatchedGemmKernel gemm = gemm_kernel("addmm", m1, m2);
  EMBER_CHECK(self.dtype() == m1.dtype(), "addmm: self ", self.describe(),
              " must have the dtype of the matrices (", m1.dtype(), ")");
  const Shape shape{m1.sizes()[0], m2.sizes()[1]};
  Tensor out = empty(shape, TensorOptions(m1.dtype(), m1.device()));
  try {
    copy_(out, self.expand(shape));
  } catch (const Error&) {
    EMBER_THROW("addmm: self ", self.describe(), " cannot be broadcast to the product shape ",
                shape_to_string(shape));
  }
  gemm(out.unsqueeze(0), m1.unsqueeze(0), m2.unsqueeze(0), beta.to_double(),
                 alpha.to_double());
  return out;
}

}  // namespace ember
