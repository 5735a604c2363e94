// PyTorch-style printing: tensor([[1.0000, 2.0000], ...], dtype=float64). Floats get one shared
// format per tensor (integer-valued, fixed with 4 decimals, or scientific), large tensors are
// summarised with "..." keeping three entries at each edge.
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tensor/ops.h"

namespace ember {
namespace {

constexpr int64_t kSummarizeThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

enum class FloatStyle { kInteger, kFixed, kScientific };

struct Formatter {
  bool floating = false;
  bool boolean = false;
  FloatStyle style = FloatStyle::kFixed;
  size_t width = 1;

  std::string format(double v) const {
    if (boolean) return v != 0 ? "True" : "False";
    if (!floating) return fmt::format("{}", static_cast<int64_t>(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    switch (style) {
      case FloatStyle::kInteger: return fmt::format("{:.0f}.", v);
      case FloatStyle::kFixed: return fmt::format("{:.4f}", v);
      case FloatStyle::kScientific: return fmt::format("{:.4e}", v);
    }
    return "";
  }
};

// Indices kept along a dim of size n (all of them, or the edges when summarising).
std::vector<int64_t> kept(int64_t n, bool summarize) {
  std::vector<int64_t> idx;
  if (!summarize || n <= 2 * kEdgeItems) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);  // the "..." marker
    for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

void collect(const Tensor& t, bool summarize, std::vector<double>& out) {
  if (t.dim() == 0) {
    out.push_back(t.item().to_double());
    return;
  }
  for (int64_t i : kept(t.sizes()[0], summarize)) {
    if (i >= 0) collect(t.select(0, i), summarize, out);
  }
}

void render(const Tensor& t, const Formatter& f, bool summarize, size_t indent, std::string& s) {
  if (t.dim() == 0) {
    std::string v = f.format(t.item().to_double());
    s += std::string(f.width > v.size() ? f.width - v.size() : 0, ' ') + v;
    return;
  }
  s += '[';
  const auto idx = kept(t.sizes()[0], summarize);
  for (size_t k = 0; k < idx.size(); ++k) {
    if (k > 0) {
      s += ',';
      if (t.dim() == 1) {
        s += ' ';
      } else {
        s += std::string(t.dim() - 1, '\n') + std::string(indent + 1, ' ');
      }
    }
    if (idx[k] < 0) {
      s += t.dim() == 1 ? " ..." : "...";  // PyTorch pads the 1-d marker: "2,  ..., 997"
      continue;
    }
    render(t.select(0, idx[k]), f, summarize, indent + 1, s);
  }
  s += ']';
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  Tensor t = is_cpu() ? *this : to(kCPU);
  const bool summarize = t.numel() > kSummarizeThreshold;
  Formatter f;
  f.floating = t.is_floating_point();
  f.boolean = t.dtype() == kBool;
  std::vector<double> values;
  if (t.numel() > 0) collect(t, summarize, values);
  if (f.floating) {
    // PyTorch's _Formatter: the mode and the width come from the non-zero finite values only
    // (zeros, nan and inf neither widen the column nor force scientific notation).
    std::vector<double> nonzero;
    for (double v : values) {
      if (std::isfinite(v) && v != 0) nonzero.push_back(v);
    }
    f.style = FloatStyle::kInteger;
    if (!nonzero.empty()) {
      bool all_int = true;
      double max_abs = 0, min_abs = INFINITY;
      for (double v : nonzero) {
        all_int = all_int && v == std::ceil(v);
        max_abs = std::max(max_abs, std::fabs(v));
        min_abs = std::min(min_abs, std::fabs(v));
      }
      const bool sci = max_abs / min_abs > 1000.0 || max_abs > 1e8 || (!all_int && min_abs < 1e-4);
      f.style = sci ? FloatStyle::kScientific : all_int ? FloatStyle::kInteger : FloatStyle::kFixed;
    }
    for (double v : nonzero) f.width = std::max(f.width, f.format(v).size());
  } else {
    for (double v : values) f.width = std::max(f.width, f.format(v).size());
  }
  std::string s = "tensor(";
  if (t.numel() == 0) {
    s += "[]";
  } else {
    render(t, f, summarize, 7, s);
  }
  const bool default_dtype = t.dtype() == kFloat32 || t.dtype() == kInt64 || t.dtype() == kBool;
  if (t.numel() == 0 && t.dim() != 1) s += ", size=" + t.shape_str();
  if (!default_dtype) s += std::string(", dtype=") + dtype_name(t.dtype());
  if (!is_cpu()) s += ", device='" + device().str() + "'";
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace ember
