// flatten-gemm-inputs: a GEMM on a 3-D (or higher) activation becomes 2-D.
//
// Before:                                  After:
//   y = gemm_rcr_bias(x, wq, bq)             x2 = reshape(x, [32, 64])
//   z = gemm_rcr_bias(x, wk, bk)             y2 = gemm_rcr_bias(x2, wq, bq)
//   # x: [2, 16, 64]                         z2 = gemm_rcr_bias(x2, wk, bk)
//                                            y = reshape(y2, [2, 16, 64])
//                                            z = reshape(z2, [2, 16, 64])
//
// fuse-group-ops groups only GEMMs whose A is 2-D (AITemplate's rule). A
// transformer exported from PyTorch applies its Q/K/V projections to a
// [batch, seq, d] activation, so they would never group; with the leading
// dims folded into M they are 2-D GEMMs of one M, and the reshapes around
// them cost nothing (same data, new shape).
//
// Preconditions: every dim of A is static (a dynamic batch would make M a
// product of dims, which a shape cannot name), and so are the weight and
// bias. A GEMM is flattened only when another GEMM of its type and dtype
// has, or would then have, the same M: alone it could not group, and the
// model keeps its shape. GEMMs reading the same tensor share one reshape.
#pragma once

#include <cstdint>

#include "hfuse/ir/graph.h"

namespace hfuse {

// Returns the number of GEMMs flattened (0: the graph is unchanged).
int64_t FlattenGemmInputs(Graph& graph);

}  // namespace hfuse
