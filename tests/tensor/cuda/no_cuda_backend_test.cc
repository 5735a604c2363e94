// Stands in for a CUDA suite in a build without the CUDA backend: one skipped test that says how
// to run the real one.
#include <gtest/gtest.h>

TEST(CudaSuite, NeedsTheCudaBackend) {
  GTEST_SKIP() << "built without the CUDA backend: run with --config=cudasim (the simulator, no "
                  "GPU needed) or --config=cuda on a GPU machine";
}
