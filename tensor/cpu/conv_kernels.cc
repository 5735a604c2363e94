// conv2d forward and backward CPU kernels: image by image, im2col into a per-thread buffer and one
// GEMM per group straight into NCHW. Backward recomputes the columns rather than keeping them alive
// between forward and backward. Float 3x3 stride-1 convolutions (ResNet's 3x3 layers: forward,
// input gradient, and the weight gradient on maps of 16 tiles or more) run Winograd F(2x2, 3x3)
// (tensor/cpu/winograd_conv.h); other stride-1 float convolutions on wide enough maps skip im2col
// with the direct kernel (tensor/cpu/direct_conv.h).
// Threads split the images (forward, input gradient) and fixed chunks of images (weight gradient;
// Note [Deterministic parallel kernels]); a backward pass with both gradients runs them in one
// region (Note [Two-part regions]), or, by Winograd, computes both in the weight gradient's chunks
// (Note [Winograd input gradient]). Checks and output allocation are the op's (tensor/conv.cc).
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "tensor/cpu/direct_conv.h"
#include "tensor/cpu/im2col.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/cpu/thread_scratch.h"
#include "tensor/cpu/winograd_conv.h"
#include "tensor/factories.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MapMatrix = Eigen::Map<RowMatrix<T>>;
template <typename T>
using ConstMapMatrix = Eigen::Map<const RowMatrix<T>>;

// Images per weight-gradient chunk: each chunk sums its images into its own buffer and the chunks
// are added in order, so the result is the same for any thread count. 8 rather than 4: Winograd's
// products run over a chunk's tiles side by side, and at 7x7 4 images were too short a product.
constexpr int64_t kImagesPerWeightChunk = 8;

// A 1x1, stride-1, unpadded convolution reads the input plane directly as its column matrix.
bool is_pointwise(const ConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

// Uninitialised working memory from the caching allocator (a std::vector would zero it first).
template <typename T>
Tensor scratch(int64_t numel) {
  return empty({numel}, dtype_of<T>());
}

// One image's column matrix [C*kh*kw, Ho*Wo]: im2col into `buffer` (image_columns_size floats;
// strided layers also keep their parity planes there), or the plane itself.
inline int64_t image_columns_size(const ConvGeometry& g) {
  return is_pointwise(g) ? 0 : g.C * g.kh * g.kw * g.Ho * g.Wo + im2col_parity_size(g);
}

template <typename T>
const T* image_columns(const T* image, const ConvGeometry& g, T* buffer) {
  if (is_pointwise(g)) return image;
  ConvGeometry one = g;
  one.N = 1;
  if (im2col_by_parity(g)) {  // Note [Stride-2 columns from parity planes]
    im2col_stride2(image, one, buffer, buffer + g.C * g.kh * g.kw * g.Ho * g.Wo);
  } else {
    im2col(image, one, buffer);
  }
  return buffer;
}

// out [O, P] of one image += b [O], channel by channel.
template <typename T>
void add_bias(T* out, const T* b, int64_t O, int64_t P) {
  for (int64_t c = 0; c < O; ++c) {
    T* row = out + c * P;
    for (int64_t i = 0; i < P; ++i) row[i] += b[c];
  }
}

// Images [begin, end): the column matrix of one image stays in cache, the product lands directly
// in NCHW layout, and nothing is permuted afterwards.
template <typename T>
void conv_forward_images(const T* in, const T* w, const T* b, const ConvGeometry& g, int64_t O,
                         int64_t G, T* o, int64_t begin, int64_t end) {
  const int64_t Og = O / G, Cg = g.C / G, K = Cg * g.kh * g.kw, P = g.Ho * g.Wo;
  const bool direct = std::is_same_v<T, float> && G == 1 && direct_conv_applies(g, O);
  Tensor buffer = scratch<T>(direct ? direct_conv_scratch_size(g, O) : image_columns_size(g));
  for (int64_t n = begin; n < end; ++n) {
    if constexpr (std::is_same_v<T, float>) {
      if (direct) direct_conv(in + n * g.C * g.H * g.W, w, g, O, o + n * O * P, buffer.data_ptr<T>());
    }
    if (!direct) {
      const T* cols = image_columns(in + n * g.C * g.H * g.W, g, buffer.data_ptr<T>());
      for (int64_t gi = 0; gi < G; ++gi) {
        MapMatrix<T> dst(o + (n * O + gi * Og) * P, Og, P);
        dst.noalias() = ConstMapMatrix<T>(w + gi * Og * K, Og, K) * ConstMapMatrix<T>(cols + gi * K * P, K, P);
      }
    }
    if (b) add_bias(o + n * O * P, b, O, P);
  }
}

// Images [begin, end) by Winograd F(2x2, 3x3) from the transformed weights u, in the thread's own
// working memory (Note [Thread scratch]).
void winograd_forward_images(const float* in, const float* u, const float* b, const ConvGeometry& g,
                             int64_t O, float* o, int64_t begin, int64_t end) {
  const int64_t P = g.Ho * g.Wo, per_call = winograd_images_per_call(g);
  ThreadScratch buffer(winograd_conv_scratch_size(g, O, std::min(per_call, end - begin)));
  for (int64_t n = begin; n < end; n += per_call) {
    const int64_t images = std::min(per_call, end - n);
    winograd_conv(in + n * g.C * g.H * g.W, u, g, O, images, o + n * O * P, buffer.data());
    if (b) {
      for (int64_t k = n; k < n + images; ++k) add_bias(o + k * O * P, b, O, P);
    }
  }
}

// The whole batch by Winograd F(2x2, 3x3), for geometries where winograd_conv_applies.
void winograd_forward(const float* in, const float* w, const float* b, const ConvGeometry& g,
                      int64_t O, float* o) {
  Tensor u = scratch<float>(winograd_weight_size(g, O));  // shared by every image and thread
  winograd_transform_weight(w, WinogradWeight::kAsGiven, g, O, u.data_ptr<float>());
  const float* uw = u.data_ptr<float>();
  parallel_for(0, g.N, 1, [&](int64_t begin, int64_t end) {
    winograd_forward_images(in, uw, b, g, O, o, begin, end);
  });
}

template <typename T>
void conv_forward_impl(const Tensor& out, const Tensor& input, const Tensor& weight,
                       const Tensor& bias, const ConvGeometry& g, int64_t G) {
  const T* in = input.data_ptr<T>();
  const T* w = weight.data_ptr<T>();
  const T* b = bias.defined() ? bias.data_ptr<T>() : nullptr;
  T* o = out.data_ptr<T>();
  const int64_t O = weight.size(0);
  if constexpr (std::is_same_v<T, float>) {
    if (G == 1 && winograd_conv_applies(g, O)) {
      winograd_forward(in, w, b, g, O, o);
      return;
    }
  }
  parallel_for(0, g.N, 1, [&](int64_t begin, int64_t end) {
    conv_forward_images<T>(in, w, b, g, O, G, o, begin, end);
  });
}

// Stride 1 with padding <= dilation*(kernel-1): the input gradient is itself a convolution of the
// output gradient with the flipped, transposed kernel ("full" padding), which costs an im2col
// and a well-shaped GEMM instead of a thin GEMM plus a scatter-add col2im.
bool input_grad_is_a_conv(const ConvGeometry& g) {
  return g.sh == 1 && g.sw == 1 && g.ph <= g.dh * (g.kh - 1) && g.pw <= g.dw * (g.kw - 1) &&
         !(g.kh == 1 && g.kw == 1);
}

// W [O, C/G, kh, kw] -> W' [C, O/G, kh, kw] with the spatial taps reversed, group by group.
template <typename T>
Tensor flipped_transposed_weight(const Tensor& weight, int64_t G) {
  const int64_t O = weight.size(0), Cg = weight.size(1), kh = weight.size(2), kw = weight.size(3);
  const int64_t Og = O / G;
  Tensor out = empty({Cg * G, Og, kh, kw}, weight.dtype());
  const T* src = weight.data_ptr<T>();
  T* dst = out.data_ptr<T>();
  for (int64_t gi = 0; gi < G; ++gi)
    for (int64_t o = 0; o < Og; ++o)
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j)
            dst[((((gi * Cg + c) * Og + o) * kh) + (kh - 1 - i)) * kw + (kw - 1 - j)] =
                src[(((gi * Og + o) * Cg + c) * kh + i) * kw + j];
  return out;
}

// gw [O, K] (per group) += grad_out(n) [O, P] x columns(n)^T for the images [begin, end).
template <typename T>
void weight_grad_images(const T* in, const T* go, const ConvGeometry& g, int64_t O, int64_t G,
                        T* gw, int64_t begin, int64_t end, T* buffer) {
  const int64_t Og = O / G, Cg = g.C / G, K = Cg * g.kh * g.kw, P = g.Ho * g.Wo;
  if constexpr (std::is_same_v<T, float>) {
    if (G == 1 && direct_conv_applies(g, O)) {
      for (int64_t n = begin; n < end; ++n) {
        direct_conv_weight_grad(in + n * g.C * g.H * g.W, go + n * O * P, g, O, gw, buffer);
      }
      return;
    }
  }
  for (int64_t n = begin; n < end; ++n) {
    const T* cols = image_columns(in + n * g.C * g.H * g.W, g, buffer);
    for (int64_t gi = 0; gi < G; ++gi) {
      MapMatrix<T>(gw + gi * Og * K, Og, K).noalias() +=
          ConstMapMatrix<T>(go + (n * O + gi * Og) * P, Og, P) *
          ConstMapMatrix<T>(cols + gi * K * P, K, P).transpose();
    }
  }
}

// The weight gradient in fixed chunks of kImagesPerWeightChunk images: each chunk sums its images
// into its own partial and finish() adds them in chunk order, so the result is the same whichever
// thread runs a chunk (Note [Deterministic parallel kernels]). By Winograd a partial is the
// chunk's dU [16, O, C], and finish() transforms the sum into gw once (Note [Winograd weight
// gradient]); otherwise it is the chunk's gw, and the sum is copied. Given grad_input (only where
// winograd_input_grad_applies), the chunks also set the input gradient of their images from the
// same transformed output gradient (Note [Winograd input gradient]).
template <typename T>
class WeightGradChunks {
 public:
  WeightGradChunks(const T* in, const T* go, const ConvGeometry& g, int64_t O, int64_t G, T* gw,
                   const Tensor& weight = Tensor(), T* gi = nullptr)
      : in_(in), go_(go), g_(g), O_(O), G_(G), gw_(gw), gi_(gi),
        winograd_(std::is_same_v<T, float> && G == 1 && winograd_weight_grad_applies(g, O)),
        size_(winograd_ ? winograd_weight_size(g, O) : O * (g.C / G) * g.kh * g.kw),
        count_((g.N + kImagesPerWeightChunk - 1) / kImagesPerWeightChunk),
        partials_(scratch<T>(count_ * size_)) {
    const bool direct = std::is_same_v<T, float> && G == 1 && direct_conv_applies(g, O);
    buffer_size_ =
        winograd_ ? winograd_backward_scratch_size(g, O, std::min(g.N, kImagesPerWeightChunk))
        : direct ? direct_conv_weight_grad_scratch_size(g, O)
                 : image_columns_size(g);
    if constexpr (std::is_same_v<T, float>) {
      if (gi != nullptr) {  // U^T: the transform of the weight read as [C, O] kernels
        ConvGeometry transposed = g;
        transposed.C = O;
        ut_ = scratch<float>(winograd_weight_size(transposed, g.C));
        winograd_transform_weight(weight.data_ptr<float>(), WinogradWeight::kTransposed,
                                  transposed, g.C, ut_.data_ptr<float>());
      }
    }
  }

  int64_t count() const { return count_; }

  // Chunks [begin, end), in one working buffer: the thread's own for float (Note [Thread scratch]).
  void operator()(int64_t begin, int64_t end) const {
    if constexpr (std::is_same_v<T, float>) {
      ThreadScratch buffer(buffer_size_);
      run(begin, end, buffer.data());
    } else {
      Tensor buffer = scratch<T>(buffer_size_);
      run(begin, end, buffer.data_ptr<T>());
    }
  }

  // gw = the chunks' partials summed in chunk order (Winograd: G^T (that sum) G).
  void finish() const {
    T* sum = partials_.data_ptr<T>();
    if (count_ > 1) {
      parallel_for(0, size_, 4096, [&](int64_t begin, int64_t end) {
        for (int64_t c = 1; c < count_; ++c) {
          const T* part = sum + c * size_;
          for (int64_t i = begin; i < end; ++i) sum[i] += part[i];
        }
      });
    }
    if constexpr (std::is_same_v<T, float>) {
      if (winograd_) {
        winograd_weight_grad_transform(sum, g_, O_, gw_);
        return;
      }
    }
    std::copy(sum, sum + size_, gw_);
  }

 private:
  void run(int64_t begin, int64_t end, T* buffer) const {
    for (int64_t c = begin; c < end; ++c) {
      T* target = partials_.data_ptr<T>() + c * size_;
      const int64_t first = c * kImagesPerWeightChunk;
      const int64_t last = std::min(g_.N, first + kImagesPerWeightChunk);
      if constexpr (std::is_same_v<T, float>) {
        if (winograd_) {  // target: the images' dU [16, O, C], set
          const int64_t in_size = g_.C * g_.H * g_.W;
          WinogradBackward args{in_ + first * in_size, go_ + first * O_ * g_.Ho * g_.Wo, target};
          if (gi_ != nullptr) {
            args.ut = ut_.data_ptr<float>();
            args.dx = gi_ + first * in_size;
          }
          winograd_backward(args, g_, O_, last - first, buffer);
          continue;
        }
      }
      std::fill(target, target + size_, T(0));
      weight_grad_images<T>(in_, go_, g_, O_, G_, target, first, last, buffer);
    }
  }

  const T* in_;
  const T* go_;
  const ConvGeometry& g_;
  int64_t O_, G_;
  T* gw_;
  T* gi_;
  bool winograd_;
  int64_t size_, count_;
  Tensor partials_;
  Tensor ut_;  // with gi_: Winograd's U^T [16, C, O]
  int64_t buffer_size_ = 0;
};

// The input gradient of images [begin, end) once its kernel is prepared. Stride-1 layers
// (input_grad_is_a_conv): the convolution of grad_out with the flipped, transposed kernel -- by
// Winograd from its transform, which reads the kernel flipped where it is, or else by im2col + GEMM
// from a flipped copy. Strided and 1x1 layers: a transposed GEMM + col2im per image.
template <typename T>
class InputGradImages {
 public:
  InputGradImages(const Tensor& grad_out, const Tensor& weight, const ConvGeometry& g, int64_t G,
                  const Tensor& grad_input)
      : g_(g), t_(g), O_(weight.size(0)), G_(G), go_(grad_out.data_ptr<T>()),
        w_(weight.data_ptr<T>()), gi_(grad_input.data_ptr<T>()) {
    if (!input_grad_is_a_conv(g)) return;
    path_ = Path::kConv;
    t_ = ConvGeometry{g.N, O_, g.Ho, g.Wo, g.kh, g.kw, 1, 1,
                      g.dh * (g.kh - 1) - g.ph, g.dw * (g.kw - 1) - g.pw, g.dh, g.dw, g.H, g.W};
    if constexpr (std::is_same_v<T, float>) {
      if (G == 1 && winograd_conv_applies(t_, g.C)) {
        path_ = Path::kWinograd;
        kernel_ = scratch<float>(winograd_weight_size(t_, g.C));  // shared by every image
        winograd_transform_weight(w_, WinogradWeight::kFlippedTransposed, t_, g.C,
                                  kernel_.data_ptr<float>());
        return;
      }
    }
    kernel_ = flipped_transposed_weight<T>(weight, G);
  }

  // The images per call that fill Winograd's GEMM tiles (more than one on small maps), else 1.
  int64_t grain() const {
    if constexpr (std::is_same_v<T, float>) {
      if (path_ == Path::kWinograd) return winograd_images_per_call(t_);
    }
    return 1;
  }

  void operator()(int64_t begin, int64_t end) const {
    if (path_ == Path::kGemm) {
      gemm_images(begin, end);
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (path_ == Path::kWinograd) {
        winograd_forward_images(go_, kernel_.data_ptr<float>(), nullptr, t_, g_.C, gi_, begin, end);
        return;
      }
    }
    conv_forward_images<T>(go_, kernel_.data_ptr<T>(), nullptr, t_, g_.C, G_, gi_, begin, end);
  }

 private:
  enum class Path { kWinograd, kConv, kGemm };

  void gemm_images(int64_t begin, int64_t end) const {
    const int64_t Og = O_ / G_, Cg = g_.C / G_, K = Cg * g_.kh * g_.kw, P = g_.Ho * g_.Wo;
    ConvGeometry one = g_;
    one.N = 1;
    Tensor gcols = scratch<T>(is_pointwise(g_) ? 0 : g_.C * g_.kh * g_.kw * P);
    for (int64_t n = begin; n < end; ++n) {
      T* gi_n = gi_ + n * g_.C * g_.H * g_.W;
      T* target = is_pointwise(g_) ? gi_n : gcols.data_ptr<T>();
      for (int64_t grp = 0; grp < G_; ++grp) {
        MapMatrix<T>(target + grp * K * P, K, P).noalias() =
            ConstMapMatrix<T>(w_ + grp * Og * K, Og, K).transpose() *
            ConstMapMatrix<T>(go_ + (n * O_ + grp * Og) * P, Og, P);
      }
      if (!is_pointwise(g_)) {
        std::fill(gi_n, gi_n + g_.C * g_.H * g_.W, T(0));
        col2im(gcols.data_ptr<T>(), one, gi_n);
      }
    }
  }

  const ConvGeometry& g_;
  ConvGeometry t_;  // the input gradient's own convolution (kWinograd, kConv)
  int64_t O_, G_;
  const T* go_;
  const T* w_;
  T* gi_;
  Path path_ = Path::kGemm;
  Tensor kernel_;  // Winograd's transform, or the flipped copy
};

template <typename T>
void conv_backward_impl(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                        const ConvGeometry& g, int64_t G, const Tensor& grad_input,
                        const Tensor& grad_weight, const Tensor& grad_bias) {
  const int64_t O = weight.size(0), P = g.Ho * g.Wo;
  const T* go = grad_out.data_ptr<T>();
  // With both gradients: by Winograd, the weight gradient's chunks also make the input gradient
  // from their transformed output gradient (Note [Winograd input gradient]); otherwise the two are
  // independent, and one region runs the weight gradient's chunks and the input gradient's images
  // (Note [Two-part regions]).
  const bool fused = std::is_same_v<T, float> && G == 1 && winograd_input_grad_applies(g, O);
  if (grad_input.defined() && grad_weight.defined() && fused) {
    const WeightGradChunks<T> both(input.data_ptr<T>(), go, g, O, G, grad_weight.data_ptr<T>(),
                                   weight, grad_input.data_ptr<T>());
    parallel_for(0, both.count(), 1, both);
    both.finish();
  } else if (grad_input.defined() && grad_weight.defined()) {
    const InputGradImages<T> input_grad(grad_out, weight, g, G, grad_input);
    const WeightGradChunks<T> weight_grad(input.data_ptr<T>(), go, g, O, G,
                                          grad_weight.data_ptr<T>());
    parallel_for_two_parts(
        weight_grad.count(), [&](int64_t chunk) { weight_grad(chunk, chunk + 1); }, g.N,
        input_grad.grain(), input_grad);
    weight_grad.finish();
  } else if (grad_input.defined()) {
    parallel_for(0, g.N, 1, InputGradImages<T>(grad_out, weight, g, G, grad_input));
  } else if (grad_weight.defined()) {
    const WeightGradChunks<T> weight_grad(input.data_ptr<T>(), go, g, O, G,
                                          grad_weight.data_ptr<T>());
    parallel_for(0, weight_grad.count(), 1, weight_grad);
    weight_grad.finish();
  }
  if (grad_bias.defined()) {
    T* gb = grad_bias.data_ptr<T>();
    parallel_for(0, O, 4, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        double s = 0;
        for (int64_t n = 0; n < g.N; ++n) {
          const T* row = go + (n * O + c) * P;
          T part = 0;
          for (int64_t i = 0; i < P; ++i) part += row[i];
          s += part;
        }
        gb[c] = static_cast<T>(s);
      }
    });
  }
}

// Contiguous float32 or float64 operands (the op checks and makes them so).
void conv2d_kernel(const Tensor& out, const Tensor& input, const Tensor& weight,
                   const Tensor& bias, const ConvGeometry& g, int64_t groups) {
  if (input.dtype() == kFloat32) {
    conv_forward_impl<float>(out, input, weight, bias, g, groups);
  } else {
    conv_forward_impl<double>(out, input, weight, bias, g, groups);
  }
}

void conv2d_backward_kernel(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                            const ConvGeometry& g, int64_t groups, const Tensor& grad_input,
                            const Tensor& grad_weight, const Tensor& grad_bias) {
  if (input.dtype() == kFloat32) {
    conv_backward_impl<float>(grad_out, input, weight, g, groups, grad_input, grad_weight, grad_bias);
  } else {
    conv_backward_impl<double>(grad_out, input, weight, g, groups, grad_input, grad_weight, grad_bias);
  }
}

}  // namespace

void register_conv_kernels(KernelTable& table) {
  table.conv2d = conv2d_kernel;
  table.conv2d_backward = conv2d_backward_kernel;
}

}  // namespace ember::cpu::CPU_CAPABILITY
