#include "nn/layers/conv.h"

#include <cmath>

#include "nn/init.h"
#include "tensor/factories.h"

namespace ember::nn {

Conv2d::Conv2d(const Conv2dOptions& o, Generator* gen) : Module("Conv2d"), options_(o) {
  EMBER_CHECK(o.in_channels > 0 && o.out_channels > 0 && o.groups > 0 &&
                  o.in_channels % o.groups == 0 && o.out_channels % o.groups == 0,
              "Conv2d: in_channels (", o.in_channels, ") and out_channels (", o.out_channels,
              ") must be positive and divisible by groups (", o.groups, ")");
  register_parameter("weight", empty({o.out_channels, o.in_channels / o.groups, o.kernel_size[0],
                                      o.kernel_size[1]}));
  if (o.bias) register_parameter("bias", empty({o.out_channels}));
  reset_parameters(gen);
}

Conv2d::Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias,
               Generator* gen)
    : Conv2d(Conv2dOptions{in, out, {kernel, kernel}, {stride, stride}, {padding, padding}, {1, 1}, 1,
                           bias},
             gen) {}

void Conv2d::reset_parameters(Generator* gen) {
  init::kaiming_uniform_(weight(), std::sqrt(5.0), init::FanMode::kFanIn,
                         init::Nonlinearity::kLeakyRelu, gen);
  if (options_.bias) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight()).first;
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    init::uniform_(param("bias"), -bound, bound, gen);
  }
}

Tensor Conv2d::forward(const Tensor& input) {
  Conv2dParams p{options_.stride, options_.padding, options_.dilation, options_.groups};
  return conv2d(input, weight(), options_.bias ? param("bias") : Tensor(), p);
}

std::string Conv2d::extra_repr() const {
  const auto& o = options_;
  return detail::str_cat(o.in_channels, ", ", o.out_channels, ", kernel_size=(", o.kernel_size[0],
                         ", ", o.kernel_size[1], "), stride=(", o.stride[0], ", ", o.stride[1],
                         "), padding=(", o.padding[0], ", ", o.padding[1], ")",
                         o.groups > 1 ? detail::str_cat(", groups=", o.groups) : "",
                         o.bias ? "" : ", bias=false");
}

}  // namespace ember::nn
