// Backward formulas for the neural-network primitives (tensor/nn_ops.h); each calls the raw
// *_backward kernel. Losses built from these (cross entropy, MSE, dropout, layer norm) are composites.
#include "autograd/functions/function_node.h"
#include "tensor/factories.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"
#include "tensor/sparse.h"

namespace ember::autograd {

namespace {

// batch_norm's node, or batch_norm_relu's (Note [Batch norm + ReLU]): the raw forward's statistics
// (and scale and shift) are bound into the formula once the forward ran. With a residual, the
// gradient is masked by ReLU's threshold_backward on the saved output, and that masked gradient
// is also the residual's.
Tensor record_batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Tensor& running_mean, const Tensor& running_var, bool training,
                         double momentum, double eps, bool relu, const Tensor& residual) {
  RecordSpec spec{relu ? "BatchNormReluBackward" : "NativeBatchNormBackward", {input}};
  if (weight.defined()) spec.inputs.push_back(weight);
  if (bias.defined()) spec.inputs.push_back(bias);
  const bool has_w = weight.defined(), has_b = bias.defined(), has_r = residual.defined();
  if (has_r) spec.inputs.push_back(residual);
  spec.saved = {input, weight};
  spec.save_output = has_r;  // saved[2]
  BatchNormReluForward forward;
  Tensor out = record_op(spec,
                         [&] {
                           if (relu) {
                             forward = batch_norm_relu_forward(input, weight, bias, running_mean,
                                                               running_var, training, momentum,
                                                               eps, residual);
                           } else {
                             auto [o, m, is] = batch_norm_forward(input, weight, bias,
                                                                  running_mean, running_var,
                                                                  training, momentum, eps);
                             forward.out = o, forward.mean = m, forward.invstd = is;
                           }
                           return forward.out;
                         },
                         nullptr);
  forward.out = Tensor();  // the formula reads the output, if at all, from the saved variables
  auto* node = static_cast<FunctionNode*>(out.grad_fn().get());
  node->set_formula([=](const Tensor& g, const variable_list& s,
                        const std::vector<bool>& n) -> variable_list {
    const bool need_w = has_w && n[1];
    const bool need_b = has_b && n[has_w ? 2 : 1];
    const std::array<bool, 3> mask{n[0], need_w, need_b};
    // With a residual, batch norm's own backward runs on the masked gradient; without one,
    // batch_norm_relu_backward masks inside batch norm's passes.
    const Tensor grad = has_r ? threshold_backward(g, s[2], 0) : g;
    auto [gi, gw, gb] =
        relu && !has_r
            ? batch_norm_relu_backward(grad, s[0], s[1], forward, training, mask)
            : batch_norm_backward(grad, s[0], s[1], forward.mean, forward.invstd, training, mask);
    variable_list r{gi};
    if (has_w) r.push_back(gw);
    if (has_b) r.push_back(gb);
    if (has_r) r.push_back(grad);
    return r;
  });
  return out;
}

}  // namespace

void register_nn_formulas(AutogradKernels& k) {
  using Needs = std::vector<bool>;
  k.conv2d = [](const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dParams& p) {
    RecordSpec spec{"ConvolutionBackward", {input, weight}, {input, weight}};
    if (bias.defined()) spec.inputs.push_back(bias);
    return record_op(spec, [&] { return conv2d(input, weight, bias, p); },
                     [p](const Tensor& g, const variable_list& s, const Needs& n) -> variable_list {
                       const bool has_bias = n.size() == 3;
                       auto [gi, gw, gb] =
                           conv2d_backward(g, s[0], s[1], p, {n[0], n[1], has_bias && n[2]});
                       variable_list out{gi, gw};
                       if (has_bias) out.push_back(gb);
                       return out;
                     });
  };
  k.max_pool2d = [](const Tensor& input, Pair kernel, Pair stride, Pair padding) {
    Tensor indices;
    Tensor out = record_op({"MaxPool2DBackward", {input}, {input}},
                           [&] {
                             auto [o, i] = max_pool2d_with_indices(input, kernel, stride, padding);
                             indices = i;
                             return o;
                           },
                           nullptr);
    // The indices only exist after the forward ran: bind them into the formula now.
    auto* node = static_cast<FunctionNode*>(out.grad_fn().get());
    node->set_formula([indices](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
      return {max_pool2d_backward(g, s[0], indices)};
    });
    return out;
  };
  k.avg_pool2d = [](const Tensor& input, Pair kernel, Pair stride, Pair padding) {
    return record_op({"AvgPool2DBackward", {input}, {input}},
                     [&] { return avg_pool2d(input, kernel, stride, padding); },
                     [=](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       return {avg_pool2d_backward(g, s[0], kernel, stride, padding)};
                     });
  };
  k.adaptive_avg_pool2d = [](const Tensor& input, Pair output_size) {
    return record_op({"AdaptiveAvgPool2DBackward", {input}, {input}},
                     [&] { return adaptive_avg_pool2d(input, output_size); },
                     [](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       return {adaptive_avg_pool2d_backward(g, s[0])};
                     });
  };
  k.batch_norm = [](const Tensor& input, const Tensor& weight, const Tensor& bias,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    double momentum, double eps) {
    return record_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                             eps, /*relu=*/false, Tensor());
  };
  k.batch_norm_relu = [](const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Tensor& running_mean, const Tensor& running_var, bool training,
                         double momentum, double eps, const Tensor& residual) {
    return record_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                             eps, /*relu=*/true, residual);
  };
  k.log_softmax = [](const Tensor& input, int64_t dim) {
    return record_op({"LogSoftmaxBackward", {input}, {}, true}, [&] { return log_softmax(input, dim); },
                     [dim](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       return {log_softmax_backward(g, s[0], dim)};
                     });
  };
  k.nll_loss = [](const Tensor& log_probs, const Tensor& target, Reduction reduction, int64_t ignore) {
    return record_op({"NllLossBackward", {log_probs}, {log_probs, target}},
                     [&] { return nll_loss(log_probs, target, reduction, ignore); },
                     [=](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       return {nll_loss_backward(g, s[0], s[1], reduction, ignore)};
                     });
  };
  k.embedding = [](const Tensor& weight, const Tensor& indices, bool sparse) {
    const Shape wshape = weight.sizes();
    return record_op({"EmbeddingBackward", {weight}, {indices}},
                     [&] { return embedding(weight, indices, sparse); },
                     [wshape, sparse](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       Tensor idx = s[0].to(kInt64).reshape({-1});
                       Tensor rows = g.reshape({-1, wshape[1]});
                       if (sparse) return {sparse_coo_tensor(idx.view({1, -1}), rows.contiguous(), wshape)};
                       Tensor gw = zeros(wshape, TensorOptions(g.dtype(), g.device()));
                       index_add_(gw, 0, idx, rows);
                       return {gw};
                     });
  };
}

}  // namespace ember::autograd
