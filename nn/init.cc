#include "nn/init.h"

#include <cmath>

#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::nn::init {

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  EMBER_CHECK(t.dim() >= 2, "init: fan in and fan out can not be computed for a tensor with fewer "
              "than 2 dimensions, got ", t.describe());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(Nonlinearity nl, double param) {
  switch (nl) {
    case Nonlinearity::kLinear: return 1.0;
    case Nonlinearity::kSigmoid: return 1.0;
    case Nonlinearity::kTanh: return 5.0 / 3.0;
    case Nonlinearity::kRelu: return std::sqrt(2.0);
    case Nonlinearity::kLeakyRelu: return std::sqrt(2.0 / (1 + param * param));
  }
  return 1.0;
}

const Tensor& uniform_(const Tensor& t, double low, double high, Generator* gen) {
  NoGradGuard g;
  return ember::uniform_(t, low, high, gen);
}

const Tensor& normal_(const Tensor& t, double mean, double std, Generator* gen) {
  NoGradGuard g;
  return ember::normal_(t, mean, std, gen);
}

const Tensor& constant_(const Tensor& t, double value) {
  NoGradGuard g;
  return fill_(t, value);
}
const Tensor& zeros_(const Tensor& t) { return constant_(t, 0.0); }
const Tensor& ones_(const Tensor& t) { return constant_(t, 1.0); }

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nl) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const int64_t fan = mode == FanMode::kFanIn ? fan_in : fan_out;
  EMBER_CHECK(fan > 0, "init: cannot initialise a tensor with zero fan, got ", t.describe());
  return calculate_gain(nl, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

const Tensor& kaiming_uniform_(const Tensor& t, double a, FanMode mode, Nonlinearity nl,
                               Generator* gen) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl);
  return init::uniform_(t, -bound, bound, gen);
}

const Tensor& kaiming_normal_(const Tensor& t, double a, FanMode mode, Nonlinearity nl,
                              Generator* gen) {
  return init::normal_(t, 0.0, kaiming_std(t, a, mode, nl), gen);
}

const Tensor& xavier_uniform_(const Tensor& t, double gain, Generator* gen) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const double a = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return init::uniform_(t, -a, a, gen);
}

const Tensor& xavier_normal_(const Tensor& t, double gain, Generator* gen) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return init::normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

}  // namespace ember::nn::init
