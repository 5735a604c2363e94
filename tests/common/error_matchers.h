// The one error-message matcher every suite uses: EXPECT_EMBER_ERROR(stmt, "op", "[2, 3]", ...)
// passes only if stmt throws ember::Error whose message contains every given string; error_of(fn)
// is the message itself.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "tensor/error.h"

namespace ember::testing {

inline ::testing::AssertionResult throws_with(const std::function<void()>& fn,
                                              std::initializer_list<std::string> needles) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles) {
      if (msg.find(n) == std::string::npos) {
        return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << n << "\"";
      }
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-ember exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// The message of what `fn` throws, "" when it throws nothing: for HasSubstr matchers on one message.
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace ember::testing

#define EXPECT_EMBER_ERROR(stmt, ...) \
  EXPECT_TRUE(::ember::testing::throws_with([&] { (void)(stmt); }, {__VA_ARGS__}))
