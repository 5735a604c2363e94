// Writes a checkpoint of a small nn::GPT as a training run would (nn::save of its state dict), and
// beside it a batch with the logits and loss ember computes on it, for nanogpt_loads_ember_test.py
// to load into PyTorch's nanoGPT and compare.
//
//   gpt_export DIR BIAS   (BIAS 1 or 0) writes DIR/gpt.safetensors and DIR/gpt_io.safetensors
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nn/checkpoint.h"
#include "nn/models/gpt.h"
#include "tensor/all.h"

int main(int argc, char** argv) {
  using namespace ember;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DIR BIAS\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  nn::GPTConfig c;
  c.block_size = 8;
  c.vocab_size = 11;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.bias = std::string(argv[2]) == "1";
  Generator gen(2026);
  nn::GPT model(c, &gen);
  model.to(kFloat64);
  {
    // Biases 0 and norm weights 1 would hide one put in the wrong place.
    NoGradGuard no_grad;
    for (const auto& [name, p] : model.named_parameters()) {
      if (p.dim() == 1) p.add_(mul(randn(p.sizes(), &gen, kFloat64), 0.1));
    }
  }
  Tensor idx = randint(0, c.vocab_size, {3, 8}, &gen);
  Tensor targets = randint(0, c.vocab_size, {3, 8}, &gen);
  Tensor logits = model.forward(idx);
  Tensor loss = model.loss(logits, targets);
  nn::save(model.state_dict(), dir + "/gpt.safetensors");
  nn::save({{"idx", idx}, {"targets", targets}, {"logits", logits.detach()}, {"loss", loss.detach()}},
           dir + "/gpt_io.safetensors");
  return 0;
}
