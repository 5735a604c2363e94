// docs/design.md step 4: compute_bucket_assignment_by_size.
#include "distributed/ddp/bucketing.h"

#include <algorithm>
#include <utility>

namespace ember::distributed {
namespace {

struct BucketKey {
  ScalarType dtype;
  Device device;
  bool operator==(const BucketKey& o) const { return dtype == o.dtype && device == o.device; }
};

struct Accumulator {
  BucketKey key;
  std::vector<size_t> indices;
  size_t size = 0;
  size_t limit_pos = 0;  // position in bucket_size_limits for this key
};

void check_arguments(const std::vector<Tensor>& tensors, const std::vector<size_t>& bucket_size_limits,
                     const std::vector<bool>& expect_sparse_gradient, const std::vector<int64_t>& tensor_indices) {
  EMBER_CHECK(!tensors.empty(), "compute_bucket_assignment_by_size: expected at least one tensor");
  EMBER_CHECK(!bucket_size_limits.empty(), "compute_bucket_assignment_by_size: expected at least one bucket size limit");
  EMBER_CHECK(expect_sparse_gradient.empty() || expect_sparse_gradient.size() == tensors.size(),
              "compute_bucket_assignment_by_size: expect_sparse_gradient has ", expect_sparse_gradient.size(),
              " entries for ", tensors.size(), " tensors");
  EMBER_CHECK(tensor_indices.empty() || tensor_indices.size() == tensors.size(),
              "compute_bucket_assignment_by_size: tensor_indices has ", tensor_indices.size(),
              " entries for ", tensors.size(), " tensors");
}

}  // namespace

std::vector<std::vector<size_t>> compute_bucket_assignment_by_size(const std::vector<Tensor>& tensors,
                                                                   const std::vector<size_t>& bucket_size_limits,
                                                                   const std::vector<bool>& expect_sparse_gradient,
                                                                   const std::vector<int64_t>& tensor_indices) {
  check_arguments(tensors, bucket_size_limits, expect_sparse_gradient, tensor_indices);
  std::vector<std::vector<size_t>> result;
  // Accumulators in first-seen order of their (dtype, device) key.
  std::vector<Accumulator> buckets;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t.defined() && !t.is_sparse(), "compute_bucket_assignment_by_size: tensor ", i,
                " is ", t.describe(), "; sparse (or undefined) parameters are not supported");
    const size_t index = tensor_indices.empty() ? i : static_cast<size_t>(tensor_indices[i]);
    // As in PyTorch, the sparse flag is looked up by the tensor's index.
    if (!expect_sparse_gradient.empty() && index < expect_sparse_gradient.size() &&
        expect_sparse_gradient[index]) {
      result.push_back({index});
      continue;
    }
    BucketKey key{t.dtype(), t.device()};
    auto it = std::find_if(buckets.begin(), buckets.end(), [&](const Accumulator& a) { return a.key == key; });
    if (it == buckets.end()) {
      buckets.push_back(Accumulator{key, {}, 0, 0});
      it = buckets.end() - 1;
    }
    it->indices.push_back(index);
    it->size += static_cast<size_t>(t.numel()) * t.element_size();
    if (it->size >= bucket_size_limits[it->limit_pos]) {
      result.push_back(std::move(it->indices));
      it->indices.clear();
      it->size = 0;
      if (it->limit_pos + 1 < bucket_size_limits.size()) ++it->limit_pos;
    }
  }
  // Leftover buckets in reverse first-seen key order. PyTorch iterates an std::unordered_map here,
  // and libstdc++ puts each new key at the front of its node list, so torch 1.13 emits them in this
  // order (checked for every order of up to the 8 CPU dtypes, tests/distributed/ddp/bucketing_test).
  // It only shows when tensor_indices is given (rebuild path: no sort afterwards); any fixed order
  // would be correct since rank 0's rebuilt assignment is broadcast, but we match PyTorch's.
  for (auto a = buckets.rbegin(); a != buckets.rend(); ++a) {
    if (!a->indices.empty()) result.push_back(std::move(a->indices));
  }
  // Without explicit indices, order buckets by their smallest tensor index (tensors are assumed to
  // be in forward order, so buckets then become ready in consecutive order once reversed).
  if (tensor_indices.empty()) {
    std::stable_sort(result.begin(), result.end(), [](const auto& a, const auto& b) {
      return *std::min_element(a.begin(), a.end()) < *std::min_element(b.begin(), b.end());
    });
  }
  return result;
}

}  // namespace ember::distributed
