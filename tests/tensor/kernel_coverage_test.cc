// Which kernel-table slots (tensor/kernels.h, EMBER_FORALL_KERNEL_SLOTS) each device fills, by
// name. The CPU fills every slot; a CUDA backend, when linked (--config=cuda or --config=cudasim),
// must fill every slot too, so an op added to the list without a CUDA kernel fails here by name.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "tensor/all.h"
#include "tensor/kernels.h"
#include "tests/tensor/test_util.h"

namespace ember {
namespace {

std::string missing_slots(DeviceType device) {
  const std::vector<bool> filled = kernel_slots_filled(kernel_table(device));
  std::string missing;
  for (size_t i = 0; i < filled.size(); ++i) {
    if (!filled[i]) missing += std::string(missing.empty() ? "" : ", ") + kernel_slot_names()[i];
  }
  return missing;
}

TEST(KernelCoverageTest, SlotNamesComeFromTheOneList) {
  const auto& names = kernel_slot_names();
  ASSERT_EQ(names.size(), kernel_slots_filled(KernelTable{}).size());
  EXPECT_STREQ(names.front(), "binary");
  for (const char* name : names) EXPECT_GT(std::string(name).size(), 0u);
}

// The slots a device fills, by name, for the test log.
void print_coverage(const char* device, DeviceType type) {
  const std::vector<bool> filled = kernel_slots_filled(kernel_table(type));
  int n = 0;
  std::string names;
  for (size_t i = 0; i < filled.size(); ++i) {
    if (!filled[i]) continue;
    ++n;
    names += std::string(names.empty() ? "" : " ") + kernel_slot_names()[i];
  }
  std::cout << device << ": " << n << " / " << filled.size() << " kernel slots: " << names << "\n";
}

TEST(KernelCoverageTest, CpuFillsEverySlot) {
  print_coverage("cpu", DeviceType::kCPU);
  EXPECT_EQ(missing_slots(DeviceType::kCPU), "");
}

TEST(KernelCoverageTest, CudaFillsEverySlotWhenLinked) {
  if (!has_device_backend(DeviceType::kCUDA)) {
    GTEST_SKIP() << "no CUDA backend in this build (run with --config=cudasim)";
  }
  print_coverage("cuda", DeviceType::kCUDA);
  EXPECT_EQ(missing_slots(DeviceType::kCUDA), "") << "CUDA kernels missing for these slots";
}

TEST(KernelCoverageTest, AnEmptySlotNamesTheOpAndOperands) {
  Tensor t = zeros({2, 3}), u = ones({4}, kInt64);
  EXPECT_EMBER_ERROR(throw_no_kernel("sum", {&t, &u}), "no CPU kernel for sum (float32[2, 3]",
                     "int64[4]");
}

}  // namespace
}  // namespace ember
