// main() for the mpirun test binaries: initialises MPI and the default process group, lets only
// rank 0 write the XML report, prints the other ranks' failures tagged with their rank, and makes
// the exit status agree across ranks.
#include <cstdio>
#include <cstdlib>

#include "distributed/distributed.h"
#include "gtest/gtest.h"
#include "tests/distributed/mpi_test_util.h"

namespace {

// Replaces GoogleTest's printer on ranks other than 0: only failures, each line tagged.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                 r.line_number(), r.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
    }
  }

 private:
  int rank_;
};

class ProcessGroupEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ember::distributed::ProcessGroup::Options options;
    // Generous: 4 ranks on 2 cores under a loaded CI machine; the timeout test uses its own group.
    options.timeout = std::chrono::seconds(90);
    ember::distributed::init_process_group("mpi", options);
  }
  void TearDown() override { ember::distributed::destroy_process_group(); }
};

}  // namespace

int main(int argc, char** argv) {
  // Before InitGoogleTest: mpirun may add arguments that MPI consumes.
  ember::distributed::init_mpi(&argc, &argv);
  const int rank = ember::distributed::mpi_world_rank();
  if (rank != 0) {
    // GoogleTest writes XML when XML_OUTPUT_FILE (Bazel) or --gtest_output is set: rank 0 only.
    unsetenv("XML_OUTPUT_FILE");
    unsetenv("GTEST_OUTPUT");
  }
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    GTEST_FLAG_SET(output, "");
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  ::testing::AddGlobalTestEnvironment(new ProcessGroupEnvironment());
  const bool failed = RUN_ALL_TESTS() != 0;
  const bool any_failed = ember::distributed::mpi_any_rank(failed);
  if (rank == 0 && any_failed && !failed) {
    std::fprintf(stderr, "rank 0 passed, but another rank failed (see its [rank N] lines)\n");
  }
  ember::distributed::finalize_mpi();
  return any_failed ? 1 : 0;
}
