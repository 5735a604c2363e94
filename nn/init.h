// nn::init: in-place initialisers with PyTorch's formulas (fan computation, gains, kaiming and
// xavier variants). All draw from an ember::Generator (the default one when none is given).
#pragma once

#include <string>
#include <utility>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace ember::nn::init {

enum class FanMode { kFanIn, kFanOut };
enum class Nonlinearity { kLinear, kRelu, kLeakyRelu, kTanh, kSigmoid };

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
double calculate_gain(Nonlinearity nl, double param = 0.01);

const Tensor& uniform_(const Tensor& t, double low = 0, double high = 1, Generator* gen = nullptr);
const Tensor& normal_(const Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);
const Tensor& constant_(const Tensor& t, double value);
const Tensor& zeros_(const Tensor& t);
const Tensor& ones_(const Tensor& t);
const Tensor& kaiming_uniform_(const Tensor& t, double a = 0, FanMode mode = FanMode::kFanIn,
                               Nonlinearity nl = Nonlinearity::kLeakyRelu, Generator* gen = nullptr);
const Tensor& kaiming_normal_(const Tensor& t, double a = 0, FanMode mode = FanMode::kFanIn,
                              Nonlinearity nl = Nonlinearity::kLeakyRelu, Generator* gen = nullptr);
const Tensor& xavier_uniform_(const Tensor& t, double gain = 1, Generator* gen = nullptr);
const Tensor& xavier_normal_(const Tensor& t, double gain = 1, Generator* gen = nullptr);

}  // namespace ember::nn::init
