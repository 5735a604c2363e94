// Learning-rate schedulers: StepLR, MultiStepLR, CosineAnnealingLR, LinearLR (linear warmup) and
// WarmupCosineLR (nanoGPT's warm-up then cosine decay).
// Each computes PyTorch's closed form (torch.optim.lr_scheduler's _get_closed_form_lr) from the
// group's base lr and the epoch counter, then writes it into every parameter group:
//   StepLR             base * gamma^(epoch / step_size)            (integer division)
//   MultiStepLR        base * gamma^(number of milestones <= epoch)
//   CosineAnnealingLR  eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
//   LinearLR           base * (start + (end - start) * min(epoch, total_iters) / total_iters)
//   WarmupCosineLR     nanoGPT's get_lr, below
// As in PyTorch, constructing a scheduler records each group's current lr as its base lr and
// applies epoch 0; each step() advances one epoch. Because the closed forms overwrite the lr,
// two schedulers on one optimizer do not compose (PyTorch's chainable form would).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/state_dict.h"
#include "optim/optimizer.h"

namespace ember::optim {

// The base of the schedulers (PyTorch's torch.optim.lr_scheduler.LRScheduler): keeps each group's
// base lr and the epoch and writes lr_at(base lr, epoch) into the groups. It keeps a reference to
// the optimizer, which must outlive it.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one epoch and sets every group's lr.
  void step();
  // The lrs set by the last step (or by construction), one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }

  // {"last_epoch": 0-dim float64, "base_lrs": float64 [groups]}; loading re-applies last_epoch's lr.
  nn::StateDict state_dict() const;
  void load_state_dict(const nn::StateDict& sd);

 protected:
  // The lr of a group whose base lr is `base_lr` at `epoch` (>= 0).
  virtual double lr_at(double base_lr, int64_t epoch) const = 0;
  // Derived constructors call this last (lr_at is not virtual yet inside the base constructor).
  void initial_step() { step(); }

 private:
  void apply();
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
};

// PyTorch's StepLR: the lr times gamma every step_size epochs. Throws unless step_size > 0.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// PyTorch's MultiStepLR: the lr times gamma at each milestone epoch. Throws unless the milestones
// are sorted.
class MultiStepLR : public LRScheduler {
 public:
  // Milestones must be increasing.
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

// PyTorch's CosineAnnealingLR (its closed form): the lr falls from the base lr to eta_min along
// half a cosine over T_max epochs. Throws unless T_max > 0.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// torch.optim.lr_scheduler.LinearLR: the factor ramps linearly from start_factor to end_factor
// over total_iters steps, then stays.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  double start_factor_;
  double end_factor_;
  int64_t total_iters_;
};

// Linear warmup: LinearLR from start_factor to 1 over warmup_iters steps.
class LinearWarmup : public LinearLR {
 public:
  LinearWarmup(Optimizer& optimizer, int64_t warmup_iters, double start_factor = 1.0 / 3)
      : LinearLR(optimizer, start_factor, 1.0, warmup_iters) {}
};

// nanoGPT's learning rate (train.py's get_lr), with min_lr = base * min_lr_factor:
//   epoch < warmup_iters          base * (epoch + 1) / (warmup_iters + 1)
//   epoch > decay_iters           min_lr
//   otherwise                     min_lr + (base - min_lr) * (1 + cos(pi * r)) / 2,
//                                 r = (epoch - warmup_iters) / (decay_iters - warmup_iters)
// PyTorch has no one scheduler for it (SequentialLR of LinearLR and CosineAnnealingLR comes
// close). Throws unless 0 <= warmup_iters < decay_iters and min_lr_factor is in [0, 1].
class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& optimizer, int64_t warmup_iters, int64_t decay_iters, double min_lr_factor = 0.1);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t warmup_iters_;
  int64_t decay_iters_;
  double min_lr_factor_;
};

}  // namespace ember::optim
