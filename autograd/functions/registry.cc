// Fills autograd_kernels() when the autograd library is linked, and lists every differentiable op
// (the autograd slots plus their composites) for the gradcheck coverage test
// (tests/autograd/gradcheck_test.cc).
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
  static const std::vector<std::string> names = [] {
    // The primitives: every autograd slot (EMBER_FORALL_AUTOGRAD_SLOTS).
    std::vector<std::string> all(autograd_slot_names().begin(), autograd_slot_names().end());
    // The composites of those, which have no slot of their own.
    for (const char* composite : {"mean", "var", "max_dim", "min_dim", "matmul", "reshape",
                                  "flatten", "narrow", "t", "contiguous", "stack", "zero_",
                                  "softmax", "masked_fill", "split"}) {
      all.push_back(composite);
    }
    return all;
  }();
  return names;
}

}  // namespace ember::autograd
