// The graph as text, in the compact notation of fuse_group_ops.h's header:
// what --print-after, `hfuse print` and the textual pass tests show.
//
//   graph towers
//   dim batch [1, 1024]
//   input x: float16[batch, 96]
//   param w0: float16[64, 96]
//   tensor x.0: float16[batch, 64]
//   ...
//   (x.0, x.1) = split(x) {split_sizes = [64, 32], dim = 1}  # split_0
//   (y0, y1) = group_gemm_rcr_bias(x.0, w0, b0, x.1, w1, b1)  # group_gemm_rcr_bias_0
//   output y0, y1
//
// Tensors come first, by id (graph inputs, params, then the others, each
// with its dtype and shape; a strided view says whose storage it lives in),
// then one line per op in the order given (by id when none), its
// attributes as graph JSON names them (a group GEMM's group_size is its
// outputs' count, so not shown; a group gather's members are their op
// names, `{members = [emb0, emb1]}`) and its name after '#'. A name with other
// characters than letters, digits and _ . / - is quoted. A LayerNorm
// with beta but no gamma reads `null` for gamma. io/graph_text.h reads it
// back.
#pragma once

#include <string>
#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse {

std::string PrintGraph(const Graph& graph, const std::vector<OpId>& op_order = {});
// One op's line, without the newline.
std::string PrintOp(const Graph& graph, OpId op);

}  // namespace hfuse
