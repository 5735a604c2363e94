// One capability level's raw-Eigen baselines (bench/eigen_baselines.h).
#include <algorithm>

#include <Eigen/Core>

#include "bench/eigen_baselines.h"

namespace ember::bench::CPU_CAPABILITY {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void gemm_f32(const float* a, const float* b, float* c, int64_t n, int64_t k, int64_t m) {
  Eigen::Map<RowMat>(c, n, m).noalias() =
      Eigen::Map<const RowMat>(a, n, k) * Eigen::Map<const RowMat>(b, k, m);
}

// The columns [C*9, S*S] of one image [C, S, S] for a 3x3 kernel with zero padding 1.
void im2col3x3(const float* x, float* cols, int64_t C, int64_t S) {
  const int64_t P = S * S;
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        float* row = cols + ((c * 3 + i) * 3 + j) * P;
        for (int64_t h = 0; h < S; ++h) {
          const int64_t ih = h + i - 1;
          for (int64_t v = 0; v < S; ++v) {
            const int64_t iv = v + j - 1;
            row[h * S + v] = ih < 0 || ih >= S || iv < 0 || iv >= S ? 0.f : x[(c * S + ih) * S + iv];
          }
        }
      }
    }
  }
}

void conv3x3_f32(const float* x, const float* w, float* cols, float* out, int64_t N, int64_t C,
                 int64_t O, int64_t S) {
  const int64_t K = C * 9, P = S * S;
  Eigen::Map<const RowMat> wm(w, O, K);
  for (int64_t n = 0; n < N; ++n) {
    im2col3x3(x + n * C * P, cols, C, S);
    Eigen::Map<RowMat>(out + n * O * P, O, P).noalias() = wm * Eigen::Map<const RowMat>(cols, K, P);
  }
}

void conv3x3_input_grad_f32(const float* w, const float* grad_out, float* cols, float* grad_x,
                            int64_t N, int64_t C, int64_t O, int64_t S) {
  const int64_t K = C * 9, P = S * S;
  Eigen::Map<const RowMat> wm(w, O, K);
  for (int64_t n = 0; n < N; ++n) {
    Eigen::Map<RowMat>(cols, K, P).noalias() =
        wm.transpose() * Eigen::Map<const RowMat>(grad_out + n * O * P, O, P);
    float* gx = grad_x + n * C * P;
    std::fill(gx, gx + C * P, 0.f);
    for (int64_t c = 0; c < C; ++c) {  // col2im: each column entry adds to the pixel it came from
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t j = 0; j < 3; ++j) {
          const float* row = cols + ((c * 3 + i) * 3 + j) * P;
          for (int64_t h = 0; h < S; ++h) {
            const int64_t ih = h + i - 1;
            if (ih < 0 || ih >= S) continue;
            for (int64_t v = 0; v < S; ++v) {
              const int64_t iv = v + j - 1;
              if (iv >= 0 && iv < S) gx[(c * S + ih) * S + iv] += row[h * S + v];
            }
          }
        }
      }
    }
  }
}

void conv3x3_weight_grad_f32(const float* x, const float* grad_out, float* cols, float* grad_w,
                             int64_t N, int64_t C, int64_t O, int64_t S) {
  const int64_t K = C * 9, P = S * S;
  Eigen::Map<RowMat> gw(grad_w, O, K);
  gw.setZero();
  for (int64_t n = 0; n < N; ++n) {
    im2col3x3(x + n * C * P, cols, C, S);
    gw.noalias() += Eigen::Map<const RowMat>(grad_out + n * O * P, O, P) *
                    Eigen::Map<const RowMat>(cols, K, P).transpose();
  }
}

}  // namespace

#define EMBER_STR2(x) #x
#define EMBER_STR(x) EMBER_STR2(x)
extern const EigenBaselines kEigenBaselines{EMBER_STR(CPU_CAPABILITY), gemm_f32, conv3x3_f32,
                                            conv3x3_input_grad_f32, conv3x3_weight_grad_f32};

}  // namespace ember::bench::CPU_CAPABILITY
