// The CPU's random slot: draws from the generator's own stream (tensor/generator.h), in element
// order, so a seed gives the same values on every machine.
#include <cmath>
#include <mutex>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/kernels_cpu.h"

namespace ember::cpu::CPU_CAPABILITY {
namespace {

double draw(const RandomSpec& spec, Generator& g) {
  switch (spec.kind) {
    case RandomSpec::Kind::kNormal: return g.next_normal();
    case RandomSpec::Kind::kInteger:
      return static_cast<double>(spec.low + static_cast<int64_t>(g.next_below(spec.range)));
    case RandomSpec::Kind::kUniform: break;
  }
  if (spec.bits == 53) return g.next_double();
  if (spec.bits == 24) return static_cast<double>(g.next_float());
  return std::ldexp(static_cast<double>(g.next_u64() >> (64 - spec.bits)), -spec.bits);
}

void random_kernel(const Tensor& out, const RandomSpec& spec, Generator& gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  EMBER_DISPATCH_ALL_TYPES(out.dtype(), "random", [&] {
    scalar_t* p = out.data_ptr<scalar_t>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = convert<scalar_t>(draw(spec, gen));
  });
}

}  // namespace

void register_random_kernels(KernelTable& table) { table.random = random_kernel; }

}  // namespace ember::cpu::CPU_CAPABILITY
