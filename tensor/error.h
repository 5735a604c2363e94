// ember::Error and the checking macros every layer uses.
// EMBER_CHECK is for user errors (bad shapes, dtypes, devices): the message names the op and operands.
// EMBER_INTERNAL_ASSERT is for broken invariants inside ember (a bug, not bad input).
#pragma once

#include <exception>
#include <sstream>
#include <string>
#include <utility>

namespace ember {

// The exception every ember error is (a std::exception; what() is the message). User errors name
// the op and its operands; failed EMBER_INTERNAL_ASSERTs start "internal error at <file>:<line>".
class Error : public std::exception {
 public:
  explicit Error(std::string msg) : msg_(std::move(msg)) {}
  const char* what() const noexcept override { return msg_.c_str(); }
  const std::string& message() const { return msg_; }

 private:
  std::string msg_;
};

namespace detail {
// Internal linkage: each file gets its own copies, so no AVX-512 build of a message formatter is
// shared with baseline code (Note [CPU capability namespaces]). Error paths only; size is no issue.
namespace {
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace

[[noreturn]] void throw_error(const char* file, int line, const std::string& msg);
[[noreturn]] void throw_internal(const char* file, int line, const char* cond, const std::string& msg);
}  // namespace detail

}  // namespace ember

#define EMBER_CHECK(cond, ...)                                                   \
  do {                                                                           \
    if (!(cond)) {                                                               \
      ::ember::detail::throw_error(__FILE__, __LINE__,                           \
                                   ::ember::detail::str_cat(__VA_ARGS__));       \
    }                                                                            \
  } while (0)

#define EMBER_THROW(...) \
  ::ember::detail::throw_error(__FILE__, __LINE__, ::ember::detail::str_cat(__VA_ARGS__))

#define EMBER_INTERNAL_ASSERT(cond, ...)                                         \
  do {                                                                           \
    if (!(cond)) {                                                               \
      ::ember::detail::throw_internal(__FILE__, __LINE__, #cond,                 \
                                      ::ember::detail::str_cat("", ##__VA_ARGS__)); \
    }                                                                            \
  } while (0)
