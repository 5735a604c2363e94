// The GPU benchmarks' binary (gpu_bench, nccl_allreduce_bench) in a build without the CUDA backend:
// says how to build it.
#include <cstdio>
#include <cstring>

int main(int, char** argv) {
  const char* slash = std::strrchr(argv[0], '/');
  std::printf("%s: built without CUDA; build with --config=cuda and run on a GPU machine\n",
              slash ? slash + 1 : argv[0]);
  return 0;
}
