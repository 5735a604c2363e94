#include "tensor/error.h"

namespace ember::detail {

void throw_error(const char* /*file*/, int /*line*/, const std::string& msg) {
  // User errors carry only the message: it already names the op and its operands.
  throw Error(msg);
}

void throw_internal(const char* file, int line, const char* cond, const std::string& msg) {
  throw Error(str_cat("internal error at ", file, ":", line, ": ", cond, " failed",
                      msg.empty() ? "" : ": ", msg,
                      " (this is a bug in ember; please report it)"));
}

}  // namespace ember::detail
