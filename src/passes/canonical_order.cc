// AITemplate's graph order, reproduced exactly. See canonical_order.h.
#include "hfuse/passes/canonical_order.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <span>

#include "hfuse/ir/analysis.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

// How far ahead a loop over tensors in sorted order prefetches.
constexpr size_t kAhead = 16;

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

// What the sort reads of the graph, copied into flat arrays in one pass in
// id order: the sort then jumps around arrays of ints instead of tensor and
// op records (hundreds of MB for a graph of a million ops).
struct SortView {
  explicit SortView(const Graph& graph) {
    const auto n = static_cast<size_t>(graph.num_tensor_ids());
    producer.resize(n);
    depth.resize(n);
    bytes.resize(n);
    user_begin.resize(n + 1, 0);
    user_list.reserve(n);
    for (TensorId t = 0; t < graph.num_tensor_ids(); ++t) {
      const auto i = static_cast<size_t>(t);
      // The records are read in order, but each points to its user list and
      // shape elsewhere: those are asked for a few tensors ahead.
      if (i + kAhead < n) {
        const Tensor& next = graph.tensor(t + static_cast<TensorId>(kAhead));
        __builtin_prefetch(next.users.data());
        __builtin_prefetch(next.shape.data());
      }
      const Tensor& tensor = graph.tensor(t);
      producer[i] = tensor.producer;
      depth[i] = tensor.depth;
      bytes[i] = TensorBytes(graph, t);
      user_list.insert(user_list.end(), tensor.users.begin(), tensor.users.end());
      user_begin[i + 1] = static_cast<int32_t>(user_list.size());
    }
    const auto n_ops = static_cast<size_t>(graph.num_op_ids());
    op_live.resize(n_ops);
    in_begin.resize(n_ops + 1, 0);
    out_begin.resize(n_ops + 1, 0);
    for (OpId o = 0; o < graph.num_op_ids(); ++o) {
      const Op& op = graph.op(o);
      const auto i = static_cast<size_t>(o);
      const bool live = op.alive;
      op_live[i] = live;
      in_begin[i + 1] = in_begin[i] + (live ? static_cast<int32_t>(op.inputs.size()) : 0);
      out_begin[i + 1] = out_begin[i] + (live ? static_cast<int32_t>(op.outputs.size()) : 0);
    }
    in_list.resize(static_cast<size_t>(in_begin[n_ops]));
    out_list.resize(static_cast<size_t>(out_begin[n_ops]));
    for (OpId o = 0; o < graph.num_op_ids(); ++o) {
      const Op& op = graph.op(o);
      if (!op.alive) continue;
      std::copy(op.inputs.begin(), op.inputs.end(),
                in_list.begin() + in_begin[static_cast<size_t>(o)]);
      std::copy(op.outputs.begin(), op.outputs.end(),
                out_list.begin() + out_begin[static_cast<size_t>(o)]);
    }
  }
  std::span<const OpId> users(TensorId t) const { return Range(user_list, user_begin, t); }
  std::span<const TensorId> inputs(OpId o) const { return Range(in_list, in_begin, o); }
  std::span<const TensorId> outputs(OpId o) const { return Range(out_list, out_begin, o); }

  std::vector<OpId> producer;
  std::vector<int64_t> depth, bytes;
  std::vector<uint8_t> op_live;

 private:
  static std::span<const int32_t> Range(const std::vector<int32_t>& list,
                                        const std::vector<int32_t>& begin, int32_t i) {
    const auto k = static_cast<size_t>(i);
    return std::span<const int32_t>(list).subspan(static_cast<size_t>(begin[k]),
                                                  static_cast<size_t>(begin[k + 1] - begin[k]));
  }
  std::vector<int32_t> user_begin, in_begin, out_begin;
  std::vector<int32_t> user_list, in_list, out_list;
};

// The Kahn pass's priority queue: the largest tensor first, ties in push
// order. Graphs have few distinct sizes, so it is a FIFO per size and an
// ordered map of the sizes.
class ReadyQueue {
 public:
  void Push(int64_t bytes, TensorId t) {
    Fifo& fifo = by_size_[bytes];
    fifo.items.push_back(t);
    ++size_;
  }
  bool empty() const { return size_ == 0; }
  TensorId Pop() {
    auto it = std::prev(by_size_.end());
    Fifo& fifo = it->second;
    const TensorId t = fifo.items[fifo.head++];
    --size_;
    if (fifo.head == fifo.items.size()) by_size_.erase(it);
    return t;
  }

 private:
  struct Fifo {
    std::vector<TensorId> items;
    size_t head = 0;
  };
  std::map<int64_t, Fifo> by_size_;
  size_t size_ = 0;
};

}  // namespace

void Canonicalize(Graph& graph) {
  DropDeadOps(graph);
  const std::vector<OpId> order = StableTopologicalOrder(graph);
  HFUSE_CHECK(static_cast<int64_t>(order.size()) == graph.NumLiveOps());
  graph.ReorderUsers(order);
  for (TensorId t = 0; t < graph.num_tensor_ids(); ++t) graph.mutable_tensor(t).depth = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k + 8 < order.size()) graph.PrefetchTensorsOf(order[k + 8]);
    const OpId id = order[k];
    const Op& op = graph.op(id);
    // Rule 3's exception: AITemplate builds each output of a group GEMM with
    // a gemm_rcr of that member's own inputs, so each takes its own depth.
    // Every other op's outputs (a group LayerNorm's too) take the depth of all its inputs.
    const bool per_member = IsGroupGemm(op.type);
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      int64_t depth = 0;
      auto take = [&](size_t k) { depth = std::max(depth, graph.tensor(op.inputs[k]).depth); };
      if (per_member) {
        ForEachMemberInput(op, i, take);
      } else {
        for (size_t k = 0; k < op.inputs.size(); ++k) take(k);
      }
      graph.mutable_tensor(op.outputs[i]).depth = depth + 1;
    }
  }
}

std::vector<TensorId> SortTensors(const Graph& graph, const std::vector<TensorId>& roots,
                                  std::vector<OpId>* ops) {
  const SortView g(graph);
  const auto n = static_cast<size_t>(graph.num_tensor_ids());
  const auto n_ops = static_cast<size_t>(graph.num_op_ids());
  // Depth-first walk: only the order in which source tensors finish matters.
  // A stack entry t >= 0 visits t; ~t finishes it. Two shortcuts keep the
  // walk linear without changing its order: an op's inputs are pushed once
  // (when another output of the op is visited later, they are all visited
  // already, so pushing them again does nothing), and so are its outputs
  // when the first of them finishes (all of them then finish one after the
  // other, the last listed first, whoever pushes them again).
  std::vector<TensorId> walk;
  walk.reserve(n);
  std::vector<uint8_t> visited(n, 0);
  std::vector<uint8_t> op_state(n_ops, 0);  // bit 0: inputs pushed; bit 1: outputs pushed
  std::vector<TensorId> stack;
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) stack.push_back(*it);
  std::vector<size_t> order;
  std::vector<size_t> start;
  while (!stack.empty()) {
    const TensorId entry = stack.back();
    stack.pop_back();
    if (entry < 0) {
      const TensorId t = ~entry;
      walk.push_back(t);
      const OpId producer = g.producer[static_cast<size_t>(t)];
      if (producer != kNone && !(op_state[static_cast<size_t>(producer)] & 2)) {
        op_state[static_cast<size_t>(producer)] |= 2;
        for (TensorId out : g.outputs(producer)) stack.push_back(out);
      }
      continue;
    }
    if (visited[static_cast<size_t>(entry)]) continue;
    visited[static_cast<size_t>(entry)] = 1;
    stack.push_back(~entry);
    const OpId producer = g.producer[static_cast<size_t>(entry)];
    if (producer == kNone || (op_state[static_cast<size_t>(producer)] & 1)) continue;
    op_state[static_cast<size_t>(producer)] |= 1;
    // Visit the deepest input first; equal depths in input order.
    const std::span<const TensorId> inputs = g.inputs(producer);
    auto depth = [&](size_t i) { return g.depth[static_cast<size_t>(inputs[i])]; };
    order.resize(inputs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    if (order.size() <= 16) {
      for (size_t i = 1; i < order.size(); ++i) {  // stable insertion sort
        for (size_t j = i; j > 0 && depth(order[j]) > depth(order[j - 1]); --j)
          std::swap(order[j], order[j - 1]);
      }
    } else {
      // A group op or a concatenate reads many tensors of few depths: a
      // stable counting sort, deepest first.
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (size_t i = 0; i < inputs.size(); ++i) {
        lo = std::min(lo, depth(i));
        hi = std::max(hi, depth(i));
      }
      if (hi - lo < static_cast<int64_t>(inputs.size())) {
        start.assign(static_cast<size_t>(hi - lo) + 2, 0);
        for (size_t i = 0; i < inputs.size(); ++i) ++start[static_cast<size_t>(hi - depth(i)) + 1];
        for (size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
        for (size_t i = 0; i < inputs.size(); ++i)
          order[start[static_cast<size_t>(hi - depth(i))]++] = i;
      } else {
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return depth(a) > depth(b); });
      }
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) stack.push_back(inputs[*it]);
  }

  // Kahn pass: sources in walk order, then the largest ready tensor first.
  // The count of distinct inputs not yet popped is kept per op (all outputs
  // of an op become ready together, in their listed order); -1 marks ops
  // that are not part of this sort.
  std::vector<int32_t> pending(n_ops, -1);
  std::vector<uint8_t> mark(n, 0);
  for (TensorId t : walk) {
    const OpId producer = g.producer[static_cast<size_t>(t)];
    if (producer == kNone || pending[static_cast<size_t>(producer)] >= 0) continue;
    int32_t distinct = 0;
    const std::span<const TensorId> inputs = g.inputs(producer);
    for (TensorId in : inputs) {
      if (!mark[static_cast<size_t>(in)]) {
        mark[static_cast<size_t>(in)] = 1;
        ++distinct;
      }
    }
    for (TensorId in : inputs) mark[static_cast<size_t>(in)] = 0;
    pending[static_cast<size_t>(producer)] = distinct;
  }
  ReadyQueue ready;
  std::vector<TensorId> sorted;
  sorted.reserve(walk.size());
  std::vector<uint8_t> emitted(n, 0);
  for (TensorId t : walk) {
    const OpId producer = g.producer[static_cast<size_t>(t)];
    if (producer == kNone || pending[static_cast<size_t>(producer)] == 0) {
      sorted.push_back(t);
      emitted[static_cast<size_t>(t)] = 1;
      ready.Push(g.bytes[static_cast<size_t>(t)], t);
    }
  }
  while (!ready.empty()) {
    const TensorId t = ready.Pop();
    if (!emitted[static_cast<size_t>(t)]) {
      emitted[static_cast<size_t>(t)] = 1;
      sorted.push_back(t);
    }
    for (OpId user : g.users(t)) {
      int32_t& p = pending[static_cast<size_t>(user)];
      if (p <= 0) continue;
      if (--p == 0) {
        for (TensorId out : g.outputs(user)) ready.Push(g.bytes[static_cast<size_t>(out)], out);
      }
    }
  }
  if (ops != nullptr) {  // SortedOps, from the view's compact arrays
    ops->clear();
    std::vector<uint8_t> seen(n_ops, 0);
    for (TensorId t : sorted) {
      const OpId p = g.producer[static_cast<size_t>(t)];
      if (p != kNone && g.op_live[static_cast<size_t>(p)] && !seen[static_cast<size_t>(p)]) {
        seen[static_cast<size_t>(p)] = 1;
        ops->push_back(p);
      }
    }
  }
  return sorted;
}

std::vector<OpId> SortedOps(const Graph& graph, const std::vector<TensorId>& sorted) {
  std::vector<uint8_t> seen(static_cast<size_t>(graph.num_op_ids()), 0);
  std::vector<OpId> ops;
  for (size_t i = 0; i < sorted.size(); ++i) {
    // The tensors lie anywhere in a large array: ask for them ahead.
    if (i + kAhead < sorted.size()) __builtin_prefetch(&graph.tensor(sorted[i + kAhead]).producer);
    const OpId p = graph.tensor(sorted[i]).producer;
    if (p != kNone && !seen[static_cast<size_t>(p)]) {
      seen[static_cast<size_t>(p)] = 1;
      ops.push_back(p);
    }
  }
  return ops;
}

void DropDeadTensors(const Graph& graph, std::vector<TensorId>& sorted) {
  size_t kept = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i + kAhead < sorted.size()) __builtin_prefetch(&graph.tensor(sorted[i + kAhead]).producer);
    const TensorId id = sorted[i];
    const Tensor& t = graph.tensor(id);
    const bool dead = !t.alive || (t.producer == kNone && t.users.empty() &&
                                   t.role != Role::kInput && !graph.IsGraphOutput(id));
    if (!dead) sorted[kept++] = id;
  }
  sorted.resize(kept);
}

int64_t RemoveNoOps(Graph& graph, std::vector<TensorId>& sorted) {
  std::vector<OpId> sorted_ops = SortedOps(graph, sorted);
  return RemoveNoOps(graph, sorted, sorted_ops);
}

int64_t RemoveNoOps(Graph& graph, std::vector<TensorId>& sorted, std::vector<OpId>& sorted_ops) {
  // Removing ops and tensors without producers moves no other op in the
  // order of first outputs: sorted_ops stays SortedOps(sorted) by dropping
  // the removed ops.
  auto drop_removed = [&] {
    std::erase_if(sorted_ops, [&](OpId id) { return !graph.op(id).alive; });
  };
  int64_t removed = 0;
  for (OpId id : sorted_ops) {
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
  drop_removed();
  for (OpId id : sorted_ops) {
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
  drop_removed();
  return removed;
}

}  // namespace hfuse
