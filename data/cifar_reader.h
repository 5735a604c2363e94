// Reader for the CIFAR-10 binary format (data_batch_{1..5}.bin, test_batch.bin): records of one label
// byte followed by 3072 pixel bytes (1024 R, 1024 G, 1024 B, row-major), returned as images
// [N, 3, 32, 32] (uint8, or float32 scaled to [0, 1]) and labels int64 [N].
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace ember::data {

constexpr int64_t kCifarImageBytes = 3 * 32 * 32;
constexpr int64_t kCifarRecordBytes = 1 + kCifarImageBytes;
constexpr int64_t kCifarNumClasses = 10;

// A CIFAR-10 split as read: images [N, 3, 32, 32] (uint8, or float32 in [0, 1]), int64 labels [N].
struct CifarSplit {
  Tensor images;  // [N, 3, 32, 32]
  Tensor labels;  // int64 [N]
};

// One batch file (raw or gzip-compressed). The size must be a positive multiple of 3073 bytes and
// every label below 10.
CifarSplit read_cifar10_file(const std::string& path, ScalarType dtype = kUInt8);

// The five training batches (train = true) or test_batch.bin from `root`, concatenated.
CifarSplit read_cifar10(const std::string& root, bool train, ScalarType dtype = kUInt8);

}  // namespace ember::data
