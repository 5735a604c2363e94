// The one translation unit that compiles CLI11 (Note [CLI11 compiles in one translation unit]).
#include "examples/common/flags.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <deque>

#include <unistd.h>

#include <ember/tensor.h>

namespace ember::flags {

struct Option::Impl {
  CLI::Option* option;
};

Option::Option(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Option::~Option() = default;

Option* Option::check(const Check& check) {
  const auto test = check.test;
  impl_->option->check(CLI::Validator([test](std::string& text) { return test(text); }, check.what));
  return this;
}

Option* Option::delimiter(char separator) {
  impl_->option->delimiter(separator);
  return this;
}

size_t Option::count() const { return impl_->option->count(); }

struct CommandLine::Impl {
  CLI::App app;
  std::deque<Option> options;  // stable addresses: add_option hands out pointers

  Impl(const std::string& description, const std::string& program) : app(description, program) {
    // Repeated flags: the last wins, as scripts append the user's "$@" after their own defaults.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
    app.get_formatter()->column_width(34);
  }
  Option* keep(CLI::Option* option) {
    return &options.emplace_back(std::make_unique<Option::Impl>(Option::Impl{option}));
  }
};

CommandLine::CommandLine(const std::string& description, const std::string& program)
    : impl_(std::make_unique<Impl>(description, program)) {}
CommandLine::~CommandLine() = default;

// One definition per value type: CLI11 deduces the type's name in --help (INT, UINT, FLOAT, TEXT).
#define EMBER_FLAGS_ADD_OPTION(T)                                                                \
  Option* CommandLine::add_option(const std::string& name, T& value, const std::string& help) { \
    return impl_->keep(impl_->app.add_option(name, value, help));                                \
  }
EMBER_FLAGS_ADD_OPTION(int64_t)
EMBER_FLAGS_ADD_OPTION(uint64_t)
EMBER_FLAGS_ADD_OPTION(double)
EMBER_FLAGS_ADD_OPTION(bool)
EMBER_FLAGS_ADD_OPTION(std::string)
EMBER_FLAGS_ADD_OPTION(std::vector<int64_t>)
#undef EMBER_FLAGS_ADD_OPTION

Option* CommandLine::add_flag(const std::string& name, bool& value, const std::string& help) {
  return impl_->keep(impl_->app.add_flag(name, value, help));
}

void CommandLine::allow_extras() { impl_->app.allow_extras(); }
std::vector<std::string> CommandLine::remaining() const { return impl_->app.remaining(); }
void CommandLine::footer(const std::string& text) { impl_->app.footer(text); }
size_t CommandLine::count(const std::string& name) const { return impl_->app.count(name); }
std::string CommandLine::help() const { return impl_->app.help(); }

Parsed CommandLine::parse(int argc, char** argv, bool print_help) {
  CLI::App& app = impl_->app;
  try {
    app.parse(argc, argv);
    return Parsed::kRun;
  } catch (const CLI::CallForHelp& e) {
    if (print_help) app.exit(e);  // the usage on stdout
    return Parsed::kHelp;
  } catch (const CLI::CallForAllHelp& e) {
    if (print_help) app.exit(e);
    return Parsed::kHelp;
  } catch (const CLI::ExtrasError& e) {
    // CLI11 says "The following argument was not expected: X"; the arguments are what matter.
    const std::string what = e.what();
    const size_t colon = what.find(": ");
    EMBER_THROW("unknown flag or argument: ", colon == std::string::npos ? what : what.substr(colon + 2),
                " (see --help)");
  } catch (const CLI::ParseError& e) {
    // Validation and conversion errors already read "--flag: 'value' is not ...".
    EMBER_THROW(e.what(), " (see --help)");
  }
}

Check integer_where(std::function<bool(int64_t)> ok, const std::string& what) {
  return Check{
      [ok, what](const std::string& text) -> std::string {
        int64_t v = 0;
        std::string why = whole_integer(text, &v);
        if (why.empty() && !ok(v)) why = "'" + text + "' is not " + what;
        return why;
      },
      what};
}

Check integer_in(int64_t lo, int64_t hi, const std::string& what) {
  return integer_where([lo, hi](int64_t v) { return v >= lo && v <= hi; }, what);
}

Check positive_integer() { return integer_in(1, kNoLimit, "positive"); }
Check non_negative_integer() { return integer_in(0, kNoLimit, "non-negative"); }

Check positive_or_minus_one() {
  return integer_where([](int64_t v) { return v >= 1 || v == -1; }, "positive or -1");
}

Check number_in(double lo, double hi, const std::string& what) {
  return Check{
      [lo, hi, what](const std::string& text) -> std::string {
        char* end = nullptr;
        const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0])) ||
            !std::isfinite(v)) {
          return "'" + text + "' is not a finite number";
        }
        if (v < lo || v > hi) return "'" + text + "' is not " + what;
        return "";
      },
      what};
}

Check zero_or_one() {
  return Check{
      [](const std::string& text) -> std::string {
        return text == "0" || text == "1" ? "" : "'" + text + "' is not 0 or 1";
      },
      "0 or 1"};
}

// "'gpu' is not cpu or cuda": the value quoted as the other checks do.
Check one_of(const std::vector<std::string>& names) {
  std::string what;
  for (size_t i = 0; i < names.size(); ++i) {
    what += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return Check{
      [names, what](const std::string& text) -> std::string {
        const bool known = std::find(names.begin(), names.end(), text) != names.end();
        return known ? "" : "'" + text + "' is not " + what;
      },
      what};
}

int launcher_rank() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  return rank ? std::atoi(rank) : 0;
}

int launcher_world_size() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size ? std::max(1, std::atoi(size)) : 1;
}

void report_rank_error(int rank, const char* program, const std::string& message) {
  const std::string line =
      "[rank " + std::to_string(rank) + "] " + program + ": " + message + "\n";
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
}

Option* add_threads(CommandLine& cli, int64_t* threads) {
  return cli.add_option("--threads", *threads, "intra-op compute threads per process")
      ->check(integer_in(1, 1024, "between 1 and 1024"));
}

Option* add_batch(CommandLine& cli, int64_t* batch, const std::string& help) {
  return cli.add_option("--batch", *batch, help)->check(positive_integer());
}

Option* add_seed(CommandLine& cli, uint64_t* seed) {
  return cli.add_option("--seed", *seed, "seed for initialisation, data and shuffling")->check(non_negative_integer());
}

Option* add_device(CommandLine& cli, std::string* device) {
  return cli.add_option("--device", *device, "cpu or cuda (one GPU per process, chosen by its local rank)")
      ->check(one_of({"cpu", "cuda"}));
}

Option* add_backend(CommandLine& cli, std::string* backend) {
  return cli
      .add_option("--backend", *backend,
                  "process group: nccl (GPU tensors) or mpi (any; stages GPU tensors through host memory, so "
                  "ranks can share a GPU); default nccl with --device=cuda, else mpi")
      ->check(one_of({"nccl", "mpi"}));
}

std::string default_backend(const std::string& backend, const std::string& device) {
  if (!backend.empty()) return backend;
  return device == "cuda" ? "nccl" : "mpi";
}

}  // namespace ember::flags
