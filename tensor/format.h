// fmt support: fmt::format("{}", tensor) prints like PyTorch; Device and ScalarType format by name.
#pragma once

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "tensor/tensor.h"

template <>
struct fmt::formatter<ember::Tensor> : fmt::ostream_formatter {};
template <>
struct fmt::formatter<ember::Device> : fmt::ostream_formatter {};
template <>
struct fmt::formatter<ember::ScalarType> : fmt::ostream_formatter {};
