// The loss one process computes for a data-parallel step of `world` ranks: the mean over the ranks
// of each rank's mean loss on its own `rows` rows of the global batch. Its gradient is what DDP's
// averaging gives every rank. `as_rank(r)` runs before rank r's rows go through the model, for a
// model whose forward depends on the rank (a branch only some ranks use).
#pragma once

#include <cstdint>
#include <functional>

#include <ember/nn.h>

namespace ember::examples {

inline Tensor mean_of_shard_losses(nn::Module& model, const Tensor& x, const Tensor& y, int world, int64_t rows,
                                   const std::function<void(int)>& as_rank) {
  Tensor total;
  for (int r = 0; r < world; ++r) {
    as_rank(r);
    Tensor loss = div(nn::functional::cross_entropy(model.forward(x.narrow(0, r * rows, rows)),
                                                    y.narrow(0, r * rows, rows)),
                      static_cast<double>(world));
    total = total.defined() ? add(total, loss) : loss;
  }
  return total;
}

}  // namespace ember::examples
