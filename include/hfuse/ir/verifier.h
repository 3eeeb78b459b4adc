// Checks that a graph is well formed.
//
// VerifyOp applies the shape rules of one op (the "Op checks on read" of the
// graph JSON spec); VerifyGraph checks every op plus the graph invariants:
// each live tensor without a role has exactly one producer, input and param
// tensors have none, user lists mirror op inputs, graph outputs exist and
// the graph is acyclic. Both throw InputError naming the op or tensor.
#pragma once

#include "hfuse/ir/graph.h"

namespace hfuse {

void VerifyOp(const Graph& graph, OpId op);
void VerifyGraph(const Graph& graph);

}  // namespace hfuse
