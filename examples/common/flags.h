// Command-line flags for every ember program (the example trainers and the benchmarks), on CLI11
// (Debian's libcli11-dev, header-only). One place says how a value is read and checked, and the
// flags several programs share (--threads, --batch, --seed, --device, --backend) are defined once,
// so they mean and check the same thing everywhere.
//
// Conventions (configure and parse):
//   --name=value and --name value both work; a flag given twice keeps its last value (scripts pass
//   defaults before "$@": scripts/train.sh --epochs=1 must win over its --epochs=5);
//   --help prints the generated usage with every default on stdout; the program then exits 0;
//   a bad flag is one line naming the flag and the value: "--batch: 'abc' is not an integer".
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "examples/common/whole_number.h"

namespace ember::flags {

// Gives `app` ember's conventions: the last of a repeated flag wins, --help shows every default.
void configure(CLI::App& app);

enum class Parsed { kRun, kHelp };

// Parses argv into the options added to `app`. --help prints the usage on stdout (unless
// !print_help: the other ranks of a job stay quiet) and returns kHelp. Anything wrong (unknown
// flag, malformed or out-of-range value, missing value) throws ember::Error with one line naming
// the flag and value, ending "(see --help)".
Parsed parse(CLI::App& app, int argc, char** argv, bool print_help = true);

// Validators over the whole text of a value (CLI11's own accept "12x" or clamp out-of-range
// integers silently). `what` completes "'V' is not ..." in the error and shows in --help.
constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();
CLI::Validator integer_in(int64_t lo, int64_t hi, const std::string& what);
// A whole integer for which `ok` holds ("-1 or at least 2", "6n+2").
CLI::Validator integer_where(std::function<bool(int64_t)> ok, const std::string& what);
CLI::Validator positive_integer();       // >= 1
CLI::Validator non_negative_integer();   // >= 0
CLI::Validator positive_or_minus_one();  // >= 1, or -1 for "no limit"
// A finite number in [lo, hi] (nan and inf are refused).
CLI::Validator number_in(double lo, double hi, const std::string& what);
CLI::Validator zero_or_one();
// One of `names` (CLI::IsMember), the error quoting the value and listing the names.
CLI::Validator one_of(const std::vector<std::string>& names);

// This process's rank as the launcher (Open MPI's mpirun) says, 0 outside mpirun: known before any
// process group exists, so every rank parses the command line and only rank 0 reports it.
int launcher_rank();

// Writes "[rank R] PROGRAM: MESSAGE" and a newline to stderr in one write(2). Under mpirun stderr is
// a pipe that mpirun forwards as it reads, so a line made of several writes (std::cerr writes each
// << on its own) can come out with mpirun's abort notice or another rank's line inside it.
void report_rank_error(int rank, const char* program, const std::string& message);

// The shared flags. Each returns its option, so a program can add to its help text.
CLI::Option* add_threads(CLI::App& app, int64_t* threads);   // intra-op threads per process, 1..1024
CLI::Option* add_batch(CLI::App& app, int64_t* batch, const std::string& help);  // positive
CLI::Option* add_seed(CLI::App& app, uint64_t* seed);        // non-negative
CLI::Option* add_device(CLI::App& app, std::string* device);  // cpu | cuda
// Process group: nccl | mpi; empty (the default) means nccl with --device=cuda, mpi on the CPU.
CLI::Option* add_backend(CLI::App& app, std::string* backend);
// The backend's default for a device, when --backend was not given.
std::string default_backend(const std::string& backend, const std::string& device);

}  // namespace ember::flags
