// A tour of the tensor library: factories, views, broadcasting, reductions, matmul, dtypes.
#include <iostream>

#include <ember/tensor.h>

namespace ember::examples {

int example_main() {
  Generator gen(0);
  Tensor a = arange(6).view({2, 3});
  std::cout << "a = arange(6).view({2, 3}):\n" << a << "\n\n";
  std::cout << "a.t() (a view, no copy):\n" << a.t() << "\n";
  std::cout << "  shares storage with a: " << std::boolalpha << a.t().is_alias_of(a) << "\n\n";
  Tensor b = from_vector<float>({10, 20, 30});
  std::cout << "a + b (broadcast [2, 3] + [3]):\n" << a + b << "\n\n";
  std::cout << "a.sum({1}) = " << a.sum({1}) << ", a.mean() = " << a.mean() << "\n\n";
  Tensor x = randn({2, 4}, &gen), w = randn({4, 3}, &gen);
  std::cout << "matmul(randn[2,4], randn[4,3]):\n" << matmul(x, w) << "\n\n";
  Tensor h = from_vector<float>({1.0f / 3.0f, 65504.0f, 1e-8f}).to(kFloat16);
  std::cout << "float16 round-to-nearest-even: " << h << "\n";
  std::cout << "bfloat16: " << from_vector<float>({1.0f / 3.0f, 3e38f}).to(kBFloat16) << "\n\n";
  try {
    add(ones({2, 3}), ones({4}));
  } catch (const Error& e) {
    std::cout << "bad input gives a clear error: " << e.what() << "\n";
  }
  return 0;
}

}  // namespace ember::examples

int main() { return ember::examples::example_main(); }
