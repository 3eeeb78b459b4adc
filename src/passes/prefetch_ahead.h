// Software prefetching for loops over ops of a large graph.
#pragma once

#include <cstddef>

#include "hfuse/ir/graph.h"

namespace hfuse {

// In a loop that reads, at each step, an op and the tensors it reads and
// writes (their user lists and shapes too): loads what the next steps will
// read, one stage of that chain of loads per step ahead (the op's record, its
// input list, its tensors' records, their user lists and shapes), the nearer
// the step, the further along the chain. In a graph of millions of ops these
// lie far apart and each is a cache miss; so they overlap instead of coming
// one after the other. `at(j)` is the op the loop reads at step j, or null.
template <typename At>
void PrefetchOpsAhead(const Graph& graph, size_t i, const At& at) {
  if (const Op* op = at(i + 16)) {
    __builtin_prefetch(op);
    __builtin_prefetch(&op->attrs);
  }
  if (const Op* op = at(i + 12)) {
    __builtin_prefetch(op->inputs.data());
    __builtin_prefetch(op->outputs.data());
  }
  if (const Op* op = at(i + 8)) {
    for (TensorId t : op->inputs) __builtin_prefetch(&graph.tensor(t));
    for (TensorId t : op->outputs) __builtin_prefetch(&graph.tensor(t));
  }
  if (const Op* op = at(i + 4)) {
    for (TensorId t : op->inputs) {
      __builtin_prefetch(graph.tensor(t).shape.data());
      __builtin_prefetch(graph.tensor(t).users.data());
    }
    for (TensorId t : op->outputs) __builtin_prefetch(graph.tensor(t).users.data());
  }
}

}  // namespace hfuse
