// Checks that a graph is well formed.
//
// Input checks: VerifyOp applies the shape rules of one op (the "Op checks
// on read" of the graph JSON spec); VerifyGraph checks every op plus the
// graph rules: each live tensor without a role has exactly one producer,
// input and param tensors have none, graph outputs exist and the graph is
// acyclic. Both throw InputError naming the op or tensor: on a graph just
// read, a failure is the input's fault.
//
// Invariant checks: VerifyInvariants checks the same, plus what only a bug
// can break (user lists mirror op inputs, producers match outputs, live ops
// read live tensors), and throws InternalError for any failure: on a graph
// a pass has rewritten, a failure is the pass's fault (the pass manager's
// --verify-each names it).
#pragma once

#include "hfuse/ir/graph.h"

namespace hfuse {

void VerifyOp(const Graph& graph, OpId op);
void VerifyGraph(const Graph& graph);
void VerifyInvariants(const Graph& graph);

}  // namespace hfuse
