// Order and reachability queries over a graph.
#pragma once

#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse {

// Live ops in a stable Kahn order: repeatedly the lowest-id op whose inputs
// all exist (inputs and params exist from the start). Returns fewer ops than
// are live when the graph has a cycle.
std::vector<OpId> StableTopologicalOrder(const Graph& graph);

// True when `ancestor` produces a tensor that `op` depends on, directly or
// through other ops (strict: an op is not its own ancestor).
bool IsAncestor(const Graph& graph, OpId ancestor, OpId op);

// Every strict ancestor of `op`, as a membership vector indexed by op id.
std::vector<bool> Ancestors(const Graph& graph, OpId op);

}  // namespace hfuse
