// Whole-string integers for command-line values and environment variables: the one parser the
// flag validators (flags.h) and the trainers' fault-injection variables share. Kept apart from
// flags.h: code that reads a number needs no command line.
#pragma once

#include <cstdint>
#include <string>

namespace ember::flags {

// "" when `text` is a whole base-10 integer in int64's range (*value set), else why not:
// "'12x' is not an integer" ("", " 12" and "12x" are not), "'9e99' is out of range".
std::string whole_integer(const std::string& text, int64_t* value);

// The same, throwing ember::Error with that reason.
int64_t parse_int64(const std::string& text);

}  // namespace ember::flags
