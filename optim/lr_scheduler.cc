#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>

#include "tensor/factories.h"

namespace ember::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const auto& g : optimizer_.param_groups()) base_lrs_.push_back(g.options().get_lr());
}

void LRScheduler::step() {
  ++last_epoch_;
  apply();
}

void LRScheduler::apply() {
  auto& groups = optimizer_.param_groups();
  EMBER_CHECK(groups.size() == base_lrs_.size(), "LRScheduler: the optimizer had ", base_lrs_.size(),
              " parameter groups when the scheduler was made and has ", groups.size(), " now");
  last_lr_.clear();
  for (size_t g = 0; g < groups.size(); ++g) {
    const double lr = lr_at(base_lrs_[g], last_epoch_);
    groups[g].options().set_lr(lr);
    last_lr_.push_back(lr);
  }
}

nn::StateDict LRScheduler::state_dict() const {
  nn::StateDict sd;
  put_number(sd, "last_epoch", static_cast<double>(last_epoch_));
  sd.emplace_back("base_lrs",
                  from_vector<double>(base_lrs_, {static_cast<int64_t>(base_lrs_.size())}));
  return sd;
}

void LRScheduler::load_state_dict(const nn::StateDict& sd) {
  const double epoch = get_number(sd, "last_epoch");
  const Tensor b = nn::find_in(sd, "base_lrs");
  EMBER_CHECK(b.defined() && !b.is_sparse() && b.dim() == 1 &&
                  b.numel() == static_cast<int64_t>(base_lrs_.size()),
              "LRScheduler::load_state_dict: 'base_lrs' must have shape [", base_lrs_.size(),
              "], got ", b.defined() ? b.describe() : std::string("nothing"));
  EMBER_CHECK(epoch >= 0 && epoch == std::floor(epoch), "LRScheduler::load_state_dict: invalid ",
              "last_epoch ", epoch);
  const Tensor bd = b.to(kFloat64).contiguous();
  base_lrs_.assign(bd.data_ptr<double>(), bd.data_ptr<double>() + bd.numel());
  last_epoch_ = static_cast<int64_t>(epoch);
  apply();
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  EMBER_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

double StepLR::lr_at(double base_lr, int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  EMBER_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
              "MultiStepLR: milestones must be increasing");
  initial_step();
}

double MultiStepLR::lr_at(double base_lr, int64_t epoch) const {
  // bisect_right: a milestone equal to epoch has already been passed.
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base_lr * std::pow(gamma_, static_cast<double>(passed));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  EMBER_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  initial_step();
}

double CosineAnnealingLR::lr_at(double base_lr, int64_t epoch) const {
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(M_PI * epoch / t_max_)) / 2;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  EMBER_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR: start_factor must be in (0, 1], got ",
              start_factor);
  EMBER_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR: end_factor must be in [0, 1], got ",
              end_factor);
  EMBER_CHECK(total_iters > 0, "LinearLR: total_iters must be positive, got ", total_iters);
  initial_step();
}

double LinearLR::lr_at(double base_lr, int64_t epoch) const {
  const double progress = static_cast<double>(std::min(total_iters_, epoch)) / total_iters_;
  return base_lr * (start_factor_ + (end_factor_ - start_factor_) * progress);
}

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, int64_t warmup_iters, int64_t decay_iters, double min_lr_factor)
    : LRScheduler(optimizer), warmup_iters_(warmup_iters), decay_iters_(decay_iters), min_lr_factor_(min_lr_factor) {
  EMBER_CHECK(warmup_iters >= 0 && warmup_iters < decay_iters, "WarmupCosineLR: needs 0 <= warmup_iters < decay_iters, ",
              "got warmup_iters ", warmup_iters, " and decay_iters ", decay_iters);
  EMBER_CHECK(min_lr_factor >= 0 && min_lr_factor <= 1, "WarmupCosineLR: min_lr_factor must be in [0, 1], got ",
              min_lr_factor);
  initial_step();
}

double WarmupCosineLR::lr_at(double base_lr, int64_t epoch) const {
  if (epoch < warmup_iters_) {
    return base_lr * static_cast<double>(epoch + 1) / static_cast<double>(warmup_iters_ + 1);
  }
  const double min_lr = base_lr * min_lr_factor_;
  if (epoch > decay_iters_) return min_lr;
  const double r = static_cast<double>(epoch - warmup_iters_) / static_cast<double>(decay_iters_ - warmup_iters_);
  return min_lr + (base_lr - min_lr) * (1 + std::cos(M_PI * r)) / 2;
}

}  // namespace ember::optim
