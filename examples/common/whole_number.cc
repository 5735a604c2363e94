#include "examples/common/whole_number.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include <ember/tensor.h>

namespace ember::flags {

std::string whole_integer(const std::string& text, int64_t* value) {
  errno = 0;
  char* end = nullptr;
  const long long v = text.empty() ? 0 : std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0]))) {
    return "'" + text + "' is not an integer";
  }
  if (errno == ERANGE) return "'" + text + "' is out of range";
  *value = v;
  return "";
}

int64_t parse_int64(const std::string& text) {
  int64_t v = 0;
  const std::string why = whole_integer(text, &v);
  EMBER_CHECK(why.empty(), why);
  return v;
}

}  // namespace ember::flags
