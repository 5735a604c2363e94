// nn::SyncBatchNorm and convert_sync_batchnorm (PyTorch's torch.nn.SyncBatchNorm): batch norm whose
// training-mode statistics span a process group (sync_batch_norm_function.h), and the conversion of
// a model's BatchNorm2d layers into it. Lives in distributed/ because nn/ must not know about process
// groups; named nn::SyncBatchNorm as in PyTorch. SyncBatchNormJoinable lets a rank that joined
// (distributed/join.h) shadow the layers' collectives for the ranks still training.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distributed/join.h"
#include "distributed/process_group.h"
#include "nn/layers/batchnorm.h"
#include "nn/module.h"

namespace ember::nn {

// SyncBatchNorm's arguments besides num_features, with torch.nn.SyncBatchNorm's defaults.
struct SyncBatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
  // The group whose statistics are combined; the default group when null.
  distributed::ProcessGroupPtr process_group;
};

// Input [N, C, ...] (any number of trailing dims; N may differ between ranks, 0 included). In
// training mode with a group of more than one rank, normalises with the group's statistics; in
// eval mode, or alone, it is exactly BatchNorm (no collectives).
class SyncBatchNorm : public Module {
 public:
  explicit SyncBatchNorm(int64_t num_features, SyncBatchNormOptions options = {});
  // Shares `bn`'s parameters, buffers and training flag (convert_sync_batchnorm).
  SyncBatchNorm(BatchNorm2d& bn, distributed::ProcessGroupPtr process_group);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t num_features() const { return num_features_; }
  // The group forward() communicates over (resolving the default group when none was given).
  distributed::ProcessGroupPtr process_group() const;
  // When forward() last synchronised, on a process-wide counter (-1: never). SyncBatchNormJoinable
  // replays the layers in this order.
  int64_t last_sync_call() const { return last_sync_call_; }

 private:
  int64_t num_features_;
  SyncBatchNormOptions options_;
  int64_t last_sync_call_ = -1;
};

// Replaces every BatchNorm2d in `module` (itself included) by a SyncBatchNorm over `process_group`
// sharing its tensors, and returns the converted module (a new one only if `module` itself was a
// BatchNorm2d). Note [Converted BatchNorm] (nn/layers/batchnorm.h): models that call the old layer
// through a typed pointer reach the new one.
std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> module,
                                               distributed::ProcessGroupPtr process_group = nullptr);

}  // namespace ember::nn

namespace ember::distributed {

// The SyncBatchNorm layers of `module` as a Joinable. A joined rank's hook shadows, per iteration of
// the ranks still training, each layer in training mode: the forward allgather with count 0 and,
// where the gathered rows say the others will run it, the backward allreduce of zeros (reverse
// order). The forward order is the one this rank's own last training iteration used
// (SyncBatchNorm::last_sync_call), or registration order if some layer never ran here; each layer
// is assumed to run once per iteration. Note [SyncBatchNorm
// collectives]. The layers must use a group other than the Join's: the shadowing runs on its own
// thread (an async shadow, Joinable::is_async_shadow), concurrently with the other joinables' hooks
// (DDP's waits for gradients that the others only produce after their SyncBatchNorm backward).
// The joinable must outlive the Join it is passed to.
class SyncBatchNormJoinable : public Joinable {
 public:
  SyncBatchNormJoinable(std::shared_ptr<nn::Module> module, ProcessGroupPtr join_process_group);
  std::unique_ptr<JoinHook> join_hook(const JoinOptions& options) override;
  ProcessGroupPtr join_process_group() const override { return join_process_group_; }
  bool is_async_shadow() const override { return true; }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<nn::SyncBatchNorm>>> layers_;
  ProcessGroupPtr join_process_group_;
};

}  // namespace ember::distributed
