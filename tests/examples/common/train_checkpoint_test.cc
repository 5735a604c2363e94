// examples/common/train_checkpoint: what a training checkpoint restores (model, optimizer momentum,
// LR schedule, the default Generator, the position, per-rank and wrapper state), how a different
// run shape is converted and warned about, and the refusals (another model, foreign files).
#include "examples/common/train_checkpoint.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "nn/layers/linear.h"
#include "optim/sgd.h"
#include "tensor/all.h"
#include "tests/common/error_matchers.h"

namespace ember::examples {
namespace {

std::string raw(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// A model, SGD with momentum and a cosine schedule, after `steps` steps on fixed data.
struct TrainRun {
  std::shared_ptr<nn::Linear> model;
  std::unique_ptr<optim::SGD> opt;
  std::unique_ptr<optim::CosineAnnealingLR> sched;
  explicit TrainRun(int64_t out = 3) {
    Generator g(7);
    model = std::make_shared<nn::Linear>(4, out, true, &g);
    opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    sched = std::make_unique<optim::CosineAnnealingLR>(*opt, 100);
  }
  void train(int steps) {
    for (int i = 0; i < steps; ++i) {
      opt->zero_grad();
      sum(mul(model->forward(ones({2, 4})), model->forward(ones({2, 4})))).backward();
      opt->step();
      sched->step();
    }
  }
  TrainState state() { return TrainState{model.get(), opt.get(), sched.get()}; }
};

class TrainCheckpointTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return ::testing::TempDir() + "/" + info->name() + "_" + name;
  }
  std::vector<std::string> warnings;
  std::function<void(const std::string&)> warn = [this](const std::string& w) { warnings.push_back(w); };
};

TEST_F(TrainCheckpointTest, RestoresEverythingTheNextStepDrawsOn) {
  TrainRun a;
  a.train(3);
  manual_seed(99);
  (void)default_generator().next_u64();  // the default generator is mid-stream
  const TrainShape shape{5, 1, 2, 10};
  CheckpointWriter({path("c.ckpt")}).save(a.state(), {0, 3, 3}, shape);
  const uint64_t next_draw = default_generator().next_u64();

  manual_seed(1);
  TrainRun b;  // fresh: different RNG, no momentum, schedule at 0
  const TrainPosition pos = restore_checkpoint(read_checkpoint(path("c.ckpt")), b.state(), shape, 0, warn);
  EXPECT_EQ(pos.epoch, 0);
  EXPECT_EQ(pos.step, 3);
  EXPECT_EQ(pos.global_step, 3);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(default_generator().next_u64(), next_draw);
  EXPECT_EQ(b.sched->last_epoch(), a.sched->last_epoch());
  a.train(2);
  b.train(2);  // momentum and lr came back too: the next steps agree bit for bit
  for (size_t i = 0; i < a.model->parameters().size(); ++i) {
    EXPECT_EQ(raw(a.model->parameters()[i]), raw(b.model->parameters()[i]));
  }
}

TEST_F(TrainCheckpointTest, AFinishedEpochContinuesWithTheNext) {
  TrainRun a;
  CheckpointWriter({path("c.ckpt")}).save(a.state(), {2, 10, 30}, {0, 1, 2, 10});
  TrainRun b;
  const TrainPosition pos = restore_checkpoint(read_checkpoint(path("c.ckpt")), b.state(), {0, 1, 2, 10}, 0, warn);
  EXPECT_EQ(pos.epoch, 3);
  EXPECT_EQ(pos.step, 0);
  EXPECT_EQ(pos.global_step, 30);
}

TEST_F(TrainCheckpointTest, PerRankAndWrapperStateRoundTrip) {
  TrainRun a;
  TrainState st = a.state();
  st.per_rank_state = [] { return nn::StateDict{{"err", from_vector<float>({1.5f, 2.5f})}}; };
  st.wrapper_state = [] { return nn::StateDict{{"layout", from_vector<int64_t>({1, 1, 0})}}; };
  CheckpointWriter({path("c.ckpt")}).save(st, {0, 2, 2}, {0, 1, 2, 10});
  CheckpointWriter({path("c.ckpt")}).save(st, {0, 4, 4}, {0, 1, 2, 10});
  CheckpointWriter({path("c.ckpt")}).save(st, {0, 6, 6}, {0, 1, 2, 10});  // replaces step 2's files
  const LoadedCheckpoint ckpt = read_checkpoint(path("c.ckpt"));
  // Named after the global step of the checkpoint that refers to them.
  EXPECT_EQ(ckpt.per_rank_pattern, "PerRankAndWrapperStateRoundTrip_c.ckpt.step6.rank%d");
  // The checkpoint before the newest is kept, with its per-rank file (Note [Two checkpoints kept]);
  // the one before that is gone.
  const LoadedCheckpoint prev = read_checkpoint(path("c.ckpt") + ".prev");
  EXPECT_EQ(prev.position.global_step, 4);
  EXPECT_EQ(prev.per_rank_pattern, "PerRankAndWrapperStateRoundTrip_c.ckpt.step4.rank%d");
  EXPECT_NO_THROW(nn::load(path("c.ckpt.step4.rank0")));
  EXPECT_THROW(nn::load(path("c.ckpt.step2.rank0")), Error);
  TrainRun b;
  TrainState sb = b.state();
  nn::StateDict got_rank, got_wrapper;
  sb.load_per_rank_state = [&](const nn::StateDict& sd) { got_rank = sd; };
  sb.load_wrapper_state = [&](const nn::StateDict& sd) { got_wrapper = sd; };
  restore_checkpoint(ckpt, sb, {0, 1, 2, 10}, 0, warn);
  ASSERT_EQ(got_rank.size(), 1u);
  EXPECT_EQ(got_rank[0].first, "err");
  EXPECT_EQ(raw(got_rank[0].second), raw(from_vector<float>({1.5f, 2.5f})));
  ASSERT_EQ(got_wrapper.size(), 1u);
  EXPECT_EQ(got_wrapper[0].first, "layout");
}

TEST_F(TrainCheckpointTest, AnotherWorldSizeKeepsSharedStateAndResetsPerRankState) {
  TrainRun a;
  TrainState st = a.state();
  st.per_rank_state = [] { return nn::StateDict{{"err", zeros({2})}}; };
  // 2 ranks x batch 8, 30 steps per epoch; 12 steps done = 192 samples of the epoch.
  CheckpointWriter({path("c.ckpt"), 0, nullptr}).save(st, {1, 12, 42}, {0, 2, 8, 30});
  TrainRun b;
  TrainState sb = b.state();
  bool loaded = false;
  sb.load_per_rank_state = [&](const nn::StateDict&) { loaded = true; };
  // 3 ranks x batch 8, 20 steps per epoch: 192 samples = 8 steps.
  const TrainPosition pos = restore_checkpoint(read_checkpoint(path("c.ckpt")), sb, {0, 3, 8, 20}, 0, warn);
  EXPECT_FALSE(loaded);
  EXPECT_EQ(pos.epoch, 1);
  EXPECT_EQ(pos.step, 8);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("written with 2 rank(s) x batch 8 (30 steps/epoch); this run has 3 x 8 (20 steps/epoch)"),
            std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("continues at step 8 of epoch 2"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("cannot be redistributed to 3: it is reset"), std::string::npos) << warnings[1];
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Note [Checkpoints off the training thread]: the background write holds the state as save() saw
// it, byte for byte the synchronous file, however training changes the originals meanwhile.
TEST_F(TrainCheckpointTest, ABackgroundWriteHoldsTheStateAtSaveTime) {
  TrainRun a;
  a.train(2);
  const TrainShape shape{0, 1, 2, 10};
  CheckpointWriter({path("sync.ckpt"), 0, nullptr, /*in_background=*/false}).save(a.state(), {0, 2, 2}, shape);
  CheckpointWriter writer({path("async.ckpt"), 0, nullptr});
  writer.save(a.state(), {0, 2, 2}, shape);
  a.train(3);  // changes the parameters and momentum the write may still be reading
  writer.wait_for_write();
  const std::string sync = file_bytes(path("sync.ckpt"));
  EXPECT_FALSE(sync.empty());
  EXPECT_EQ(file_bytes(path("async.ckpt")), sync);
  writer.save(a.state(), {0, 5, 5}, shape);  // waits for nothing, and keeps step 2's as .prev
  writer.wait_for_write();
  EXPECT_EQ(file_bytes(previous_checkpoint_path(path("async.ckpt"))), sync);
  EXPECT_EQ(read_checkpoint(path("async.ckpt")).position.global_step, 5);
  EXPECT_EQ(writer.cost().save_ms.size(), 2u);
}

TEST_F(TrainCheckpointTest, ABackgroundWriteThatFailsThrowsAtTheNextWait) {
  TrainRun a;
  CheckpointWriter writer({::testing::TempDir() + "/no/such/dir/c.ckpt", 0, nullptr});
  writer.save(a.state(), {0, 1, 1}, {0, 1, 2, 10});  // returns before the write fails
  EXPECT_EMBER_ERROR(writer.wait_for_write(), "no/such/dir/c.ckpt");
  writer.wait_for_write();  // the error was reported once
}

TEST_F(TrainCheckpointTest, RefusesAnotherModelNamingTheFirstMismatch) {
  TrainRun a;
  CheckpointWriter({path("c.ckpt")}).save(a.state(), {0, 1, 1}, {0, 1, 2, 10});
  TrainRun wider(5);
  const TrainShape shape{0, 1, 2, 10};
  EXPECT_EMBER_ERROR(restore_checkpoint(read_checkpoint(path("c.ckpt")), wider.state(), shape, 0, warn),
                     "is from a different model: tensor 0 is 'weight' [3, 4] there but 'weight' [5, 4] here");
}

TEST_F(TrainCheckpointTest, RefusesFilesThatAreNotTrainingCheckpoints) {
  nn::save({{"w", ones({2})}}, path("plain.safetensors"), {{"format", "pt"}});
  EXPECT_EMBER_ERROR(read_checkpoint(path("plain.safetensors")), "is not a training checkpoint of this version",
                     "its format is 'pt', expected 'ember-train-v2'");
  nn::save({{"w", ones({2})}}, path("partial.safetensors"), {{"format", "ember-train-v2"}, {"epoch", "x"}});
  EXPECT_EMBER_ERROR(read_checkpoint(path("partial.safetensors")), "metadata 'epoch' = 'x' is not a non-negative integer");
}

}  // namespace
}  // namespace ember::examples
