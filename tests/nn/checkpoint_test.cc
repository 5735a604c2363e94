// nn::save / nn::load in the safetensors format: round trips of every dtype (0-dim and empty
// tensors too) and metadata, the atomic write, the exact byte layout of a tiny file, and a clear
// error (naming the file and the problem) for each kind of corrupt input.
#include "nn/checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <sstream>

#include <gtest/gtest.h>
#include <zlib.h>

#include "tensor/all.h"
#include "tensor/sparse.h"
#include "tests/common/error_matchers.h"

namespace ember::nn {
namespace {


// A fresh directory per test, so listing it shows exactly what save left behind.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/ckpt_" + info->name();
    ::mkdir(dir_.c_str(), 0755);
    for (const std::string& f : list_dir()) std::remove((dir_ + "/" + f).c_str());
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::vector<std::string> list_dir() const {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.push_back(e->d_name);
      }
      ::closedir(d);
    }
    return out;
  }
  std::string dir_;
};

std::string read_bytes(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

void write_bytes(const std::string& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return s;
}

// A file with `header` (unpadded) followed by `data`.
std::string file_with(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

std::string raw(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

void expect_same(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.dtype(), want.dtype());
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_EQ(raw(got), raw(want));  // bit-exact, including f16/bf16 and NaN payloads
}

TEST_F(CheckpointTest, RoundTripsEveryDtypeInOrder) {
  StateDict sd;
  sd.emplace_back("z.f32", from_vector<float>({1.5f, -2.25f, 3e-8f, 1e30f, -0.0f, 7.0f}, {2, 3}));
  sd.emplace_back("a.f64", from_vector<double>({3.141592653589793, -1e-300}, {2}));
  sd.emplace_back("m.f16", from_vector<float>({0.5f, -65504.0f, 6e-5f, 1.0f}, {2, 2}).to(kFloat16));
  sd.emplace_back("b.bf16", from_vector<float>({1.0f, -3.0e38f, 0.1f}, {3}).to(kBFloat16));
  sd.emplace_back("i32", from_vector<int32_t>({INT32_MIN, 0, INT32_MAX}, {3, 1}));
  sd.emplace_back("i64", from_vector<int64_t>({INT64_MIN, 42, INT64_MAX}, {1, 3}));
  sd.emplace_back("u8", from_vector<uint8_t>({0, 128, 255}, {3}));
  sd.emplace_back("bool", from_vector<bool>({true, false, true, true}, {4}));
  sd.emplace_back("scalar", scalar_tensor(2.5, kFloat64));
  sd.emplace_back("empty", empty({0}, kFloat32));
  sd.emplace_back("empty2d", empty({2, 0, 3}, kInt64));
  sd.emplace_back("last", from_vector<float>({9.0f}, {1}));
  save(sd, path("all.safetensors"));
  const StateDict got = load(path("all.safetensors"));
  ASSERT_EQ(got.size(), sd.size());
  for (size_t i = 0; i < sd.size(); ++i) {
    SCOPED_TRACE(sd[i].first);
    EXPECT_EQ(got[i].first, sd[i].first);  // saved order, not alphabetical
    expect_same(got[i].second, sd[i].second);
  }
  EXPECT_EQ(got[8].second.dim(), 0);
}

TEST_F(CheckpointTest, NonContiguousIsSavedContiguous) {
  Tensor t = arange(6.0, kFloat32).view({2, 3}).t();  // [3, 2], strides [1, 3]
  ASSERT_FALSE(t.is_contiguous());
  save({{"t", t}, {"slice", arange(10.0, kInt64).slice(0, 1, 9, 3)}}, path("nc.safetensors"));
  const StateDict got = load(path("nc.safetensors"));
  expect_same(got[0].second, t.contiguous());
  EXPECT_EQ(got[0].second.sizes(), (Shape{3, 2}));
  expect_same(got[1].second, from_vector<int64_t>({1, 4, 7}));
}

TEST_F(CheckpointTest, MetadataRoundTrips) {
  const CheckpointMetadata meta = {{"format", "pt"}, {"epoch", "3"},
                                   {"odd \"key\"", "back\\slash\nnew line \t tab \x01 ünï"}};
  save({{"w", ones({2})}}, path("meta.safetensors"), meta);
  CheckpointMetadata got;
  const StateDict sd = load(path("meta.safetensors"), &got);
  EXPECT_EQ(got, meta);
  EXPECT_EQ(sd.size(), 1u);
  CheckpointMetadata none;
  save({{"w", ones({2})}}, path("nometa.safetensors"));
  load(path("nometa.safetensors"), &none);
  EXPECT_TRUE(none.empty());
}

TEST_F(CheckpointTest, AtomicWriteLeavesOnlyTheTarget) {
  save({{"w", ones({4})}}, path("model.safetensors"));
  EXPECT_EQ(list_dir(), (std::vector<std::string>{"model.safetensors"}));
  // Overwriting replaces the file whole.
  save({{"v", zeros({2}, kInt32)}}, path("model.safetensors"));
  EXPECT_EQ(list_dir(), (std::vector<std::string>{"model.safetensors"}));
  const StateDict got = load(path("model.safetensors"));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, "v");
  struct stat st;
  ASSERT_EQ(::stat(path("model.safetensors").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(CheckpointTest, BadSavesThrowAndLeaveNothing) {
  EXPECT_EMBER_ERROR(save({{"w", ones({1})}}, path("no/such/dir/x.safetensors")), "save",
                     "no/such/dir/x.safetensors", "temporary file");
  EXPECT_EMBER_ERROR(save({{"w", ones({1})}, {"w", ones({1})}}, path("dup.safetensors")),
                     "duplicate tensor name 'w'");
  EXPECT_EMBER_ERROR(save({{"", ones({1})}}, path("e.safetensors")), "invalid tensor name");
  EXPECT_EMBER_ERROR(save({{"__metadata__", ones({1})}}, path("e.safetensors")), "invalid tensor name");
  EXPECT_EMBER_ERROR(save({{"u", Tensor()}}, path("e.safetensors")), "'u' is undefined");
  const Tensor sparse = sparse_coo_tensor(from_vector<int64_t>({0}, {1, 1}), ones({1}), {2});
  EXPECT_EMBER_ERROR(save({{"s", sparse}}, path("e.safetensors")), "'s' is sparse");
  EXPECT_TRUE(list_dir().empty());
}

TEST_F(CheckpointTest, ExactByteLayoutOfATinyFile) {
  save({{"a", from_vector<float>({1.0f, 2.0f})}, {"b", from_vector<uint8_t>({7})}},
       path("tiny.safetensors"), {{"k", "v"}});
  const float data[2] = {1.0f, 2.0f};
  const std::string tensors =
      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[8,9]}}";
  // Note [Checkpoint checksum]: CRC-32 of the header without it, then of the data.
  const std::string unsummed = "{\"__metadata__\":{\"k\":\"v\"}," + tensors;
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(unsummed.data()), unsummed.size());
  crc = crc32(crc, reinterpret_cast<const Bytef*>(data), 8);
  crc = crc32(crc, reinterpret_cast<const Bytef*>("\x07"), 1);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08lx", crc);
  std::string header = "{\"__metadata__\":{\"k\":\"v\",\"ember.crc32\":\"" + std::string(hex) + "\"}," + tensors;
  header.append((8 - header.size() % 8) % 8, ' ');  // padded with spaces to a multiple of 8
  ASSERT_EQ(header.size() % 8, 0u);
  const std::string want = le64(header.size()) + header +
                           std::string(reinterpret_cast<const char*>(data), 8) + "\x07";
  EXPECT_EQ(read_bytes(path("tiny.safetensors")), want);
  // Little-endian by definition: the length's low byte comes first, 1.0f is 00 00 80 3f.
  const std::string bytes = read_bytes(path("tiny.safetensors"));
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), header.size());
  ASSERT_EQ(bytes.size(), 8 + header.size() + 9);
  EXPECT_EQ(bytes.substr(8 + header.size(), 4), std::string("\x00\x00\x80\x3f", 4));
}

TEST_F(CheckpointTest, ReadsFilesWrittenByOthers) {
  // Keys in another order than the data, whitespace, escapes and extra fields: what a different
  // writer may produce. Order on load follows the data offsets.
  const std::string header =
      " { \"second\" : {\"data_offsets\":[4,8],\"shape\":[],\"dtype\":\"I32\"},\n"
      "   \"fir\\u0073t\": {\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":[null,true]},"
      "   \"__metadata__\": {} }";
  const int32_t v[2] = {5, -6};
  write_bytes(path("other.safetensors"), file_with(header, std::string(reinterpret_cast<const char*>(v), 8)));
  const StateDict sd = load(path("other.safetensors"));
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_EQ(sd[0].first, "first");
  EXPECT_EQ(sd[0].second.item<int64_t>(), 5);
  EXPECT_EQ(sd[1].first, "second");
  EXPECT_EQ(sd[1].second.dim(), 0);
  EXPECT_EQ(sd[1].second.item<int64_t>(), -6);
}

// ---- corrupt input: each case names the file and the problem --------------------------------------

TEST_F(CheckpointTest, MissingFile) {
  EXPECT_EMBER_ERROR(load(path("absent.safetensors")), "cannot open", "absent.safetensors");
}

TEST_F(CheckpointTest, TooShortForTheLength) {
  write_bytes(path("short.safetensors"), "abc");
  EXPECT_EMBER_ERROR(load(path("short.safetensors")), "short.safetensors", "truncated", "3 bytes");
}

TEST_F(CheckpointTest, HeaderLengthPastEndOfFile) {
  write_bytes(path("len.safetensors"), le64(1000) + "{}");
  EXPECT_EMBER_ERROR(load(path("len.safetensors")), "len.safetensors", "header length 1000",
                     "runs past the end of the file (10 bytes)");
  write_bytes(path("huge.safetensors"), le64(~0ull) + "{}");
  EXPECT_EMBER_ERROR(load(path("huge.safetensors")), "huge.safetensors", "runs past the end");
}

TEST_F(CheckpointTest, CorruptJson) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"a\":{\"dtype\":\"F32\",", "unexpected end of input"},
      {"{\"a\" 1}", "expected ':'"},
      {"{\"a\":tru}", "invalid literal"},
      {"{\"a\":\"\\q\"}", "forbidden character after backslash"},
      {"{\"a\":\"\\ud800\"}", "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"},
      {"{} x", "expected end of input"},
      {std::string("{\"a\":\"x\0y\"}", 11), "control character U+0000"},
  };
  for (const auto& [header, needle] : cases) {
    SCOPED_TRACE(header);
    write_bytes(path("json.safetensors"), file_with(header));
    EXPECT_EMBER_ERROR(load(path("json.safetensors")), "json.safetensors", "corrupt header",
                       "invalid JSON at byte", needle);
  }
  write_bytes(path("dup.safetensors"), file_with("{\"m\":{\"a\":1,\"a\":2}}"));
  EXPECT_EMBER_ERROR(load(path("dup.safetensors")), "corrupt header", "duplicate key \"a\"");
  write_bytes(path("arr.safetensors"), file_with("[1, 2]"));
  EXPECT_EMBER_ERROR(load(path("arr.safetensors")), "expected a JSON object, got an array");
  write_bytes(path("deep.safetensors"), file_with(std::string(10000, '[') + std::string(10000, ']')));
  EXPECT_EMBER_ERROR(load(path("deep.safetensors")), "expected a JSON object, got an array");
}

TEST_F(CheckpointTest, BadTensorEntries) {
  const std::string data(16, '\0');
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"{\"t\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}", {"'t'", "unknown dtype F8"}},
      {"{\"t\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]}}", {"unknown dtype a number"}},
      {"{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", {"'t'", "needs \"dtype\""}},
      {"{\"t\":[1]}", {"'t'", "expected an object, got an array"}},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", {"shape entries"}},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", {"shape entries"}},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", {"two non-negative integers"}},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
       {"'t'", "shape [3] of F32 needs 12 bytes", "[0, 8] span 8"}},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}",
       {"more than 2^64"}},
      {"{\"t\":{\"dtype\":\"F64\",\"shape\":[4],\"data_offsets\":[0,32]}}",
       {"'t'", "[0, 32] are out of range for 16 bytes"}},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", {"out of range"}},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999999]}}",
       {"two non-negative integers"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
       {"tensors 'a' [0, 8] and 'b' [4, 12] overlap"}},
      {"{\"__metadata__\":{\"k\":1}}", {"__metadata__ value of 'k' must be a string"}},
      {"{\"__metadata__\":[]}", {"__metadata__ must be an object"}},
      {"{\"t\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[14,16]}}", {"BOOL tensor 't'", "byte 2"}},
  };
  std::string bool_data = data;
  bool_data[15] = 2;
  for (const auto& [header, needles] : cases) {
    SCOPED_TRACE(header);
    write_bytes(path("bad.safetensors"), file_with(header, bool_data));
    try {
      load(path("bad.safetensors"));
      ADD_FAILURE() << "did not throw";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << msg;
      for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg << " lacks " << n;
    }
  }
}

TEST_F(CheckpointTest, TruncatedData) {
  save({{"w", arange(16.0, kFloat32)}}, path("cut.safetensors"));
  const std::string full = read_bytes(path("cut.safetensors"));
  write_bytes(path("cut.safetensors"), full.substr(0, full.size() - 4));
  EXPECT_EMBER_ERROR(load(path("cut.safetensors")), "cut.safetensors", "'w'", "[0, 64]",
                     "out of range for 60 bytes");
  // Cut inside the header.
  write_bytes(path("cut.safetensors"), full.substr(0, 20));
  EXPECT_EMBER_ERROR(load(path("cut.safetensors")), "cut.safetensors", "runs past the end");
}

TEST_F(CheckpointTest, ChecksumCatchesAFlippedBitAnywhere) {
  save({{"w", arange(16.0, kFloat32)}, {"b", from_vector<int64_t>({3, 4})}}, path("sum.safetensors"),
       {{"epoch", "2"}});
  const std::string good = read_bytes(path("sum.safetensors"));
  const uint64_t header_size = static_cast<unsigned char>(good[0]) | (static_cast<unsigned char>(good[1]) << 8);
  // A weight's byte, the epoch in the metadata, a dtype that keeps the sizes consistent.
  std::string weight = good;
  weight[8 + header_size + 5] ^= 0x10;
  std::string epoch = good;
  epoch.replace(epoch.find("\"epoch\":\"2\""), 11, "\"epoch\":\"3\"");
  std::string dtype = good;
  dtype.replace(dtype.find("\"F32\""), 5, "\"I32\"");
  for (const std::string* bad : {&weight, &epoch, &dtype}) {
    write_bytes(path("bad.safetensors"), *bad);
    EXPECT_EMBER_ERROR(load(path("bad.safetensors")), "bad.safetensors", "is corrupt: checksum mismatch");
  }
  // The checksum key is not user metadata and cannot be overridden.
  CheckpointMetadata meta;
  load(path("sum.safetensors"), &meta);
  EXPECT_EQ(meta, (CheckpointMetadata{{"epoch", "2"}}));
  EXPECT_EMBER_ERROR(save({{"w", ones({1})}}, path("r.safetensors"), {{"ember.crc32", "0"}}), "reserved");
}

TEST_F(CheckpointTest, EmptyTensorsMayShareOffsets) {
  save({{"e1", empty({0})}, {"x", ones({2})}, {"e2", empty({0, 4})}, {"e3", empty({0}, kBool)}},
       path("empties.safetensors"));
  const StateDict sd = load(path("empties.safetensors"));
  ASSERT_EQ(sd.size(), 4u);
  EXPECT_EQ(sd[0].first, "e1");
  EXPECT_EQ(sd[1].first, "x");
  EXPECT_EQ(sd[2].first, "e2");
  EXPECT_EQ(sd[2].second.sizes(), (Shape{0, 4}));
  EXPECT_EQ(sd[3].second.dtype(), kBool);
}

}  // namespace
}  // namespace ember::nn
