#include "bench/ratio_report.h"

#include "examples/common/flags.h"
#include "tensor/cpu/capability.h"
#include "tensor/parallel.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ember::bench {
namespace {

struct Row {
  double ember = 0, baseline = 0;
  std::string baseline_name;
};

// Prints as the console reporter does, and remembers one rate per (op, size, implementation):
// the median aggregate when repetitions ran, else the single run.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  explicit RatioReporter(std::string counter) : counter_(std::move(counter)) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      const bool single = r.run_type == Run::RT_Iteration && r.repetitions <= 1;
      if (!median && !single) continue;
      auto it = r.counters.find(counter_);
      if (it == r.counters.end()) continue;
      const std::string& fn = r.run_name.function_name;  // "<op>/<impl>"
      const size_t slash = fn.rfind('/');
      if (slash == std::string::npos) continue;
      const std::string op = fn.substr(0, slash), impl = fn.substr(slash + 1);
      auto key = std::make_pair(op, r.run_name.args);
      Row& row = rows_[key];
      if (impl == "ember") {
        row.ember = it->second.value;
      } else {
        row.baseline = it->second.value;
        row.baseline_name = impl;
      }
    }
  }

  // Rows by op name, then by size: repetitions run in random order (run_with_ratio_table), so
  // results arrive shuffled. Of two sizes, the shorter string is the smaller number.
  void print_table() const {
    std::vector<std::pair<std::string, std::string>> keys;
    for (const auto& [key, row] : rows_) keys.push_back(key);
    const auto rank = [](const std::pair<std::string, std::string>& k) {
      return std::make_tuple(k.first, k.second.size(), k.second);
    };
    std::sort(keys.begin(), keys.end(),
              [&](const auto& x, const auto& y) { return rank(x) < rank(y); });
    std::printf("\n%-22s %-10s %12s %12s %-8s %7s\n", "op", "size", "ember", "baseline", "(which)",
                "ratio");
    for (const auto& key : keys) {
      const Row& row = rows_.at(key);
      const double ratio = row.baseline > 0 ? row.ember / row.baseline : 0.0;
      std::printf("%-22s %-10s %12.2f %12.2f %-8s %7.3f\n", key.first.c_str(), key.second.c_str(),
                  row.ember, row.baseline, row.baseline_name.c_str(), ratio);
    }
    std::printf("(rates in %s/s, medians over repetitions; ratio = ember / baseline)\n",
                counter_.c_str());
  }

 private:
  std::string counter_;
  std::map<std::pair<std::string, std::string>, Row> rows_;
};

}  // namespace

void set_rate(benchmark::State& state, const char* counter, double units_per_iteration) {
  state.counters[counter] = benchmark::Counter(
      units_per_iteration * static_cast<double>(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
}

int run_with_ratio_table(int argc, char** argv, const char* rate_counter) {
  const char* slash = std::strrchr(argv[0], '/');
  const std::string program = slash ? slash + 1 : argv[0];
  // ember's own flags (--threads, as every program has it); the rest is Google Benchmark's.
  int64_t threads = 1;
  std::vector<std::string> passed;
  try {
    flags::CommandLine cli("A micro-benchmark of ember against its baseline, ending with a ratio table.", program);
    cli.allow_extras();
    flags::Option* threads_flag = flags::add_threads(cli, &threads);
    cli.footer("Google Benchmark's flags pass through, e.g. --benchmark_filter=REGEX, "
               "--benchmark_repetitions=N (5 unless given), "
               "--benchmark_enable_random_interleaving=false (true unless given), "
               "--benchmark_min_time=SECONDS, --benchmark_list_tests, --benchmark_format=json.");
    if (cli.parse(argc, argv) == flags::Parsed::kHelp) return 0;
    if (threads_flag->count() > 0) set_num_threads(static_cast<int>(threads));
    passed = cli.remaining();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return 2;
  }
  // Medians need repetitions, and on a shared host the machine drifts within the seconds that
  // one benchmark's repetitions take: repetitions of every benchmark run in random order, so ember
  // and its baseline see the same conditions (docs/measurements.md, "Micro-benchmarks", compares
  // the two orders). The user's choices win.
  for (const char* flag :
       {"--benchmark_repetitions=5", "--benchmark_enable_random_interleaving=true"}) {
    const std::string name(flag, std::strchr(flag, '=') - flag);
    const auto given = [&](const std::string& a) { return a.rfind(name, 0) == 0; };
    if (std::none_of(passed.begin(), passed.end(), given)) passed.push_back(flag);
  }
  std::vector<char*> args{argv[0]};
  for (std::string& a : passed) args.push_back(a.data());
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  std::printf("ember CPU kernels: %s (CPU reports: %s), %d thread(s)\n", cpu_capability(),
              cpu_vector_extensions(), get_num_threads());
  RatioReporter reporter(rate_counter);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_table();
  benchmark::Shutdown();
  return 0;
}

}  // namespace ember::bench
