#include "examples/common/flags.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <unistd.h>

#include "tensor/error.h"

namespace ember::flags {

void configure(CLI::App& app) {
  // Repeated flags: the last wins, as scripts append the user's "$@" after their own defaults.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  app.get_formatter()->column_width(34);
}

Parsed parse(CLI::App& app, int argc, char** argv, bool print_help) {
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

CLI::Validator integer_where(std::function<bool(int64_t)> ok, const std::string& what) {
  return CLI::Validator(
      [ok, what](std::string& text) -> std::string {
        int64_t v = 0;
        std::string why = whole_integer(text, &v);
        if (why.empty() && !ok(v)) why = "'" + text + "' is not " + what;
        return why;
      },
      what);
}

CLI::Validator integer_in(int64_t lo, int64_t hi, const std::string& what) {
  return integer_where([lo, hi](int64_t v) { return v >= lo && v <= hi; }, what);
}

CLI::Validator positive_integer() { return integer_in(1, kNoLimit, "positive"); }
CLI::Validator non_negative_integer() { return integer_in(0, kNoLimit, "non-negative"); }

CLI::Validator positive_or_minus_one() {
  return integer_where([](int64_t v) { return v >= 1 || v == -1; }, "positive or -1");
}

CLI::Validator number_in(double lo, double hi, const std::string& what) {
  return CLI::Validator(
      [lo, hi, what](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0])) ||
            !std::isfinite(v)) {
          return "'" + text + "' is not a finite number";
        }
        if (v < lo || v > hi) return "'" + text + "' is not " + what;
        return "";
      },
      what);
}

CLI::Validator zero_or_one() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text == "0" || text == "1" ? "" : "'" + text + "' is not 0 or 1";
      },
      "0 or 1");
}

// "'gpu' is not cpu or cuda": IsMember's check, with the value quoted as the other validators do.
CLI::Validator one_of(const std::vector<std::string>& names) {
  std::string what;
  for (size_t i = 0; i < names.size(); ++i) {
    what += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  const CLI::Validator member = CLI::IsMember(names);
  return CLI::Validator(
      [member, what](std::string& text) -> std::string {
        std::string copy = text;
        return member(copy).empty() ? "" : "'" + text + "' is not " + what;
      },
      what);
}

int launcher_rank() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  return rank ? std::atoi(rank) : 0;
}

void report_rank_error(int rank, const char* program, const std::string& message) {
  const std::string line =
      "[rank " + std::to_string(rank) + "] " + program + ": " + message + "\n";
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
}

CLI::Option* add_threads(CLI::App& app, int64_t* threads) {
  return app.add_option("--threads", *threads, "intra-op compute threads per process")
      ->check(integer_in(1, 1024, "between 1 and 1024"));
}

CLI::Option* add_batch(CLI::App& app, int64_t* batch, const std::string& help) {
  return app.add_option("--batch", *batch, help)->check(positive_integer());
}

CLI::Option* add_seed(CLI::App& app, uint64_t* seed) {
  return app.add_option("--seed", *seed, "seed for initialisation, data and shuffling")->check(non_negative_integer());
}

CLI::Option* add_device(CLI::App& app, std::string* device) {
  return app.add_option("--device", *device, "cpu or cuda (one GPU per process, chosen by its local rank)")
      ->check(one_of({"cpu", "cuda"}));
}

CLI::Option* add_backend(CLI::App& app, std::string* backend) {
  return app
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
