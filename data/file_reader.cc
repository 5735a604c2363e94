#include "data/file_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "tensor/error.h"

namespace ember::data {

namespace {

gzFile as_gz(void* f) { return static_cast<gzFile>(f); }

// Sniffs the gzip magic with plain stdio: gzopen would read raw files transparently too, but the
// error messages should say which kind of file was found.
bool has_gzip_magic(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  EMBER_CHECK(f != nullptr, "cannot open '", path, "': ", std::strerror(errno));
  unsigned char magic[2] = {0, 0};
  const size_t n = std::fread(magic, 1, 2, f);
  std::fclose(f);
  return n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

}  // namespace

FileReader::FileReader(std::string path) : path_(std::move(path)) {
  gzip_ = has_gzip_magic(path_);
  file_ = gzopen(path_.c_str(), "rb");
  EMBER_CHECK(file_ != nullptr, "cannot open '", path_, "': ", std::strerror(errno));
  // 1 MiB of zlib buffer: the default 8 KiB makes decompressing 47 MB of MNIST needlessly slow.
  gzbuffer(as_gz(file_), 1 << 20);
}

FileReader::~FileReader() {
  if (file_ != nullptr) gzclose(as_gz(file_));
}

size_t FileReader::read_some(void* dst, size_t n) {
  size_t done = 0;
  char* out = static_cast<char*>(dst);
  while (done < n) {
    // gzread takes an unsigned int length, so large reads go in chunks.
    const size_t chunk = std::min<size_t>(n - done, 1u << 30);
    const int got = gzread(as_gz(file_), out + done, static_cast<unsigned>(chunk));
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(as_gz(file_), &errnum);
      EMBER_THROW("error reading '", path_, "' at byte ", offset_ + done, ": ",
                  gzip_ ? "corrupt gzip stream: " : "", msg != nullptr ? msg : "unknown error");
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  offset_ += done;
  return done;
}

void FileReader::read_exact(void* dst, size_t n, const std::string& what) {
  const uint64_t start = offset_;
  const size_t got = read_some(dst, n);
  if (got == n) return;
  int errnum = Z_OK;
  const char* zmsg = gzerror(as_gz(file_), &errnum);
  EMBER_THROW("'", path_, "' is truncated: expected ", n, " bytes of ", what, " at byte ", start,
              gzip_ ? " of the decompressed stream" : "", ", found only ", got,
              (gzip_ && errnum != Z_OK && zmsg != nullptr) ? std::string(" (gzip: ") + zmsg + ")"
                                                           : std::string());
}

std::vector<uint8_t> FileReader::read_to_end() {
  std::vector<uint8_t> out;
  size_t filled = 0;
  for (;;) {
    out.resize(filled + (1u << 20));
    const size_t got = read_some(out.data() + filled, out.size() - filled);
    filled += got;
    if (filled < out.size()) break;
  }
  out.resize(filled);
  // A gzip stream cut short reads as a clean EOF followed by an error flag; surface it.
  int errnum = Z_OK;
  const char* zmsg = gzerror(as_gz(file_), &errnum);
  EMBER_CHECK(errnum == Z_OK || errnum == Z_STREAM_END, "'", path_, "' is truncated or corrupt after ",
              offset_, " bytes (gzip: ", zmsg != nullptr ? zmsg : "unknown error", ")");
  return out;
}

}  // namespace ember::data
