// bench/gpu_bench.sh's binary in a build without the CUDA backend: says how to build it.
#include <cstdio>

int main() {
  std::printf("gpu_bench: built without CUDA; build with --config=cuda and run on a GPU machine\n");
  return 0;
}
