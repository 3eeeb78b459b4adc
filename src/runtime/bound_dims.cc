// Bound dims and concrete shapes. See bound_dims.h.
#include "hfuse/runtime/bound_dims.h"

#include "hfuse/support/error.h"

namespace hfuse {

DimValues BindDims(const Graph& graph, const std::map<std::string, int64_t>& overrides) {
  DimValues values;
  for (const DynamicDim& d : graph.dims()) values.push_back(d.run_value > 0 ? d.run_value : d.max);
  for (const auto& [name, value] : overrides) {
    auto index = graph.FindDim(name);
    if (!index) ThrowInputError("--dim {}: the graph has no dim named '{}'", name, name);
    const DynamicDim& d = graph.dims()[static_cast<size_t>(*index)];
    if (value < d.min || value > d.max) {
      ThrowInputError("--dim {}={}: outside [{}, {}]", name, value, d.min, d.max);
    }
    if (!d.product_of.empty()) {
      ThrowInputError("--dim {}: '{}' is the product of other dims; bind those", name, name);
    }
    values[static_cast<size_t>(*index)] = value;
  }
  DeriveDims(graph, values);
  return values;
}

void DeriveDims(const Graph& graph, DimValues& values) {
  // Derived dims (graph.h) follow the ones they are products of.
  for (size_t i = 0; i < graph.dims().size(); ++i) {
    const DynamicDim& d = graph.dims()[i];
    if (d.product_of.empty()) continue;
    int64_t v = d.factor;
    for (int32_t f : d.product_of) v *= values[static_cast<size_t>(f)];
    values[i] = v;
  }
}

std::vector<int64_t> ConcreteShape(const Shape& shape, const DimValues& dims) {
  std::vector<int64_t> out;
  for (const Dim& d : shape) out.push_back(d.is_static() ? d.value : dims[static_cast<size_t>(d.dynamic)]);
  return out;
}

}  // namespace hfuse
