#include "nn/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "nn/checkpoint_json.h"
#include "tensor/factories.h"

namespace ember::nn {

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "nn/checkpoint writes tensors' bytes as they are in memory; safetensors requires little-endian"
#endif

namespace {

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

}  // namespace

void save(const StateDict& sd, const std::string& path, const CheckpointMetadata& metadata) {
  // Validate and collect contiguous CPU copies before touching the file system.
  std::vector<Tensor> data;
  std::set<std::string> names;
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      header += (first ? "" : ",") + json::quote(k) + ":" + json::quote(v);
      first = false;
    }
    header += "}";
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
    std::string shape;
    for (int64_t d = 0; d < c.dim(); ++d) shape += (d ? "," : "") + std::to_string(c.sizes()[d]);
    const uint64_t end = offset + c.nbytes();
    header += (header.size() > 1 ? "," : "") + json::quote(name) + ":{\"dtype\":\"" +
              safetensors_dtype(c.dtype()) + "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
    data.push_back(std::move(c));
  }
  header += "}";
  // Pad so the data starts 8-byte aligned (the spec's recommendation; readers mmap the file).
  header.append((8 - header.size() % 8) % 8, ' ');
  char len_bytes[8];
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<char>((n >> (8 * i)) & 0xFF);

  // Temporary file in the same directory, so the rename is atomic (same file system).
  const std::string dir = directory_of(path);
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  EMBER_CHECK(!base.empty(), "save: '", path, "' names a directory, not a file");
  std::string tmpl = dir + "/." + base + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  EMBER_CHECK(fd >= 0, "save: '", path, "': cannot create a temporary file in '", dir, "': ",
              errno_text());
  bool ok = true;
  std::string what;
  {
    FdCloser closer{fd};
    ok = ::fchmod(fd, 0644) == 0 && write_all(fd, len_bytes, 8) &&
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
    if (::close(fd) != 0 && ok) {
      ok = false;
      what = "close failed: " + errno_text();
    }
  }
  if (ok && ::rename(tmpl.c_str(), path.c_str()) != 0) {
    ok = false;
    what = "rename failed: " + errno_text();
  }
  if (!ok) {
    ::unlink(tmpl.c_str());
    EMBER_THROW("save: '", path, "': ", what);
  }
  // Persist the rename itself; best effort (some file systems refuse to open directories).
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

StateDict load(const std::string& path) { return load(path, nullptr); }

StateDict load(const std::string& path, CheckpointMetadata* metadata) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  EMBER_CHECK(fd >= 0, "load: cannot open '", path, "': ", errno_text());
  FdCloser closer{fd};
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
  std::string header(n, '\0');
  EMBER_CHECK(read_exact(fd, header.data(), n, 8), "load: cannot read the header of '", path, "': ",
              errno_text());
  json::Value root;
  try {
    root = json::parse(header);
  } catch (const Error& e) {
    EMBER_THROW("load: '", path, "' has a corrupt header: ", e.what());
  }
  EMBER_CHECK(root.kind == json::Value::Kind::Object, "load: '", path,
              "' has a corrupt header: expected a JSON object, got ", root.kind_name());

  const uint64_t data_size = file_size - 8 - n;
  struct Entry {
    std::string name;
    ScalarType dtype;
    Shape shape;
    uint64_t begin, end;
    size_t order;  // position in the header, to keep equal offsets (empty tensors) stable
  };
  std::vector<Entry> entries;
  for (const auto& [name, v] : root.object) {
    const std::string where = "load: '" + path + "': ";
    if (name == "__metadata__") {
      EMBER_CHECK(v.kind == json::Value::Kind::Object, where, "__metadata__ must be an object, got ",
                  v.kind_name());
      for (const auto& [k, mv] : v.object) {
        EMBER_CHECK(mv.kind == json::Value::Kind::String, where, "__metadata__ value of '", k,
                    "' must be a string, got ", mv.kind_name());
        if (metadata != nullptr) (*metadata)[k] = mv.text;
      }
      continue;
    }
    const std::string tw = where + "tensor '" + name + "': ";
    EMBER_CHECK(v.kind == json::Value::Kind::Object, tw, "expected an object, got ", v.kind_name());
    const json::Value* dt = v.find("dtype");
    const json::Value* shape = v.find("shape");
    const json::Value* offsets = v.find("data_offsets");
    EMBER_CHECK(dt && shape && offsets, tw, "needs \"dtype\", \"shape\" and \"data_offsets\"");
    Entry e{name, kFloat32, {}, 0, 0, entries.size()};
    EMBER_CHECK(dt->kind == json::Value::Kind::String && parse_dtype(dt->text, &e.dtype), tw,
                "unknown dtype ", dt->kind == json::Value::Kind::String ? dt->text : dt->kind_name(),
                " (supported: F32 F64 F16 BF16 I32 I64 U8 BOOL)");
    EMBER_CHECK(shape->kind == json::Value::Kind::Array, tw, "shape must be an array");
    uint64_t numel = 1;
    bool overflow = false, has_zero = false;
    for (const json::Value& d : shape->array) {
      uint64_t s = 0;
      EMBER_CHECK(json::to_uint64(d, &s) && s <= static_cast<uint64_t>(INT64_MAX), tw,
                  "shape entries must be non-negative integers");
      if (s == 0) has_zero = true;
      if (s != 0 && numel > UINT64_MAX / s) overflow = true;
      numel *= s;
      e.shape.push_back(static_cast<int64_t>(s));
    }
    if (has_zero) {  // an empty tensor, however large its other dims
      overflow = false;
      numel = 0;
    }
    EMBER_CHECK(offsets->kind == json::Value::Kind::Array && offsets->array.size() == 2 &&
                    json::to_uint64(offsets->array[0], &e.begin) &&
                    json::to_uint64(offsets->array[1], &e.end),
                tw, "data_offsets must be two non-negative integers");
    EMBER_CHECK(e.begin <= e.end && e.end <= data_size, tw, "data_offsets [", e.begin, ", ", e.end,
                "] are out of range for ", data_size, " bytes of data");
    const uint64_t esize = element_size(e.dtype);
    EMBER_CHECK(!overflow && numel <= UINT64_MAX / esize && numel * esize == e.end - e.begin, tw,
                "shape ", shape_to_string(e.shape), " of ", dt->text, " needs ",
                overflow ? std::string("more than 2^64") : std::to_string(numel * esize),
                " bytes but data_offsets [", e.begin, ", ", e.end, "] span ", e.end - e.begin);
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.order < b.order;
  });
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin == e.end) continue;  // empty tensors occupy no bytes
    EMBER_CHECK(prev == nullptr || e.begin >= prev->end, "load: '", path, "': tensors '", prev->name,
                "' [", prev->begin, ", ", prev->end, "] and '", e.name, "' [", e.begin, ", ", e.end,
                "] overlap");
    prev = &e;
  }
  StateDict sd;
  sd.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    const size_t bytes = static_cast<size_t>(e.end - e.begin);
    if (bytes > 0) {
      EMBER_CHECK(read_exact(fd, static_cast<char*>(t.data_ptr()), bytes, 8 + n + e.begin),
                  "load: cannot read tensor '", e.name, "' from '", path, "': ", errno_text());
    }
    if (e.dtype == kBool) {
      // Any byte but 0/1 in a bool is undefined behaviour in C++; reject it as corruption.
      const unsigned char* b = static_cast<const unsigned char*>(t.data_ptr());
      for (size_t i = 0; i < bytes; ++i) {
        EMBER_CHECK(b[i] <= 1, "load: '", path, "': BOOL tensor '", e.name, "' holds byte ",
                    static_cast<int>(b[i]), " at element ", i);
      }
    }
    sd.emplace_back(e.name, std::move(t));
  }
  return sd;
}

}  // namespace ember::nn
