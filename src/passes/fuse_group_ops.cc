// The fuse-group-ops driver: canonical order, then one round per op type.
#include "hfuse/passes/fuse_group_ops.h"

#include <fmt/format.h>

#include "hfuse/passes/canonical_order.h"
#include "hfuse/passes/group_planner.h"

namespace hfuse {

FuseGroupOpsResult FuseGroupOps(Graph& graph, const FuseGroupOpsOptions& options) {
  FuseGroupOpsResult result;
  result.rules = options.rules;
  Canonicalize(graph);
  // The sorted tensor list, and its ops in the order their first output is
  // met (SortedOps), kept up to date together.
  std::vector<OpId> sorted_ops;
  std::vector<TensorId> sorted = SortTensors(graph, graph.outputs(), &sorted_ops);
  std::vector<int64_t> op_number(static_cast<size_t>(graph.num_op_ids()), 0);
  for (size_t i = 0; i < sorted_ops.size(); ++i) {
    op_number[static_cast<size_t>(sorted_ops[i])] = static_cast<int64_t>(i);
  }
  RemoveNoOps(graph, sorted, sorted_ops);
  result.ops_before = graph.NumLiveOps();

  // The seed's order: GEMM kinds as op_kinds.def lists them, then the
  // LayerNorm kinds in reverse (layernorm_sigmoid_mul before layernorm).
  std::vector<OpType> types;
  std::vector<OpType> layernorms;
  for (int i = 0; i < kNumOpTypes; ++i) {
    const auto type = static_cast<OpType>(i);
    if (IsGemm(type) && options.group_gemm) types.push_back(type);
    if (IsLayerNorm(type)) layernorms.insert(layernorms.begin(), type);
  }
  types.insert(types.end(), layernorms.begin(), layernorms.end());

  for (OpType type : types) {
    TypeRoundResult round =
        GroupOpsOfType(graph, sorted_ops, op_number, type, options.want_dumps, options.reach,
                       options.rules);
    if (options.want_dumps && !round.dependency_dump.empty()) {
      result.dumps.emplace_back(
          fmt::format("fuse_group_{}_dependency_graph_filtered.txt", OpTypeName(type)),
          round.dependency_dump);
      result.dumps.emplace_back(fmt::format("fuse_group_{}_groups.txt", OpTypeName(type)),
                                round.groups_dump);
    }
    result.dropped_by_cycle_check += round.cycle_drops;
    if (round.group_ops.empty()) continue;
    for (size_t i = 0; i < round.group_ops.size(); ++i) {
      result.groups.push_back({graph.op(round.group_ops[i]).type, std::move(round.members[i])});
    }
    // Rule 7: the old list, its members' outputs now new tensors at the end.
    std::vector<bool> moved(static_cast<size_t>(graph.num_tensor_ids()), false);
    for (TensorId t : round.new_outputs) moved[static_cast<size_t>(t)] = true;
    std::erase_if(sorted, [&](TensorId t) { return moved[static_cast<size_t>(t)]; });
    sorted.insert(sorted.end(), round.new_outputs.begin(), round.new_outputs.end());
    sorted = SortTensors(graph, sorted, &sorted_ops);
    DropDeadTensors(graph, sorted);  // no op moves: sorted_ops stays
  }
  result.op_order = sorted_ops;
  result.ops_after = static_cast<int64_t>(result.op_order.size());
  return result;
}

}  // namespace hfuse
