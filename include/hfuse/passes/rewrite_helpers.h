// Small graph edits that several rewriting passes share (flatten-gemm-inputs,
// fold-batchnorm, the canonical-GEMM passes): a fresh tensor, a reshape
// between two tensors, a new param with values, the dim of a product of
// dims. Each picks a name no tensor or op has yet, from `base` ("base", then
// "base_1", ...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse {

// A new intermediate tensor.
TensorId AddFreshTensor(Graph& graph, const std::string& base, Shape shape, DType dtype);
// A new param holding `data` (row-major, little-endian, `dtype`).
TensorId AddParamTensor(Graph& graph, const std::string& base, Shape shape, DType dtype,
                        std::vector<uint8_t> data);
// out = reshape(in), out's shape as the shape attribute (-1 for its named
// dim: out must have one at most).
OpId AddReshape(Graph& graph, const std::string& base, TensorId in, TensorId out);
// The dim of `factor` times the named dims `factors` (derived dims among
// them taken apart): static, one named dim, or the derived dim of the
// product ("batch*S", "batch*4"), made when the graph has none of that name.
Dim DerivedDim(Graph& graph, int64_t factor, std::vector<int32_t> factors);
// The dim of the product of `dims` (1 for none), as DerivedDim names it.
Dim ProductOfDims(Graph& graph, const std::vector<Dim>& dims);

}  // namespace hfuse
