// Rewriting a set of ops into one group op.
//
//   y0 = gemm_rcr_bias(x0, w0, b0)        (y1, y0) = group_gemm_rcr_bias(
//   y1 = gemm_rcr_bias(x1, w1, b1)   =>        x1, w1, b1, x0, w0, b0)
//
// The members are first put in AITemplate's deterministic order (GEMMs by
// weight name, then by (K, N) descending, stably; LayerNorms by gamma name),
// then detached; the group op reads every member's inputs and produces the
// members' own output tensors, which keep their names and users. The group
// op is appended once to each input's user list. Output depths follow rule 3
// of the spec's canonical order.
#pragma once

#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse {

// Orders `members` in place as the rewrite will; exposed for tests.
void SortGroupMembers(const Graph& graph, std::vector<OpId>& members);

// Replaces `members` (all of one gemm or layernorm type, or GEMMs of several
// kinds under the hfuse rules; at least two) by one group op, which is
// returned: GEMMs of several kinds make a group_gemm_rcr_mixed that lists
// each member's kind. `members` comes back in the group's order.
OpId RewriteAsGroup(Graph& graph, std::vector<OpId>& members);

// Replaces `members` (ONNX Gathers, IsOnnxGather, at least two) by one
// group_gather, which is returned; members come back in its order, by op
// id. Its attrs.onnx names the members (OnnxNode::member_names).
//
//   y0 = opaque(t0, i0) {onnx = Gather}  # emb0      (y0, y1) = group_gather(t0, i0, t1, i1)
//   y1 = opaque(t1, i1) {onnx = Gather}  # emb1  =>      {members = [emb0, emb1]}
OpId RewriteAsGatherGroup(Graph& graph, std::vector<OpId>& members);

}  // namespace hfuse
