// FileReader: sequential reads from a file that may be gzip-compressed (detected by the 1f 8b magic
// bytes) or raw, for the IDX and CIFAR readers. Every failure (missing file, short read, corrupt
// gzip stream) throws ember::Error naming the file, what was being read and how much was found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::data {

class FileReader {
 public:
  explicit FileReader(std::string path);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  const std::string& path() const { return path_; }
  bool is_gzip() const { return gzip_; }
  // Bytes consumed so far (of the decompressed stream).
  uint64_t offset() const { return offset_; }

  // Reads exactly n bytes into dst; `what` names them in the error ("the IDX header").
  void read_exact(void* dst, size_t n, const std::string& what);
  // Reads up to n bytes; returns how many were read (fewer only at the end of the stream).
  size_t read_some(void* dst, size_t n);
  // Everything from the current offset to the end of the (decompressed) stream.
  std::vector<uint8_t> read_to_end();

 private:
  std::string path_;
  void* file_ = nullptr;  // gzFile; kept opaque so that zlib.h stays out of this header
  bool gzip_ = false;
  uint64_t offset_ = 0;
};

// Big-endian 32-bit integer at p (the byte order of IDX headers).
inline uint32_t read_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace ember::data
