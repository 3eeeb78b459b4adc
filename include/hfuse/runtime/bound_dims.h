// Dynamic dims bound to values, and the concrete shapes they give: what
// every runtime (the CPU reference, the CUDA backend) needs before it can
// size a buffer. Below both, so neither depends on the other.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse {

// The value of each dynamic dim, indexed like Graph::dims().
using DimValues = std::vector<int64_t>;

// Each dim at its max unless `overrides` (name -> value) says otherwise;
// throws InputError for an unknown name or a value outside [min, max].
DimValues BindDims(const Graph& graph, const std::map<std::string, int64_t>& overrides = {});

// Recomputes every derived dim (DynamicDim::product_of) from its factors'
// values, after a caller bound dims of their own (BindDims does this).
void DeriveDims(const Graph& graph, DimValues& values);

std::vector<int64_t> ConcreteShape(const Shape& shape, const DimValues& dims);

}  // namespace hfuse
