// nn::SyncBatchNorm and convert_sync_batchnorm; see sync_batch_norm.h.
#include "distributed/sync_batch_norm.h"

#include "distributed/sync_batch_norm_function.h"
#include "tensor/factories.h"
#include "tensor/nn_ops.h"
#include "tensor/ops.h"

#include <atomic>

namespace ember::nn {
namespace {

std::atomic<int64_t> next_sync_call{0};

}  // namespace

SyncBatchNorm::SyncBatchNorm(int64_t num_features, SyncBatchNormOptions options)
    : Module("SyncBatchNorm"), num_features_(num_features), options_(std::move(options)) {
  EMBER_CHECK(num_features > 0, "SyncBatchNorm: num_features must be positive, got ", num_features);
  if (options_.affine) {
    register_parameter("weight", ones({num_features}));
    register_parameter("bias", zeros({num_features}));
  }
  if (options_.track_running_stats) {
    register_buffer("running_mean", zeros({num_features}));
    register_buffer("running_var", ones({num_features}));
    register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

SyncBatchNorm::SyncBatchNorm(BatchNorm2d& bn, distributed::ProcessGroupPtr process_group)
    : Module("SyncBatchNorm"), num_features_(bn.num_features()) {
  options_.eps = bn.eps();
  options_.momentum = bn.momentum();
  options_.affine = bn.affine();
  options_.track_running_stats = bn.track_running_stats();
  options_.process_group = std::move(process_group);
  for (auto& [name, p] : bn.named_parameters(false)) register_parameter(name, p, p.requires_grad());
  for (auto& [name, b] : bn.named_buffers(false)) register_buffer(name, b);
  train(bn.is_training());
}

distributed::ProcessGroupPtr SyncBatchNorm::process_group() const {
  if (options_.process_group) return options_.process_group;
  return distributed::is_initialized() ? distributed::get_default_group() : nullptr;
}

// PyTorch's SyncBatchNorm.forward: batch statistics when training (or without running statistics),
// synchronised only in training mode over a group of more than one rank.
Tensor SyncBatchNorm::forward(const Tensor& input) {
  EMBER_CHECK(input.defined() && input.dim() >= 2 && input.size(1) == num_features_,
              "SyncBatchNorm: expected input [N, ", num_features_, ", ...] (at least 2D), got ",
              input.defined() ? input.describe() : "an undefined tensor");
  const bool track = options_.track_running_stats;
  if (is_training() && track) {
    NoGradGuard g;
    add_(buffer("num_batches_tracked"), 1);
  }
  const bool bn_training = is_training() || !track;
  Tensor weight = options_.affine ? param("weight") : Tensor();
  Tensor bias = options_.affine ? param("bias") : Tensor();
  Tensor rm = track ? buffer("running_mean") : Tensor();
  Tensor rv = track ? buffer("running_var") : Tensor();
  distributed::ProcessGroupPtr group = bn_training && is_training() ? process_group() : nullptr;
  if (!group || group->size() < 2) {
    return batch_norm(input, weight, bias, rm, rv, bn_training, options_.momentum, options_.eps);
  }
  last_sync_call_ = next_sync_call.fetch_add(1);
  distributed::SyncBatchNormArgs args;
  args.eps = options_.eps;
  args.momentum = options_.momentum;
  args.process_group = std::move(group);
  return distributed::sync_batch_norm(input, weight, bias, rm, rv, args);
}

std::string SyncBatchNorm::extra_repr() const {
  distributed::ProcessGroupPtr group = process_group();
  return detail::str_cat(num_features_, ", eps=", options_.eps, ", momentum=", options_.momentum,
                         ", affine=", options_.affine ? "true" : "false",
                         ", track_running_stats=", options_.track_running_stats ? "true" : "false",
                         ", process_group=", group ? group->group_name() : "<none>");
}

std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> module,
                                               distributed::ProcessGroupPtr process_group) {
  EMBER_CHECK(module != nullptr, "convert_sync_batchnorm: module is null");
  if (auto bn = std::dynamic_pointer_cast<BatchNorm2d>(module)) {
    auto sync = std::make_shared<SyncBatchNorm>(*bn, process_group);
    bn->redirect_forward(sync);  // Note [Converted BatchNorm]
    return sync;
  }
  for (auto& [name, child] : module->named_children()) {
    std::shared_ptr<Module> converted = convert_sync_batchnorm(child, process_group);
    if (converted != child) module->replace_module(name, converted);
  }
  return module;
}

}  // namespace ember::nn
