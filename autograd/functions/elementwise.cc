// Backward formulas for elementwise ops, in-place forms included. Broadcasting needs no code here:
// the engine sums each gradient back to its input's shape and casts it to the input's dtype.
#include "autograd/functions/function_node.h"
#include "tensor/factories.h"
#include "tensor/ops.h"

namespace ember::autograd {
namespace {

using Needs = std::vector<bool>;
Tensor scaled(const Tensor& g, const Scalar& alpha) {
  return alpha.to_double() == 1.0 ? g : mul(g, alpha);
}
Tensor as_float_mask(const Tensor& mask, const Tensor& like) { return mask.to(like.dtype()); }

// Note [ReLU backward]: PyTorch's threshold_backward(grad, result, 0): zero where the result is
// <= 0, the gradient itself elsewhere (so a NaN result passes its gradient on, and an infinite
// gradient under a zero result gives 0, not 0 * inf). One pass over both, where a compare into a
// bool mask and a select took a visible share of a 1-thread ResNet-20 step (`perf record
// bazel-bin/bench/resnet_train_bench --threads=1`; docs/measurements.md, "CPU training step").
// Reads only the result, so relu_ can share it.
Tensor relu_backward(const Tensor& g, const Tensor& result) { return threshold_backward(g, result, 0); }

// Unary op whose gradient is grad * f(saved); `save_output` picks input or output as saved[0].
Tensor unary(const char* name, const Tensor& t, Tensor (*op)(const Tensor&), bool save_output,
             Tensor (*dfn)(const Tensor& g, const Tensor& saved)) {
  RecordSpec spec{name, {t}, {}, save_output};
  if (!save_output) spec.saved = {t};
  return record_op(spec, [&] { return op(t); },
                   [dfn](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                     return {dfn(g, s[0])};
                   });
}

// maximum/minimum: the winner takes the gradient; ties split it evenly, as in PyTorch.
Tensor extreme(const char* name, const Tensor& a, const Tensor& b, bool is_max) {
  return record_op({name, {a, b}, {a, b}}, [&] { return is_max ? maximum(a, b) : minimum(a, b); },
                   [is_max](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                     Tensor wins = as_float_mask(is_max ? gt(s[0], s[1]) : lt(s[0], s[1]), g);
                     Tensor ties = as_float_mask(eq(s[0], s[1]), g);
                     Tensor wa = add(wins, mul(ties, 0.5));
                     return {mul(g, wa), mul(g, rsub(wa, 1))};
                   });
}

}  // namespace

void register_elementwise_formulas(AutogradKernels& k) {
  k.add = [](const Tensor& a, const Tensor& b, const Scalar& alpha) {
    return record_op({"AddBackward", {a, b}}, [&] { return add(a, b, alpha); },
                     [alpha](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                       return {g, scaled(g, alpha)};
                     });
  };
  k.sub = [](const Tensor& a, const Tensor& b, const Scalar& alpha) {
    return record_op({"SubBackward", {a, b}}, [&] { return sub(a, b, alpha); },
                     [alpha](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                       return {g, neg(scaled(g, alpha))};
                     });
  };
  k.mul = [](const Tensor& a, const Tensor& b) {
    return record_op({"MulBackward", {a, b}, {a, b}}, [&] { return mul(a, b); },
                     [](const Tensor& g, const variable_list& s, const Needs& n) -> variable_list {
                       return {n[0] ? mul(g, s[1]) : Tensor(), n[1] ? mul(g, s[0]) : Tensor()};
                     });
  };
  k.div = [](const Tensor& a, const Tensor& b) {
    return record_op({"DivBackward", {a, b}, {a, b}}, [&] { return div(a, b); },
                     [](const Tensor& g, const variable_list& s, const Needs& n) -> variable_list {
                       return {n[0] ? div(g, s[1]) : Tensor(),
                               n[1] ? neg(div(mul(g, s[0]), mul(s[1], s[1]))) : Tensor()};
                     });
  };
  k.pow = [](const Tensor& a, const Tensor& e) {
    return record_op({"PowBackward", {a, e}, {a, e}, true}, [&] { return pow(a, e); },
                     [](const Tensor& g, const variable_list& s, const Needs& n) -> variable_list {
                       const Tensor &x = s[0], &y = s[1], &out = s[2];
                       Tensor ga, gy;
                       if (n[0]) ga = mul(g, mul(y, pow(x, sub(y, 1))));
                       // d/dy x^y = x^y log x; PyTorch defines it as 0 where x == 0 and y >= 0.
                       if (n[1]) {
                         Tensor zero_base = mul(eq(x, 0), ge(y, 0));  // bool * bool is logical and
                         gy = where(zero_base, zeros_like(g), mul(g, mul(out, log(x))));
                       }
                       return {ga, gy};
                     });
  };
  k.maximum = [](const Tensor& a, const Tensor& b) { return extreme("MaximumBackward", a, b, true); };
  k.minimum = [](const Tensor& a, const Tensor& b) { return extreme("MinimumBackward", a, b, false); };

  k.add_scalar = [](const Tensor& a, const Scalar& v) {
    return record_op({"AddBackward", {a}}, [&] { return add(a, v); },
                     [](const Tensor& g, const variable_list&, const Needs&) -> variable_list { return {g}; });
  };
  k.sub_scalar = [](const Tensor& a, const Scalar& v) {
    return record_op({"SubBackward", {a}}, [&] { return sub(a, v); },
                     [](const Tensor& g, const variable_list&, const Needs&) -> variable_list { return {g}; });
  };
  k.mul_scalar = [](const Tensor& a, const Scalar& v) {
    return record_op({"MulBackward", {a}}, [&] { return mul(a, v); },
                     [v](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                       return {mul(g, v)};
                     });
  };
  k.div_scalar = [](const Tensor& a, const Scalar& v) {
    return record_op({"DivBackward", {a}}, [&] { return div(a, v); },
                     [v](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                       return {div(g, v)};
                     });
  };
  k.pow_scalar = [](const Tensor& a, const Scalar& e) {
    return record_op({"PowBackward", {a}, {a}}, [&] { return pow(a, e); },
                     [e](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       if (e.to_double() == 0.0) return {zeros_like(g)};
                       return {mul(g, mul(pow(s[0], e.to_double() - 1.0), e))};
                     });
  };
  k.rsub = [](const Tensor& a, const Scalar& v) {
    return record_op({"RsubBackward", {a}}, [&] { return rsub(a, v); },
                     [](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                       return {neg(g)};
                     });
  };
  k.rdiv = [](const Tensor& a, const Scalar& v) {
    return record_op({"RdivBackward", {a}, {a}, true}, [&] { return rdiv(a, v); },
                     [](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       return {neg(div(mul(g, s[1]), s[0]))};
                     });
  };
  k.where = [](const Tensor& cond, const Tensor& a, const Tensor& b) {
    return record_op({"WhereBackward", {a, b}, {cond}}, [&] { return where(cond, a, b); },
                     [](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       Tensor z = zeros({}, TensorOptions(g.dtype(), g.device()));
                       return {where(s[0], g, z), where(s[0], z, g)};
                     });
  };

  k.neg = [](const Tensor& t) {
    return record_op({"NegBackward", {t}}, [&] { return neg(t); },
                     [](const Tensor& g, const variable_list&, const Needs&) -> variable_list { return {neg(g)}; });
  };
  k.exp = [](const Tensor& t) {
    return unary("ExpBackward", t, exp, true, [](const Tensor& g, const Tensor& out) { return mul(g, out); });
  };
  k.log = [](const Tensor& t) {
    return unary("LogBackward", t, log, false, [](const Tensor& g, const Tensor& x) { return div(g, x); });
  };
  k.sqrt = [](const Tensor& t) {
    return unary("SqrtBackward", t, sqrt, true,
                 [](const Tensor& g, const Tensor& out) { return div(g, mul(out, 2)); });
  };
  k.rsqrt = [](const Tensor& t) {
    return unary("RsqrtBackward", t, rsqrt, true,
                 [](const Tensor& g, const Tensor& out) { return mul(g, mul(pow(out, 3), -0.5)); });
  };
  k.abs = [](const Tensor& t) {
    return unary("AbsBackward", t, abs, false, [](const Tensor& g, const Tensor& x) { return mul(g, sign(x)); });
  };
  k.relu = [](const Tensor& t) {
    return unary("ReluBackward", t, relu, true, relu_backward);
  };
  k.sigmoid = [](const Tensor& t) {
    return unary("SigmoidBackward", t, sigmoid, true, [](const Tensor& g, const Tensor& out) {
      return mul(g, mul(out, rsub(out, 1)));
    });
  };
  k.tanh = [](const Tensor& t) {
    return unary("TanhBackward", t, tanh, true, [](const Tensor& g, const Tensor& out) {
      return mul(g, rsub(mul(out, out), 1));
    });
  };
  k.gelu = [](const Tensor& t, GeluApproximation approximate) {
    return record_op({"GeluBackward", {t}, {t}}, [&] { return gelu(t, approximate); },
                     [approximate](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       return {gelu_backward(g, s[0], approximate)};
                     });
  };
  k.sign = [](const Tensor& t) {
    return unary("SignBackward", t, sign, false, [](const Tensor& g, const Tensor&) { return zeros_like(g); });
  };
  k.clamp = [](const Tensor& t, std::optional<Scalar> lo, std::optional<Scalar> hi) {
    return record_op({"ClampBackward", {t}, {t}}, [&] { return clamp(t, lo, hi); },
                     [lo, hi](const Tensor& g, const variable_list& s, const Needs&) -> variable_list {
                       Tensor pass = ones_like(g);
                       if (lo) pass = mul(pass, as_float_mask(ge(s[0], *lo), g));
                       if (hi) pass = mul(pass, as_float_mask(le(s[0], *hi), g));
                       return {mul(g, pass)};
                     });
  };

  // ---- in place -------------------------------------------------------------------------------
  k.add_ = [](const Tensor& s, const Tensor& o, const Scalar& alpha) -> const Tensor& {
    record_inplace({"AddBackward", {s, o}}, [&] { add_(s, o, alpha); },
                   [alpha](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                     return {g, scaled(g, alpha)};
                   });
    return s;
  };
  k.sub_ = [](const Tensor& s, const Tensor& o, const Scalar& alpha) -> const Tensor& {
    record_inplace({"SubBackward", {s, o}}, [&] { sub_(s, o, alpha); },
                   [alpha](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                     return {g, neg(scaled(g, alpha))};
                   });
    return s;
  };
  k.mul_ = [](const Tensor& s, const Tensor& o) -> const Tensor& {
    // The gradient for `o` needs self's value from before the multiplication.
    Tensor before = o.requires_grad() ? s.detach().clone() : Tensor();
    record_inplace({"MulBackward", {s, o}, {o, before}}, [&] { mul_(s, o); },
                   [](const Tensor& g, const variable_list& v, const Needs& n) -> variable_list {
                     return {mul(g, v[0]), n[1] ? mul(g, v[1]) : Tensor()};
                   });
    return s;
  };
  k.div_ = [](const Tensor& s, const Tensor& o) -> const Tensor& {
    record_inplace({"DivBackward", {s, o}, {o}, true}, [&] { div_(s, o); },
                   [](const Tensor& g, const variable_list& v, const Needs& n) -> variable_list {
                     return {div(g, v[0]), n[1] ? neg(div(mul(g, v[1]), v[0])) : Tensor()};
                   });
    return s;
  };
  k.add_scalar_ = [](const Tensor& s, const Scalar& v) -> const Tensor& {
    record_inplace({"AddBackward", {s}}, [&] { add_(s, v); },
                   [](const Tensor& g, const variable_list&, const Needs&) -> variable_list { return {g}; });
    return s;
  };
  k.mul_scalar_ = [](const Tensor& s, const Scalar& v) -> const Tensor& {
    record_inplace({"MulBackward", {s}}, [&] { mul_(s, v); },
                   [v](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                     return {mul(g, v)};
                   });
    return s;
  };
  k.div_scalar_ = [](const Tensor& s, const Scalar& v) -> const Tensor& {
    record_inplace({"DivBackward", {s}}, [&] { div_(s, v); },
                   [v](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                     return {div(g, v)};
                   });
    return s;
  };
  k.fill_ = [](const Tensor& s, const Scalar& v) -> const Tensor& {
    record_inplace({"FillBackward", {s}}, [&] { fill_(s, v); },
                   [](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                     return {zeros_like(g)};
                   });
    return s;
  };
  k.relu_ = [](const Tensor& s) -> const Tensor& {
    record_inplace({"ReluBackward", {s}, {}, true}, [&] { relu_(s); },
                   [](const Tensor& g, const variable_list& v, const Needs&) -> variable_list {
                     return {relu_backward(g, v[0])};
                   });
    return s;
  };
  k.copy_ = [](const Tensor& dst, const Tensor& src) -> const Tensor& {
    record_inplace({"CopyBackward", {dst, src}}, [&] { copy_(dst, src); },
                   [](const Tensor& g, const variable_list&, const Needs&) -> variable_list {
                     return {zeros_like(g), g};
                   });
    return dst;
  };
}

}  // namespace ember::autograd
