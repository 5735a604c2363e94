#include "examples/common/train_checkpoint.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <ember/tensor.h>

#include "examples/common/kill_fault.h"

namespace ember::examples {

namespace {

constexpr const char* kFormat = "ember-train-v2";

// A Generator's whole state as int64 [7]: the four xoshiro words, the seed, the cached-normal flag
// and the cached normal's bits.
Tensor generator_to_tensor(const Generator::State& st) {
  int64_t cached_bits = 0;
  std::memcpy(&cached_bits, &st.cached_normal, sizeof cached_bits);
  return from_vector<int64_t>({static_cast<int64_t>(st.s[0]), static_cast<int64_t>(st.s[1]),
                               static_cast<int64_t>(st.s[2]), static_cast<int64_t>(st.s[3]),
                               static_cast<int64_t>(st.seed), st.has_cached_normal ? 1 : 0, cached_bits});
}

Generator::State generator_from_tensor(const Tensor& t, const std::string& path) {
  EMBER_CHECK(t.dtype() == kInt64 && t.dim() == 1 && t.numel() == 7, "resume: '", path,
              "': rng.default must be int64 [7], got ", t.describe());
  const int64_t* v = t.data_ptr<int64_t>();
  Generator::State st{};
  for (int i = 0; i < 4; ++i) st.s[i] = static_cast<uint64_t>(v[i]);
  st.seed = static_cast<uint64_t>(v[4]);
  st.has_cached_normal = v[5] != 0;
  std::memcpy(&st.cached_normal, &v[6], sizeof st.cached_normal);
  return st;
}

// Tensors under `prefix`, with the prefix removed, in file order.
nn::StateDict with_prefix(const nn::StateDict& sd, const std::string& prefix) {
  nn::StateDict out;
  for (const auto& [name, t] : sd) {
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t);
  }
  return out;
}

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string dirname_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

// Note [Per-rank checkpoint files]: rank r's state for the checkpoint at global step G lives in
// "<file>.step<G>.rank<r>". Every rank writes its file, all meet at a barrier, and only then does
// rank 0 rename the shared file -- which names the pattern -- into place. A kill at any moment
// leaves the previous shared file pointing at its own, still present, per-rank files; old files
// are removed after the next shared file is in place.
std::string per_rank_pattern(const std::string& path, int64_t global_step) {
  return basename_of(path) + ".step" + std::to_string(global_step) + ".rank%d";
}

std::string per_rank_file(const std::string& dir, const std::string& pattern, int rank) {
  const size_t at = pattern.rfind("%d");
  return dir + pattern.substr(0, at) + std::to_string(rank) + pattern.substr(at + 2);
}

// This rank's per-rank files of earlier checkpoints at `path` (from this run or one before a
// crash), except `keep` (the newest) and the newest below it, which the previous checkpoint
// (`<path>.prev`) names; files of later steps are a crashed attempt's leftovers and go too.
void remove_stale_per_rank_files(const std::string& path, int rank, const std::string& keep, int64_t keep_step) {
  const std::string dir = dirname_of(path);
  const std::string prefix = basename_of(path) + ".step", suffix = ".rank" + std::to_string(rank);
  DIR* d = ::opendir(dir.empty() ? "." : dir.c_str());
  if (d == nullptr) return;
  std::vector<std::pair<int64_t, std::string>> older;  // (step, file)
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string step = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (step.find_first_not_of("0123456789") != std::string::npos || dir + name == keep) continue;
    const int64_t g = std::stoll(step);
    if (g < keep_step) {
      older.emplace_back(g, dir + name);
    } else {
      stale.push_back(dir + name);
    }
  }
  ::closedir(d);
  std::sort(older.begin(), older.end());
  if (!older.empty()) older.pop_back();  // the previous checkpoint's
  for (const auto& [g, f] : older) stale.push_back(f);
  for (const std::string& f : stale) ::unlink(f.c_str());
}

std::string format_fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Note [Two checkpoints kept]: before the new shared file is written, the current one is
// hard-linked to `path.prev`; nn::save then renames the new file over `path`. So at every moment
// `path` is a complete checkpoint (the rename is atomic) and `path.prev` is absent, the one before
// it, or -- after a crash while writing -- the same one; its per-rank files are kept. A restart
// takes the newest of the two that reads back whole (scripts/elastic_run.py).
void keep_previous(const std::string& path) {
  const std::string prev = previous_checkpoint_path(path);
  if (::access(path.c_str(), F_OK) != 0) return;
  ::unlink(prev.c_str());
  EMBER_CHECK(::link(path.c_str(), prev.c_str()) == 0 || ::rename(path.c_str(), prev.c_str()) == 0,
              "checkpoint: cannot keep '", path, "' as '", prev, "': ", std::strerror(errno));
}


int64_t metadata_int(const nn::CheckpointMetadata& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  EMBER_CHECK(it != meta.end(), "resume: '", path, "' has no '", key,
              "' in its metadata: not a training checkpoint of this version (", kFormat, ")");
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  EMBER_CHECK(used == it->second.size() && used > 0 && v >= 0, "resume: '", path, "': metadata '", key,
              "' = '", it->second, "' is not a non-negative integer");
  return v;
}

// The first difference between the model's state and the checkpoint's, by name and shape.
void check_same_model(const nn::StateDict& model, const nn::StateDict& saved, const std::string& path) {
  for (size_t i = 0; i < std::max(model.size(), saved.size()); ++i) {
    EMBER_CHECK(i < saved.size(), "resume: '", path, "' is from a different model: it has no '",
                model[i].first, "' ", shape_to_string(model[i].second.sizes()), " (it holds ", saved.size(),
                " model tensors, this model ", model.size(), ")");
    EMBER_CHECK(i < model.size(), "resume: '", path, "' is from a different model: it has '", saved[i].first,
                "' ", shape_to_string(saved[i].second.sizes()), ", which this model lacks (it holds ",
                saved.size(), " model tensors, this model ", model.size(), ")");
    const auto& [name, t] = model[i];
    const auto& [saved_name, s] = saved[i];
    EMBER_CHECK(name == saved_name && t.sizes() == s.sizes(), "resume: '", path,
                "' is from a different model: tensor ", i, " is '", saved_name, "' ",
                shape_to_string(s.sizes()), " there but '", name, "' ", shape_to_string(t.sizes()), " here");
  }
}

// The shared file's contents: the tensors under their prefixes, and the position and shape.
struct SharedCheckpoint {
  nn::StateDict tensors;
  nn::CheckpointMetadata metadata;
};

// With copy_tensors, every tensor is a CPU copy of its own, so training may go on changing the
// originals while another thread writes them.
SharedCheckpoint copy_shared_state(const TrainState& state, const TrainPosition& position, const TrainShape& shape,
                                   const std::string& per_rank_pattern, bool copy_tensors) {
  SharedCheckpoint c;
  const auto add = [&](const std::string& prefix, const nn::StateDict& sd) {
    for (const auto& [name, t] : sd) c.tensors.emplace_back(prefix + name, copy_tensors ? t.to(kCPU, true) : t);
  };
  add("model.", state.model->state_dict());
  add("optim.", state.optimizer->state_dict());
  add("sched.", state.scheduler->state_dict());
  c.tensors.emplace_back("rng.default", generator_to_tensor(default_generator().get_state()));
  if (state.wrapper_state) add("ddp.", state.wrapper_state());
  c.metadata = {{"format", kFormat},
                {"epoch", std::to_string(position.epoch)},
                {"step_in_epoch", std::to_string(position.step)},
                {"global_step", std::to_string(position.global_step)},
                {"seed", std::to_string(shape.seed)},
                {"world_size", std::to_string(shape.world_size)},
                {"batch_per_rank", std::to_string(shape.batch)},
                {"steps_per_epoch", std::to_string(shape.steps_per_epoch)},
                {"per_rank_files", per_rank_pattern}};
  return c;
}

}  // namespace

void CheckpointWriter::save(const TrainState& state, const TrainPosition& position, const TrainShape& shape) {
  wait_for_write();  // one write in flight at a time (counted as a wait)
  const auto start = std::chrono::steady_clock::now();
  if (state.before_save) state.before_save();
  write_per_rank_and_shared(state, position, shape);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  cost_.save_ms.push_back(ms);
  if (position.step < shape.steps_per_epoch) cost_.between_steps_ms += ms;
}

void CheckpointWriter::wait_for_write() {
  if (!shared_write_.valid()) return;
  const auto start = std::chrono::steady_clock::now();
  shared_write_.get();  // rethrows the write's error
  cost_.waited_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

CheckpointWriter::~CheckpointWriter() {
  if (!shared_write_.valid()) return;
  try {
    shared_write_.get();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] checkpoint: %s\n", options_.rank, e.what());
  }
}

std::string checkpoint_cost_summary(const CheckpointCost& cost, double train_ms, int64_t steps, int64_t every) {
  if (cost.save_ms.empty() || steps <= 0) return "";
  std::vector<double> sorted = cost.save_ms;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  const double median = sorted[sorted.size() / 2];
  const double step_ms = std::max(0.0, train_ms - cost.between_steps_ms - cost.waited_ms) / static_cast<double>(steps);
  std::string out = "checkpoints: " + std::to_string(cost.save_ms.size()) + " written, median " +
                    format_fixed(median, 1) + " ms each on the training thread";
  if (step_ms > 0) {
    out += " (" + format_fixed(100.0 * median / step_ms, 1) + " % of a " + format_fixed(step_ms, 1) + " ms step";
    if (every > 0) {
      out += "; every " + std::to_string(every) + " steps: " + format_fixed(100.0 * median / step_ms / every, 2) +
             " % per step";
    }
    out += ")";
  }
  return out + ", " + format_fixed(cost.waited_ms, 1) + " ms in all waiting for writes in flight";
}

void CheckpointWriter::write_per_rank_and_shared(const TrainState& state, const TrainPosition& position,
                                                 const TrainShape& shape) {
  const std::string& path = options_.path;
  const std::string pattern = state.per_rank_state ? per_rank_pattern(path, position.global_step) : "";
  std::string mine;
  if (state.per_rank_state) {
    mine = per_rank_file(dirname_of(path), pattern, options_.rank);
    nn::save(state.per_rank_state(), mine,
             {{"format", std::string(kFormat) + "-rank"}, {"global_step", std::to_string(position.global_step)},
              {"rank", std::to_string(options_.rank)}});
  }
  const bool in_background = options_.in_background && !state.per_rank_state;
  if (options_.barrier && !in_background) options_.barrier();  // every per-rank file exists before the shared one
  if (options_.rank == 0) {
    SharedCheckpoint shared = copy_shared_state(state, position, shape, pattern, /*copy_tensors=*/in_background);
    const auto write = [path, global_step = position.global_step, rank = options_.rank, shared = std::move(shared)] {
      // EMBER_FAULT_KILL_IN_CHECKPOINT=G: killed after the per-rank files, before the shared file is
      // in place -- the window Note [Per-rank checkpoint files] protects.
      maybe_kill_self("EMBER_FAULT_KILL_IN_CHECKPOINT", global_step, rank);
      keep_previous(path);
      nn::save(shared.tensors, path, shared.metadata);
    };
    if (in_background) {
      shared_write_ = std::async(std::launch::async, write);
    } else {
      write();
    }
  } else {
    maybe_kill_self("EMBER_FAULT_KILL_IN_CHECKPOINT", position.global_step, options_.rank);
  }
  if (options_.barrier && !in_background) options_.barrier();  // the shared file now names the new per-rank files
  if (!mine.empty()) remove_stale_per_rank_files(path, options_.rank, mine, position.global_step);
}

std::string previous_checkpoint_path(const std::string& path) { return path + ".prev"; }

LoadedCheckpoint read_checkpoint(const std::string& path) {
  LoadedCheckpoint c;
  c.path = path;
  nn::CheckpointMetadata meta;
  c.tensors = nn::load(path, &meta);
  auto format = meta.find("format");
  EMBER_CHECK(format != meta.end() && format->second == kFormat, "resume: '", path,
              "' is not a training checkpoint of this version: its format is '",
              format == meta.end() ? std::string("(none)") : format->second, "', expected '", kFormat, "'");
  c.position.epoch = metadata_int(meta, "epoch", path);
  c.position.step = metadata_int(meta, "step_in_epoch", path);
  c.position.global_step = metadata_int(meta, "global_step", path);
  c.shape.seed = static_cast<uint64_t>(metadata_int(meta, "seed", path));
  c.shape.world_size = metadata_int(meta, "world_size", path);
  c.shape.batch = metadata_int(meta, "batch_per_rank", path);
  c.shape.steps_per_epoch = metadata_int(meta, "steps_per_epoch", path);
  c.per_rank_pattern = meta.count("per_rank_files") ? meta.at("per_rank_files") : "";
  EMBER_CHECK(c.per_rank_pattern.empty() || (c.per_rank_pattern.find('/') == std::string::npos &&
                                              c.per_rank_pattern.find("%d") != std::string::npos),
              "resume: '", path, "': metadata 'per_rank_files' = '", c.per_rank_pattern,
              "' is not a file name pattern with %d");
  EMBER_CHECK(c.shape.world_size >= 1 && c.shape.batch >= 1 && c.position.step <= c.shape.steps_per_epoch,
              "resume: '", path, "': inconsistent metadata (world_size ", c.shape.world_size, ", batch_per_rank ",
              c.shape.batch, ", step_in_epoch ", c.position.step, " of ", c.shape.steps_per_epoch, ")");
  return c;
}

TrainPosition restore_checkpoint(const LoadedCheckpoint& ckpt, const TrainState& state, const TrainShape& now,
                                 int rank, const std::function<void(const std::string&)>& warn) {
  const std::string& path = ckpt.path;
  // The seed and the model are checked before anything is restored.
  EMBER_CHECK(ckpt.shape.seed == now.seed, "resume: '", path, "' was trained with --seed=", ckpt.shape.seed,
              " but this run has --seed=", now.seed,
              "; the seed orders and augments the data, so resume with the checkpoint's seed");
  const nn::StateDict model_sd = with_prefix(ckpt.tensors, "model.");
  check_same_model(state.model->state_dict(), model_sd, path);
  state.model->load_state_dict(model_sd);
  state.optimizer->load_state_dict(with_prefix(ckpt.tensors, "optim."));
  state.scheduler->load_state_dict(with_prefix(ckpt.tensors, "sched."));
  const nn::StateDict rng = with_prefix(ckpt.tensors, "rng.");
  EMBER_CHECK(rng.size() == 1 && rng[0].first == "default", "resume: '", path, "' lacks rng.default");
  default_generator().set_state(generator_from_tensor(rng[0].second, path));
  const nn::StateDict wrapper = with_prefix(ckpt.tensors, "ddp.");
  if (!wrapper.empty() && state.load_wrapper_state) state.load_wrapper_state(wrapper);

  TrainPosition pos = ckpt.position;
  const bool same_shape = ckpt.shape.world_size == now.world_size && ckpt.shape.batch == now.batch &&
                          ckpt.shape.steps_per_epoch == now.steps_per_epoch;
  if (!same_shape) {
    // The epoch's shards differ, so no step here matches one there: continue at the same fraction
    // of the epoch (the samples of the rest of the epoch may repeat or skip a few).
    const int64_t done = ckpt.position.step * ckpt.shape.batch * ckpt.shape.world_size;
    const int64_t per_step = now.batch * now.world_size;
    pos.step = std::min(now.steps_per_epoch, ckpt.shape.steps_per_epoch == ckpt.position.step
                                                 ? now.steps_per_epoch
                                                 : done / per_step);
    warn("checkpoint " + path + " was written with " + std::to_string(ckpt.shape.world_size) + " rank(s) x batch " +
         std::to_string(ckpt.shape.batch) + " (" + std::to_string(ckpt.shape.steps_per_epoch) +
         " steps/epoch); this run has " + std::to_string(now.world_size) + " x " + std::to_string(now.batch) + " (" +
         std::to_string(now.steps_per_epoch) + " steps/epoch): model, optimizer, LR schedule and RNG restored; the data "
         "continues at step " + std::to_string(pos.step) + " of epoch " + std::to_string(pos.epoch + 1) +
         " (the same share of the epoch, resharded), so the run is not bit-identical to an uninterrupted one");
  }
  if (!ckpt.per_rank_pattern.empty() && state.load_per_rank_state) {
    if (ckpt.shape.world_size != now.world_size) {
      warn("per-rank state (PowerSGD error feedback and low-rank memories) was saved by " +
           std::to_string(ckpt.shape.world_size) + " rank(s) and cannot be redistributed to " +
           std::to_string(now.world_size) + ": it is reset, and compression restarts from zero error");
    } else {
      const std::string file = per_rank_file(dirname_of(path), ckpt.per_rank_pattern, rank);
      nn::CheckpointMetadata meta;
      nn::StateDict sd = nn::load(file, &meta);
      EMBER_CHECK(meta["global_step"] == std::to_string(ckpt.position.global_step), "resume: '", file,
                  "' is from global step ", meta["global_step"], ", but '", path, "' from ",
                  ckpt.position.global_step);
      state.load_per_rank_state(sd);
    }
  } else if (!ckpt.per_rank_pattern.empty() || state.load_per_rank_state) {
    warn(ckpt.per_rank_pattern.empty()
             ? "checkpoint " + path + " holds no per-rank communication-hook state: the hook starts fresh"
             : "checkpoint " + path + " holds per-rank communication-hook state, which this run (no such hook) ignores");
  }
  if (pos.step >= now.steps_per_epoch) {  // the epoch was complete
    pos.step = 0;
    ++pos.epoch;
  }
  return pos;
}

}  // namespace ember::examples
