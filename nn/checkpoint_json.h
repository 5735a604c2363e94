// The small JSON reader/writer behind nn/checkpoint's safetensors headers: a full JSON parser
// (objects keep document order, numbers keep their literal text) that throws ember::Error with the
// byte offset on malformed input, and a string quoter for the writer. Kept private to nn/.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ember::nn::json {

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text;  // a string's decoded value, or a number's literal
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;  // in document order, keys unique

  // The member `key` of an object, or nullptr.
  const Value* find(const std::string& key) const;
  const char* kind_name() const;
};

// Parses one JSON document (surrounding whitespace allowed); errors say what and at which byte.
Value parse(const std::string& text);

// A non-negative integer literal (no sign, fraction or exponent) as uint64; false if it is not
// one or does not fit.
bool to_uint64(const Value& v, uint64_t* out);

// `s` as a JSON string literal, quotes included.
std::string quote(const std::string& s);

}  // namespace ember::nn::json
