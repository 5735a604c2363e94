// FunctionNode: the one backward Node class behind every differentiable op. A formula is a lambda
// taking the output gradient, the unpacked saved tensors and which inputs need a gradient; saved
// tensors live in the node (as SavedVariables) so release and in-place checks work uniformly.
// record_op / record_inplace run the plain op below autograd and attach the node.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/saved_variable.h"
#include "autograd/variable.h"
#include "tensor/autograd_dispatch.h"

namespace ember::autograd {

using BackwardFormula = std::function<variable_list(const Tensor& grad, const variable_list& saved,
                                                    const std::vector<bool>& needs)>;

class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFormula formula)
      : name_(std::move(name)), formula_(std::move(formula)) {}
  std::string name() const override { return name_; }
  variable_list apply(variable_list&& grads) override;
  void release_variables() override;
  void save(const Tensor& t, bool is_output) { saved_.emplace_back(t, is_output); }
  // For ops whose formula needs values only known after the forward ran (pooling indices, batch
  // statistics): record with a null formula, then bind it here.
  void set_formula(BackwardFormula formula) { formula_ = std::move(formula); }

 private:
  std::string name_;
  BackwardFormula formula_;
  std::vector<SavedVariable> saved_;
};

struct RecordSpec {
  const char* name;                 // e.g. "MulBackward"
  std::vector<Tensor> inputs;       // differentiable inputs, in the formula's output order
  std::vector<Tensor> saved;        // tensors the formula reads (saved[0..])
  bool save_output = false;         // append the op's output to `saved`
  bool is_view = false;             // the output aliases inputs[0]
};

// Runs `forward` with autograd disabled below, then gives its output a FunctionNode.
Tensor record_op(const RecordSpec& spec, const std::function<Tensor()>& forward,
                 BackwardFormula formula);

// For in-place ops on spec.inputs[0]: checks it may be modified, runs `forward` (which modifies it),
// and rebases its history onto a new node whose first edge is its previous history. Returns
// nothing: the caller returns its own `self` (a reference into `spec`, usually a temporary, would
// dangle -- it did, for every in-place op, until relu_(y).backward() read it).
void record_inplace(const RecordSpec& spec, const std::function<void()>& forward,
                    BackwardFormula formula);

// Names of every differentiable op (primitives with formulas and composites built on them); the
// gradcheck suite checks it has an entry for each.
const std::vector<std::string>& differentiable_op_names();

// Sums a broadcast gradient back to `shape` (leading dims, then size-1 dims).
Tensor sum_to(const Tensor& grad, const Shape& shape);

// Called once at startup by each functions/*.cc file to fill its slots of autograd_kernels().
void register_elementwise_formulas(AutogradKernels& k);
void register_reduction_formulas(AutogradKernels& k);
void register_shape_formulas(AutogradKernels& k);
void register_linalg_formulas(AutogradKernels& k);
void register_indexing_formulas(AutogradKernels& k);
void register_nn_formulas(AutogradKernels& k);

}  // namespace ember::autograd
