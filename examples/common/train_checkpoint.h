// Training checkpoints that resume exactly: everything a run draws on to produce its next step, so
// a job killed mid-epoch and restarted with --resume reaches bit-identical parameters to a run that
// was never interrupted (Note [Exact resume]).
//
// One safetensors file (nn/checkpoint: atomic, CRC-32 checked) holds
//   model.*   parameters and buffers        optim.*  optimizer state (momentum buffers, lr)
//   sched.*   the LR scheduler's state       rng.default  the default Generator (dropout, init)
//   ddp.*     DDP's rebuilt bucket layout (state PowerSGD keeps per bucket must meet the same buckets)
// and in __metadata__ the position (epoch, steps done in it, global step), the seed that orders and
// augments the data, and the run's shape (world size, batch per rank, steps per epoch).
// Per-rank state (PowerSGD's error feedback) goes to one file per rank next to it, named with the
// global step so that a set of files is switched over atomically (Note [Per-rank checkpoint files]).
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include <ember/optim.h>

namespace ember::examples {

// Note [Exact resume]: a step's inputs are the parameters, the optimizer and scheduler state, the
// batch, and any random draws. The batch at (epoch, step) is a pure function of the data seed (the
// DataLoader's contract: order from seed + epoch, augmentation from seed, epoch and batch index), so
// the position and seed stand for the data order and augmentation RNGs; the default Generator is
// saved whole. Collectives are deterministic for a fixed world size (2 ranks: a + b = b + a).
struct TrainPosition {
  int64_t epoch = 0;        // the epoch in progress (or the next one, when `step` == steps_per_epoch)
  int64_t step = 0;         // steps of `epoch` already taken
  int64_t global_step = 0;  // steps since the start of training
};

// The run a checkpoint came from: what resume must agree with, or convert.
struct TrainShape {
  uint64_t seed = 0;
  int64_t world_size = 1;
  int64_t batch = 0;            // per rank
  int64_t steps_per_epoch = 0;
};

// The parts of training a checkpoint restores. `per_rank` may be null (no per-rank state).
struct TrainState {
  nn::Module* model = nullptr;
  optim::Optimizer* optimizer = nullptr;
  optim::LRScheduler* scheduler = nullptr;
  // A wrapper's own shared state (DDP's rebuilt bucket layout), saved as "ddp.*"; may be null.
  std::function<nn::StateDict()> wrapper_state;
  std::function<void(const nn::StateDict&)> load_wrapper_state;
  // Runs on every rank at the start of each save, before anything is read: ZeRO gathers its
  // sharded optimizer state on rank 0 here (consolidate_state_dict is collective). May be null.
  std::function<void()> before_save;
  // This rank's own state (PowerSGD): saved to and loaded from this rank's file.
  std::function<nn::StateDict()> per_rank_state;
  std::function<void(const nn::StateDict&)> load_per_rank_state;
};

struct SaveCheckpointOptions {
  std::string path;
  int rank = 0;                   // rank 0 writes the shared file; every rank its per-rank file
  std::function<void()> barrier;  // between the per-rank files and the shared file (null: 1 process)
  // Write the shared file on a thread of its own (Note [Checkpoints off the training thread]).
  bool in_background = true;
};

// Note [Checkpoints off the training thread]
// A checkpoint's write, fsync and rename cost a ResNet-20 step at 2 ranks about 6 % (the trainers'
// closing "checkpoints:" line measures it: scripts/train.sh --checkpoint=c.ckpt --checkpoint_every=1
// --train_limit=6400 --epochs=1 --checkpoint_in_line=1), so without per-rank state rank 0 only copies
// what the checkpoint holds on the training thread (the model, optimizer, scheduler and RNG state) and a
// thread of its own writes the copy while the next step's forward pass runs. The trainers wait for
// that write before the step's backward (CheckpointWriter::wait_for_write): no rank finishes a
// backward without rank 0's allreduce, so the checkpoint of step k is on disk before any rank
// completes step k+1, and a failure after that always finds it. A failed write throws there,
// naming the file. With per-rank state (PowerSGD), whose files must all exist before the shared one
// names them, save stays synchronous (Note [Per-rank checkpoint files]).

// How long CheckpointWriter::save held the training thread: each save, and the sum of those
// between steps (--checkpoint_every's, as opposed to the epoch ends').
struct CheckpointCost {
  std::vector<double> save_ms;
  double between_steps_ms = 0;
  double waited_ms = 0;  // in wait_for_write, for writes still in flight
};

// Writes checkpoints (collective when there are several ranks: every rank calls save). The file
// it replaces stays as previous_checkpoint_path(path) (Note [Two checkpoints kept]); once the new
// shared file is in place, this rank's per-rank files of any older checkpoint go.
class CheckpointWriter {
 public:
  explicit CheckpointWriter(SaveCheckpointOptions options) : options_(std::move(options)) {}
  // Waits for a write still in flight; an error it met is printed (a destructor cannot throw).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void save(const TrainState& state, const TrainPosition& position, const TrainShape& shape);
  // Returns once the last save's shared file is in place; throws the error its write met.
  void wait_for_write();
  // What the saves so far held the training thread for (barriers and waits included).
  const CheckpointCost& cost() const { return cost_; }

 private:
  void write_per_rank_and_shared(const TrainState& state, const TrainPosition& position, const TrainShape& shape);
  SaveCheckpointOptions options_;
  CheckpointCost cost_;
  std::future<void> shared_write_;  // the background write of the shared file, if one was started
};

// The trainers' closing line on what checkpoints cost: "checkpoints: N written, median M ms each
// on the training thread (P % of a S ms step; every K steps: Q % per step), W ms in all waiting for
// writes in flight". `train_ms` is the time of `steps` training steps, the saves between steps and
// the waits included (the epoch-end saves come after).
std::string checkpoint_cost_summary(const CheckpointCost& cost, double train_ms, int64_t steps, int64_t every);

// Where the checkpoint before the newest at `path` is kept: "<path>.prev".
std::string previous_checkpoint_path(const std::string& path);

// A checkpoint read back, before anything is restored from it.
struct LoadedCheckpoint {
  std::string path;
  TrainPosition position;
  TrainShape shape;
  nn::StateDict tensors;
  std::string per_rank_pattern;  // "<file>.step<G>.rank%d", empty without per-rank state
};

// Reads and validates a training checkpoint (format, checksum, metadata); throws ember::Error
// naming the file and what is wrong.
LoadedCheckpoint read_checkpoint(const std::string& path);

// Restores `state` from `ckpt` at this run's shape. The model must match by name and shape (else
// an error naming the first mismatch). A different world size keeps everything shared, restarts
// the data at the same fraction of the epoch and resets per-rank state; `warn` hears each of those
// decisions. Returns the position to continue from, in this run's steps.
TrainPosition restore_checkpoint(const LoadedCheckpoint& ckpt, const TrainState& state, const TrainShape& now,
                                 int rank, const std::function<void(const std::string&)>& warn);

}  // namespace ember::examples
