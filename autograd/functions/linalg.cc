// Backward formulas for matrix products; matmul is a composite of these and views.
#include "autograd/functions/function_node.h"
#include "tensor/ops.h"

namespace ember::autograd {

void register_linalg_formulas(AutogradKernels& k) {
  using Needs = std::vector<bool>;
  k.mm = [](const Tensor& a, const Tensor& b) {
    return record_op({"MmBackward", {a, b}, {a, b}}, [&] { return mm(a, b); },
                     [](const Tensor& g, const variable_list& s, const Needs& n) -> variable_list {
                       return {n[0] ? mm(g, s[1].t()) : Tensor(), n[1] ? mm(s[0].t(), g) : Tensor()};
                     });
  };
  k.bmm = [](const Tensor& a, const Tensor& b) {
    return record_op({"BmmBackward", {a, b}, {a, b}}, [&] { return bmm(a, b); },
                     [](const Tensor& g, const variable_list& s, const Needs& n) -> variable_list {
                       return {n[0] ? bmm(g, s[1].transpose(1, 2)) : Tensor(),
                               n[1] ? bmm(s[0].transpose(1, 2), g) : Tensor()};
                     });
  };
  k.addmm = [](const Tensor& self, const Tensor& m1, const Tensor& m2, const Scalar& beta,
               const Scalar& alpha) {
    return record_op({"AddmmBackward", {self, m1, m2}, {m1, m2}},
                     [&] { return addmm(self, m1, m2, beta, alpha); },
                     [beta, alpha](const Tensor& g, const variable_list& s, const Needs& n) -> variable_list {
                       const bool unit = alpha.to_double() == 1.0;
                       Tensor g1, g2;
                       if (n[1]) g1 = mm(g, s[1].t());
                       if (n[2]) g2 = mm(s[0].t(), g);
                       if (!unit && g1.defined()) g1 = mul(g1, alpha);
                       if (!unit && g2.defined()) g2 = mul(g2, alpha);
                       return {beta.to_double() == 1.0 ? g : mul(g, beta), g1, g2};
                     });
  };
}

}  // namespace ember::autograd
