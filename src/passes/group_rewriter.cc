// The rewrite half of fuse-group-ops. See group_rewriter.h.
#include "hfuse/passes/group_rewriter.h"

#include <algorithm>
#include <memory>

#include "hfuse/ir/op_members.h"
#include "hfuse/support/error.h"
#include "prefetch_ahead.h"

namespace hfuse {

void SortGroupMembers(const Graph& graph, std::vector<OpId>& members) {
  // AITemplate sorts stably by weight (or gamma) name, then GEMMs again by
  // (K, N) descending: one stable sort by (K, N) descending, then name, is
  // the same order. Keys are gathered first, so that comparisons touch no
  // graph.
  struct Key {
    int64_t k, n;
    const std::string* name;  // GEMM weight, or LayerNorm gamma
    OpId op;
  };
  const bool gemm = IsGemm(graph.op(members[0]).type);
  std::vector<Key> keys;
  keys.reserve(members.size());
  const size_t n = members.size();
  for (size_t i = 0; i < n; ++i) {
    // The first loop over the members: what the rewrite reads of them then
    // stays in cache for the rest of it.
    PrefetchOpsAhead(graph, i, [&](size_t j) { return j < n ? &graph.op(members[j]) : nullptr; });
    const OpId id = members[i];
    const Tensor& w = graph.tensor(graph.op(id).inputs[1]);
    keys.push_back({gemm ? w.shape[1].value : 0, gemm ? w.shape[0].value : 0, &w.name, id});
  }
  std::stable_sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.k != b.k) return a.k > b.k;
    if (a.n != b.n) return a.n > b.n;
    return *a.name < *b.name;
  });
  for (size_t i = 0; i < keys.size(); ++i) members[i] = keys[i].op;
}

OpId RewriteAsGroup(Graph& graph, std::vector<OpId>& members) {
  HFUSE_CHECK(members.size() >= 2);
  SortGroupMembers(graph, members);
  const Op& first = graph.op(members[0]);
  const bool gemm = IsGemm(first.type);
  HFUSE_CHECK(gemm || IsLayerNorm(first.type));

  // GEMMs of more than one kind (hfuse rules) make a mixed group, which
  // keeps each member's kind; one kind makes that kind's group.
  const bool mixed = gemm && std::any_of(members.begin(), members.end(), [&](OpId m) {
    return graph.op(m).type != first.type;
  });
  Op group;
  group.type = mixed ? OpType::kGroupGemmRcrMixed : GroupOf(first.type);
  group.name = graph.UniqueOpName(OpTypeName(group.type));
  std::vector<int64_t> depths;
  if (gemm) {
    std::vector<GemmMember> ms;
    for (OpId m : members) {
      const Op& op = graph.op(m);
      HFUSE_CHECK(IsGemm(op.type));
      if (mixed) group.attrs.member_ops.push_back(op.type);
      int64_t depth = 0;
      for (TensorId in : op.inputs) depth = std::max(depth, graph.tensor(in).depth);
      depths.push_back(depth + 1);
      ms.push_back(GemmMemberOf(op, 0));
    }
    group.inputs = GroupGemmInputs(ms);
  } else {
    group.attrs.eps = first.attrs.eps;
    std::vector<LayerNormMember> ms;
    for (OpId m : members) {
      ms.push_back(LayerNormMemberOf(graph.op(m), 0));
      group.attrs.normalized_shapes.push_back(graph.op(m).attrs.normalized_shape);
    }
    group.inputs = GroupLayerNormInputs(ms);
    int64_t depth = 0;
    for (TensorId in : group.inputs) depth = std::max(depth, graph.tensor(in).depth);
    depths.assign(members.size(), depth + 1);
  }
  for (OpId m : members) {
    HFUSE_CHECK(graph.op(m).outputs.size() == 1 && (mixed || graph.op(m).type == first.type));
    group.outputs.push_back(graph.op(m).outputs[0]);
  }
  graph.DetachOps(members);
  const std::vector<TensorId> outputs = group.outputs;
  const OpId id = graph.AddOp(std::move(group));
  HFUSE_CHECK(id != kNone);
  for (size_t i = 0; i < outputs.size(); ++i) graph.mutable_tensor(outputs[i]).depth = depths[i];
  return id;
}

OpId RewriteAsGatherGroup(Graph& graph, std::vector<OpId>& members) {
  HFUSE_CHECK(members.size() >= 2);
  // By op id: the order the model listed its lookups in (feature order in
  // the exporters seen), never by anything that could vary run to run.
  std::sort(members.begin(), members.end());
  Op group;
  group.type = OpType::kGroupGather;
  group.name = graph.UniqueOpName(OpTypeName(group.type));
  auto node = std::make_shared<OnnxNode>();
  node->domain = "ai.hfuse";
  node->op_type = std::string(OpKind(group.type).onnx_name);
  node->opset = 1;
  std::vector<GatherMember> ms;
  std::vector<int64_t> depths;
  for (OpId m : members) {
    const Op& op = graph.op(m);
    HFUSE_CHECK(GatherOperandsAreInputs(op));
    ms.push_back(GatherMemberOf(op, 0));
    node->member_names.push_back(op.name);
    group.outputs.push_back(op.outputs[0]);
    int64_t depth = 0;
    for (TensorId in : op.inputs) depth = std::max(depth, graph.tensor(in).depth);
    depths.push_back(depth + 1);
  }
  group.inputs = GroupGatherInputs(ms);
  group.attrs.onnx = std::move(node);
  graph.DetachOps(members);
  const std::vector<TensorId> outputs = group.outputs;
  const OpId id = graph.AddOp(std::move(group));
  HFUSE_CHECK(id != kNone);
  for (size_t i = 0; i < outputs.size(); ++i) graph.mutable_tensor(outputs[i]).depth = depths[i];
  return id;
}

}  // namespace hfuse
