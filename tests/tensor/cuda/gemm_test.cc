// The matrix products on cuda:0 against the CPU backend: mm, addmm, bmm and matmul with every
// transpose combination of the operands, odd sizes, leading dimensions wider than the matrix,
// strided, interleaved and broadcast batches, at the floating dtypes (cuBLAS, tensor/cuda/
// gemm_slots.cc) and the integer ones (tensor/cuda/gemm_kernels.cu); the dtypes neither backend
// multiplies are refused by both.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>

#include "tests/common/error_matchers.h"
#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/cuda/device_parity.h"

namespace ember::testing {
namespace {

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

// How a 3-d operand's matrices lie in its storage: back to back, every other one of twice as many,
// or interleaved row by row (stored [rows, batch, cols], as attention heads are).
enum class Batches { kDense, kEveryOther, kInterleaved };

// An operand of logical shape `shape`, read as a view of a tensor stored otherwise: its last two
// dims swapped in storage and read through transpose() (unit row stride, cuBLAS op T), and `pad`
// extra columns stored per row (a leading dimension wider than the matrix).
struct Operand {
  Shape shape;
  bool transposed = false;
  int64_t pad = 0;
  Batches batches = Batches::kDense;
  std::optional<double> fill;  // every element this value instead of drawn ones
};

bool is_matrix(const Operand& o) { return o.shape.size() >= 2; }

Shape storage_shape(const Operand& o) {
  Shape s = o.shape;
  const size_t r = s.size();
  if (o.transposed && is_matrix(o)) std::swap(s[r - 2], s[r - 1]);
  s[r - 1] += o.pad;
  if (r == 3 && o.batches == Batches::kEveryOther) s[0] *= 2;
  if (r == 3 && o.batches == Batches::kInterleaved) s = {s[1], s[0], s[2]};
  return s;
}

Tensor view_of(const Tensor& stored, const Operand& o) {
  const int64_t r = static_cast<int64_t>(o.shape.size());
  Tensor t = stored;
  if (r == 3 && o.batches == Batches::kEveryOther) t = t.slice(0, 0, t.size(0), 2);
  if (r == 3 && o.batches == Batches::kInterleaved) t = t.transpose(0, 1);
  const bool swap = o.transposed && is_matrix(o);
  t = t.narrow(r - 1, 0, o.shape[swap ? r - 2 : r - 1]);
  return swap ? t.transpose(r - 2, r - 1) : t;
}

struct Param {
  ScalarType dtype;
  bool transpose_a, transpose_b;
  bool padded;  // a's rows padded by 3 elements, b's by 5: leading dims differ from the sizes
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << dtype_name(p.dtype) << (p.transpose_a ? " a^T" : " a") << (p.transpose_b ? " b^T" : " b")
      << (p.padded ? " padded" : "");
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const Param& p = info.param;
  return std::string(dtype_name(p.dtype)) + "_" + (p.transpose_a ? "T" : "N") +
         (p.transpose_b ? "T" : "N") + (p.padded ? "_padded" : "");
}

const std::vector<ScalarType> kGemmDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16,
                                             kInt32,   kInt64};

std::vector<Param> all_params() {
  std::vector<Param> out;
  for (ScalarType dt : kGemmDtypes) {
    for (int layout = 0; layout < 8; ++layout) {
      out.push_back({dt, (layout & 1) != 0, (layout & 2) != 0, (layout & 4) != 0});
    }
  }
  return out;
}

// [n, k] x [k, m] sizes: ones, primes and one past powers of two, each dim 1 somewhere, an empty
// inner dimension (the product is all zeros) and an empty output.
struct Dims {
  int64_t n, k, m;
};
const std::vector<Dims> kMatrixDims = {{1, 1, 1},  {1, 17, 3}, {3, 1, 17}, {17, 33, 1},
                                       {33, 17, 65}, {65, 3, 33}, {5, 0, 3},  {0, 4, 3}};
const std::vector<Dims> kBatchDims = {{1, 1, 1}, {3, 17, 5}, {17, 1, 33}, {33, 65, 3}};

std::string dims_str(const Dims& d) {
  return std::to_string(d.n) + "x" + std::to_string(d.k) + " @ " + std::to_string(d.k) + "x" +
         std::to_string(d.m);
}

class CudaGemmTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { EMBER_SKIP_WITHOUT_CUDA_DEVICE(); }

  ScalarType dtype() const { return GetParam().dtype; }
  bool floating() const { return is_floating_point(dtype()); }

  // The first and second factors of a product at this test's layout.
  Operand a(const Shape& shape, Batches batches = Batches::kDense) const {
    return {shape, GetParam().transpose_a, GetParam().padded ? 3 : 0, batches};
  }
  Operand b(const Shape& shape, Batches batches = Batches::kDense) const {
    return {shape, GetParam().transpose_b, GetParam().padded ? 5 : 0, batches};
  }

  // op on views of freshly drawn operands, on cuda:0 and on the CPU.
  void expect_matches_cpu(const std::string& what, const std::vector<Operand>& operands,
                          const Op& op) const {
    SCOPED_TRACE(what);
    std::vector<Tensor> stored;
    for (size_t i = 0; i < operands.size(); ++i) {
      const Operand& o = operands[i];
      stored.push_back(o.fill ? full(storage_shape(o), *o.fill, TensorOptions(dtype()))
                              : parity_input(storage_shape(o), dtype(), 1000 + 17 * i));
    }
    const Op on_views = [&](const std::vector<Tensor>& x) {
      std::vector<Tensor> views;
      for (size_t i = 0; i < x.size(); ++i) views.push_back(view_of(x[i], operands[i]));
      return op(views);
    };
    EXPECT_TRUE(matches_cpu(on_views, stored, device_tolerance(dtype())));
  }
};

TEST_P(CudaGemmTest, Mm) {
  for (const Dims& d : kMatrixDims) {
    expect_matches_cpu("mm " + dims_str(d), {a({d.n, d.k}), b({d.k, d.m})},
                       [](auto& x) { return mm(x[0], x[1]); });
  }
}

// beta and alpha other than 0 and 1, beta 0 (self is not read: NaN there does not reach the
// result), the defaults, and self broadcast from a row.
TEST_P(CudaGemmTest, Addmm) {
  struct Scale {
    double beta, alpha;
  };
  const std::vector<Scale> scales = floating() ? std::vector<Scale>{{-1.5, 0.75}, {0, 2}, {1, 1}}
                                               : std::vector<Scale>{{3, -2}, {0, 2}, {1, 1}};
  for (const Dims& d : kMatrixDims) {
    for (const Scale& s : scales) {
      const std::string scale =
          " beta=" + std::to_string(s.beta) + " alpha=" + std::to_string(s.alpha);
      Operand self{{d.n, d.m}};
      if (s.beta == 0 && floating()) self.fill = std::numeric_limits<double>::quiet_NaN();
      const Op op = [s](auto& x) { return addmm(x[0], x[1], x[2], s.beta, s.alpha); };
      expect_matches_cpu("addmm " + dims_str(d) + scale, {self, a({d.n, d.k}), b({d.k, d.m})}, op);
      expect_matches_cpu("addmm row self " + dims_str(d) + scale,
                         {Operand{{d.m}}, a({d.n, d.k}), b({d.k, d.m})}, op);
    }
  }
}

TEST_P(CudaGemmTest, AddmmDefaultsAreBetaOneAlphaOne) {
  expect_matches_cpu("addmm 17x33 @ 33x5", {Operand{{17, 5}}, a({17, 33}), b({33, 5})},
                     [](auto& x) { return addmm(x[0], x[1], x[2]); });
}

// The batch dims of both operands in each of the three storage orders, paired differently.
TEST_P(CudaGemmTest, Bmm) {
  const std::vector<std::pair<Batches, Batches>> batch_layouts = {
      {Batches::kDense, Batches::kDense},
      {Batches::kDense, Batches::kEveryOther},
      {Batches::kEveryOther, Batches::kInterleaved},
      {Batches::kInterleaved, Batches::kDense}};
  const char* names[] = {"dense", "every other", "interleaved"};
  for (const Dims& d : kBatchDims) {
    for (const auto& [ba, bb] : batch_layouts) {
      expect_matches_cpu("bmm 3 x " + dims_str(d) + ", batches " +
                             names[static_cast<int>(ba)] + " x " + names[static_cast<int>(bb)],
                         {a({3, d.n, d.k}, ba), b({3, d.k, d.m}, bb)},
                         [](auto& x) { return bmm(x[0], x[1]); });
    }
  }
}

// Each of matmul's cases: dot, mv, vm, mm, bmm, a matrix against a batch and a batch against a
// matrix (a stride-0 batch), batches broadcast from size-1 dims on both sides, and a strided batch.
TEST_P(CudaGemmTest, Matmul) {
  struct Case {
    Shape a, b;
    Batches batches_a = Batches::kDense;
  };
  const std::vector<Case> cases = {
      {{17}, {17}},
      {{3, 17}, {17}},
      {{17}, {17, 5}},
      {{3, 17}, {17, 33}},
      {{2, 3, 17}, {2, 17, 5}},
      {{2, 3, 17}, {17, 5}},
      {{3, 17}, {2, 17, 5}},
      {{17}, {2, 17, 5}},
      {{2, 1, 3, 17}, {4, 17, 5}},
      {{1, 3, 17}, {4, 17, 5}},
      {{3, 3, 17}, {3, 17, 5}, Batches::kEveryOther},
      {{3, 3, 17}, {17}, Batches::kInterleaved},
  };
  for (const Case& c : cases) {
    expect_matches_cpu("matmul " + shape_to_string(c.a) + " @ " + shape_to_string(c.b),
                       {a(c.a, c.batches_a), b(c.b)}, [](auto& x) { return matmul(x[0], x[1]); });
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, CudaGemmTest, ::testing::ValuesIn(all_params()), param_name);

// uint8 and bool have no matrix product on either backend: both refuse them the same way.
TEST(CudaGemmDtypeTest, UnsupportedDtypesAreRefusedAsOnTheCpu) {
  EMBER_SKIP_WITHOUT_CUDA_DEVICE();
  for (ScalarType dt : {kUInt8, kBool}) {
    for (const Device& device : {Device(DeviceType::kCPU), kCuda0}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " on " + device.str());
      const Tensor m = parity_input({3, 4}, dt, 1).to(device);
      const Tensor n = parity_input({4, 5}, dt, 2).to(device);
      EXPECT_EMBER_ERROR(mm(m, n), "matmul: not supported for dtype", dtype_name(dt));
      EXPECT_EMBER_ERROR(bmm(m.unsqueeze(0), n.unsqueeze(0)), "matmul: not supported for dtype",
                         dtype_name(dt));
      EXPECT_EMBER_ERROR(addmm(zeros({3, 5}, TensorOptions(dt, device)), m, n),
                         "matmul: not supported for dtype", dtype_name(dt));
    }
  }
}

}  // namespace
}  // namespace ember::testing
