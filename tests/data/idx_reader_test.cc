// IDX reader: raw and gzip files written here, values and shapes, and every malformed-file error.
#include "data/idx_reader.h"

#include <sys/stat.h>

#include <cstring>

#include <gtest/gtest.h>

#include "data_test_util.h"

namespace ember::data {
namespace {

using testing::append_be32;
using testing::Bytes;
using testing::idx_bytes;
using testing::image_payload;
using testing::temp_path;
using testing::write_gz;
using testing::write_raw;

TEST(IdxReader, ReadsRawImagesAsUint8) {
  const std::string path = temp_path("raw-images-idx3-ubyte");
  write_raw(path, idx_bytes({3, 4, 5}, image_payload(3, 4, 5)));
  const Tensor images = read_idx_images(path);
  EXPECT_EQ(images.sizes(), (Shape{3, 1, 4, 5}));
  EXPECT_EQ(images.dtype(), kUInt8);
  const uint8_t* p = images.data_ptr<uint8_t>();
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 20; ++k) EXPECT_EQ(p[i * 20 + k], (i * 31 + k) % 256);
  }
}

TEST(IdxReader, ReadsGzipImagesAsScaledFloat) {
  const std::string path = temp_path("gz-images-idx3-ubyte.gz");
  write_gz(path, idx_bytes({2, 28, 28}, image_payload(2, 28, 28)));
  const Tensor images = read_idx_images(path, kFloat32);
  EXPECT_EQ(images.sizes(), (Shape{2, 1, 28, 28}));
  EXPECT_EQ(images.dtype(), kFloat32);
  const float* p = images.data_ptr<float>();
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 784; k += 13) EXPECT_FLOAT_EQ(p[i * 784 + k], ((i * 31 + k) % 256) / 255.0f);
  }
}

TEST(IdxReader, GzipAndRawGiveTheSameTensor) {
  const Bytes file = idx_bytes({4, 3, 3}, image_payload(4, 3, 3));
  write_raw(temp_path("same-raw"), file);
  write_gz(temp_path("same-gz"), file);  // no .gz suffix: detection is by magic bytes, not by name
  const Tensor a = read_idx_images(temp_path("same-raw"));
  const Tensor b = read_idx_images(temp_path("same-gz"));
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_EQ(0, std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()));
}

TEST(IdxReader, ReadsLabelsAsInt64) {
  const std::string path = temp_path("labels-idx1-ubyte.gz");
  write_gz(path, idx_bytes({5}, Bytes{9, 0, 3, 7, 255}));
  const Tensor labels = read_idx_labels(path);
  EXPECT_EQ(labels.sizes(), (Shape{5}));
  EXPECT_EQ(labels.dtype(), kInt64);
  const int64_t* p = labels.data_ptr<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(p, p + 5), (std::vector<int64_t>{9, 0, 3, 7, 255}));
}

TEST(IdxReader, ReadMnistPrefersGzAndChecksCounts) {
  const std::string root = temp_path("mnist_root");
  mkdir(root.c_str(), 0755);
  write_gz(root + "/t10k-images-idx3-ubyte.gz", idx_bytes({3, 28, 28}, image_payload(3, 28, 28)));
  write_raw(root + "/t10k-labels-idx1-ubyte", idx_bytes({3}, Bytes{1, 2, 3}));
  const MnistSplit split = read_mnist(root, /*train=*/false);
  EXPECT_EQ(split.images.sizes(), (Shape{3, 1, 28, 28}));
  EXPECT_EQ(split.labels.data_ptr<int64_t>()[2], 3);

  write_raw(root + "/train-images-idx3-ubyte", idx_bytes({3, 28, 28}, image_payload(3, 28, 28)));
  write_raw(root + "/train-labels-idx1-ubyte", idx_bytes({2}, Bytes{1, 2}));
  EXPECT_EMBER_ERROR(read_mnist(root, true), "read_mnist", "holds 3 images", "holds 2 labels",
                     "train-labels-idx1-ubyte");
  EXPECT_EMBER_ERROR(read_mnist(temp_path("no_such_dir"), true), "read_mnist",
                     "train-images-idx3-ubyte.gz", "exists");
}

TEST(IdxReaderErrors, MissingFile) {
  const std::string path = temp_path("does-not-exist-idx3-ubyte");
  EXPECT_EMBER_ERROR(read_idx_images(path), "cannot open", path, "No such file");
}

TEST(IdxReaderErrors, BadMagicNumber) {
  const std::string path = temp_path("bad-magic");
  Bytes b{0x12, 0x34, 0x08, 0x03};
  append_be32(b, 1);
  write_raw(path, b);
  EXPECT_EMBER_ERROR(read_idx_images(path), path, "not an IDX file", "0x12340803", "expected 0x000008NN");
  write_gz(path + ".gz", b);
  EXPECT_EMBER_ERROR(read_idx_images(path + ".gz"), "0x12340803", "after gzip decompression");
}

TEST(IdxReaderErrors, UnsupportedElementType) {
  const std::string path = temp_path("float-idx");
  write_raw(path, idx_bytes({1}, Bytes{0, 0, 0, 0}, /*type=*/0x0D));
  EXPECT_EMBER_ERROR(read_idx_labels(path), path, "element type is 0x0D", "expected 0x08");
}

TEST(IdxReaderErrors, WrongNumberOfDims) {
  const std::string labels = temp_path("dims-labels");
  write_raw(labels, idx_bytes({4}, Bytes{1, 2, 3, 4}));
  EXPECT_EMBER_ERROR(read_idx_images(labels), labels, "expected an idx3 image file", "found 1 dims", "[4]");
  const std::string images = temp_path("dims-images");
  write_raw(images, idx_bytes({1, 2, 2}, Bytes{1, 2, 3, 4}));
  EXPECT_EMBER_ERROR(read_idx_labels(images), images, "expected an idx1 label file", "found 3 dims",
                     "[1, 2, 2]");
}

TEST(IdxReaderErrors, TruncatedHeader) {
  const std::string path = temp_path("short-header");
  write_raw(path, Bytes{0, 0});
  EXPECT_EMBER_ERROR(read_idx_images(path), path, "truncated", "expected 4 bytes of the IDX magic number",
                     "found only 2");
  Bytes dims_cut{0, 0, 8, 3, 0, 0, 0, 10, 0, 0};
  write_raw(path, dims_cut);
  EXPECT_EMBER_ERROR(read_idx_images(path), "truncated", "12 bytes of the IDX dimension sizes",
                     "found only 6");
  write_raw(path, Bytes{});
  EXPECT_EMBER_ERROR(read_idx_images(path), "truncated", "found only 0");
}

TEST(IdxReaderErrors, TruncatedPayloadRawAndGzip) {
  Bytes b = idx_bytes({10, 28, 28}, image_payload(10, 28, 28));
  b.resize(b.size() - 100);
  const std::string raw = temp_path("cut-raw");
  write_raw(raw, b);
  EXPECT_EMBER_ERROR(read_idx_images(raw), raw, "truncated", "expected 7840 bytes", "[10, 28, 28]",
                     "found only 7740");
  const std::string gz = temp_path("cut-payload.gz");
  write_gz(gz, b);
  EXPECT_EMBER_ERROR(read_idx_images(gz), gz, "truncated", "expected 7840 bytes", "found only 7740",
                     "decompressed");
}

TEST(IdxReaderErrors, TruncatedGzipStream) {
  // A complete IDX file whose compressed bytes are cut in half: zlib reports the early end.
  const std::string whole = temp_path("whole.gz");
  write_gz(whole, idx_bytes({50, 28, 28}, image_payload(50, 28, 28)));
  Bytes compressed = testing::read_raw(whole);
  ASSERT_GT(compressed.size(), 100u);
  compressed.resize(compressed.size() / 2);
  const std::string cut = temp_path("cut-stream.gz");
  write_raw(cut, compressed);
  EXPECT_EMBER_ERROR(read_idx_images(cut), cut, "truncated", "expected 39200 bytes");
}

TEST(IdxReaderErrors, ImplausibleDims) {
  const std::string path = temp_path("huge-dims");
  write_raw(path, idx_bytes({0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, Bytes{}));
  EXPECT_EMBER_ERROR(read_idx_images(path), path, "implausibly large");
}

TEST(IdxReaderErrors, BadDtype) {
  EXPECT_EMBER_ERROR(read_idx_images(temp_path("x"), kInt32), "read_idx_images", "uint8 or float32", "int32");
}

}  // namespace
}  // namespace ember::data
