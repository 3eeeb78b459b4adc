// Order and reachability queries: iterative, so any depth of graph is fine.
#include "hfuse/ir/analysis.h"

#include <functional>
#include <queue>

namespace hfuse {

std::vector<OpId> StableTopologicalOrder(const Graph& graph) {
  // missing[op] = number of distinct produced inputs whose producer has not
  // run yet. Counted per tensor, not per input slot, so that an op with many
  // inputs is not scanned once per input (user lists hold each op once).
  const int32_t n = graph.num_op_ids();
  std::vector<int32_t> missing(static_cast<size_t>(n), 0);
  std::vector<OpId> last_reader(static_cast<size_t>(graph.num_tensor_ids()), kNone);
  bool in_id_order = true;  // every op's producers have lower ids
  for (OpId id = 0; id < n; ++id) {
    graph.PrefetchTensorsOf(id + 8);
    const Op& op = graph.op(id);
    if (!op.alive) {
      missing[static_cast<size_t>(id)] = -1;  // never ready
      continue;
    }
    for (TensorId in : op.inputs) {
      const OpId producer = graph.tensor(in).producer;
      if (producer == kNone || last_reader[static_cast<size_t>(in)] == id) continue;
      in_id_order = in_id_order && producer < id;
      last_reader[static_cast<size_t>(in)] = id;
      ++missing[static_cast<size_t>(id)];
    }
  }
  // Then each op is ready once those below it are done: the order is the
  // ids' (the usual case: a graph file lists its ops in an order that runs).
  if (in_id_order) return graph.LiveOps();
  // The lowest ready id: a scan upward finds the ready ops at or above it;
  // those that become ready below it (a graph listed out of order) wait in a
  // heap. A graph listed in order needs no heap at all.
  std::priority_queue<OpId, std::vector<OpId>, std::greater<>> behind;
  std::vector<OpId> order;
  OpId scan = 0;
  while (true) {
    while (scan < n && missing[static_cast<size_t>(scan)] != 0) ++scan;
    OpId id;
    if (!behind.empty() && (scan == n || behind.top() < scan)) {
      id = behind.top();
      behind.pop();
    } else if (scan < n) {
      id = scan++;
    } else {
      break;
    }
    missing[static_cast<size_t>(id)] = -1;  // done
    order.push_back(id);
    for (TensorId out : graph.op(id).outputs) {
      for (OpId user : graph.tensor(out).users) {
        if (--missing[static_cast<size_t>(user)] == 0 && user < scan) behind.push(user);
      }
    }
  }
  return order;
}

std::vector<bool> Ancestors(const Graph& graph, OpId op) {
  std::vector<bool> seen(static_cast<size_t>(graph.num_op_ids()), false);
  std::vector<OpId> stack = {op};
  while (!stack.empty()) {
    const OpId cur = stack.back();
    stack.pop_back();
    for (TensorId in : graph.op(cur).inputs) {
      const OpId p = graph.tensor(in).producer;
      if (p != kNone && !seen[static_cast<size_t>(p)]) {
        seen[static_cast<size_t>(p)] = true;
        stack.push_back(p);
      }
    }
  }
  return seen;
}

bool IsAncestor(const Graph& graph, OpId ancestor, OpId op) {
  return Ancestors(graph, op)[static_cast<size_t>(ancestor)];
}

}  // namespace hfuse
