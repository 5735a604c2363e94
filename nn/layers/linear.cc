#include "nn/layers/linear.h"

#include <cmath>

#include "nn/init.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator* gen)
    : Module("Linear"), in_features_(in_features), out_features_(out_features), has_bias_(bias) {
  EMBER_CHECK(in_features > 0 && out_features > 0, "Linear: features must be positive, got in=",
              in_features, " out=", out_features);
  register_parameter("weight", empty({out_features, in_features}));
  if (bias) register_parameter("bias", empty({out_features}));
  reset_parameters(gen);
}

void Linear::reset_parameters(Generator* gen) {
  init::kaiming_uniform_(weight(), std::sqrt(5.0), init::FanMode::kFanIn,
                         init::Nonlinearity::kLeakyRelu, gen);
  if (has_bias_) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
    init::uniform_(param("bias"), -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& input) {
  EMBER_CHECK(input.defined() && input.dim() >= 1 && input.size(-1) == in_features_,
              "Linear: expected input [..., ", in_features_, "], got ", input.describe());
  if (input.dim() == 2 && has_bias_) return addmm(param("bias"), input, weight().t());
  Tensor y = matmul(input, weight().t());
  return has_bias_ ? add(y, param("bias")) : y;
}

std::string Linear::extra_repr() const {
  return detail::str_cat("in_features=", in_features_, ", out_features=", out_features_,
                         ", bias=", has_bias_ ? "true" : "false");
}

}  // namespace ember::nn
