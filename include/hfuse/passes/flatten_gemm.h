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
// Preconditions: the weight and bias are static, and so is A's last dim (K).
// The leading dims of A are static, or with `dynamic_m` (the hfuse rules,
// which group GEMMs of one named M) may hold named dims: then M is a
// derived dim, their product times the static ones' (DynamicDim::factor),
// such as batch*39 for A = [batch, 39, 16], shared by every GEMM of that M;
// with the seed's rules a GEMM of dynamic M never groups, so it keeps its
// shape. A GEMM is flattened only when another GEMM of its type and dtype
// has, or would then have, the same M: alone it could not group, and the
// model keeps its shape. GEMMs reading the same tensor share one reshape.
#pragma once

#include <cstdint>

#include "hfuse/ir/graph.h"

namespace hfuse {

struct FlattenGemmInputsOptions {
  bool dynamic_m = false;  // leading dims of A may be named dims (above)
};

// Returns the number of GEMMs flattened (0: the graph is unchanged).
int64_t FlattenGemmInputs(Graph& graph, const FlattenGemmInputsOptions& options = {});

}  // namespace hfuse
