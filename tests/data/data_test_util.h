// Shared helpers for the data suites: an ember::Error message matcher, scratch paths under
// TEST_TMPDIR, and writers for raw/gzip files and IDX/CIFAR contents (so tests never need real data).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/error.h"
#include "tests/common/error_matchers.h"

namespace ember::data::testing {

using ::ember::testing::throws_with;


using Bytes = std::vector<uint8_t>;

// A fresh path under the test's scratch directory (TEST_TMPDIR under Bazel).
inline std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

inline void write_raw(const std::string& path, const Bytes& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  }
  std::fclose(f);
}

inline void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  }
  gzclose(f);
}

inline Bytes read_raw(const std::string& path) {
  Bytes out;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  int c;
  while ((c = std::fgetc(f)) != EOF) out.push_back(static_cast<uint8_t>(c));
  std::fclose(f);
  return out;
}

inline void append_be32(Bytes& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v >> 24));
  b.push_back(static_cast<uint8_t>(v >> 16));
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}

// An IDX file of unsigned bytes with the given dims and payload.
inline Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& payload, uint8_t type = 0x08) {
  Bytes b{0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) append_be32(b, d);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

// n images of rows x cols whose pixel k of image i is (i * 31 + k) % 256.
inline Bytes image_payload(int n, int rows, int cols) {
  Bytes p;
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < rows * cols; ++k) p.push_back(static_cast<uint8_t>((i * 31 + k) % 256));
  }
  return p;
}

// CIFAR records: label i % 10, pixel k of record i is (i * 7 + k) % 256.
inline Bytes cifar_bytes(int n, int label_offset = 0) {
  Bytes b;
  for (int i = 0; i < n; ++i) {
    b.push_back(static_cast<uint8_t>((i + label_offset) % 10));
    for (int k = 0; k < 3072; ++k) b.push_back(static_cast<uint8_t>((i * 7 + k) % 256));
  }
  return b;
}

}  // namespace ember::data::testing
