// SyncBatchNormJoinable: a joined rank shadows the SyncBatchNorm collectives of the ranks still
// training (Note [SyncBatchNorm collectives], sync_batch_norm_function.h), on a thread of its own.
#include <algorithm>
#include <exception>
#include <numeric>
#include <thread>

#include "distributed/sync_batch_norm.h"
#include "distributed/sync_batch_norm_function.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::distributed {
namespace {

using Layers = std::vector<std::pair<std::string, std::shared_ptr<nn::SyncBatchNorm>>>;

// One iteration of the others: every training-mode layer's forward allgather with count 0, then
// the backward allreduces of zeros, last layer first, for the layers whose rows asked for one.
void shadow_iteration(const Layers& layers) {
  // This rank's own last forward order when every layer ran here, else registration order.
  std::vector<size_t> order(layers.size());
  std::iota(order.begin(), order.end(), 0);
  const bool all_ran = std::all_of(layers.begin(), layers.end(),
                                   [](const auto& l) { return l.second->last_sync_call() >= 0; });
  if (all_ran) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return layers[a].second->last_sync_call() < layers[b].second->last_sync_call();
    });
  }
  std::vector<size_t> backward;
  for (size_t i : order) {
    const auto& layer = layers[i].second;
    if (!layer->is_training()) continue;
    ProcessGroupPtr group = layer->process_group();
    const int64_t row = sync_batch_norm_row_size(layer->num_features());
    Tensor zeros_row = zeros({row}, kFloat64);
    Tensor gathered = empty({group->size() * row}, kFloat64);
    group->allgather_base(gathered, zeros_row)->wait();
    // The needs_backward flag of every rank (the last entry of each row).
    Tensor flags = gathered.view({group->size(), row}).narrow(1, row - 1, 1);
    if (max(flags).item<double>() != 0) backward.push_back(i);
  }
  for (size_t k = backward.size(); k-- > 0;) {
    const auto& layer = layers[backward[k]].second;
    std::vector<Tensor> sums{zeros({2 * layer->num_features()}, kFloat64)};
    layer->process_group()->allreduce(sums)->wait();
  }
}

class SyncBatchNormJoinHook final : public JoinHook {
 public:
  explicit SyncBatchNormJoinHook(const Layers& layers) : layers_(layers) {}
  ~SyncBatchNormJoinHook() override {
    if (worker_.joinable()) worker_.join();
  }

  // Starts this iteration's shadow and returns at once: the other joinables' hooks (DDP's) must
  // run meanwhile. The previous iteration's shadow has finished by now (the others started a new
  // iteration, so they finished that one's backward); any error it hit is thrown here.
  void main_hook() override {
    finish_previous();
    worker_ = std::thread([this] {
      try {
        shadow_iteration(layers_);
      } catch (...) {
        error_ = std::current_exception();
      }
    });
  }

  void post_hook(bool) override { finish_previous(); }

 private:
  void finish_previous() {
    if (worker_.joinable()) worker_.join();
    if (error_) {
      std::exception_ptr e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }

  const Layers& layers_;
  std::thread worker_;
  std::exception_ptr error_;
};

}  // namespace

SyncBatchNormJoinable::SyncBatchNormJoinable(std::shared_ptr<nn::Module> module,
                                             ProcessGroupPtr join_process_group)
    : join_process_group_(std::move(join_process_group)) {
  EMBER_CHECK(module != nullptr, "SyncBatchNormJoinable: module is null");
  EMBER_CHECK(join_process_group_ != nullptr, "SyncBatchNormJoinable: the Join's process group is null");
  for (auto& [name, m] : module->named_modules()) {
    auto layer = std::dynamic_pointer_cast<nn::SyncBatchNorm>(m);
    if (!layer) continue;
    EMBER_CHECK(layer->process_group() != join_process_group_, "SyncBatchNormJoinable (rank ",
                join_process_group_->rank(), "): SyncBatchNorm '", name,
                "' communicates over the Join's process group '", join_process_group_->group_name(),
                "'; give the SyncBatchNorm layers a group of their own "
                "(new_group, or convert_sync_batchnorm(module, group)) so that a joined rank can shadow them "
                "while it shadows DDP");
    layers_.emplace_back(name, layer);
  }
  EMBER_CHECK(!layers_.empty(), "SyncBatchNormJoinable: the module has no SyncBatchNorm layer");
}

std::unique_ptr<JoinHook> SyncBatchNormJoinable::join_hook(const JoinOptions&) {
  return std::make_unique<SyncBatchNormJoinHook>(layers_);
}

}  // namespace ember::distributed
