// Readers for the IDX format of MNIST and Fashion-MNIST (gzip-compressed or raw, detected by magic
// bytes): images come back as [N, 1, rows, cols] (uint8, or float32 scaled to [0, 1]) and labels as
// int64 [N]. Malformed files throw ember::Error naming the file, what was expected and what was found.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace ember::data {

// An IDX file of unsigned bytes (element type 0x08) with its dims as written: e.g. [N, 28, 28].
Tensor read_idx_ubyte(const std::string& path);

// An idx3 image file as [N, 1, rows, cols]. dtype kUInt8 keeps the raw bytes; kFloat32 divides by 255.
Tensor read_idx_images(const std::string& path, ScalarType dtype = kUInt8);
// An idx1 label file as int64 [N].
Tensor read_idx_labels(const std::string& path);

// An MNIST or Fashion-MNIST split as read_mnist returns it: images (uint8, or float32 in [0, 1])
// and their labels.
struct MnistSplit {
  Tensor images;  // [N, 1, 28, 28]
  Tensor labels;  // int64 [N]
};

// {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `root` (the .gz name is tried first), with
// the image and label counts checked against each other.
MnistSplit read_mnist(const std::string& root, bool train, ScalarType dtype = kUInt8);

}  // namespace ember::data
