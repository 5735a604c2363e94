#include "data/idx_reader.h"

#include <cstdio>
#include <cstring>

#include "data/file_reader.h"
#include "tensor/factories.h"

namespace ember::data {

namespace {

// IDX magic: two zero bytes, the element type, the number of dims.
constexpr uint8_t kIdxUnsignedByte = 0x08;
constexpr int kMaxIdxDims = 8;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08X", v);
  return buf;
}

bool file_exists(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::fclose(f);
  return true;
}

Tensor to_float_scaled(const Tensor& bytes) {
  Tensor out = empty(bytes.sizes(), TensorOptions(kFloat32, kCPU));
  const uint8_t* src = bytes.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  const int64_t n = bytes.numel();
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);
  return out;
}

std::string mnist_path(const std::string& root, const std::string& name) {
  const std::string base = root.empty() || root.back() == '/' ? root + name : root + "/" + name;
  if (file_exists(base + ".gz")) return base + ".gz";
  EMBER_CHECK(file_exists(base), "read_mnist: neither '", base, ".gz' nor '", base, "' exists");
  return base;
}

}  // namespace

Tensor read_idx_ubyte(const std::string& path) {
  FileReader in(path);
  uint8_t magic[4];
  in.read_exact(magic, 4, "the IDX magic number");
  const uint32_t magic_value = read_be32(magic);
  EMBER_CHECK(magic[0] == 0 && magic[1] == 0 && magic[3] >= 1 && magic[3] <= kMaxIdxDims,
              "'", path, "' is not an IDX file: magic number is ", hex32(magic_value),
              ", expected 0x000008NN (two zero bytes, element type, 1-", kMaxIdxDims, " dims)",
              in.is_gzip() ? " after gzip decompression" : "");
  EMBER_CHECK(magic[2] == kIdxUnsignedByte, "'", path, "': IDX element type is 0x",
              hex32(magic[2]).substr(8), ", expected 0x08 (unsigned byte), the only type MNIST uses");
  const int ndim = magic[3];
  std::vector<uint8_t> dims_raw(4 * ndim);
  in.read_exact(dims_raw.data(), dims_raw.size(), "the IDX dimension sizes");
  Shape sizes(ndim);
  uint64_t numel = 1;
  for (int d = 0; d < ndim; ++d) {
    sizes[d] = read_be32(&dims_raw[4 * d]);
    numel *= static_cast<uint64_t>(sizes[d]);
    // 2^40 bytes is far beyond any real IDX file; a bigger product means a corrupt header.
    EMBER_CHECK(numel <= (uint64_t{1} << 40), "'", path, "': IDX dims ", shape_to_string(sizes),
                " are implausibly large (corrupt header?)");
  }
  Tensor out = empty(sizes, TensorOptions(kUInt8, kCPU));
  in.read_exact(out.data_ptr(), static_cast<size_t>(numel),
                "pixel/label data for dims " + shape_to_string(sizes));
  return out;
}

Tensor read_idx_images(const std::string& path, ScalarType dtype) {
  EMBER_CHECK(dtype == kUInt8 || dtype == kFloat32, "read_idx_images: dtype must be uint8 or float32, got ",
              dtype);
  Tensor raw = read_idx_ubyte(path);
  EMBER_CHECK(raw.dim() == 3, "'", path, "': expected an idx3 image file with dims [N, rows, cols], found ",
              raw.dim(), " dims ", raw.shape_str());
  Tensor images = raw.view({raw.size(0), 1, raw.size(1), raw.size(2)});
  return dtype == kUInt8 ? images : to_float_scaled(images);
}

Tensor read_idx_labels(const std::string& path) {
  Tensor raw = read_idx_ubyte(path);
  EMBER_CHECK(raw.dim() == 1, "'", path, "': expected an idx1 label file with dims [N], found ", raw.dim(),
              " dims ", raw.shape_str());
  Tensor labels = empty({raw.size(0)}, TensorOptions(kInt64, kCPU));
  const uint8_t* src = raw.data_ptr<uint8_t>();
  int64_t* dst = labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < raw.size(0); ++i) dst[i] = src[i];
  return labels;
}

MnistSplit read_mnist(const std::string& root, bool train, ScalarType dtype) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string images_path = mnist_path(root, prefix + "-images-idx3-ubyte");
  const std::string labels_path = mnist_path(root, prefix + "-labels-idx1-ubyte");
  MnistSplit split{read_idx_images(images_path, dtype), read_idx_labels(labels_path)};
  EMBER_CHECK(split.images.size(0) == split.labels.size(0), "read_mnist: '", images_path, "' holds ",
              split.images.size(0), " images but '", labels_path, "' holds ", split.labels.size(0),
              " labels");
  return split;
}

}  // namespace ember::data
