#include "data/data_loader.h"

#include <algorithm>

#include "tensor/generator.h"

namespace ember::data {

namespace {

// splitmix64's finaliser: decorrelates the (seed, epoch, batch) triple before seeding a Generator.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Each batch gets its own stream, so its augmentation does not depend on how many batches were
// prepared before it (prefetch on or off, an epoch abandoned half way).
uint64_t augmentation_seed(uint64_t seed, int64_t epoch, int64_t batch) {
  return mix(mix(mix(seed ^ 0x6461746161756775ull) + static_cast<uint64_t>(epoch)) +
             static_cast<uint64_t>(batch));
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options,
                       TransformList transforms, std::shared_ptr<Sampler> sampler)
    : dataset_(std::move(dataset)),
      options_(options),
      transforms_(std::move(transforms)),
      sampler_(std::move(sampler)) {
  EMBER_CHECK(dataset_ != nullptr, "DataLoader: dataset is null");
  EMBER_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be positive, got ", options_.batch_size);
  EMBER_CHECK(options_.prefetch_depth > 0, "DataLoader: prefetch_depth must be positive, got ",
              options_.prefetch_depth);
  for (const auto& t : transforms_) EMBER_CHECK(t != nullptr, "DataLoader: null transform in the list");
  if (sampler_ == nullptr) {
    if (options_.shuffle) {
      sampler_ = std::make_shared<RandomSampler>(dataset_->size(), options_.seed);
    } else {
      sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
    }
  }
}

DataLoader::~DataLoader() { stop_worker(); }

int64_t DataLoader::num_batches() const {
  const int64_t n = sampler_->size();
  return options_.drop_last ? n / options_.batch_size : (n + options_.batch_size - 1) / options_.batch_size;
}

void DataLoader::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  sampler_->set_epoch(epoch);
}

void DataLoader::set_start_batch(int64_t batch) {
  EMBER_CHECK(batch >= 0, "DataLoader::set_start_batch: batch ", batch, " is negative");
  start_batch_ = batch;
}

void DataLoader::start_epoch() {
  stop_worker();
  indices_ = sampler_->indices();
  for (int64_t i : indices_) {
    EMBER_CHECK(i >= 0 && i < dataset_->size(), "DataLoader: sampler produced index ", i,
                " for a dataset of size ", dataset_->size());
  }
  const int64_t n = static_cast<int64_t>(indices_.size());
  epoch_batches_ = options_.drop_last ? n / options_.batch_size : (n + options_.batch_size - 1) / options_.batch_size;
  running_epoch_ = epoch_++;
  next_batch_ = std::min(start_batch_, epoch_batches_);
  start_batch_ = 0;
  active_ = true;
  if (options_.prefetch && next_batch_ < epoch_batches_) {
    stop_ = false;
    worker_done_ = false;
    worker_ = std::thread([this, first = next_batch_] { worker_loop(first); });
  }
}

Batch DataLoader::make_batch(int64_t batch_index) const {
  const int64_t begin = batch_index * options_.batch_size;
  const int64_t end = std::min<int64_t>(begin + options_.batch_size, static_cast<int64_t>(indices_.size()));
  const std::vector<int64_t> slice(indices_.begin() + begin, indices_.begin() + end);
  Example ex = dataset_->get_batch(slice);
  EMBER_CHECK(ex.target.defined() && ex.target.dtype() == kInt64, "DataLoader: dataset targets must be int64, got ",
              ex.target.defined() ? ex.target.describe() : std::string("an undefined tensor"));
  Tensor data = to_float_batch(ex.data);
  if (!transforms_.empty()) {
    Generator gen(augmentation_seed(options_.seed, running_epoch_, batch_index));
    data = apply_transforms(transforms_, data, gen);
  }
  return {data, ex.target};
}

void DataLoader::worker_loop(int64_t first_batch) {
  for (int64_t b = first_batch; b < epoch_batches_; ++b) {
    Item item;
    try {
      item.batch = make_batch(b);
    } catch (...) {
      item.error = std::current_exception();
    }
    const bool failed = item.error != nullptr;
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return stop_ || static_cast<int64_t>(queue_.size()) < options_.prefetch_depth; });
    if (stop_) break;
    queue_.push_back(std::move(item));
    cv_.notify_all();
    if (failed) break;  // the consumer re-throws at this position; later batches are not needed
  }
  std::lock_guard<std::mutex> lock(mutex_);
  worker_done_ = true;
  cv_.notify_all();
}

void DataLoader::stop_worker() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  queue_.clear();
  stop_ = false;
  worker_done_ = false;
  active_ = false;
}

std::optional<Batch> DataLoader::next() {
  if (!active_) start_epoch();
  if (next_batch_ >= epoch_batches_) {
    stop_worker();  // joins the finished worker and marks the epoch over
    return std::nullopt;
  }
  Item item;
  if (!options_.prefetch) {
    try {
      item.batch = make_batch(next_batch_);
    } catch (...) {
      active_ = false;
      throw;
    }
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !queue_.empty() || worker_done_; });
    EMBER_INTERNAL_ASSERT(!queue_.empty(), "DataLoader: worker finished before batch ", next_batch_);
    item = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
  }
  ++next_batch_;
  if (item.error) {
    stop_worker();
    std::rethrow_exception(item.error);
  }
  return std::move(item.batch);
}

DataLoader::Iterator DataLoader::begin() {
  start_epoch();
  return Iterator(this);
}

DataLoader::Iterator::Iterator(DataLoader* loader) : loader_(loader), current_(loader->next()) {}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  current_ = loader_->next();
  return *this;
}

}  // namespace ember::data
