#include "tensor/kernels.h"

#include <cmath>

namespace ember {

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "add";
    case BinaryOp::kSub: return "sub";
    case BinaryOp::kMul: return "mul";
    case BinaryOp::kDiv: return "div";
    case BinaryOp::kPow: return "pow";
    case BinaryOp::kMaximum: return "maximum";
    case BinaryOp::kMinimum: return "minimum";
    case BinaryOp::kThresholdBackward: return "threshold_backward";
    case BinaryOp::kEq: return "eq";
    case BinaryOp::kNe: return "ne";
    case BinaryOp::kLt: return "lt";
    case BinaryOp::kLe: return "le";
    case BinaryOp::kGt: return "gt";
    case BinaryOp::kGe: return "ge";
  }
  return "binary op";
}

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg: return "neg";
    case UnaryOp::kAbs: return "abs";
    case UnaryOp::kRelu: return "relu";
    case UnaryOp::kSign: return "sign";
    case UnaryOp::kExp: return "exp";
    case UnaryOp::kLog: return "log";
    case UnaryOp::kSqrt: return "sqrt";
    case UnaryOp::kRsqrt: return "rsqrt";
    case UnaryOp::kSigmoid: return "sigmoid";
    case UnaryOp::kTanh: return "tanh";
    case UnaryOp::kGelu: return "gelu";
    case UnaryOp::kGeluTanh: return "gelu(approximate='tanh')";
    case UnaryOp::kGeluDerivative: return "gelu_backward";
    case UnaryOp::kGeluTanhDerivative: return "gelu_backward(approximate='tanh')";
  }
  return "unary op";
}

void check_binary_operands(BinaryOp op, ScalarType dtype, const Scalar& alpha) {
  const char* name = binary_op_name(op);
  EMBER_CHECK(!(dtype == kBool && op == BinaryOp::kSub),
              "sub: subtraction with two bool tensors is not supported; use logical_xor or ~ "
              "instead");
  if (!is_floating_point(dtype) && op != BinaryOp::kThresholdBackward) {
    EMBER_CHECK(!alpha.is_floating_point() || alpha.to_double() == std::floor(alpha.to_double()),
                name, ": for integral input tensors, alpha must not be a fractional number (got ",
                alpha, ")");
  }
}

const std::vector<const char*>& kernel_slot_names() {
  static const std::vector<const char*> names = {
#define EMBER_KERNEL_SLOT_NAME(name, params) #name,
      EMBER_FORALL_KERNEL_SLOTS(EMBER_KERNEL_SLOT_NAME)
#undef EMBER_KERNEL_SLOT_NAME
  };
  return names;
}

std::vector<bool> kernel_slots_filled(const KernelTable& table) {
  return {
#define EMBER_KERNEL_SLOT_FILLED(name, params) table.name != nullptr,
      EMBER_FORALL_KERNEL_SLOTS(EMBER_KERNEL_SLOT_FILLED)
#undef EMBER_KERNEL_SLOT_FILLED
  };
}

void throw_no_kernel(const char* op, std::initializer_list<const Tensor*> tensors) {
  std::string operands;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    operands += (operands.empty() ? "" : ", ") + t->describe();
  }
  const Device device = (*tensors.begin())->device();
  EMBER_THROW("no ", device.is_cuda() ? "CUDA" : "CPU", " kernel for ", op, " (", operands, ")");
}

KernelTable& kernel_table(DeviceType type) {
  static KernelTable tables[2] = {cpu::make_kernel_table(), KernelTable{}};
  return tables[static_cast<int>(type)];
}

const KernelTable& kernels_for(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    EMBER_CHECK(t->defined(), op, ": got an undefined tensor");
    EMBER_CHECK(!t->is_sparse(), op, ": sparse tensors are not supported (got ", t->describe(),
                "); convert with to_dense() first");
    if (!first) {
      first = t;
      continue;
    }
    EMBER_CHECK(t->device() == first->device(), op,
                ": expected all tensors on the same device, got ", first->describe(), " and ",
                t->describe());
  }
  EMBER_INTERNAL_ASSERT(first != nullptr);
  return kernel_table(first->device().type);
}

}  // namespace ember
