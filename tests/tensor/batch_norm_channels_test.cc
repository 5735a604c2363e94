// Batch norm's per-channel arithmetic (tensor/batch_norm_channels.h) evaluated both ways: per
// channel on doubles, as the CPU does, and as [C] float64 tensor ops, as a GPU does (here on the
// CPU's kernels, at this suite's capability level). Note [Per-channel batch-norm values stay on the
// device] promises the same bits.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/all.h"
#include "tensor/batch_norm_channels.h"

namespace ember {
namespace {

namespace bnc = batch_norm_channels;
constexpr int64_t kChannels = 37;

class BatchNormChannelsTest : public ::testing::Test {
 protected:
  // Values spanning several magnitudes, so that a product or quotient rounded differently shows.
  Tensor values(double low, double high) {
    return rand({kChannels}, &gen_, kFloat64) * (high - low) + low;
  }
  static std::vector<double> host(const Tensor& t) {
    const Tensor c = t.contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  }
  // Every channel's host result has the bits of the tensor op's element.
  template <typename F>
  void expect_same_bits(const Tensor& by_tensor_ops, const F& by_channel, const char* what) {
    const std::vector<double> t = host(by_tensor_ops);
    ASSERT_EQ(static_cast<int64_t>(t.size()), kChannels) << what;
    for (int64_t c = 0; c < kChannels; ++c) {
      const double h = by_channel(c);
      EXPECT_EQ(std::memcmp(&h, &t[c], sizeof h), 0)
          << what << ", channel " << c << ": host " << h << ", tensor ops " << t[c];
    }
  }

  Generator gen_{2024};
};

TEST_F(BatchNormChannelsTest, RunningStatisticsAgree) {
  const Tensor running = values(-3, 3), batch = values(1e-6, 40);
  const std::vector<double> r = host(running), b = host(batch);
  for (double momentum : {0.1, 0.01, 0.3}) {
    expect_same_bits(bnc::running_average(running, batch, momentum),
                     [&](int64_t c) { return bnc::running_average(r[c], b[c], momentum); },
                     "running_average");
  }
  for (int64_t M : {2, 3, 64 * 32 * 32, 1000003}) {
    expect_same_bits(bnc::unbiased(batch, M), [&](int64_t c) { return bnc::unbiased(b[c], M); },
                     "unbiased");
  }
}

TEST_F(BatchNormChannelsTest, NormalisationAgrees) {
  const Tensor mean = values(-5, 5), var = values(1e-7, 50), w = values(-2, 2), b = values(-1, 1);
  const std::vector<double> m = host(mean), v = host(var), wh = host(w), bh = host(b);
  for (double eps : {1e-5, 1e-3}) {
    const auto t = bnc::normalisation(mean, var, w, b, eps);
    const auto h = [&](int64_t c) { return bnc::normalisation(m[c], v[c], wh[c], bh[c], eps); };
    expect_same_bits(t.invstd, [&](int64_t c) { return h(c).invstd; }, "invstd");
    expect_same_bits(t.scale, [&](int64_t c) { return h(c).scale; }, "scale");
    expect_same_bits(t.shift, [&](int64_t c) { return h(c).shift; }, "shift");
  }
}

TEST_F(BatchNormChannelsTest, GradientCoefficientsAgree) {
  const Tensor w = values(-2, 2), invstd = values(0.01, 30), sum_g = values(-100, 100),
               sum_gx = values(-50, 50);
  const std::vector<double> wh = host(w), ih = host(invstd), g = host(sum_g), gx = host(sum_gx);
  for (bool training : {true, false}) {
    const int64_t M = 64 * 16 * 16;
    const auto t = bnc::input_gradient(w, invstd, sum_g, sum_gx, M, training);
    const auto h = [&](int64_t c) {
      return bnc::input_gradient(wh[c], ih[c], g[c], gx[c], M, training);
    };
    expect_same_bits(t.a, [&](int64_t c) { return h(c).a; }, "a");
    if (training) {
      expect_same_bits(t.b, [&](int64_t c) { return h(c).b; }, "b");
      expect_same_bits(t.d, [&](int64_t c) { return h(c).d; }, "d");
    } else {
      EXPECT_FALSE(t.b.defined());
      EXPECT_EQ(h(0).b, 0.0);
    }
  }
  expect_same_bits(
      bnc::weight_gradient(sum_gx, invstd),
      [&](int64_t c) { return bnc::weight_gradient(gx[c], ih[c]); }, "weight gradient");
}

}  // namespace
}  // namespace ember
