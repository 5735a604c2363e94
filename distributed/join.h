// Join: training with uneven inputs (PyTorch's torch.distributed.algorithms.Join, Joinable,
// JoinHook). A rank that runs out of data calls Join::finish(); from then on it shadows, through
// each joinable's JoinHook::main_hook(), the collectives the ranks still training issue in every
// iteration, until every rank has joined; then each hook's post_hook() runs once. DDP is a joinable
// (distributed/ddp/ddp_join.cc, docs/design.md steps 6, 10 and 12); so is SyncBatchNorm's
// SyncBatchNormJoinable. Protocol and collective order: Note [Join protocol].
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "distributed/process_group.h"
#include "distributed/work.h"

namespace ember::distributed {

// Note [Join protocol]
// Per iteration of a rank that has NOT joined, on the Join's process group:
//   1. Join::notify_join_context (the first joinable that is not an async shadow, see Joinable):
//      an async allreduce of 1, and with throw_on_early_termination a blocking allreduce of 0 that
//      is non-zero once any rank joined;
//   2. then each joinable's own collectives (DDP: bucket rebuild, buffer broadcast, the
//      "backward will synchronise" allreduce, bucket allreduces, the used-parameter map).
// Per iteration shadowed by a rank that HAS joined (Join::finish's loop):
//   1'. an allreduce of 0 that pairs with 1 and counts the ranks still training (0 ends the loop);
//       with throw_on_early_termination, an allreduce of 1 that pairs with 1's second allreduce,
//       then this rank throws (and the others throw from notify_join_context);
//   2'. each hook's main_hook() (async shadows first), issuing the same collectives as 2, in the
//       same order, with zeros.
// Every joinable must use the Join's process group for steps 1/1' (checked in the constructor);
// the count from 1 is what DDP divides gradients by when divide_by_initial_world_size is false.

// What Join passes to its joinables' hooks (PyTorch's Join kwargs, named).
struct JoinOptions {
  bool enable = true;
  // The first rank to join throws "Rank r exhausted all inputs.", and every other rank throws from
  // its next iteration, instead of shadowing.
  bool throw_on_early_termination = false;
  // DDP: divide gradients by the initial world size (true, PyTorch's default) or by the number of
  // ranks still training in that iteration (false).
  bool divide_by_initial_world_size = true;
};

// The per-joinable state Join sets (PyTorch's _JoinConfig).
struct JoinConfig {
  bool enable = false;
  bool throw_on_early_termination = false;
  bool is_first_joinable = false;
};

// What a joinable does on a rank that joined (PyTorch's JoinHook): main_hook() shadows one
// iteration of the ranks still training; post_hook() runs once after every rank joined.
class JoinHook {
 public:
  virtual ~JoinHook() = default;
  // Called once per iteration of the ranks still training, after this rank joined: issue the
  // collectives those ranks issue in that iteration.
  virtual void main_hook() {}
  // Called once after every rank joined; is_last_joiner is true on the rank(s) that joined last.
  virtual void post_hook(bool is_last_joiner) {}
};

// Something whose collectives a joined rank must shadow (PyTorch's Joinable): it makes a JoinHook
// and names the process group Join runs on (DistributedDataParallel, SyncBatchNormJoinable).
class Joinable {
 public:
  virtual ~Joinable() = default;
  virtual std::unique_ptr<JoinHook> join_hook(const JoinOptions& options) = 0;
  virtual ProcessGroupPtr join_process_group() const = 0;
  // ember extension: a joinable with no per-iteration entry point of its own (it never calls
  // notify_join_context) whose main_hook only starts its shadow on its own thread and group, e.g.
  // SyncBatchNormJoinable. Join runs these hooks first in each iteration, so their collectives are
  // posted before a blocking hook (DDP's) waits for gradients that depend on them, and never
  // makes one of them the notifying (first) joinable.
  virtual bool is_async_shadow() const { return false; }
  const JoinConfig& join_config() const { return join_config_; }

 private:
  friend class Join;
  JoinConfig join_config_;
};

// PyTorch's torch.distributed.algorithms.Join (Note [Join protocol]): construct it around the
// training loop and call finish() once this rank is out of data, or use Join::run.
class Join {
 public:
  // PyTorch's __init__ + __enter__: builds the hooks and enables the joinables. Throws when the
  // list is empty, holds only async shadows, or the joinables use different process groups.
  // The joinables must outlive the Join.
  Join(std::vector<Joinable*> joinables, JoinOptions options = {});
  // Disables the joinables again (PyTorch leaves them enabled after the context; here a DDP used
  // after the Join scope issues no join collectives). Never communicates.
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  // PyTorch's __exit__ without an exception: call when this rank's inputs are exhausted. Shadows
  // the other ranks' iterations until all joined, then runs the post hooks.
  void finish();

  // with Join(joinables, options): body()  -- finish() runs only when body returns normally.
  static void run(std::vector<Joinable*> joinables, JoinOptions options, const std::function<void()>& body);

  // Called by a joinable at the start of each iteration (DDP's forward): step 1 of Note [Join
  // protocol]. Returns the async allreduce counting the ranks still training (its result is that
  // count), or nullptr when `joinable` is not the first or Join is not enabled.
  static WorkPtr notify_join_context(Joinable& joinable);

 private:
  int64_t num_nonjoined_procs();
  [[noreturn]] void notify_procs_to_terminate();

  std::vector<Joinable*> joinables_;
  std::vector<std::unique_ptr<JoinHook>> hooks_;
  JoinOptions options_;
  ProcessGroupPtr process_group_;
  bool finished_ = false;
};

}  // namespace ember::distributed
