// A model whose parameter is marked ready twice in one backward, for the DDP suites' "marked twice"
// cases (ddp_errors_test under mpirun, reducer_test in one process).
#pragma once

#include <memory>

#include "nn/nn.h"
#include "tensor/all.h"

namespace ember::distributed::testing {

// The hidden activation's hook runs a reentrant backward of a side loss through fc2 alone (built in
// forward, while grad mode is on). fc2.weight's AccumulateGrad then fires twice in one iteration;
// fc1 is untouched by the side loss, so the single bucket is never launched before the error.
struct ReentrantNet : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  explicit ReentrantNet(Generator* g) : nn::Module("ReentrantNet") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8, true, g));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 2, false, g));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(fc1->forward(x));
    Tensor side = sum(fc2->forward(ones({1, 8})));
    h.register_hook([side](const Tensor& grad) {
      side.backward();
      return grad;
    });
    return fc2->forward(h);
  }
};

}  // namespace ember::distributed::testing
