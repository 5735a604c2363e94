// A program of one's own on ember (README, "Use ember in your own program"): its own model (a
// module with a custom forward: a residual MLP), trained with DistributedDataParallel under mpirun
// on its own synthetic regression data, then saved as a checkpoint by rank 0.
//   mpirun -np 2 build/my_trainer [checkpoint.safetensors]
#include <cstdio>
#include <memory>
#include <string>

#include <ember/ember.h>

namespace ember::examples {

// y = x + W2 relu(W1 x): the skip connection is the custom part no layer of ember's provides.
struct ResidualMlp : nn::Module {
  std::shared_ptr<nn::Linear> in, hidden, out;
  ResidualMlp(int64_t features, int64_t width, Generator* gen) : nn::Module("ResidualMlp") {
    in = register_module("in", std::make_shared<nn::Linear>(features, width, true, gen));
    hidden = register_module("hidden", std::make_shared<nn::Linear>(width, features, true, gen));
    out = register_module("out", std::make_shared<nn::Linear>(features, 1, true, gen));
  }
  Tensor forward(const Tensor& x) override { return out->forward(x + hidden->forward(relu(in->forward(x)))); }
};

int example_main(int argc, char** argv) {
  const std::string checkpoint = argc > 1 ? argv[1] : "my_model.safetensors";
  auto pg = distributed::init_process_group("mpi");
  const int rank = pg->rank(), world = pg->size();
  constexpr int64_t kFeatures = 8, kRowsPerRank = 32;
  constexpr int kSteps = 200;

  Generator init(7);  // the same initial weights everywhere (DDP broadcasts rank 0's anyway)
  auto model = std::make_shared<ResidualMlp>(kFeatures, 32, &init);
  auto ddp = std::make_shared<distributed::DistributedDataParallel>(model);
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.05).momentum(0.9));

  // Synthetic data: y = sum of x's first half - sum of its second half, plus a little noise; each
  // rank draws its own rows.
  Generator data(100 + rank);
  const Tensor weights = cat({ones({kFeatures / 2}), mul(ones({kFeatures / 2}), -1.0)}).reshape({kFeatures, 1});
  double first_loss = 0, loss_value = 0;
  for (int step = 0; step < kSteps; ++step) {
    const Tensor x = randn({kRowsPerRank, kFeatures}, &data);
    const Tensor y = matmul(x, weights) + mul(randn({kRowsPerRank, 1}, &data), 0.01);
    opt.zero_grad();
    Tensor loss = nn::functional::mse_loss(ddp->forward(x), y);
    loss.backward();
    opt.step();
    loss_value = loss.item<double>();
    if (step == 0) first_loss = loss_value;
  }
  if (rank == 0) {
    nn::save(model->state_dict(), checkpoint, {{"steps", std::to_string(kSteps)}});
    std::printf("RESULT world=%d first_loss=%.4f final_loss=%.5f checkpoint=%s\n", world, first_loss, loss_value,
                checkpoint.c_str());
  }
  ddp.reset();
  distributed::destroy_process_group();
  return 0;
}

}  // namespace ember::examples

int main(int argc, char** argv) { return ember::examples::example_main(argc, argv); }
