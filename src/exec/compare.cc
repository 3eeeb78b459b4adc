// Output comparison. See compare.h.
#include "hfuse/exec/compare.h"

#include <cmath>

namespace hfuse {

double Tolerance(DType dtype, bool tf32x3) {
  switch (dtype) {
    case DType::kFloat32: return tf32x3 ? 3e-5 : 1e-5;
    case DType::kFloat16: return 1e-2;
    case DType::kBFloat16: return 2e-2;
    case DType::kInt64:
    case DType::kInt32:
    case DType::kBool: return 0;  // exact
  }
  return 0;
}

std::vector<OutputComparison> CompareOutputs(const TensorMap& reference, const TensorMap& actual, bool tf32x3) {
  std::vector<OutputComparison> out;
  for (const auto& [name, ref] : reference) {
    OutputComparison c;
    c.name = name;
    c.dtype = ref.dtype;
    c.shape = ref.shape;
    auto it = actual.find(name);
    if (it == actual.end()) {
      c.problem = "missing";
    } else if (it->second.dtype != ref.dtype || it->second.shape != ref.shape) {
      c.problem = "shape or dtype differs";
    } else {
      const HostTensor& got = it->second;
      c.bitwise_equal = got.bytes == ref.bytes;
      double ref_max = 0;
      bool bad = false;
      for (int64_t i = 0; i < ref.numel(); ++i) {
        const double r = ref.Get(i), a = got.Get(i);
        if (std::isfinite(r)) ref_max = std::max(ref_max, std::fabs(r));
        if (std::isfinite(r) != std::isfinite(a)) bad = true;
        if (std::isfinite(r) && std::isfinite(a)) c.max_abs = std::max(c.max_abs, std::fabs(a - r));
      }
      c.normalized = c.max_abs / std::max(ref_max, 1e-30);
      if (bad) c.problem = "non-finite values differ";
      c.pass = !bad && (c.bitwise_equal || c.normalized <= Tolerance(ref.dtype, tf32x3));
    }
    out.push_back(std::move(c));
  }
  for (const auto& [name, t] : actual) {
    if (!reference.count(name)) {
      OutputComparison c;
      c.name = name;
      c.problem = "not an output of the reference";
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace hfuse
