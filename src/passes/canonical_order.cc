// AITemplate's graph order, reproduced exactly. See canonical_order.h.
#include "hfuse/passes/canonical_order.h"

#include <algorithm>
#include <queue>
#include <tuple>

#include "hfuse/ir/analysis.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

void DropDeadOps(Graph& graph) {
  std::vector<bool> live(static_cast<size_t>(graph.num_op_ids()), false);
  std::vector<bool> seen(static_cast<size_t>(graph.num_tensor_ids()), false);
  std::vector<TensorId> stack(graph.outputs().begin(), graph.outputs().end());
  for (TensorId t : stack) seen[static_cast<size_t>(t)] = true;
  while (!stack.empty()) {
    const OpId p = graph.tensor(stack.back()).producer;
    stack.pop_back();
    if (p == kNone || live[static_cast<size_t>(p)]) continue;
    live[static_cast<size_t>(p)] = true;
    for (TensorId in : graph.op(p).inputs) {
      if (!seen[static_cast<size_t>(in)]) {
        seen[static_cast<size_t>(in)] = true;
        stack.push_back(in);
      }
    }
  }
  std::vector<TensorId> orphans;
  for (OpId id : graph.LiveOps()) {
    if (live[static_cast<size_t>(id)]) continue;
    const Op& op = graph.op(id);
    orphans.insert(orphans.end(), op.outputs.begin(), op.outputs.end());
    graph.DetachOp(id);
  }
  for (TensorId t : orphans) graph.EraseTensor(t);
}

// A concatenate input is empty when it has a zero-size dim (static 0, or a
// dynamic dim whose max is 0). The spec's rule; AITemplate also counts a
// dynamic dim with min 0 as empty, and so removes concatenates of two such
// inputs, which leaves their consumers reading a tensor of the wrong shape.
bool HasZeroSizeDim(const Graph& graph, TensorId id) {
  for (const Dim& d : graph.tensor(id).shape) {
    const int64_t high = d.is_static() ? d.value : graph.dims()[static_cast<size_t>(d.dynamic)].max;
    if (high == 0) return true;
  }
  return false;
}

}  // namespace

void Canonicalize(Graph& graph) {
  DropDeadOps(graph);
  const std::vector<OpId> order = StableTopologicalOrder(graph);
  HFUSE_CHECK(static_cast<int64_t>(order.size()) == graph.NumLiveOps());
  graph.ReorderUsers(order);
  for (TensorId t = 0; t < graph.num_tensor_ids(); ++t) graph.mutable_tensor(t).depth = 0;
  for (OpId id : order) {
    const Op& op = graph.op(id);
    // Rule 3's exception: AITemplate builds each output of a group GEMM with
    // a gemm_rcr of that member's own inputs, so each takes its own depth.
    const bool per_member = IsGroupGemm(op.type);
    const size_t stride = per_member ? op.inputs.size() / op.outputs.size() : op.inputs.size();
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      const size_t begin = per_member ? i * stride : 0;
      int64_t depth = 0;
      for (size_t k = begin; k < begin + stride; ++k) {
        depth = std::max(depth, graph.tensor(op.inputs[k]).depth);
      }
      graph.mutable_tensor(op.outputs[i]).depth = depth + 1;
    }
  }
}

std::vector<TensorId> SortTensors(const Graph& graph, const std::vector<TensorId>& roots) {
  const auto n = static_cast<size_t>(graph.num_tensor_ids());
  // Depth-first walk: only the order in which source tensors finish matters.
  std::vector<TensorId> walk;
  std::vector<bool> visited(n, false);
  std::vector<std::pair<TensorId, bool>> stack;
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) stack.emplace_back(*it, false);
  std::vector<size_t> order;
  while (!stack.empty()) {
    const auto [t, finished] = stack.back();
    stack.pop_back();
    const OpId producer = graph.tensor(t).producer;
    if (finished) {
      walk.push_back(t);
      if (producer != kNone) {
        for (TensorId out : graph.op(producer).outputs) stack.emplace_back(out, false);
      }
      continue;
    }
    if (visited[static_cast<size_t>(t)]) continue;
    visited[static_cast<size_t>(t)] = true;
    stack.emplace_back(t, true);
    if (producer == kNone) continue;
    // Visit the deepest input first; equal depths in input order.
    const std::vector<TensorId>& inputs = graph.op(producer).inputs;
    order.resize(inputs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return graph.tensor(inputs[a]).depth > graph.tensor(inputs[b]).depth;
    });
    for (auto it = order.rbegin(); it != order.rend(); ++it) stack.emplace_back(inputs[*it], false);
  }

  // Kahn pass: sources in walk order, then the largest ready tensor first.
  std::vector<int32_t> pending(n, -1);  // -1: not part of this sort
  for (TensorId t : walk) {
    const OpId producer = graph.tensor(t).producer;
    int32_t distinct = 0;
    if (producer != kNone) {
      std::vector<TensorId> ins = graph.op(producer).inputs;
      std::sort(ins.begin(), ins.end());
      distinct = static_cast<int32_t>(std::unique(ins.begin(), ins.end()) - ins.begin());
    }
    pending[static_cast<size_t>(t)] = distinct;
  }
  using Entry = std::tuple<int64_t, int64_t, TensorId>;  // (-bytes, push count, tensor)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  int64_t pushes = 0;
  std::vector<TensorId> sorted;
  std::vector<bool> emitted(n, false);
  for (TensorId t : walk) {
    if (pending[static_cast<size_t>(t)] == 0) {
      sorted.push_back(t);
      emitted[static_cast<size_t>(t)] = true;
      heap.emplace(-TensorBytes(graph, t), pushes++, t);
    }
  }
  while (!heap.empty()) {
    const TensorId t = std::get<2>(heap.top());
    heap.pop();
    if (!emitted[static_cast<size_t>(t)]) {
      emitted[static_cast<size_t>(t)] = true;
      sorted.push_back(t);
    }
    for (OpId user : graph.tensor(t).users) {
      for (TensorId out : graph.op(user).outputs) {
        int32_t& p = pending[static_cast<size_t>(out)];
        if (p <= 0) continue;
        if (--p == 0) heap.emplace(-TensorBytes(graph, out), pushes++, out);
      }
    }
  }
  return sorted;
}

std::vector<OpId> SortedOps(const Graph& graph, const std::vector<TensorId>& sorted) {
  std::vector<bool> seen(static_cast<size_t>(graph.num_op_ids()), false);
  std::vector<OpId> ops;
  for (TensorId t : sorted) {
    const OpId p = graph.tensor(t).producer;
    if (p != kNone && !seen[static_cast<size_t>(p)]) {
      seen[static_cast<size_t>(p)] = true;
      ops.push_back(p);
    }
  }
  return ops;
}

void DropDeadTensors(const Graph& graph, std::vector<TensorId>& sorted) {
  std::erase_if(sorted, [&](TensorId id) {
    const Tensor& t = graph.tensor(id);
    if (!t.alive) return true;
    return t.producer == kNone && t.users.empty() && t.role != Role::kInput &&
           !graph.IsGraphOutput(id);
  });
}

int64_t RemoveNoOps(Graph& graph, std::vector<TensorId>& sorted) {
  int64_t removed = 0;
  for (OpId id : SortedOps(graph, sorted)) {
    const Op& op = graph.op(id);
    if (op.type != OpType::kConcatenate || graph.IsGraphOutput(op.outputs[0])) continue;
    int64_t non_empty = 0;
    size_t first_non_empty = 0;
    for (size_t i = op.inputs.size(); i-- > 0;) {
      if (!HasZeroSizeDim(graph, op.inputs[i])) {
        ++non_empty;
        first_non_empty = i;
      }
    }
    if (op.inputs.size() > 1 && non_empty > 1) continue;
    const TensorId kept = op.inputs[non_empty == 1 ? first_non_empty : 0];
    graph.ReplaceAllUsesWith(op.outputs[0], kept);
    graph.EraseOp(id);
    ++removed;
  }
  DropDeadTensors(graph, sorted);
  for (OpId id : SortedOps(graph, sorted)) {
    const Op& op = graph.op(id);
    if (op.type != OpType::kSplit || op.outputs.size() != 1 ||
        graph.IsGraphOutput(op.outputs[0])) {
      continue;
    }
    graph.ReplaceAllUsesWith(op.outputs[0], op.inputs[0]);
    graph.EraseOp(id);
    ++removed;
  }
  DropDeadTensors(graph, sorted);
  return removed;
}

}  // namespace hfuse
