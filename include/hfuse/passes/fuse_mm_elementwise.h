// fuse-mm-elementwise: a GEMM absorbs the bias add and the activation after it.
//
// Before:                               After:
//   y = gemm_rcr(x, w)                    z = gemm_rcr_bias_relu(x, w, b)
//   t = elementwise add(y, b)   # b: [N]
//   z = elementwise relu(t)
//
// AITemplate's fuse_mm_elementwise, for the epilogues the group ops have:
// gemm_rcr + add of a 1-D param bias -> gemm_rcr_bias (either operand order),
// then gemm_rcr_bias + relu / sigmoid -> gemm_rcr_bias_relu / _sigmoid, also
// where a shape-only op (reshape, Squeeze, Unsqueeze, Flatten, Identity)
// stands between the GEMM and the activation: the GEMM takes the
// activation, the shape op then writes the activation's output. It
// runs before fuse-group-ops on graphs read from ONNX, where a Linear layer
// arrives as a Gemm (gemm_rcr_bias) or as MatMul + Add, and its activation as
// its own node; graph JSON spells the fused types out, so JSON input skips it.
//
// Preconditions for each step: the GEMM's output has exactly one user (the
// add or the activation) and is not a graph output; the bias is a param
// (constant) of shape [N] with the GEMM's dtype. A bias that is computed, a
// C of shape [M, N], or a scaled C (Gemm's beta != 1, imported as a multiply)
// is left alone, so such a GEMM stays as it is, unfused but correct.
//
// The fused op keeps the GEMM's id and name (so reports name the model's
// Gemm/MatMul node) and produces the last absorbed op's output tensor.
#pragma once

#include <cstdint>

#include "hfuse/ir/graph.h"

namespace hfuse {

struct FuseMmElementwiseOptions {
  bool activations = true;  // also absorb relu / sigmoid after a bias add
};

// Returns the number of ops absorbed (0: the graph is unchanged).
int64_t FuseMmElementwise(Graph& graph, const FuseMmElementwiseOptions& options = {});

}  // namespace hfuse
