// DataLoader: turns a Dataset into an epoch of batches (float32 data [B, ...], int64 targets [B]),
// ordered by a Sampler, augmented by Transforms, with a background thread that prepares the next
// batches while the training step consumes the current one. See the usage note on the class.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/samplers.h"
#include "data/transforms.h"
#include "tensor/tensor.h"

namespace ember::data {

// One batch of a DataLoader: B samples, B = batch_size except perhaps in an epoch's last batch.
struct Batch {
  Tensor data;    // float32 [B, C, H, W]: uint8 pixels scaled to [0, 1], then the transforms
  Tensor target;  // int64 [B]
};

// How a DataLoader batches (PyTorch's DataLoader arguments, with a seed for the generator) and
// prefetches. DataLoader's constructor throws unless batch_size and prefetch_depth are positive.
struct DataLoaderOptions {
  int64_t batch_size = 1;
  // Without an explicit sampler: shuffle = true uses RandomSampler(seed), false SequentialSampler.
  bool shuffle = false;
  // Seeds the shuffle order and, mixed with the epoch and batch number, the transforms' Generator.
  uint64_t seed = 0;
  // Drop the last batch when it is smaller than batch_size.
  bool drop_last = false;
  // Prepare batches on a background thread; false builds each batch inside next().
  bool prefetch = true;
  // How many finished batches the background thread may hold ahead of the consumer (1 or 2 is enough:
  // the point is to overlap one batch's assembly with one training step).
  int64_t prefetch_depth = 2;
};

// Usage, one epoch per loop (each begin() starts a new epoch, abandoning any unfinished one):
//
//   DataLoaderOptions options;
//   options.batch_size = 64;
//   options.shuffle = true;
//   DataLoader loader(dataset, options, transforms);
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     loader.set_epoch(epoch);              // optional for shuffle=true, required for a DistributedSampler
//     for (Batch& batch : loader) { ... }  // or: while (auto batch = loader.next()) { ... }
//   }
//
// next() starts an epoch when none is running and returns nullopt once at its end, so the while-loop
// form also repeats per epoch. The batches of an epoch depend only on (seed, epoch, sampler), never on
// prefetching or timing. An exception thrown while building a batch (in the background thread or not)
// is re-thrown from next() / operator++ at that batch's position. Destroying the loader mid-epoch stops
// and joins the background thread. Not thread-safe: iterate from one thread.
class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options,
             TransformList transforms = {}, std::shared_ptr<Sampler> sampler = nullptr);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts a new epoch (stopping the previous one if it is still running).
  void start_epoch();
  // The next batch of the running epoch (starting one if none runs), or nullopt at the epoch's end.
  std::optional<Batch> next();

  // Sets the epoch used by the next start_epoch() (forwarded to the sampler, like PyTorch's
  // sampler.set_epoch). Without calls the loader counts epochs itself: 0, 1, 2, ...
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  // The next epoch started begins at batch `batch` instead of 0, for resuming mid-epoch (the
  // skipped batches are never built; the rest are the same batches as in a whole epoch). Applies to
  // that one epoch; like torchdata's StatefulDataLoader.load_state_dict.
  void set_start_batch(int64_t batch);

  // Batches per epoch: ceil(samples / batch_size), or floor with drop_last.
  int64_t num_batches() const;
  int64_t size() const { return num_batches(); }
  Sampler& sampler() { return *sampler_; }
  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }

  class Iterator {
   public:
    Iterator() = default;  // the end iterator
    Batch& operator*() { return *current_; }
    Batch* operator->() { return &*current_; }
    Iterator& operator++();
    bool operator==(const Iterator& other) const { return at_end() == other.at_end(); }
    bool operator!=(const Iterator& other) const { return !(*this == other); }

   private:
    friend class DataLoader;
    explicit Iterator(DataLoader* loader);
    bool at_end() const { return !current_.has_value(); }
    DataLoader* loader_ = nullptr;
    std::optional<Batch> current_;
  };
  // Starts a new epoch and returns an iterator at its first batch.
  Iterator begin();
  Iterator end() { return Iterator(); }

 private:
  // The batch at position `batch_index` of the running epoch. Pure given (indices, epoch, index).
  Batch make_batch(int64_t batch_index) const;
  void worker_loop(int64_t first_batch);
  void stop_worker();

  // One finished batch, or the error that prevented it.
  struct Item {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  TransformList transforms_;
  std::shared_ptr<Sampler> sampler_;

  // The running epoch (written only while no worker runs).
  bool active_ = false;
  int64_t epoch_ = 0;          // the next epoch to start
  int64_t running_epoch_ = 0;  // the epoch being iterated
  std::vector<int64_t> indices_;
  int64_t epoch_batches_ = 0;
  int64_t next_batch_ = 0;  // consumer position
  int64_t start_batch_ = 0;  // where the next epoch starts (set_start_batch)

  // Prefetch thread and its bounded queue.
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  bool worker_done_ = false;
};

}  // namespace ember::data
