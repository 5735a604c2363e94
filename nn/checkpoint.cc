#include "nn/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "tensor/factories.h"

namespace ember::nn {

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "nn/checkpoint writes tensors' bytes as they are in memory; safetensors requires little-endian"
#endif

namespace {

// Keys keep document order, so the header lists tensors in saved (data) order.
using Json = nlohmann::ordered_json;

// Note [Checkpoint checksum]: save stores a CRC-32 in __metadata__["ember.crc32"] over the header
// written without that entry (compact JSON, as nlohmann dumps it) followed by the data bytes; load
// recomputes it from the parsed header, so a flipped bit anywhere -- a shape, an offset, a weight --
// is caught. Files from other writers carry no checksum and load as before.
constexpr const char* kChecksumKey = "ember.crc32";

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {  // zlib's length is a uInt
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = static_cast<uint32_t>(::crc32(crc, p, chunk));
    p += chunk;
    n -= chunk;
  }
  return crc;
}

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// "a number", "an array", ...: what a JSON value is, for error messages.
std::string kind_of(const Json& v) {
  const std::string t = v.type_name();
  return (t == "array" || t == "object" ? "an " : "a ") + t;
}

// Parses the header, rejecting duplicate keys (nlohmann keeps the last; safetensors forbids them).
Json parse_header(const std::string& text) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  auto reject_duplicates = [&keys](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) keys.emplace_back();
    if (event == Json::parse_event_t::object_end) keys.pop_back();
    if (event == Json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second) {
      EMBER_THROW("duplicate key \"", parsed.get<std::string>(), "\"");
    }
    return true;
  };
  try {
    return Json::parse(text, reject_duplicates);
  } catch (const Json::parse_error& e) {
    // what() reads "[json.exception.parse_error.101] parse error at line 1, column 9: <problem>".
    std::string problem = e.what();
    const size_t colon = problem.find(": ");
    if (colon != std::string::npos) problem = problem.substr(colon + 2);
    EMBER_THROW("invalid JSON at byte ", e.byte, ": ", problem);
  }
}

// The safetensors spec's cap on the header (guards against allocating a bogus length).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

const char* safetensors_dtype(ScalarType t) {
  switch (t) {
    case kFloat32: return "F32";
    case kFloat64: return "F64";
    case kFloat16: return "F16";
    case kBFloat16: return "BF16";
    case kInt32: return "I32";
    case kInt64: return "I64";
    case kUInt8: return "U8";
    case kBool: return "BOOL";
  }
  EMBER_THROW("save: unknown dtype ", static_cast<int>(t));
}

bool parse_dtype(const std::string& s, ScalarType* out) {
  static const std::pair<const char*, ScalarType> kTable[] = {
      {"F32", kFloat32}, {"F64", kFloat64}, {"F16", kFloat16}, {"BF16", kBFloat16},
      {"I32", kInt32},   {"I64", kInt64},   {"U8", kUInt8},    {"BOOL", kBool}};
  for (const auto& [name, t] : kTable) {
    if (s == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

std::string errno_text() { return std::strerror(errno); }

// Writes all of [data, data + n), retrying short writes and EINTR.
bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes at `offset`; false on error or end of file.
bool read_exact(int fd, char* data, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, data, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (r == 0) return false;
    data += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

// Closes fd on scope exit (every error path of save/load throws).
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// CRC-32 of `text`, to be continued over more bytes with crc32_update.
uint32_t crc32_of(const std::string& text) {
  return crc32_update(static_cast<uint32_t>(::crc32(0L, Z_NULL, 0)), text.data(), text.size());
}

// What save writes: the header (before its checksum is added) and the bytes it describes.
struct SavePlan {
  Json head;
  std::vector<Tensor> data;  // contiguous CPU copies, in data order
};

// Validates the metadata and tensors and lays the tensors out back to back, in `sd`'s order.
SavePlan plan_save(const StateDict& sd, const std::string& path,
                   const CheckpointMetadata& metadata) {
  SavePlan plan;
  std::set<std::string> names;
  // __metadata__ always comes first (as in the spec's examples) and always holds the checksum.
  plan.head = Json::object();
  plan.head["__metadata__"] = Json::object();
  for (const auto& [k, v] : metadata) {
    EMBER_CHECK(k != kChecksumKey, "save: '", path, "': metadata key '", k, "' is reserved");
    plan.head["__metadata__"][k] = v;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : sd) {
    EMBER_CHECK(!name.empty() && name != "__metadata__", "save: '", path, "': invalid tensor name '",
                name, "'");
    EMBER_CHECK(names.insert(name).second, "save: '", path, "': duplicate tensor name '", name, "'");
    EMBER_CHECK(t.defined(), "save: '", path, "': tensor '", name, "' is undefined");
    EMBER_CHECK(!t.is_sparse(), "save: '", path, "': tensor '", name, "' is sparse (", t.describe(),
                "); safetensors stores dense tensors only");
    Tensor c = t.cpu().contiguous();
    const uint64_t end = offset + c.nbytes();
    plan.head[name] = {{"dtype", safetensors_dtype(c.dtype())},
                       {"shape", std::vector<int64_t>(c.sizes().begin(), c.sizes().end())},
                       {"data_offsets", {offset, end}}};
    offset = end;
    plan.data.push_back(std::move(c));
  }
  return plan;
}

// Adds the checksum to the header and returns it as written, padded.
std::string finish_header(SavePlan& plan, const std::string& path) {
  std::string header;
  try {
    // Note [Checkpoint checksum]: over the header without the checksum, then the data.
    uint32_t crc = crc32_of(plan.head.dump());
    for (const Tensor& c : plan.data) crc = crc32_update(crc, c.data_ptr(), c.nbytes());
    plan.head["__metadata__"][kChecksumKey] = hex32(crc);
    header = plan.head.dump();
  } catch (const Json::exception& e) {  // e.g. a name that is not valid UTF-8
    EMBER_THROW("save: '", path, "': cannot write the header: ", e.what());
  }
  // Pad so the data starts 8-byte aligned (the spec's recommendation; readers mmap the file).
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

// A temporary file in the target's directory, so the rename over it is atomic (same file system).
struct TempFile {
  std::string dir;   // the target's directory, fsynced after the rename
  std::string path;  // mkstemp's name for the file
  int fd;
};

TempFile create_temp_file(const std::string& path) {
  TempFile tmp{directory_of(path), "", -1};
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  EMBER_CHECK(!base.empty(), "save: '", path, "' names a directory, not a file");
  tmp.path = tmp.dir + "/." + base + ".tmp.XXXXXX";
  tmp.fd = ::mkstemp(tmp.path.data());
  EMBER_CHECK(tmp.fd >= 0, "save: '", path, "': cannot create a temporary file in '", tmp.dir,
              "': ", errno_text());
  return tmp;
}

// Writes the header length, header and data to fd, fsyncs and closes it. Returns what failed, or ""
// if nothing did (the caller then removes the temporary file and throws).
std::string write_and_close(int fd, const std::string& header, const std::vector<Tensor>& data) {
  char len_bytes[8];
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  std::string what;
  FdCloser closer{fd};
  bool ok = ::fchmod(fd, 0644) == 0 && write_all(fd, len_bytes, 8) &&
            write_all(fd, header.data(), header.size());
  for (size_t i = 0; ok && i < data.size(); ++i) {
    ok = write_all(fd, static_cast<const char*>(data[i].data_ptr()), data[i].nbytes());
  }
  if (!ok) what = "write failed: " + errno_text();
  if (ok && ::fsync(fd) != 0) {
    ok = false;
    what = "fsync failed: " + errno_text();
  }
  closer.fd = -1;
  if (::close(fd) != 0 && ok) what = "close failed: " + errno_text();
  return what;
}

// Persists a rename in `dir`; best effort (some file systems refuse to open directories).
void fsync_directory(const std::string& dir) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// A checkpoint open for reading: an 8-byte header length, the header, then the data section.
struct CheckpointFile {
  std::string path;
  int fd;
  uint64_t file_size;
  uint64_t header_size;
  uint64_t data_start() const { return 8 + header_size; }
  uint64_t data_size() const { return file_size - 8 - header_size; }
};

// Reads the file's size and header length, checking the header fits in the file and the cap.
CheckpointFile read_layout(int fd, const std::string& path) {
  struct stat st;
  EMBER_CHECK(::fstat(fd, &st) == 0, "load: cannot stat '", path, "': ", errno_text());
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  EMBER_CHECK(file_size >= 8, "load: '", path, "' is truncated: ", file_size,
              " bytes, too small for the 8-byte header length");
  unsigned char len_bytes[8];
  EMBER_CHECK(read_exact(fd, reinterpret_cast<char*>(len_bytes), 8, 0), "load: cannot read '", path,
              "': ", errno_text());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  EMBER_CHECK(n <= file_size - 8, "load: '", path, "' is corrupt or truncated: header length ", n,
              " runs past the end of the file (", file_size, " bytes)");
  EMBER_CHECK(n <= kMaxHeaderBytes, "load: '", path, "': header length ", n, " exceeds the ",
              kMaxHeaderBytes, "-byte limit");
  return CheckpointFile{path, fd, file_size, n};
}

// Reads and parses the header, which must be a JSON object.
Json read_header(const CheckpointFile& file) {
  std::string header(file.header_size, '\0');
  EMBER_CHECK(read_exact(file.fd, header.data(), file.header_size, 8),
              "load: cannot read the header of '", file.path, "': ", errno_text());
  Json root;
  try {
    root = parse_header(header);
  } catch (const Error& e) {
    EMBER_THROW("load: '", file.path, "' has a corrupt header: ", e.what());
  }
  EMBER_CHECK(root.is_object(), "load: '", file.path,
              "' has a corrupt header: expected a JSON object, got ", kind_of(root));
  return root;
}

// Where one tensor's bytes lie in the data section, and what they hold.
struct TensorEntry {
  std::string name;
  ScalarType dtype;
  Shape shape;
  uint64_t begin, end;
  size_t order;  // position in the header, to keep equal offsets (empty tensors) stable
};

// What load takes from the header besides the metadata it hands back.
struct HeaderContents {
  std::vector<TensorEntry> entries;  // in header order
  std::string stored_checksum;       // empty when the file carries none
};

bool as_uint64(const Json& v, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;  // negative, fractional or too large numbers are not
  *out = v.get<uint64_t>();
  return true;
}

// Copies __metadata__ into `metadata` (when wanted), all but the checksum, which it returns.
void read_metadata(const Json& v, const std::string& where, CheckpointMetadata* metadata,
                   std::string* stored_checksum) {
  EMBER_CHECK(v.is_object(), where, "__metadata__ must be an object, got ", kind_of(v));
  for (const auto& [k, mv] : v.items()) {
    EMBER_CHECK(mv.is_string(), where, "__metadata__ value of '", k, "' must be a string, got ",
                kind_of(mv));
    if (k == kChecksumKey) {
      *stored_checksum = mv.get<std::string>();
    } else if (metadata != nullptr) {
      (*metadata)[k] = mv.get<std::string>();
    }
  }
}

// A header's shape and its element count, which overflows 64 bits in some corrupt files.
struct ParsedShape {
  Shape dims;
  uint64_t numel = 1;
  bool overflow = false;
};

ParsedShape parse_shape(const Json& shape, const std::string& tw) {
  EMBER_CHECK(shape.is_array(), tw, "shape must be an array");
  ParsedShape parsed;
  bool has_zero = false;
  for (const Json& d : shape) {
    uint64_t s = 0;
    EMBER_CHECK(as_uint64(d, &s) && s <= static_cast<uint64_t>(INT64_MAX), tw,
                "shape entries must be non-negative integers");
    if (s == 0) has_zero = true;
    if (s != 0 && parsed.numel > UINT64_MAX / s) parsed.overflow = true;
    parsed.numel *= s;
    parsed.dims.push_back(static_cast<int64_t>(s));
  }
  if (has_zero) {  // an empty tensor, however large its other dims
    parsed.overflow = false;
    parsed.numel = 0;
  }
  return parsed;
}

// Validates one tensor's header entry: its dtype, shape, and offsets within `data_size` bytes
// spanning exactly the bytes the shape needs.
TensorEntry parse_entry(const std::string& name, const Json& v, size_t order, uint64_t data_size,
                        const std::string& where) {
  const std::string tw = where + "tensor '" + name + "': ";
  EMBER_CHECK(v.is_object(), tw, "expected an object, got ", kind_of(v));
  EMBER_CHECK(v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"), tw,
              "needs \"dtype\", \"shape\" and \"data_offsets\"");
  const Json& dt = v["dtype"];
  const Json& offsets = v["data_offsets"];
  TensorEntry e{name, kFloat32, {}, 0, 0, order};
  const std::string dtype_name = dt.is_string() ? dt.get<std::string>() : kind_of(dt);
  EMBER_CHECK(dt.is_string() && parse_dtype(dtype_name, &e.dtype), tw, "unknown dtype ", dtype_name,
              " (supported: F32 F64 F16 BF16 I32 I64 U8 BOOL)");
  const ParsedShape shape = parse_shape(v["shape"], tw);
  e.shape = shape.dims;
  EMBER_CHECK(offsets.is_array() && offsets.size() == 2 && as_uint64(offsets[0], &e.begin) &&
                  as_uint64(offsets[1], &e.end),
              tw, "data_offsets must be two non-negative integers");
  EMBER_CHECK(e.begin <= e.end && e.end <= data_size, tw, "data_offsets [", e.begin, ", ", e.end,
              "] are out of range for ", data_size, " bytes of data");
  const uint64_t esize = element_size(e.dtype);
  EMBER_CHECK(!shape.overflow && shape.numel <= UINT64_MAX / esize &&
                  shape.numel * esize == e.end - e.begin,
              tw, "shape ", shape_to_string(e.shape), " of ", dtype_name, " needs ",
              shape.overflow ? std::string("more than 2^64") : std::to_string(shape.numel * esize),
              " bytes but data_offsets [", e.begin, ", ", e.end, "] span ", e.end - e.begin);
  return e;
}

// Validates the header's entries in document order, filling `metadata` from __metadata__.
HeaderContents read_entries(const Json& root, const CheckpointFile& file,
                            CheckpointMetadata* metadata) {
  HeaderContents contents;
  const std::string where = "load: '" + file.path + "': ";
  for (const auto& [name, v] : root.items()) {
    if (name == "__metadata__") {
      read_metadata(v, where, metadata, &contents.stored_checksum);
    } else {
      contents.entries.push_back(
          parse_entry(name, v, contents.entries.size(), file.data_size(), where));
    }
  }
  return contents;
}

// Sorts the entries into data order and rejects tensors whose bytes overlap.
void sort_and_check_overlaps(std::vector<TensorEntry>& entries, const std::string& path) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.order < b.order;
  });
  const TensorEntry* prev = nullptr;
  for (const TensorEntry& e : entries) {
    if (e.begin == e.end) continue;  // empty tensors occupy no bytes
    EMBER_CHECK(prev == nullptr || e.begin >= prev->end, "load: '", path, "': tensors '", prev->name,
                "' [", prev->begin, ", ", prev->end, "] and '", e.name, "' [", e.begin, ", ", e.end,
                "] overlap");
    prev = &e;
  }
}

// Reads one tensor's bytes into a new CPU tensor.
Tensor read_tensor(const CheckpointFile& file, const TensorEntry& e) {
  Tensor t = empty(e.shape, e.dtype);
  const size_t bytes = static_cast<size_t>(e.end - e.begin);
  if (bytes > 0) {
    EMBER_CHECK(read_exact(file.fd, static_cast<char*>(t.data_ptr()), bytes,
                           file.data_start() + e.begin),
                "load: cannot read tensor '", e.name, "' from '", file.path, "': ", errno_text());
  }
  if (e.dtype == kBool) {
    // Any byte but 0/1 in a bool is undefined behaviour in C++; reject it as corruption.
    const unsigned char* b = static_cast<const unsigned char*>(t.data_ptr());
    for (size_t i = 0; i < bytes; ++i) {
      EMBER_CHECK(b[i] <= 1, "load: '", file.path, "': BOOL tensor '", e.name, "' holds byte ",
                  static_cast<int>(b[i]), " at element ", i);
    }
  }
  return t;
}

// Note [Checkpoint checksum]: the header as written before the checksum was added, then the data in
// file order (the whole data section, gaps included, as save leaves none).
void verify_checksum(const CheckpointFile& file, Json root, const std::string& stored_checksum) {
  root["__metadata__"].erase(kChecksumKey);
  uint32_t crc = crc32_of(root.dump());
  const uint64_t data_size = file.data_size();
  std::vector<char> buf(std::min<uint64_t>(data_size, 1u << 20));
  for (uint64_t at = 0; at < data_size;) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(buf.size(), data_size - at));
    EMBER_CHECK(read_exact(file.fd, buf.data(), chunk, file.data_start() + at),
                "load: cannot read '", file.path, "': ", errno_text());
    crc = crc32_update(crc, buf.data(), chunk);
    at += chunk;
  }
  EMBER_CHECK(hex32(crc) == stored_checksum, "load: '", file.path,
              "' is corrupt: checksum mismatch (", kChecksumKey, " ", stored_checksum,
              " in the header, ", hex32(crc),
              " computed) -- the file was modified or damaged after it was written");
}

}  // namespace

void save(const StateDict& sd, const std::string& path, const CheckpointMetadata& metadata) {
  // Validate and collect contiguous CPU copies before touching the file system.
  SavePlan plan = plan_save(sd, path, metadata);
  const std::string header = finish_header(plan, path);
  const TempFile tmp = create_temp_file(path);
  std::string what = write_and_close(tmp.fd, header, plan.data);
  if (what.empty() && ::rename(tmp.path.c_str(), path.c_str()) != 0) {
    what = "rename failed: " + errno_text();
  }
  if (!what.empty()) {
    ::unlink(tmp.path.c_str());
    EMBER_THROW("save: '", path, "': ", what);
  }
  fsync_directory(tmp.dir);
}

StateDict load(const std::string& path) { return load(path, nullptr); }

StateDict load(const std::string& path, CheckpointMetadata* metadata) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  EMBER_CHECK(fd >= 0, "load: cannot open '", path, "': ", errno_text());
  FdCloser closer{fd};
  const CheckpointFile file = read_layout(fd, path);
  Json root = read_header(file);
  HeaderContents contents = read_entries(root, file, metadata);
  sort_and_check_overlaps(contents.entries, path);
  StateDict sd;
  sd.reserve(contents.entries.size());
  for (const TensorEntry& e : contents.entries) sd.emplace_back(e.name, read_tensor(file, e));
  if (!contents.stored_checksum.empty()) {
    verify_checksum(file, std::move(root), contents.stored_checksum);
  }
  return sd;
}

}  // namespace ember::nn
