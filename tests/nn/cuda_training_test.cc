// ResNet-20 trained on cuda:0 against the same model trained on the CPU: same initial weights,
// same batches, SGD with momentum and weight decay; after each step the losses, and at the end
// every parameter and batch-norm statistic, agree within a float32 tolerance. Exercises every
// kernel a training step needs on the device, autograd and the optimizer unchanged.
#include <gtest/gtest.h>

#include "nn/functional.h"
#include "nn/layers/linear.h"
#include "nn/layers/simple.h"
#include "nn/models/gpt.h"
#include "nn/models/resnet.h"
#include "nn/utils/clip_grad.h"
#include "optim/adam.h"
#include "optim/param_groups.h"
#include "optim/sgd.h"
#include "tests/tensor/cuda/device_buffer.h"
#include "tests/tensor/test_util.h"

namespace ember {
namespace {

const Device kCuda0(DeviceType::kCUDA, 0);

// |a - b| <= tol * max(1, max |b|) elementwise, so near-zero entries of a large tensor are
// compared at the tensor's scale: the two devices sum in different orders.
::testing::AssertionResult close_at_scale(const Tensor& a, const Tensor& b, double tol) {
  const Tensor x = a.cpu().to(kFloat64), y = b.cpu().to(kFloat64);
  const double scale = std::max(1.0, max(abs(y)).item<double>());
  const double err = max(abs(sub(x, y))).item<double>();
  if (err <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max difference " << err << " at scale " << scale;
}

TEST(CudaTrainingTest, ResNet20StepsOnTheDeviceMatchTheCpu) {
  EMBER_SKIP_WITHOUT_CUDA_DEVICE();
  Generator init_cpu(7), init_gpu(7);
  nn::ResNet cpu_model(nn::ResNetOptions{}, &init_cpu);
  nn::ResNet gpu_model(nn::ResNetOptions{}, &init_gpu);
  gpu_model.to(kCuda0);
  const auto options = optim::SGDOptions(0.05).momentum(0.9).weight_decay(5e-4);
  optim::SGD cpu_opt(cpu_model.parameters(), options);
  optim::SGD gpu_opt(gpu_model.parameters(), options);
  Generator data(11);
  constexpr int kSteps = 3;
  for (int step = 0; step < kSteps; ++step) {
    const Tensor x = randn({8, 1, 12, 12}, &data), y = randint(0, 10, {8}, &data);
    Tensor cpu_loss = nn::functional::cross_entropy(cpu_model.forward(x), y);
    Tensor gpu_loss = nn::functional::cross_entropy(gpu_model.forward(x.to(kCuda0)), y.to(kCuda0));
    ASSERT_TRUE(gpu_loss.is_cuda());
    EXPECT_NEAR(gpu_loss.item<double>(), cpu_loss.item<double>(), 1e-4) << "step " << step;
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    cpu_loss.backward();
    gpu_loss.backward();
    cpu_opt.step();
    gpu_opt.step();
  }
  const auto cpu_params = cpu_model.named_parameters(), gpu_params = gpu_model.named_parameters();
  ASSERT_EQ(cpu_params.size(), gpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    EXPECT_TRUE(gpu_params[i].second.is_cuda()) << gpu_params[i].first;
    EXPECT_TRUE(close_at_scale(gpu_params[i].second, cpu_params[i].second, 1e-4))
        << cpu_params[i].first;
  }
  const auto cpu_buffers = cpu_model.named_buffers(), gpu_buffers = gpu_model.named_buffers();
  ASSERT_EQ(cpu_buffers.size(), gpu_buffers.size());
  for (size_t i = 0; i < cpu_buffers.size(); ++i) {
    EXPECT_TRUE(close_at_scale(gpu_buffers[i].second, cpu_buffers[i].second, 1e-4))
        << cpu_buffers[i].first;
  }
}

// Adam (with AMSGrad and weight decay) updating device parameters: its state lives on the device
// and the steps match the CPU's.
TEST(CudaTrainingTest, AdamStepsMatchTheCpu) {
  EMBER_SKIP_WITHOUT_CUDA_DEVICE();
  Generator init_cpu(4), init_gpu(4), data(5);
  nn::Linear cpu_fc(6, 3, true, &init_cpu), gpu_fc(6, 3, true, &init_gpu);
  gpu_fc.to(kCuda0);
  const auto options = optim::AdamOptions(0.01).weight_decay(1e-2).amsgrad(true);
  optim::Adam cpu_opt(cpu_fc.parameters(), options), gpu_opt(gpu_fc.parameters(), options);
  for (int step = 0; step < 4; ++step) {
    const Tensor x = randn({5, 6}, &data), y = randint(0, 3, {5}, &data);
    Tensor cpu_loss = nn::functional::cross_entropy(cpu_fc.forward(x), y);
    Tensor gpu_loss = nn::functional::cross_entropy(gpu_fc.forward(x.to(kCuda0)), y.to(kCuda0));
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    cpu_loss.backward();
    gpu_loss.backward();
    cpu_opt.step();
    gpu_opt.step();
  }
  for (size_t i = 0; i < cpu_fc.parameters().size(); ++i) {
    EXPECT_TRUE(close_at_scale(gpu_fc.parameters()[i], cpu_fc.parameters()[i], 1e-5)) << i;
  }
}

// Sparse gradients on the device: an Embedding(sparse=true) trained with SGD (the optimizer's
// sparse update) matches the CPU.
TEST(CudaTrainingTest, SparseEmbeddingStepsMatchTheCpu) {
  EMBER_SKIP_WITHOUT_CUDA_DEVICE();
  Generator init_cpu(3), init_gpu(3);
  nn::Embedding cpu_emb(10, 4, /*sparse=*/true, &init_cpu),
      gpu_emb(10, 4, /*sparse=*/true, &init_gpu);
  gpu_emb.to(kCuda0);
  optim::SGD cpu_opt(cpu_emb.parameters(), optim::SGDOptions(0.5));
  optim::SGD gpu_opt(gpu_emb.parameters(), optim::SGDOptions(0.5));
  for (int step = 0; step < 3; ++step) {
    const Tensor ids = from_vector<int64_t>({1, 7, 1, step}, {2, 2});
    Tensor cpu_loss = sum(mul(cpu_emb.forward(ids), cpu_emb.forward(ids)));
    Tensor gpu_loss = sum(mul(gpu_emb.forward(ids.to(kCuda0)), gpu_emb.forward(ids.to(kCuda0))));
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    cpu_loss.backward();
    gpu_loss.backward();
    ASSERT_TRUE(gpu_emb.parameters()[0].grad().is_sparse());
    cpu_opt.step();
    gpu_opt.step();
  }
  EXPECT_TRUE(close_at_scale(gpu_emb.parameters()[0], cpu_emb.parameters()[0], 1e-6));
}

// The GPT on the device (attention's batched products, the causal fill, softmax, GELU, LayerNorm,
// the tied embedding and head) with AdamW's two groups and clipping, against the CPU.
TEST(CudaTrainingTest, GptStepsMatchTheCpu) {
  EMBER_SKIP_WITHOUT_CUDA_DEVICE();
  nn::GPTConfig config;
  config.block_size = 8;
  config.vocab_size = 11;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 16;
  Generator init_cpu(9), init_gpu(9), data(10);
  nn::GPT cpu_model(config, &init_cpu), gpu_model(config, &init_gpu);
  gpu_model.to(kCuda0);
  ASSERT_TRUE(gpu_model.wte_weight().is_same(gpu_model.lm_head_weight()));
  const auto options = optim::AdamWOptions(3e-3);
  optim::AdamW cpu_opt(optim::configure_optimizer_groups(cpu_model, 0.1, options), options);
  optim::AdamW gpu_opt(optim::configure_optimizer_groups(gpu_model, 0.1, options), options);
  for (int step = 0; step < 3; ++step) {
    const Tensor x = randint(0, 11, {3, 8}, &data), y = randint(0, 11, {3, 8}, &data);
    Tensor cpu_loss = cpu_model.loss(cpu_model.forward(x), y);
    Tensor gpu_loss = gpu_model.loss(gpu_model.forward(x.to(kCuda0)), y.to(kCuda0));
    ASSERT_TRUE(gpu_loss.is_cuda());
    EXPECT_NEAR(gpu_loss.item<double>(), cpu_loss.item<double>(), 1e-4) << "step " << step;
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    cpu_loss.backward();
    gpu_loss.backward();
    nn::utils::clip_grad_norm_(cpu_model.parameters(), 0.5);
    nn::utils::clip_grad_norm_(gpu_model.parameters(), 0.5);
    cpu_opt.step();
    gpu_opt.step();
  }
  const auto cpu_params = cpu_model.named_parameters(), gpu_params = gpu_model.named_parameters();
  ASSERT_EQ(cpu_params.size(), gpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    EXPECT_TRUE(close_at_scale(gpu_params[i].second, cpu_params[i].second, 1e-4)) << cpu_params[i].first;
  }
}

}  // namespace
}  // namespace ember
