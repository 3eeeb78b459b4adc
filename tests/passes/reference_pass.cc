// The seed's fuse_group_ops, literally. See reference_pass.h; the comments
// name the seed's functions.
#include "passes/reference_pass.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <tuple>

#include "hfuse/ir/analysis.h"
#include "hfuse/passes/canonical_order.h"
#include "hfuse/passes/group_planner.h"
#include "hfuse/passes/group_rewriter.h"
#include "hfuse/support/error.h"

namespace hfuse::test {
namespace {

using OpSet = std::set<OpId>;

// _dfs: the ops of `type` below each tensor (fix (j): a tensor met again
// still reports its producer). Recursion made explicit: frame = (tensor,
// next user, next output of that user, descendants so far).
struct DfsFrame {
  TensorId tensor;
  size_t user = 0;
  size_t output = 0;
  OpSet descendants;
};

OpSet Dfs(const Graph& g, TensorId root, OpType type, std::map<TensorId, OpSet>& visited,
          std::vector<TensorId>& visit_order) {
  auto with_producer = [&](TensorId t, OpSet s) {
    const OpId src = g.tensor(t).producer;
    if (src != kNone && g.op(src).type == type) s.insert(src);
    return s;
  };
  if (visited.count(root)) return with_producer(root, visited[root]);
  std::vector<DfsFrame> stack;
  visited[root];  // establish topological order in visited
  visit_order.push_back(root);
  stack.push_back({root, 0, 0, {}});
  OpSet returned;
  while (true) {
    DfsFrame& f = stack.back();
    const std::vector<OpId>& users = g.tensor(f.tensor).users;
    if (f.user < users.size()) {
      const std::vector<TensorId>& outs = g.op(users[f.user]).outputs;
      if (f.output == outs.size()) {
        ++f.user;
        f.output = 0;
        continue;
      }
      const TensorId out = outs[f.output++];
      if (visited.count(out)) {
        const OpSet d = with_producer(out, visited[out]);
        f.descendants.insert(d.begin(), d.end());
        continue;
      }
      visited[out];
      visit_order.push_back(out);
      stack.push_back({out, 0, 0, {}});
      continue;
    }
    // All users done: visited[tensor] holds the descendants, not the tensor's producer.
    visited[f.tensor] = f.descendants;
    OpSet result = with_producer(f.tensor, std::move(f.descendants));
    stack.pop_back();
    if (stack.empty()) {
      returned = std::move(result);
      break;
    }
    stack.back().descendants.insert(result.begin(), result.end());
  }
  return returned;
}

// _get_dependency_graph: {op of `type`: the ops of `type` below it}.
std::map<OpId, OpSet> DependencyGraph(const Graph& g, const std::vector<TensorId>& sorted,
                                      OpType type) {
  std::map<TensorId, OpSet> visited;
  std::vector<TensorId> visit_order;
  for (TensorId t : sorted) Dfs(g, t, type, visited, visit_order);
  std::map<OpId, OpSet> filtered;  // _filter_by_op_type
  for (TensorId t : visit_order) {
    const OpId src = g.tensor(t).producer;
    if (src != kNone && g.op(src).type == type) filtered[src] = visited[t];
  }
  return filtered;
}

// The seed's _can_fuse_split_op as hfuse reads it: split on dim 1, the dims
// from there on static.
bool CanFuseSplit(const Graph& g, const Op& split) {
  const Shape& x = g.tensor(split.inputs[0]).shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = split.attrs.dim < 0 ? split.attrs.dim + rank : split.attrs.dim;
  if (axis != 1) return false;
  return std::all_of(x.begin() + 1, x.end(), [](const Dim& d) { return d.is_static(); });
}

// _has_cycle: does another member of the group reach grouped_op?
bool HasCycle(const Graph& g, OpId grouped_op, const std::vector<OpId>& group) {
  for (OpId op : group) {
    if (op == grouped_op) continue;
    if (IsAncestor(g, op, grouped_op)) return true;
  }
  return false;
}

bool FilterOp(const Graph& g, OpId id) {  // _get_op_filter
  return !IsGemm(g.op(id).type) || IsGemmCandidate(g, id);
}

bool Compatible(const Graph& g, OpId a, OpId b) {
  const Op& op1 = g.op(a);
  const Op& op2 = g.op(b);
  // _ops_have_same_num_inputs and _check_op_num_outputs(op, 1)
  if (op1.inputs.empty() || op1.inputs.size() != op2.inputs.size() || op1.outputs.size() != 1) {
    return false;
  }
  return IsGemm(op1.type) ? GemmsCompatible(g, a, b) : LayerNormsCompatible(g, a, b);
}

int64_t FlatNormalizedSize(const Op& op) {
  int64_t n = 1;
  for (int64_t d : op.attrs.normalized_shape) n *= d;
  return n;
}

class ReferenceRound {
 public:
  ReferenceRound(Graph& g, const std::vector<int64_t>& op_number, OpType type,
                 FuseGroupOpsResult& out)
      : g_(g), op_number_(op_number), type_(type), out_(out) {}

  // _group_ops_by_type; returns the outputs of the group ops it made.
  std::vector<TensorId> Run(const std::vector<TensorId>& sorted) {
    std::map<OpId, OpSet> dependency_graph = DependencyGraph(g_, sorted, type_);
    if (dependency_graph.empty()) return {};
    const std::vector<OpId> sorted_ops = SortedOps(g_, sorted);
    // _get_sorted_candidate_ops: grouped = {op: False}, in sorted order.
    std::vector<std::pair<OpId, bool>> grouped;
    for (OpId op : sorted_ops) {
      if (g_.op(op).type == type_ && FilterOp(g_, op)) grouped.emplace_back(op, false);
    }
    HFUSE_CHECK(grouped.size() <= dependency_graph.size());

    // _group_split_outputs_together, applies to group gemms only.
    if (IsGemm(type_)) {
      for (OpId op : sorted_ops) {
        const Op& split = g_.op(op);
        if (split.type != OpType::kSplit || !CanFuseSplit(g_, split)) continue;
        std::vector<OpId> gemm_group;
        bool complete = true;
        for (TensorId output : split.outputs) {
          const std::vector<OpId>& dst_ops = g_.tensor(output).users;
          if (dst_ops.empty()) {
            complete = false;
            break;
          }
          const OpId gemm = dst_ops.front();
          const Op& gemm_op = g_.op(gemm);
          if (gemm_op.type != type_ || !IsGemmCandidate(g_, gemm)) {
            complete = false;
            break;
          }
          // Fix (c): distinct GEMMs, each reading its split output as A.
          if (gemm_op.inputs[0] != output ||
              std::find(gemm_group.begin(), gemm_group.end(), gemm) != gemm_group.end()) {
            complete = false;
            break;
          }
          if (!gemm_group.empty() && !GemmsCompatible(g_, gemm_group.back(), gemm)) {
            complete = false;
            break;
          }
          gemm_group.push_back(gemm);
        }
        if (!complete || gemm_group.size() < 2) continue;  // fix (e)
        bool cycle = false;
        for (OpId m : gemm_group) cycle = cycle || HasCycle(g_, m, gemm_group);
        if (cycle) continue;
        for (OpId m : gemm_group) {
          std::erase_if(grouped, [&](const auto& entry) { return entry.first == m; });
        }
        Fuse(gemm_group);
      }
    }

    std::set<OpId> op_set;  // the ops available for group fusion
    for (const auto& [op, flag] : grouped) op_set.insert(op);
    for (size_t i = 0; i < grouped.size(); ++i) {
      const OpId op = grouped[i].first;
      if (grouped[i].second) {
        op_set.erase(op);
        continue;
      }
      OpSet descendants = dependency_graph[op];
      op_set.erase(op);
      std::vector<OpId> group_candidates;
      for (OpId c : op_set) {
        if (!descendants.count(c)) group_candidates.push_back(c);
      }
      std::sort(group_candidates.begin(), group_candidates.end(), [&](OpId a, OpId b) {
        return op_number_[static_cast<size_t>(a)] < op_number_[static_cast<size_t>(b)];
      });
      std::vector<OpId> group = {op};
      for (OpId candidate : group_candidates) {
        if (descendants.count(candidate)) continue;
        if (Compatible(g_, op, candidate)) {
          group.push_back(candidate);
          for (auto& entry : grouped) {
            if (entry.first == candidate) entry.second = true;
          }
          op_set.erase(candidate);
          const OpSet& more = dependency_graph[candidate];  // must merge descendants together
          descendants.insert(more.begin(), more.end());
        }
      }
      // Remove any op that may introduce a cycle because of grouping ops.
      size_t idx = 0;
      while (idx < group.size()) {
        if (HasCycle(g_, group[idx], group)) {
          group.erase(group.begin() + static_cast<ptrdiff_t>(idx));
          ++out_.dropped_by_cycle_check;
        } else {
          ++idx;
        }
      }
      if (group.size() > kMaxLayerNormGroup && IsLayerNorm(type_)) {
        // _break_layernorm_groups: sort by normalized size, descending (stably).
        std::stable_sort(group.begin(), group.end(), [&](OpId a, OpId b) {
          return FlatNormalizedSize(g_.op(a)) > FlatNormalizedSize(g_.op(b));
        });
        for (size_t begin = 0; begin < group.size(); begin += kMaxLayerNormGroup) {
          std::vector<OpId> chunk(group.begin() + static_cast<ptrdiff_t>(begin),
                                  group.begin() + static_cast<ptrdiff_t>(std::min(
                                                      begin + kMaxLayerNormGroup, group.size())));
          if (chunk.size() >= 2) Fuse(chunk);  // fix (e)
        }
      } else if (group.size() >= 2) {
        Fuse(group);
      }
      grouped[i].second = true;
    }
    return new_outputs_;
  }

 private:
  // _fuse_gemm_ops / _fuse_layernorm_ops.
  void Fuse(std::vector<OpId> group) {
    const OpId id = RewriteAsGroup(g_, group);
    std::vector<std::string> names;
    for (OpId m : group) names.push_back(g_.op(m).name);
    out_.groups.push_back({g_.op(id).type, std::move(names), id, g_.op(id).name});
    const auto& outs = g_.op(id).outputs;
    new_outputs_.insert(new_outputs_.end(), outs.begin(), outs.end());
  }

  Graph& g_;
  const std::vector<int64_t>& op_number_;
  OpType type_;
  FuseGroupOpsResult& out_;
  std::vector<TensorId> new_outputs_;
};

}  // namespace

std::vector<TensorId> ReferenceSortTensors(const Graph& graph, const std::vector<TensorId>& roots) {
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

FuseGroupOpsResult ReferenceFuseGroupOps(Graph& graph, const FuseGroupOpsOptions& options) {
  FuseGroupOpsResult result;
  Canonicalize(graph);
  std::vector<TensorId> sorted = ReferenceSortTensors(graph, graph.outputs());
  const std::vector<OpId> first_order = SortedOps(graph, sorted);
  std::vector<int64_t> op_number(static_cast<size_t>(graph.num_op_ids()), 0);
  for (size_t i = 0; i < first_order.size(); ++i) {
    op_number[static_cast<size_t>(first_order[i])] = static_cast<int64_t>(i);
  }
  RemoveNoOps(graph, sorted);
  result.ops_before = graph.NumLiveOps();

  // fuse_group_gemm_ops, then fuse_group_layernorm_ops.
  std::vector<OpType> types;
  if (options.group_gemm) {
    types = {OpType::kGemmRcr, OpType::kGemmRcrBias, OpType::kGemmRcrBiasRelu,
             OpType::kGemmRcrBiasSigmoid};
  }
  types.push_back(OpType::kLayerNormSigmoidMul);
  types.push_back(OpType::kLayerNorm);
  for (OpType type : types) {
    // _fuse_group_ops_by_type
    const std::vector<TensorId> new_outputs =
        ReferenceRound(graph, op_number, type, result).Run(sorted);
    if (new_outputs.empty()) continue;
    // The member outputs are now the group op's, at the end of the list.
    std::erase_if(sorted, [&](TensorId t) {
      return std::find(new_outputs.begin(), new_outputs.end(), t) != new_outputs.end();
    });
    sorted.insert(sorted.end(), new_outputs.begin(), new_outputs.end());
    sorted = ReferenceSortTensors(graph, sorted);
    DropDeadTensors(graph, sorted);  // sanitize_sorted_graph
  }
  result.op_order = SortedOps(graph, sorted);
  result.ops_after = static_cast<int64_t>(result.op_order.size());
  return result;
}

}  // namespace hfuse::test
