// elide-split-concat: splits and concatenates become strided views.
//
// Before:                                   After:
//   (x0, x1) = split(x, [64, 32], dim=1)      x0 = x[:, 0:64], x1 = x[:, 64:96]  (views)
//   (y0, y1) = group_gemm_rcr(x0, w0, ...)    (y0, y1) = group_gemm_rcr(...)     reads x strided,
//   out = concatenate(y0, y1, dim=1)          y0 = out[:, 0:N0], y1 = out[:, N0:] writes out strided
//
// This is what AITemplate does after grouping (fuse_split_and_group_gemm,
// transform_strided_ops): the split's copy and the concatenate's copy vanish.
// The split and concatenate ops stay in the graph, marked elided, so orders
// and checks are unchanged; executors give them no work, read the views
// through row strides and write through them.
//
// Preconditions, per op: the split or concatenate is along the last dim; a
// split's outputs are read only as a GEMM's A or a LayerNorm's X (the
// operands every backend reads with a row stride) and are not graph outputs;
// a concatenate's inputs are each produced by a GEMM or LayerNorm (plain or
// group), read by nothing else, and are not graph outputs; no view of a view.
#pragma once

#include <cstdint>

#include "hfuse/ir/graph.h"

namespace hfuse {

// Returns the number of ops elided.
int64_t ElideSplitConcat(Graph& graph);

// Whether `op` reads input slot `slot` with a row stride / writes output
// `index` with a row stride (the operands backends support as views).
bool ReadsStrided(const Op& op, size_t slot);
bool WritesStrided(const Op& op);

}  // namespace hfuse
