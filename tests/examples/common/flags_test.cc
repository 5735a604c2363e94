// examples/common/flags: the validators every program's flags go through (whole values, ranges,
// one line naming the flag and value), both --name=value and --name value, the last of a repeated
// flag winning, --help, and unknown flags.
#include "examples/common/flags.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/common/error_matchers.h"

namespace ember::flags {
namespace {

// Parses `args` (without the program name) into `cli`, quietly (no --help output).
Parsed parse_args(CommandLine& cli, std::vector<std::string> args) {
  std::vector<char*> argv{const_cast<char*>("prog")};
  for (std::string& a : args) argv.push_back(a.data());
  return cli.parse(static_cast<int>(argv.size()), argv.data(), /*print_help=*/false);
}

// A small command line with the shared flags.
struct Program {
  int64_t batch = 64, threads = 1, steps = 10;
  uint64_t seed = 0;
  double lr = 0.1;
  std::string device = "cpu", backend;
  flags::CommandLine cli{"test program", "prog"};
  Program() {
    add_batch(cli, &batch, "batch");
    add_threads(cli, &threads);
    add_seed(cli, &seed);
    add_device(cli, &device);
    add_backend(cli, &backend);
    cli.add_option("--steps", steps)->check(positive_or_minus_one());
    cli.add_option("--lr", lr)->check(number_in(0, 10, "in [0, 10]"));
  }
  Parsed parse(std::vector<std::string> args) { return parse_args(cli, std::move(args)); }
};

TEST(Flags, BothSpellingsAndTheLastOfARepeatedFlag) {
  Program p;
  EXPECT_EQ(p.parse({"--batch=32", "--threads", "4", "--seed=7", "--device", "cuda", "--batch", "16"}),
            Parsed::kRun);
  EXPECT_EQ(p.batch, 16);
  EXPECT_EQ(p.threads, 4);
  EXPECT_EQ(p.seed, 7u);
  EXPECT_EQ(p.device, "cuda");
  EXPECT_EQ(default_backend(p.backend, p.device), "nccl");
  EXPECT_EQ(default_backend("mpi", "cuda"), "mpi");
  EXPECT_EQ(default_backend("", "cpu"), "mpi");
}

TEST(Flags, MalformedValuesNameTheFlagAndTheValue) {
  EXPECT_EMBER_ERROR(Program().parse({"--batch=abc"}), "--batch: 'abc' is not an integer (see --help)");
  EXPECT_EMBER_ERROR(Program().parse({"--batch=12x"}), "--batch: '12x' is not an integer");
  EXPECT_EMBER_ERROR(Program().parse({"--batch= 12"}), "--batch: ' 12' is not an integer");
  EXPECT_EMBER_ERROR(Program().parse({"--batch=99999999999999999999"}), "'99999999999999999999' is out of range");
  EXPECT_EMBER_ERROR(Program().parse({"--lr=nan"}), "--lr: 'nan' is not a finite number");
  EXPECT_EMBER_ERROR(Program().parse({"--lr=1e400"}), "--lr: '1e400' is not a finite number");
  EXPECT_EMBER_ERROR(Program().parse({"--batch"}), "--batch", "(see --help)");
}

TEST(Flags, RangesAndSets) {
  EXPECT_EMBER_ERROR(Program().parse({"--batch=0"}), "--batch: '0' is not positive");
  EXPECT_EMBER_ERROR(Program().parse({"--threads=1025"}), "--threads: '1025' is not between 1 and 1024");
  EXPECT_EMBER_ERROR(Program().parse({"--seed=-1"}), "--seed: '-1' is not non-negative");
  EXPECT_EMBER_ERROR(Program().parse({"--steps=0"}), "--steps: '0' is not positive or -1");
  EXPECT_EMBER_ERROR(Program().parse({"--lr=11"}), "--lr: '11' is not in [0, 10]");
  EXPECT_EMBER_ERROR(Program().parse({"--device=gpu"}), "--device: 'gpu' is not cpu or cuda");
  EXPECT_EMBER_ERROR(Program().parse({"--backend=gloo"}), "--backend: 'gloo' is not nccl or mpi");
  Program p;
  EXPECT_EQ(p.parse({"--steps=-1", "--lr=0"}), Parsed::kRun);
  EXPECT_EQ(p.steps, -1);
}

TEST(Flags, UnknownFlagsAndStrayArguments) {
  EXPECT_EMBER_ERROR(Program().parse({"--bacth=64"}), "unknown flag or argument: --bacth=64 (see --help)");
  EXPECT_EMBER_ERROR(Program().parse({"64"}), "unknown flag or argument: 64");
}

TEST(Flags, ListsSwitchesCountsAndExtras) {
  std::vector<int64_t> sizes;
  bool fast = false;
  int64_t threads = 1;
  CommandLine cli{"test program", "prog"};
  cli.add_option("--sizes", sizes)->delimiter(',')->check(positive_integer());
  cli.add_flag("--fast", fast);
  Option* threads_flag = add_threads(cli, &threads);
  cli.allow_extras();
  EXPECT_EQ(parse_args(cli, {"--sizes=784,10", "--fast", "--benchmark_filter=x"}), Parsed::kRun);
  EXPECT_EQ(sizes, (std::vector<int64_t>{784, 10}));
  EXPECT_TRUE(fast);
  EXPECT_EQ(threads_flag->count(), 0u);
  EXPECT_EQ(cli.count("--fast"), 1u);
  EXPECT_EQ(cli.remaining(), std::vector<std::string>{"--benchmark_filter=x"});
  EXPECT_EMBER_ERROR(Program().parse({"--steps=1", "--fast"}), "unknown flag or argument: --fast");
}

TEST(Flags, ListItemsAreCheckedOneByOne) {
  std::vector<int64_t> sizes;
  CommandLine cli{"test program", "prog"};
  cli.add_option("--sizes", sizes)->delimiter(',')->check(positive_integer());
  EXPECT_EMBER_ERROR(parse_args(cli, {"--sizes=784,0"}), "--sizes: '0' is not positive");
}

TEST(Flags, HelpIsNotAnError) {
  EXPECT_EQ(Program().parse({"--help"}), Parsed::kHelp);
  EXPECT_EQ(Program().parse({"--batch=32", "-h"}), Parsed::kHelp);
}

TEST(Flags, HelpListsEveryFlagWithItsDefault) {
  Program p;
  const std::string help = p.cli.help();
  for (const char* s : {"--batch INT:positive=64", "--threads INT:between 1 and 1024=1", "--seed UINT", "--device"}) {
    EXPECT_NE(help.find(s), std::string::npos) << s << " in\n" << help;
  }
}

}  // namespace
}  // namespace ember::flags
