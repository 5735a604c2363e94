// Hooks chosen by name (the tools' --comm_hook flag): each name installs the hook it says, which the
// payload per step shows (fp16/bf16 halve it, noop sends nothing, PowerSGD compresses once started),
// "allreduce" trains bit-identically to "none", an unknown name lists the known ones, and --help
// has one line per name.
#include "examples/common/comm_hook_by_name.h"

#include <sstream>
#include <string>

#include "tests/common/error_matchers.h"
#include "tests/distributed/ddp/ddp_test_util.h"

namespace ember::distributed::testing {
namespace {

using examples::comm_hook_help;
using examples::comm_hook_names;
using examples::CommHookSpec;
using examples::register_comm_hook_by_name;

// A model with one matrix PowerSGD compresses (64 x 32) and small tensors it sends as they are.
Scenario by_name_scenario(const CommHookSpec& spec) {
  Scenario sc;
  sc.make_model = [](uint64_t seed) {
    Generator g(seed);
    return nn::make_mlp({32, 64, 4}, &g);
  };
  sc.make_batch = random_batches({32}, 4);
  sc.setup = [spec](DistributedDataParallel& ddp) {
    register_comm_hook_by_name(ddp, get_default_group(), spec);
  };
  return sc;
}

// The parameters after 4 steps and the payload this rank handed to collectives in step 4 alone:
// the difference between a 4-step and a 3-step run (construction and the rebuild cancel out).
struct Trained {
  std::vector<Tensor> params;
  uint64_t last_step_bytes;
};
Trained train_counting(const CommHookSpec& spec, int rank, int world, ProcessGroup& pg) {
  Scenario sc = by_name_scenario(spec);
  sc.steps = 3;
  uint64_t start = pg.payload_bytes();
  train_ddp(sc, rank, world);
  const uint64_t three = pg.payload_bytes() - start;
  sc.steps = 4;
  start = pg.payload_bytes();
  auto ddp = train_ddp(sc, rank, world);
  const uint64_t four = pg.payload_bytes() - start;
  return {ddp->module()->parameters(), four - three};
}

class CommHookByName : public MpiTest {};

TEST_F(CommHookByName, EachNameInstallsItsHook) {
  const uint64_t grad_bytes = 4 * (32 * 64 + 64 + 64 * 4 + 4);
  auto none = train_counting({"none"}, rank_, world_, *pg_);
  EXPECT_EQ(none.last_step_bytes, grad_bytes);
  auto allreduce = train_counting({"allreduce"}, rank_, world_, *pg_);
  EXPECT_EQ(allreduce.last_step_bytes, grad_bytes);
  ASSERT_EQ(allreduce.params.size(), none.params.size());
  for (size_t i = 0; i < none.params.size(); ++i) EXPECT_TRUE(equal(allreduce.params[i], none.params[i])) << i;
  EXPECT_EQ(train_counting({"fp16"}, rank_, world_, *pg_).last_step_bytes, grad_bytes / 2);
  EXPECT_EQ(train_counting({"bf16"}, rank_, world_, *pg_).last_step_bytes, grad_bytes / 2);
  EXPECT_EQ(train_counting({"noop"}, rank_, world_, *pg_).last_step_bytes, 0u);
  // PowerSGD rank 1 from iteration 2 (step 4 compresses): both weights pass the compression-rate
  // test ((n + m) * 1 * 2 < n * m), so P = 64 + 4 and Q = 32 + 64 floats, plus the biases (64 + 4)
  // uncompressed.
  const auto powersgd = train_counting({"powersgd", 1, 2}, rank_, world_, *pg_);
  EXPECT_EQ(powersgd.last_step_bytes, 4u * (68 + 96 + 68));
  // The blocking form waits in the hook: the same collectives and the same result.
  const auto blocking = train_counting({"powersgd_blocking", 1, 2}, rank_, world_, *pg_);
  EXPECT_EQ(blocking.last_step_bytes, powersgd.last_step_bytes);
  ASSERT_EQ(blocking.params.size(), powersgd.params.size());
  for (size_t i = 0; i < powersgd.params.size(); ++i) EXPECT_TRUE(equal(blocking.params[i], powersgd.params[i])) << i;
  // Batched: the whole bucket (2372 floats) as one 49 x 49 zero-padded matrix, P and Q of 49 each.
  EXPECT_EQ(train_counting({"batched_powersgd", 1, 2}, rank_, world_, *pg_).last_step_bytes, 4u * (49 + 49));
}

TEST_F(CommHookByName, PowerSGDNamesReturnTheirState) {
  auto ddp = std::make_shared<DistributedDataParallel>(by_name_scenario({"none"}).make_model(1));
  EXPECT_NE(register_comm_hook_by_name(*ddp, pg_, {"powersgd", 4, 7}), nullptr);
  auto other = std::make_shared<DistributedDataParallel>(by_name_scenario({"none"}).make_model(1));
  auto state = register_comm_hook_by_name(*other, pg_, {"batched_powersgd", 2, 5});
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->matrix_approximation_rank, 2);
  EXPECT_EQ(state->start_powerSGD_iter, 5);
  auto plain = std::make_shared<DistributedDataParallel>(by_name_scenario({"none"}).make_model(1));
  EXPECT_EQ(register_comm_hook_by_name(*plain, pg_, {"fp16"}), nullptr);
}

TEST_F(CommHookByName, UnknownNameListsTheKnownOnes) {
  auto ddp = std::make_shared<DistributedDataParallel>(by_name_scenario({"none"}).make_model(1));
  EXPECT_EMBER_ERROR(register_comm_hook_by_name(*ddp, pg_, {"fp8"}),
                     "unknown comm hook 'fp8' (known: none, allreduce, fp16, bf16, noop, powersgd, powersgd_blocking, "
                     "batched_powersgd)");
}

// Names, help and lookup come from one table (Note [Built-in comm hooks]): same names, same order.
TEST_F(CommHookByName, HelpHasOneLinePerName) {
  std::string expected_names;
  std::istringstream lines(comm_hook_help("  "));
  for (std::string line; std::getline(lines, line);) {
    ASSERT_EQ(line.rfind("  ", 0), 0u) << line;
    const auto colon = line.find(": ");
    ASSERT_NE(colon, std::string::npos) << line;
    EXPECT_GT(line.size(), colon + 2) << "no help text: " << line;
    expected_names += (expected_names.empty() ? "" : "|") + line.substr(2, colon - 2);
  }
  EXPECT_EQ(expected_names, comm_hook_names("|"));
}

}  // namespace
}  // namespace ember::distributed::testing
