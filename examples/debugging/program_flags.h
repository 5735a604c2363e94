// The debugging programs' command line, on CLI11 like every ember program (examples/common/flags.h):
// --help, and --fixed where the program has a corrected loop. Only the launcher's rank 0 prints the
// usage or a bad flag; every rank returns the same answer, so all of them stop together.
#pragma once

#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "examples/common/flags.h"

namespace ember::examples {

// std::nullopt: run the program; otherwise the exit code main() returns at once (0 after --help,
// 1 after a bad flag). `fixed`: where --fixed lands (nullptr: the program has none).
inline std::optional<int> exit_code_from_flags(int argc, char** argv, const std::string& program, bool* fixed) {
  flags::CommandLine cli("A DDP mistake and its error message: docs/debugging.md", program);
  if (fixed != nullptr) cli.add_flag("--fixed", *fixed, "run the corrected training loop");
  const bool rank0 = flags::launcher_rank() == 0;
  try {
    if (cli.parse(argc, argv, rank0) == flags::Parsed::kHelp) return 0;
    return std::nullopt;
  } catch (const std::exception& e) {
    if (rank0) std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return 1;
  }
}

}  // namespace ember::examples
