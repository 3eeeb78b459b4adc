// The canonical order of the graph JSON spec ("Canonical order", rules 1-7).
//
// Which ops the horizontal-fusion pass groups, and in what order, depends on
// the order in which it visits them; AITemplate derives that order from how
// its graph was built and from its topological sort. These functions
// reproduce it exactly:
//
//   Canonicalize   rules 1-3: drop dead ops, rebuild user lists in
//                  construction order, assign depths
//   SortTensors    rule 4: AITemplate's toposort (a depth-first walk that
//                  fixes the order of source tensors, then a Kahn pass that
//                  pops the largest tensor first)
//   SortedOps      the ops in the order their first output is met
//   RemoveNoOps    rule 6: single-input concatenates and one-output splits
//   DropDeadTensors  the clean-up after a sort (rule 7)
#pragma once

#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse {

void Canonicalize(Graph& graph);

// With `ops`, also SortedOps of the result (made from the sort's own arrays,
// faster than SortedOps).
std::vector<TensorId> SortTensors(const Graph& graph, const std::vector<TensorId>& roots,
                                  std::vector<OpId>* ops = nullptr);

std::vector<OpId> SortedOps(const Graph& graph, const std::vector<TensorId>& sorted);

// Removes the no-op concatenates, then the no-op splits, visiting ops in the
// order of `sorted`, and drops the removed tensors from `sorted`.
// Returns the number of ops removed.
int64_t RemoveNoOps(Graph& graph, std::vector<TensorId>& sorted);
// The same, given SortedOps(graph, sorted), which it keeps up to date.
int64_t RemoveNoOps(Graph& graph, std::vector<TensorId>& sorted, std::vector<OpId>& sorted_ops);

// Drops erased tensors and tensors with neither producer nor users that are
// neither graph inputs nor graph outputs.
void DropDeadTensors(const Graph& graph, std::vector<TensorId>& sorted);

}  // namespace hfuse
