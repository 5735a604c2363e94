// CIFAR-10 binary reader: layout of records into [N, 3, 32, 32], the five-batch split, and errors.
#include "data/cifar_reader.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "data_test_util.h"

namespace ember::data {
namespace {

using testing::Bytes;
using testing::cifar_bytes;
using testing::temp_path;
using testing::write_gz;
using testing::write_raw;

TEST(CifarReader, ReadsRecordsIntoChannelsFirstImages) {
  const std::string path = temp_path("data_batch_x.bin");
  write_raw(path, cifar_bytes(3));
  const CifarSplit s = read_cifar10_file(path);
  EXPECT_EQ(s.images.sizes(), (Shape{3, 3, 32, 32}));
  EXPECT_EQ(s.images.dtype(), kUInt8);
  EXPECT_EQ(s.labels.sizes(), (Shape{3}));
  EXPECT_EQ(s.labels.dtype(), kInt64);
  const uint8_t* px = s.images.data_ptr<uint8_t>();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.labels.data_ptr<int64_t>()[i], i);
    // channel c, row y, col x is byte c*1024 + y*32 + x of the record's pixels
    for (int c = 0; c < 3; ++c) {
      for (int y : {0, 17, 31}) {
        for (int x : {0, 5, 31}) {
          const int k = c * 1024 + y * 32 + x;
          EXPECT_EQ(px[((i * 3 + c) * 32 + y) * 32 + x], (i * 7 + k) % 256);
        }
      }
    }
  }
}

TEST(CifarReader, FloatIsScaledAndGzipWorks) {
  const std::string path = temp_path("cifar.bin.gz");
  write_gz(path, cifar_bytes(2));
  const CifarSplit s = read_cifar10_file(path, kFloat32);
  EXPECT_EQ(s.images.dtype(), kFloat32);
  EXPECT_FLOAT_EQ(s.images.data_ptr<float>()[3072 + 100], ((7 + 100) % 256) / 255.0f);
}

TEST(CifarReader, ConcatenatesTheFiveTrainingBatches) {
  const std::string root = temp_path("cifar_root");
  mkdir(root.c_str(), 0755);
  for (int i = 1; i <= 5; ++i) {
    write_raw(root + "/data_batch_" + std::to_string(i) + ".bin", cifar_bytes(2, /*label_offset=*/i));
  }
  write_raw(root + "/test_batch.bin", cifar_bytes(4));
  const CifarSplit train = read_cifar10(root, true);
  EXPECT_EQ(train.images.sizes(), (Shape{10, 3, 32, 32}));
  const int64_t* lab = train.labels.data_ptr<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(lab, lab + 10), (std::vector<int64_t>{1, 2, 2, 3, 3, 4, 4, 5, 5, 6}));
  EXPECT_EQ(read_cifar10(root, false).images.size(0), 4);
}

TEST(CifarReaderErrors, TruncatedFile) {
  Bytes b = cifar_bytes(2);
  b.resize(b.size() - 10);
  const std::string path = temp_path("cut.bin");
  write_raw(path, b);
  EXPECT_EMBER_ERROR(read_cifar10_file(path), path, "size 6136 bytes", "multiple of the 3073-byte",
                     "truncated", "1 whole records and 3063 bytes left over");
}

TEST(CifarReaderErrors, EmptyFile) {
  const std::string path = temp_path("empty.bin");
  write_raw(path, Bytes{});
  EXPECT_EMBER_ERROR(read_cifar10_file(path), path, "size 0 bytes", "positive multiple");
}

TEST(CifarReaderErrors, LabelOutOfRange) {
  Bytes b = cifar_bytes(3);
  b[2 * 3073] = 42;  // record 2's label
  const std::string path = temp_path("badlabel.bin");
  write_raw(path, b);
  EXPECT_EMBER_ERROR(read_cifar10_file(path), path, "label 42 of record 2", "byte 6146", "[0, 10)");
}

TEST(CifarReaderErrors, MissingFiles) {
  EXPECT_EMBER_ERROR(read_cifar10_file(temp_path("nope.bin")), "cannot open", "nope.bin");
  EXPECT_EMBER_ERROR(read_cifar10(temp_path("no_cifar_here"), true), "cannot open", "data_batch_1.bin");
}

TEST(CifarReaderErrors, TruncatedGzipStream) {
  const std::string whole = temp_path("whole_cifar.gz");
  write_gz(whole, cifar_bytes(20));
  Bytes compressed = testing::read_raw(whole);
  compressed.resize(compressed.size() / 2);
  const std::string cut = temp_path("cut_cifar.gz");
  write_raw(cut, compressed);
  EXPECT_EMBER_ERROR(read_cifar10_file(cut), cut, "truncated");
}

}  // namespace
}  // namespace ember::data
