// Command-line flags for every ember program (the example trainers and the benchmarks), on CLI11
// (Debian's libcli11-dev, header-only). One place says how a value is read and checked, and the
// flags several programs share (--threads, --batch, --seed, --device, --backend) are defined once,
// so they mean and check the same thing everywhere.
//
// Conventions (CommandLine and parse):
//   --name=value and --name value both work; a flag given twice keeps its last value (scripts pass
//   defaults before "$@": scripts/train.sh --epochs=1 must win over its --epochs=5);
//   --help prints the generated usage with every default on stdout; the program then exits 0;
//   a bad flag is one line naming the flag and the value: "--batch: 'abc' is not an integer".
//
// Note [CLI11 compiles in one translation unit]
// CLI11 is header-only, and its headers add seconds to the compilation of every translation unit
// that includes them (scripts/top_actions.py on a build's --profile lists them), in each
// configuration the tests build (plain, ASan, TSan, the CUDA builds). This header therefore
// names no CLI11 type: CommandLine wraps a CLI::App that only flags.cc sees, and a Check is a plain
// function that flags.cc turns into a CLI11 validator. No other file includes <CLI/CLI.hpp>:
// `grep -rlE '^#include <CLI/' --include='*.cc' --include='*.h' .` names flags.cc alone.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "examples/common/whole_number.h"

namespace ember::flags {

// A check on the whole text of a flag's value (CLI11's own accept "12x" or clamp out-of-range
// integers silently). `test` returns "" when the text is fine, else why not ("'0' is not
// positive"); `what` says what it wants and shows in --help after the type ("INT:positive").
struct Check {
  std::function<std::string(const std::string& text)> test;
  std::string what;
};

// One flag added to a CommandLine, for adding checks to it. Owned by its CommandLine.
class Option {
 public:
  struct Impl;  // the CLI11 option (flags.cc)
  explicit Option(std::unique_ptr<Impl> impl);
  ~Option();

  Option* check(const Check& check);
  Option* delimiter(char separator);  // a list flag's items may be joined by it: --sizes=784,10,10
  size_t count() const;               // how often the command line gave it

 private:
  std::unique_ptr<Impl> impl_;
};

enum class Parsed { kRun, kHelp };

// A program's command line: its description, its flags, and parse(). The last of a repeated flag
// wins and --help shows every flag's default.
class CommandLine {
 public:
  CommandLine(const std::string& description, const std::string& program);
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // --name VALUE, read into `value` (whose value before parse() is the default --help shows).
  Option* add_option(const std::string& name, int64_t& value, const std::string& help = "");
  Option* add_option(const std::string& name, uint64_t& value, const std::string& help = "");
  Option* add_option(const std::string& name, double& value, const std::string& help = "");
  Option* add_option(const std::string& name, bool& value, const std::string& help = "");  // 0/1, true/false
  Option* add_option(const std::string& name, std::string& value, const std::string& help = "");
  Option* add_option(const std::string& name, std::vector<int64_t>& value, const std::string& help = "");
  // --name alone sets `value` to true.
  Option* add_flag(const std::string& name, bool& value, const std::string& help = "");

  // Arguments no flag claims are kept for remaining() (e.g. Google Benchmark's) instead of failing.
  void allow_extras();
  std::vector<std::string> remaining() const;
  void footer(const std::string& text);  // the last paragraph of --help
  size_t count(const std::string& name) const;  // how often the command line gave --name
  std::string help() const;

  // Parses argv. --help prints the usage on stdout (unless !print_help: the other ranks of a job
  // stay quiet) and returns kHelp. Anything wrong (unknown flag, malformed or out-of-range value,
  // missing value) throws ember::Error with one line naming the flag and value, ending "(see --help)".
  Parsed parse(int argc, char** argv, bool print_help = true);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Checks. `what` completes "'V' is not ..." in the error and shows in --help.
constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();
Check integer_in(int64_t lo, int64_t hi, const std::string& what);
// A whole integer for which `ok` holds ("-1 or at least 2", "6n+2").
Check integer_where(std::function<bool(int64_t)> ok, const std::string& what);
Check positive_integer();       // >= 1
Check non_negative_integer();   // >= 0
Check positive_or_minus_one();  // >= 1, or -1 for "no limit"
// A finite number in [lo, hi] (nan and inf are refused).
Check number_in(double lo, double hi, const std::string& what);
Check zero_or_one();
// One of `names`, the error quoting the value and listing the names.
Check one_of(const std::vector<std::string>& names);

// This process's rank as the launcher (Open MPI's mpirun) says, 0 outside mpirun: known before any
// process group exists, so every rank parses the command line and only rank 0 reports it.
int launcher_rank();
// The number of processes mpirun started (Open MPI's OMPI_COMM_WORLD_SIZE), 1 outside mpirun.
int launcher_world_size();

// Writes "[rank R] PROGRAM: MESSAGE" and a newline to stderr in one write(2). Under mpirun stderr is
// a pipe that mpirun forwards as it reads, so a line made of several writes (std::cerr writes each
// << on its own) can come out with mpirun's abort notice or another rank's line inside it.
void report_rank_error(int rank, const char* program, const std::string& message);

// The shared flags. Each returns its option, so a program can add to its checks or count it.
Option* add_threads(CommandLine& cli, int64_t* threads);   // intra-op threads per process, 1..1024
Option* add_batch(CommandLine& cli, int64_t* batch, const std::string& help);  // positive
Option* add_seed(CommandLine& cli, uint64_t* seed);        // non-negative
Option* add_device(CommandLine& cli, std::string* device);  // cpu | cuda
// Process group: nccl | mpi; empty (the default) means nccl with --device=cuda, mpi on the CPU.
Option* add_backend(CommandLine& cli, std::string* backend);
// The backend's default for a device, when --backend was not given.
std::string default_backend(const std::string& backend, const std::string& device);

}  // namespace ember::flags
