#include "data/cifar_reader.h"

#include <cstring>
#include <vector>

#include "data/file_reader.h"
#include "tensor/factories.h"

namespace ember::data {

namespace {

// Splits the records of `bytes` into images and labels, starting at sample `first` of the outputs.
void unpack_records(const std::string& path, const std::vector<uint8_t>& bytes, int64_t first,
                    const Tensor& images, const Tensor& labels) {
  const int64_t n = static_cast<int64_t>(bytes.size()) / kCifarRecordBytes;
  int64_t* lab = labels.data_ptr<int64_t>();
  const bool as_float = images.dtype() == kFloat32;
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* rec = bytes.data() + r * kCifarRecordBytes;
    EMBER_CHECK(rec[0] < kCifarNumClasses, "'", path, "': label ", int{rec[0]}, " of record ", r,
                " (byte ", r * kCifarRecordBytes, ") is out of range [0, ", kCifarNumClasses,
                "); is this a CIFAR-10 binary file?");
    lab[first + r] = rec[0];
    const uint8_t* px = rec + 1;
    if (as_float) {
      float* dst = images.data_ptr<float>() + (first + r) * kCifarImageBytes;
      for (int64_t i = 0; i < kCifarImageBytes; ++i) dst[i] = static_cast<float>(px[i]) * (1.0f / 255.0f);
    } else {
      std::memcpy(images.data_ptr<uint8_t>() + (first + r) * kCifarImageBytes, px, kCifarImageBytes);
    }
  }
}

std::vector<uint8_t> read_checked(const std::string& path) {
  FileReader in(path);
  std::vector<uint8_t> bytes = in.read_to_end();
  EMBER_CHECK(!bytes.empty() && bytes.size() % kCifarRecordBytes == 0, "'", path, "': size ",
              bytes.size(), " bytes is not a positive multiple of the ", kCifarRecordBytes,
              "-byte CIFAR-10 record (1 label + 3072 pixels); the file is truncated or not CIFAR-10 (",
              bytes.size() / kCifarRecordBytes, " whole records and ", bytes.size() % kCifarRecordBytes,
              " bytes left over)");
  return bytes;
}

CifarSplit read_files(const std::vector<std::string>& paths, ScalarType dtype) {
  EMBER_CHECK(dtype == kUInt8 || dtype == kFloat32, "read_cifar10: dtype must be uint8 or float32, got ",
              dtype);
  std::vector<std::vector<uint8_t>> contents;
  int64_t total = 0;
  for (const std::string& p : paths) {
    contents.push_back(read_checked(p));
    total += static_cast<int64_t>(contents.back().size()) / kCifarRecordBytes;
  }
  CifarSplit out{empty({total, 3, 32, 32}, TensorOptions(dtype, kCPU)),
                 empty({total}, TensorOptions(kInt64, kCPU))};
  int64_t first = 0;
  for (size_t f = 0; f < paths.size(); ++f) {
    unpack_records(paths[f], contents[f], first, out.images, out.labels);
    first += static_cast<int64_t>(contents[f].size()) / kCifarRecordBytes;
    contents[f] = {};  // release each file's bytes as soon as they are unpacked
  }
  return out;
}

}  // namespace

CifarSplit read_cifar10_file(const std::string& path, ScalarType dtype) { return read_files({path}, dtype); }

CifarSplit read_cifar10(const std::string& root, bool train, ScalarType dtype) {
  const std::string dir = root.empty() || root.back() == '/' ? root : root + "/";
  std::vector<std::string> paths;
  if (train) {
    for (int i = 1; i <= 5; ++i) paths.push_back(dir + "data_batch_" + std::to_string(i) + ".bin");
  } else {
    paths.push_back(dir + "test_batch.bin");
  }
  return read_files(paths, dtype);
}

}  // namespace ember::data
