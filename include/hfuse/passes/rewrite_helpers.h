// Small graph edits that several rewriting passes share (flatten-gemm-inputs,
// fold-batchnorm, the canonical-GEMM passes): a fresh tensor, a reshape
// between two tensors, a new param with values. Each picks a name no tensor
// or op has yet, from `base` ("base", then "base_1", ...).
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

}  // namespace hfuse
