// Helpers shared by the optim suites: a leaf parameter from values, setting its gradient, reading
// values back, an error matcher that checks the ember::Error message, and SGD's update as tensor ops.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/common/error_matchers.h"

#include "optim/optim.h"
#include "tensor/all.h"
#include "tensor/sparse.h"

namespace ember::optim::testing {

inline Tensor param(const std::vector<double>& v, const Shape& shape = {}) {
  Tensor p = from_vector<double>(v, shape);
  p.set_requires_grad(true);
  return p;
}

inline void set_grad(const Tensor& p, const std::vector<double>& g) {
  p.mutable_grad() = from_vector<double>(g, p.sizes());
}

inline std::vector<double> vals(const Tensor& t) {
  Tensor c = t.to(kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

using ::ember::testing::throws_with;

// SGD's single-tensor rule as tensor ops (torch.optim.SGD; optim::SGD's path for what
// fused_sgd_ does not take): buf is the momentum buffer, undefined before the first step.
inline void sgd_op_by_op(const Tensor& p, const Tensor& grad, Tensor& buf,
                         const SgdHyperparameters& h) {
  Tensor d_p = h.weight_decay != 0 ? grad.add(p, h.weight_decay) : grad;
  if (h.momentum != 0) {
    if (!buf.defined()) {
      buf = d_p.clone();
    } else {
      buf.mul_(h.momentum).add_(d_p, 1 - h.dampening);
    }
    d_p = h.nesterov ? d_p.add(buf, h.momentum) : buf;
  }
  p.add_(d_p, -h.lr);
}


// Every element within tol of the expected values.
#define EXPECT_VALUES_NEAR(tensor, expected, tol)                                 \
  do {                                                                            \
    const std::vector<double> got_ = ::ember::optim::testing::vals(tensor);       \
    const std::vector<double> exp_ = (expected);                                  \
    ASSERT_EQ(got_.size(), exp_.size());                                          \
    for (size_t i_ = 0; i_ < got_.size(); ++i_) EXPECT_NEAR(got_[i_], exp_[i_], tol) << "at " << i_; \
  } while (0)

}  // namespace ember::optim::testing
