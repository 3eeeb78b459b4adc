// Bound dims and concrete shapes. See bound_dims.h.
#include "hfuse/runtime/bound_dims.h"

#include "hfuse/support/error.h"

namespace hfuse {

DimValues BindDims(const Graph& graph, const std::map<std::string, int64_t>& overrides) {
  DimValues values;
  for (const DynamicDim& d : graph.dims()) values.push_back(d.max);
  for (const auto& [name, value] : overrides) {
    auto index = graph.FindDim(name);
    if (!index) ThrowInputError("--dim {}: the graph has no dim named '{}'", name, name);
    const DynamicDim& d = graph.dims()[static_cast<size_t>(*index)];
    if (value < d.min || value > d.max) {
      ThrowInputError("--dim {}={}: outside [{}, {}]", name, value, d.min, d.max);
    }
    values[static_cast<size_t>(*index)] = value;
  }
  return values;
}

std::vector<int64_t> ConcreteShape(const Shape& shape, const DimValues& dims) {
  std::vector<int64_t> out;
  for (const Dim& d : shape) out.push_back(d.is_static() ? d.value : dims[static_cast<size_t>(d.dynamic)]);
  return out;
}

}  // namespace hfuse
