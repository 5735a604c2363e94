#include "distributed/hooks/grad_bucket.h"

namespace ember::distributed {

std::vector<Tensor> GradBucket::gradients() const {
  std::vector<Tensor> out;
  if (buffer_.is_sparse()) return {buffer_};
  for (size_t i = 0; i < offsets_.size(); ++i) {
    out.push_back(buffer_.narrow(0, static_cast<int64_t>(offsets_[i]), static_cast<int64_t>(lengths_[i]))
                      .view(sizes_[i]));
  }
  return out;
}

}  // namespace ember::distributed
