#include "autograd/saved_variable.h"

namespace ember::autograd {

SavedVariable::SavedVariable(const Tensor& t, bool is_output)
    : was_defined_(t.defined()), is_output_(is_output) {
  if (!t.defined()) return;
  data_ = Tensor(std::make_shared<TensorImpl>(t.storage(), t.sizes(), t.strides(), t.storage_offset(),
                                              t.dtype(), t.unsafe_impl()->version_counter()));
  if (t.is_sparse()) data_ = t;  // sparse tensors are immutable here: keep the handle itself
  saved_version_ = t.version();
}

void SavedVariable::reset_data() {
  data_ = Tensor();
  released_ = true;
}

Tensor SavedVariable::unpack(const std::string& node_name, size_t index) const {
  if (!was_defined_) return Tensor();
  EMBER_CHECK(!released_, node_name, ": trying to backward through the graph a second time (or ",
              "to access saved tensors after they have been freed). Saved intermediate values of ",
              "the graph are freed when you call backward(); specify retain_graph=true on the first ",
              "backward if you need to backward through the graph a second time.");
  EMBER_CHECK(data_.version() == saved_version_,
              "one of the tensors needed for gradient computation has been modified by an in-place ",
              "operation: [", data_.describe(), "], saved ", is_output_ ? "output" : "input", " ",
              index, " of ", node_name, ", is at version ", data_.version(), "; expected version ",
              saved_version_, " instead. Use an out-of-place op, or clone() the tensor first.");
  return data_;
}

}  // namespace ember::autograd
