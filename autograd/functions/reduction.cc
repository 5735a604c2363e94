// Backward formulas for reductions. mean, var and max/min along a dim are composites (sum, div,
// gather, ...) and need none of their own.
#include <algorithm>

#include "autograd/functions/function_node.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::autograd {
namespace {

using Needs = std::vector<bool>;

// Full max/min: the gradient is shared evenly among all elements equal to the result.
Tensor extreme_all(const char* name, const Tensor& t, bool is_max) {
  return record_op({name, {t}, {t}, true}, [&] { return is_max ? max(t) : min(t); },
                   [](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                     Tensor mask = eq(s[0], s[1]).to(g.dtype());
                     return {mul(div(mask, sum(mask)), g)};
                   });
}

}  // namespace

void register_reduction_formulas(AutogradKernels& k) {
  k.sum = [](const Tensor& t, const Shape& dims, bool keepdim) {
    const Shape in_shape = t.sizes();
    Shape reduced;  // wrapped and sorted, to re-insert dims that keepdim=false removed
    for (int64_t d : dims) reduced.push_back(wrap_dim(d, t.dim(), "sum"));
    if (dims.empty()) {
      for (int64_t d = 0; d < t.dim(); ++d) reduced.push_back(d);
    }
    std::sort(reduced.begin(), reduced.end());
    return record_op({"SumBackward", {t}}, [&] { return sum(t, dims, keepdim); },
                     [in_shape, reduced, keepdim](const Tensor& g, const variable_list&,
                                                  const Needs&) -> variable_list {
                       Tensor r = g;
                       if (!keepdim) {
                         for (int64_t d : reduced) r = r.unsqueeze(d);
                       }
                       return {r.expand(in_shape)};
                     });
  };
  k.max = [](const Tensor& t) { return extreme_all("MaxBackward", t, true); };
  k.min = [](const Tensor& t) { return extreme_all("MinBackward", t, false); };
}

}  // namespace ember::autograd
