// A straightforward implementation of the seed's fuse_group_ops (shared/seed,
// AITemplate's python/aitemplate/compiler/transform/fuse_group_ops.py), kept
// in the test tree as the reference for the fast pass of src/passes.
//
// It follows the seed step by step, with its data structures: a descendant
// set per tensor from a depth-first walk (`_dfs`, with fix (j) of README.md:
// exact sets), `op_set` and `grouped`, candidates sorted by op number for
// every leader, `_has_cycle` as an ancestor search per pair of members, the
// graph rewritten group by group, and AITemplate's toposort of the whole
// tensor list after each op type (the plain version hfuse had before it was
// made linear). It uses hfuse's IR, the canonical-order functions for the
// rest of the order (Canonicalize, SortedOps, RemoveNoOps, DropDeadTensors),
// the rules' predicates and the rewriter, so that it differs from the pass
// only in how the decisions are computed. It is cubic; use it on graphs of
// up to a few thousand ops.
#pragma once

#include <cstdint>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/fuse_group_ops.h"

namespace hfuse::test {

// AITemplate's toposort, the plain way (see SortTensors).
std::vector<TensorId> ReferenceSortTensors(const Graph& graph, const std::vector<TensorId>& roots);

// The pass, the seed's way; fills what FuseGroupOps fills (dumps excepted).
FuseGroupOpsResult ReferenceFuseGroupOps(Graph& graph, const FuseGroupOpsOptions& options = {});

}  // namespace hfuse::test
