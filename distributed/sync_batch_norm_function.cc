// sync_batch_norm: the forward statistics gather and the backward allreduce (Note [SyncBatchNorm
// collectives]). Statistics are combined in float64. CPU tensors only for now: the rows and sums
// are built on the CPU, where the MPI backend's collectives run.
#include "distributed/sync_batch_norm_function.h"

#include "autograd/functions/function_node.h"
#include "autograd/variable.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::distributed {
namespace {

struct Layout {
  int64_t N = 0, C = 0, inner = 0;  // input viewed as [N, C, inner]
  int64_t count() const { return N * inner; }
};

Layout check_input(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                   const Tensor& running_var, const SyncBatchNormArgs& args) {
  EMBER_CHECK(args.process_group != nullptr, "sync_batch_norm: no process group");
  const int rank = args.process_group->rank();
  EMBER_CHECK(input.defined() && input.dim() >= 2, "sync_batch_norm (rank ", rank,
              "): expected an input [N, C, ...], got ",
              input.defined() ? input.describe() : "an undefined tensor");
  EMBER_CHECK(is_floating_point(input.dtype()), "sync_batch_norm (rank ", rank,
              "): expected a floating-point input, got ", input.describe());
  EMBER_CHECK(input.is_cpu(), "sync_batch_norm (rank ", rank, "): only CPU tensors are supported, got ",
              input.describe());
  Layout l;
  l.N = input.size(0);
  l.C = input.size(1);
  EMBER_CHECK(l.C > 0, "sync_batch_norm (rank ", rank, "): input ", input.describe(), " has no channels");
  l.inner = l.N == 0 ? 0 : input.numel() / (l.N * l.C);
  const char* names[] = {"weight", "bias", "running_mean", "running_var"};
  const Tensor* tensors[] = {&weight, &bias, &running_mean, &running_var};
  for (int i = 0; i < 4; ++i) {
    const Tensor& t = *tensors[i];
    if (!t.defined()) continue;
    EMBER_CHECK(t.dim() == 1 && t.size(0) == l.C, "sync_batch_norm (rank ", rank, "): ", names[i], " ",
                t.describe(), " must have ", l.C, " elements to match input ", input.describe());
  }
  EMBER_CHECK(running_mean.defined() == running_var.defined(), "sync_batch_norm (rank ", rank,
              "): running_mean and running_var must both be given or both be undefined");
  return l;
}

// The group's statistics from every rank's row (count-weighted; rows with count 0 add nothing).
struct GroupStats {
  Tensor mean, var;  // float64 [C], var biased
  double count = 0;
};

GroupStats combine(const Tensor& gathered, int64_t world, int64_t C) {
  Tensor rows = gathered.view({world, sync_batch_norm_row_size(C)});
  Tensor means = rows.narrow(1, 0, C), vars = rows.narrow(1, C, C), counts = rows.narrow(1, 2 * C, 1);
  GroupStats s;
  s.count = sum(counts).item<double>();
  if (s.count == 0) return s;
  s.mean = div(sum(mul(counts, means), {0}), s.count);
  Tensor dev = sub(means, s.mean.view({1, C}));
  s.var = div(sum(mul(counts, add(vars, mul(dev, dev))), {0}), s.count);
  return s;
}

void update_running_stats(const Tensor& running_mean, const Tensor& running_var, const GroupStats& s,
                          double momentum) {
  if (!running_mean.defined()) return;
  const double unbiased = s.count / (s.count - 1);
  copy_(running_mean, add(mul(running_mean.to(kFloat64), 1 - momentum), mul(s.mean, momentum)));
  copy_(running_var, add(mul(running_var.to(kFloat64), 1 - momentum), mul(s.var, momentum * unbiased)));
}

Tensor per_channel_or(const Tensor& t, int64_t C, double fill) {
  return t.defined() ? t.to(kFloat64) : full({C}, Scalar(fill), kFloat64);
}

}  // namespace

namespace {

// What the forward hands the backward: the group's statistics.
struct ForwardStats {
  GroupStats stats;
  Tensor invstd;
};

// The forward: this rank's per-channel moments, the group's by one allgather (Note [SyncBatchNorm
// collectives]), the running stats, then y = x * scale + shift per channel.
Tensor normalize_over_group(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                            const Tensor& running_var, const SyncBatchNormArgs& args, const Layout& l,
                            bool needs_backward, ForwardStats* out) {
  NoGradGuard no_grad;
  const int64_t C = l.C;
  ProcessGroup& group = *args.process_group;
  Tensor local_mean = zeros({C}, kFloat64), local_var = zeros({C}, kFloat64);
  Tensor x3;
  if (l.count() > 0) {
    x3 = input.contiguous().reshape({l.N, C, l.inner});
    Tensor x64 = x3.to(kFloat64);
    local_mean = mean(x64, {0, 2});
    local_var = var(x64, {0, 2}, /*unbiased=*/false);
  }
  Tensor row = cat({local_mean, local_var, full({1}, Scalar(static_cast<double>(l.count())), kFloat64),
                    full({1}, Scalar(needs_backward ? 1.0 : 0.0), kFloat64)});
  Tensor gathered = empty({group.size() * row.numel()}, kFloat64);
  group.allgather_base(gathered, row)->wait();
  out->stats = combine(gathered, group.size(), C);
  EMBER_CHECK(out->stats.count > 1, "sync_batch_norm (rank ", group.rank(), "): expected more than 1 value per channel ",
              "across the ", group.size(), " ranks of group '", group.group_name(), "' when training, got ",
              out->stats.count, " (this rank's input ", input.describe(), ")");
  out->invstd = rsqrt(add(out->stats.var, args.eps));
  update_running_stats(running_mean, running_var, out->stats, args.momentum);
  if (l.count() == 0) return empty(input.sizes(), input.dtype());
  // y = x * scale + shift per channel, as the BatchNorm kernel computes it.
  Tensor scale = mul(per_channel_or(weight, C, 1.0), out->invstd);
  Tensor shift = sub(per_channel_or(bias, C, 0.0), mul(out->stats.mean, scale));
  Tensor y = add(mul(x3, scale.to(input.dtype()).view({1, C, 1})), shift.to(input.dtype()).view({1, C, 1}));
  return y.reshape(input.sizes());
}

// The backward: the input gradient needs the group's sums of dy and dy * (x - mean) (one
// allreduce); the weight's and bias's gradients are this rank's own.
autograd::BackwardFormula backward_over_group(const Layout& l, ProcessGroupPtr group, const ForwardStats& fwd,
                                              bool has_w, bool has_b) {
  const int64_t C = l.C;
  const Tensor mean_c = fwd.stats.mean, invstd_c = fwd.invstd;
  const double total = fwd.stats.count;
  return [=](const Tensor& g, const autograd::variable_list& s, const std::vector<bool>& n) {
    NoGradGuard no_grad;
    const Tensor& x = s[0];
    Tensor sum_dy = zeros({C}, kFloat64), sum_dy_xmu = zeros({C}, kFloat64);
    Tensor dy, xmu;
    if (l.count() > 0) {
      dy = g.contiguous().reshape({l.N, C, l.inner}).to(kFloat64);
      xmu = sub(x.contiguous().reshape({l.N, C, l.inner}).to(kFloat64), mean_c.view({1, C, 1}));
      sum_dy = sum(dy, {0, 2});
      sum_dy_xmu = sum(mul(dy, xmu), {0, 2});
    }
    autograd::variable_list grads;
    Tensor grad_input;
    if (n[0]) {
      // Note [SyncBatchNorm collectives]: the group's sums, for the input gradient only.
      Tensor combined = cat({sum_dy, sum_dy_xmu});
      std::vector<Tensor> list{combined};
      group->allreduce(list)->wait();
      if (l.count() > 0) {
        Tensor all_dy = combined.narrow(0, 0, C).view({1, C, 1});
        Tensor all_dy_xmu = combined.narrow(0, C, C).view({1, C, 1});
        Tensor is = invstd_c.view({1, C, 1});
        Tensor k = mul(per_channel_or(s[1], C, 1.0).view({1, C, 1}), is);
        // dx = w * invstd * (dy - sum_dy / M - (x - mean) * invstd^2 * sum_dy_xmu / M), M the group's count
        Tensor gi = sub(sub(dy, div(all_dy, total)), mul(xmu, div(mul(mul(is, is), all_dy_xmu), total)));
        grad_input = mul(gi, k).reshape(x.sizes()).to(x.dtype());
      } else {
        grad_input = zeros(x.sizes(), x.dtype());
      }
    }
    grads.push_back(grad_input);
    if (has_w) grads.push_back(mul(sum_dy_xmu, invstd_c).to(x.dtype()));
    if (has_b) grads.push_back(sum_dy.to(x.dtype()));
    return grads;
  };
}

}  // namespace

Tensor sync_batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, const SyncBatchNormArgs& args) {
  const Layout l = check_input(input, weight, bias, running_mean, running_var, args);
  const bool needs_backward = GradMode::is_enabled() && input.requires_grad();
  ForwardStats fwd;
  auto forward = [&]() -> Tensor {
    return normalize_over_group(input, weight, bias, running_mean, running_var, args, l, needs_backward, &fwd);
  };
  const bool has_w = weight.defined(), has_b = bias.defined();
  if (!GradMode::is_enabled() ||
      !(input.requires_grad() || (has_w && weight.requires_grad()) || (has_b && bias.requires_grad()))) {
    return forward();
  }
  autograd::RecordSpec spec{"SyncBatchNormBackward", {input}};
  if (has_w) spec.inputs.push_back(weight);
  if (has_b) spec.inputs.push_back(bias);
  spec.saved = {input, weight};
  Tensor out = autograd::record_op(spec, forward, nullptr);
  auto* node = static_cast<autograd::FunctionNode*>(out.grad_fn().get());
  node->set_formula(backward_over_group(l, args.process_group, fwd, has_w, has_b));
  return out;
}

}  // namespace ember::distributed
