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
#include <optional>
#include <string>

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
  // This rank's own state (PowerSGD): saved to and loaded from this rank's file.
  std::function<nn::StateDict()> per_rank_state;
  std::function<void(const nn::StateDict&)> load_per_rank_state;
};

struct SaveCheckpointOptions {
  std::string path;
  int rank = 0;                   // rank 0 writes the shared file; every rank its per-rank file
  std::function<void()> barrier;  // between the per-rank files and the shared file (null: 1 process)
};

// Writes checkpoints (collective when there are several ranks: every rank calls save). The file
// it replaces stays as previous_checkpoint_path(path) (Note [Two checkpoints kept]); once the new
// shared file is in place, this rank's per-rank files of any older checkpoint go.
class CheckpointWriter {
 public:
  explicit CheckpointWriter(SaveCheckpointOptions options) : options_(std::move(options)) {}
  void save(const TrainState& state, const TrainPosition& position, const TrainShape& shape);

 private:
  SaveCheckpointOptions options_;
};

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
