// The debugging programs' command line, on CLI11 like every ember program (examples/common/flags.h):
// --help, and --fixed where the program has a corrected loop. Only the launcher's rank 0 prints the
// usage or a bad flag; every rank returns the same answer, so all of them stop together.
#pragma once

#include <cstdio>
#include <exception>
#include <string>

#include "examples/common/flags.h"

namespace ember::examples {

enum class ProgramStart { kRun, kExit0, kExit1 };

// `fixed`: where --fixed lands (nullptr: the program has none).
inline ProgramStart parse_debugging_flags(int argc, char** argv, const std::string& program,
                                          const std::string& description, bool* fixed) {
  CLI::App app(description, program);
  flags::configure(app);
  if (fixed != nullptr) app.add_flag("--fixed", *fixed, "run the corrected training loop");
  const bool rank0 = flags::launcher_rank() == 0;
  try {
    return flags::parse(app, argc, argv, rank0) == flags::Parsed::kHelp ? ProgramStart::kExit0 : ProgramStart::kRun;
  } catch (const std::exception& e) {
    if (rank0) std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return ProgramStart::kExit1;
  }
}

}  // namespace ember::examples
