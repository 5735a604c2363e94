// Fills autograd_kernels() when the autograd library is linked, and lists every differentiable op
// for the gradcheck coverage test (tests/autograd/gradcheck_test.cc).
#include "autograd/functions/function_node.h"

namespace ember::autograd {
namespace {
const bool kRegistered = [] {
  AutogradKernels& k = autograd_kernels();
  register_elementwise_formulas(k);
  register_reduction_formulas(k);
  register_shape_formulas(k);
  register_linalg_formulas(k);
  register_indexing_formulas(k);
  register_nn_formulas(k);
  return true;
}();
}  // namespace

const std::vector<std::string>& differentiable_op_names() {
  static const std::vector<std::string> names = {
      // primitives with a formula
      "add", "sub", "mul", "div", "pow", "maximum", "minimum", "add_scalar", "sub_scalar",
      "mul_scalar", "div_scalar", "pow_scalar", "rsub", "rdiv", "where", "neg", "exp", "log",
      "sqrt", "rsqrt", "abs", "relu", "sigmoid", "tanh", "sign", "clamp", "add_", "sub_", "mul_",
      "div_", "add_scalar_", "mul_scalar_", "div_scalar_", "fill_", "copy_", "sum", "max", "min",
      "mm", "bmm", "addmm", "view", "permute", "transpose", "slice", "select", "expand", "squeeze",
      "squeeze_dim", "unsqueeze", "as_strided", "clone", "to_dtype", "cat", "index_select",
      "gather", "scatter_add", "index_add_", "conv2d", "max_pool2d", "avg_pool2d",
      "adaptive_avg_pool2d", "batch_norm", "log_softmax", "nll_loss", "embedding",
      // composites of the above
      "mean", "var", "max_dim", "min_dim", "matmul", "reshape", "flatten", "narrow", "t",
      "contiguous", "stack", "zero_", "softmax"};
  return names;
}

}  // namespace ember::autograd
