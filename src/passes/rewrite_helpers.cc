// Shared graph edits of the rewriting passes. See rewrite_helpers.h.
#include "hfuse/passes/rewrite_helpers.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <memory>

namespace hfuse {

TensorId AddFreshTensor(Graph& graph, const std::string& base, Shape shape, DType dtype) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  for (int n = 0;; ++n) {
    t.name = n == 0 ? base : fmt::format("{}_{}", base, n);
    if (const TensorId id = graph.TryAddTensor(t); id != kNone) return id;
  }
}

TensorId AddParamTensor(Graph& graph, const std::string& base, Shape shape, DType dtype,
                        std::vector<uint8_t> data) {
  Tensor t;
  t.role = Role::kParam;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = std::make_shared<std::vector<uint8_t>>(std::move(data));
  for (int n = 0;; ++n) {
    t.name = n == 0 ? base : fmt::format("{}_{}", base, n);
    if (const TensorId id = graph.TryAddTensor(t); id != kNone) return id;
  }
}

OpId AddReshape(Graph& graph, const std::string& base, TensorId in, TensorId out) {
  Op op;
  op.type = OpType::kReshape;
  op.inputs = {in};
  op.outputs = {out};
  for (const Dim& d : graph.tensor(out).shape) {
    op.attrs.shape.push_back(d.is_static() ? d.value : -1);
  }
  for (int n = 0;; ++n) {
    op.name = n == 0 ? base : fmt::format("{}_{}", base, n);
    if (const OpId id = graph.AddOp(op); id != kNone) return id;
  }
}

namespace {

void AddFactors(const Graph& graph, int32_t dim, int64_t& factor, std::vector<int32_t>& out) {
  const DynamicDim& d = graph.dims()[static_cast<size_t>(dim)];
  if (d.product_of.empty()) {
    out.push_back(dim);
    return;
  }
  factor = std::min<int64_t>(factor * d.factor, INT32_MAX);
  for (int32_t f : d.product_of) AddFactors(graph, f, factor, out);
}

}  // namespace

Dim DerivedDim(Graph& graph, int64_t factor, std::vector<int32_t> factors) {
  std::vector<int32_t> named;
  for (int32_t f : factors) AddFactors(graph, f, factor, named);
  if (named.empty()) return Dim::Static(factor);
  if (named.size() == 1 && factor == 1) return Dim::Dynamic(named[0]);
  std::sort(named.begin(), named.end());
  std::string name;
  int64_t lo = factor, hi = factor;
  for (int32_t f : named) {
    const DynamicDim& d = graph.dims()[static_cast<size_t>(f)];
    name += (name.empty() ? "" : "*") + d.name;
    lo = std::min<int64_t>(lo * d.min, INT32_MAX);
    hi = std::min<int64_t>(hi * d.max, INT32_MAX);
  }
  if (factor != 1) name += fmt::format("*{}", factor);
  if (auto d = graph.FindDim(name)) return Dim::Dynamic(*d);
  DynamicDim dim;
  dim.name = name;
  dim.min = lo;
  dim.max = hi;
  dim.product_of = std::move(named);
  dim.factor = factor;
  return Dim::Dynamic(graph.AddDim(std::move(dim)));
}

Dim ProductOfDims(Graph& graph, const std::vector<Dim>& dims) {
  int64_t factor = 1;
  std::vector<int32_t> named;
  for (const Dim& d : dims) {
    if (d.is_static()) {
      factor *= d.value;  // the dims of a tensor, whose size counts in 64 bits
    } else {
      named.push_back(d.dynamic);
    }
  }
  return DerivedDim(graph, factor, std::move(named));
}

}  // namespace hfuse
