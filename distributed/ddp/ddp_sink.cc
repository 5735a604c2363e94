// docs/design.md steps 7-8: DDP's output sink; see ddp_sink.h.
#include "distributed/ddp/ddp_sink.h"

#include <memory>
#include <utility>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "distributed/ddp/reducer.h"

namespace ember::distributed {
namespace {

class DDPSink final : public autograd::Node {
 public:
  DDPSink(Reducer& reducer, size_t num_outputs, bool delay_all_reduce)
      : reducer_(reducer), num_outputs_(num_outputs), delay_all_reduce_(delay_all_reduce) {}
  std::string name() const override { return "DDPSinkBackward"; }
  size_t num_inputs() const override { return num_outputs_; }
  autograd::variable_list apply(autograd::variable_list&& grads) override {
    if (delay_all_reduce_) {
      Reducer* reducer = &reducer_;
      autograd::Engine::get_default_engine().queue_callback([reducer] { reducer->delay_all_reduce(); });
    }
    return std::move(grads);
  }

 private:
  Reducer& reducer_;
  size_t num_outputs_;
  bool delay_all_reduce_;
};

}  // namespace

std::vector<Tensor> pass_through_ddp_sink(const std::vector<Tensor>& outputs, Reducer& reducer,
                                          bool delay_all_reduce) {
  std::vector<size_t> through;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].defined() && outputs[i].requires_grad()) through.push_back(i);
  }
  if (through.empty()) return outputs;
  auto sink = std::make_shared<DDPSink>(reducer, through.size(), delay_all_reduce);
  std::vector<Tensor> result = outputs;
  for (size_t k = 0; k < through.size(); ++k) {
    const Tensor& out = outputs[through[k]];
    sink->add_input(autograd::impl::gradient_edge(out), out);
    Tensor alias = out.detach();  // same storage, fresh autograd metadata
    autograd::AutogradMeta& meta = autograd::impl::meta(alias);
    meta.grad_fn_ = sink;
    meta.output_nr_ = static_cast<uint32_t>(k);
    result[through[k]] = alias;
  }
  return result;
}

}  // namespace ember::distributed
