// DataLoader: batching, drop_last, seeded shuffling, transforms, prefetch on/off equivalence,
// exceptions from the worker, and shutdown mid-epoch.
#include "data/data_loader.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "data/distributed_sampler.h"
#include "data/tensor_dataset.h"
#include "data_test_util.h"
#include "tensor/factories.h"

namespace ember::data {
namespace {

// n uint8 images [1, 2, 2] whose pixels all equal the image index; target = index.
std::shared_ptr<TensorDataset> indexed_dataset(int64_t n) {
  Tensor data = empty({n, 1, 2, 2}, kUInt8);
  for (int64_t i = 0; i < n; ++i) data.select(0, i).fill_(i);
  return std::make_shared<TensorDataset>(data, arange(0, n, 1, kInt64));
}

std::vector<int64_t> targets(const Batch& b) {
  const int64_t* p = b.target.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + b.target.numel());
}

std::vector<std::vector<int64_t>> epoch_targets(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (Batch& b : loader) out.push_back(targets(b));
  return out;
}

std::vector<float> floats(const Tensor& t) {
  const float* p = t.data_ptr<float>();
  return std::vector<float>(p, p + t.numel());
}

class DataLoaderTest : public ::testing::TestWithParam<bool> {  // param: prefetch
 protected:
  DataLoaderOptions opts(int64_t batch, bool shuffle = false, bool drop_last = false) {
    DataLoaderOptions o;
    o.batch_size = batch;
    o.shuffle = shuffle;
    o.drop_last = drop_last;
    o.seed = 11;
    o.prefetch = GetParam();
    return o;
  }
};

TEST_P(DataLoaderTest, SequentialBatchesWithPartialLast) {
  DataLoader loader(indexed_dataset(10), opts(4));
  EXPECT_EQ(loader.num_batches(), 3);
  EXPECT_EQ(epoch_targets(loader),
            (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
}

TEST_P(DataLoaderTest, DataIsFloatScaledFromBytes) {
  DataLoader loader(indexed_dataset(6), opts(3));
  auto batch = loader.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->data.dtype(), kFloat32);
  EXPECT_EQ(batch->data.sizes(), (Shape{3, 1, 2, 2}));
  EXPECT_EQ(batch->target.dtype(), kInt64);
  EXPECT_FLOAT_EQ(floats(batch->data)[3 * 2], 1.0f / 255.0f);  // image 1 (index 1), first pixel
  EXPECT_FLOAT_EQ(floats(batch->data)[4 * 2], 2.0f / 255.0f);
}

TEST_P(DataLoaderTest, DropLastDropsThePartialBatch) {
  DataLoader loader(indexed_dataset(10), opts(4, false, /*drop_last=*/true));
  EXPECT_EQ(loader.num_batches(), 2);
  EXPECT_EQ(epoch_targets(loader), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
}

TEST_P(DataLoaderTest, ShuffleIsSeededAndReshufflesEachEpoch) {
  DataLoader a(indexed_dataset(20), opts(5, /*shuffle=*/true));
  DataLoader b(indexed_dataset(20), opts(5, /*shuffle=*/true));
  const auto a0 = epoch_targets(a), a1 = epoch_targets(a);
  EXPECT_EQ(a0, epoch_targets(b));
  EXPECT_EQ(a1, epoch_targets(b));
  EXPECT_NE(a0, a1);
  std::vector<int64_t> all;
  for (const auto& batch : a0) all.insert(all.end(), batch.begin(), batch.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(all[i], i);
  // set_epoch replays an epoch.
  a.set_epoch(0);
  EXPECT_EQ(epoch_targets(a), a0);
}

TEST_P(DataLoaderTest, NextApiEndsEachEpochWithNullopt) {
  DataLoader loader(indexed_dataset(5), opts(2));
  for (int epoch = 0; epoch < 2; ++epoch) {
    int count = 0;
    while (auto b = loader.next()) ++count;
    EXPECT_EQ(count, 3);
  }
  EXPECT_EQ(loader.epoch(), 2);
}

TEST_P(DataLoaderTest, BeginAbandonsAnUnfinishedEpoch) {
  DataLoader loader(indexed_dataset(12), opts(3));
  ASSERT_TRUE(loader.next().has_value());  // epoch 0, batch 0; the worker may be ahead
  EXPECT_EQ(epoch_targets(loader).size(), 4u);  // a full fresh epoch
}

TEST_P(DataLoaderTest, WorksWithADistributedSampler) {
  auto ds = indexed_dataset(10);
  auto sampler = std::make_shared<DistributedSampler>(10, 3, /*rank=*/1, /*shuffle=*/false);
  DataLoader loader(ds, opts(2), {}, sampler);
  EXPECT_EQ(loader.num_batches(), 2);
  EXPECT_EQ(epoch_targets(loader), (std::vector<std::vector<int64_t>>{{1, 4}, {7, 0}}));
}

TEST_P(DataLoaderTest, TransformsAreReproducibleAndIndependentOfPrefetch) {
  auto ds = indexed_dataset(64);
  TransformList tf{std::make_shared<RandomCrop>(2, 1), std::make_shared<RandomHorizontalFlip>(0.5),
                   std::make_shared<Normalize>(std::vector<double>{0.5}, std::vector<double>{0.25})};
  DataLoaderOptions with = opts(8, true), without = opts(8, true);
  with.prefetch = true;
  without.prefetch = false;
  DataLoader a(ds, with, tf), b(ds, without, tf);
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto ia = a.begin();
    auto ib = b.begin();
    for (; ia != a.end(); ++ia, ++ib) {
      ASSERT_NE(ib, b.end());
      EXPECT_EQ(targets(*ia), targets(*ib));
      EXPECT_EQ(floats(ia->data), floats(ib->data));
    }
    EXPECT_EQ(ib, b.end());
  }
  // The crop with padding really zero-pads somewhere: a normalized 0 is (0 - 0.5) / 0.25 = -2.
  auto batch = a.next();
  const std::vector<float> v = floats(batch->data);
  EXPECT_NE(std::find(v.begin(), v.end(), -2.0f), v.end());
}

TEST_P(DataLoaderTest, StartBatchResumesMidEpochWithTheSameBatches) {
  auto ds = indexed_dataset(40);
  TransformList tf{std::make_shared<RandomCrop>(2, 1), std::make_shared<RandomHorizontalFlip>(0.5)};
  DataLoader whole(ds, opts(8, true), tf), resumed(ds, opts(8, true), tf);
  whole.set_epoch(3);
  std::vector<Batch> want;
  for (Batch& b : whole) want.push_back(b);
  ASSERT_EQ(want.size(), 5u);
  resumed.set_epoch(3);
  resumed.set_start_batch(2);
  std::vector<Batch> got;
  for (Batch& b : resumed) got.push_back(b);
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(targets(got[i]), targets(want[i + 2]));
    EXPECT_EQ(floats(got[i].data), floats(want[i + 2].data));  // augmentation keyed by batch index
  }
  // One epoch only: the next starts at batch 0 again; past the end gives an empty epoch.
  EXPECT_EQ(epoch_targets(resumed).size(), 5u);
  resumed.set_start_batch(99);
  EXPECT_TRUE(epoch_targets(resumed).empty());
  EXPECT_THROW(resumed.set_start_batch(-1), Error);
}

// Throws from get_batch when it meets `bad_index`.
class FailingDataset : public TensorDataset {
 public:
  FailingDataset(int64_t n, int64_t bad) : TensorDataset(zeros({n, 1, 1, 1}), arange(0, n, 1, kInt64)), bad_(bad) {}
  Example get_batch(const std::vector<int64_t>& indices) const override {
    for (int64_t i : indices) EMBER_CHECK(i != bad_, "FailingDataset: refusing index ", i);
    return TensorDataset::get_batch(indices);
  }

 private:
  int64_t bad_;
};

TEST_P(DataLoaderTest, WorkerErrorsAreRethrownAtTheirBatch) {
  DataLoader loader(std::make_shared<FailingDataset>(10, 5), opts(2));
  ASSERT_TRUE(loader.next().has_value());  // [0, 1]
  ASSERT_TRUE(loader.next().has_value());  // [2, 3]
  EXPECT_EMBER_ERROR(loader.next(), "FailingDataset", "refusing index 5");
  // The loader stays usable: the next call starts a new epoch from batch 0.
  auto again = loader.next();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(targets(*again), (std::vector<int64_t>{0, 1}));
}

TEST_P(DataLoaderTest, EmptyDatasetGivesNoBatches) {
  DataLoader loader(indexed_dataset(0), opts(4));
  EXPECT_EQ(loader.num_batches(), 0);
  EXPECT_TRUE(epoch_targets(loader).empty());
}

INSTANTIATE_TEST_SUITE_P(Prefetch, DataLoaderTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "On" : "Off"; });

// Counts batches built and sleeps a little in each, so the worker is mid-build or blocked on a full
// queue when the loader dies.
class SlowDataset : public TensorDataset {
 public:
  explicit SlowDataset(int64_t n) : TensorDataset(zeros({n, 1, 1, 1}), arange(0, n, 1, kInt64)) {}
  Example get_batch(const std::vector<int64_t>& indices) const override {
    built.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return TensorDataset::get_batch(indices);
  }
  mutable std::atomic<int> built{0};
};

TEST(DataLoaderPrefetch, RunsAheadByAtMostTheQueueDepth) {
  auto ds = std::make_shared<SlowDataset>(100);
  DataLoaderOptions o;
  o.batch_size = 1;
  o.prefetch_depth = 2;
  DataLoader loader(ds, o);
  ASSERT_TRUE(loader.next().has_value());
  // Wait (generously, for a loaded CI machine) until the worker has filled the queue...
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (ds->built.load() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(ds->built.load(), 4);
  // ...then check it stops there: one consumed, two queued, one built and blocked on the full queue.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ds->built.load(), 4);
}

TEST(DataLoaderPrefetch, DestroyingMidEpochStopsTheWorker) {
  auto ds = std::make_shared<SlowDataset>(1000);
  DataLoaderOptions o;
  o.batch_size = 10;
  for (int trial = 0; trial < 5; ++trial) {
    auto loader = std::make_unique<DataLoader>(ds, o);
    ASSERT_TRUE(loader->next().has_value());
    if (trial % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // queue full
    const auto start = std::chrono::steady_clock::now();
    loader.reset();  // joins the worker; must not hang or crash
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  }
  const int built = ds->built.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(ds->built.load(), built);  // nothing keeps running after destruction
  EXPECT_LT(built, 5 * 5);
}

TEST(DataLoaderErrors, BadOptions) {
  DataLoaderOptions o;
  o.batch_size = 0;
  EXPECT_EMBER_ERROR(DataLoader(indexed_dataset(4), o), "DataLoader", "batch_size", "0");
  o.batch_size = 1;
  o.prefetch_depth = 0;
  EXPECT_EMBER_ERROR(DataLoader(indexed_dataset(4), o), "DataLoader", "prefetch_depth");
  EXPECT_EMBER_ERROR(DataLoader(nullptr, DataLoaderOptions{}), "DataLoader", "null");
  auto sampler = std::make_shared<SequentialSampler>(9);
  DataLoader bad(indexed_dataset(4), DataLoaderOptions{}, {}, sampler);
  EXPECT_EMBER_ERROR(bad.next(), "DataLoader", "index 4", "size 4");
}

}  // namespace
}  // namespace ember::data
