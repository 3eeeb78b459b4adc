// The fuse-group-ops driver: canonical order, then one round per op type.
#include "hfuse/passes/fuse_group_ops.h"

#include <fmt/format.h>

#include "hfuse/passes/canonical_order.h"
#include "hfuse/passes/group_planner.h"

namespace hfuse {

FuseGroupOpsResult FuseGroupOps(Graph& graph, const FuseGroupOpsOptions& options) {
  FuseGroupOpsResult result;
  Canonicalize(graph);
  std::vector<TensorId> sorted = SortTensors(graph, graph.outputs());
  const std::vector<OpId> first_order = SortedOps(graph, sorted);
  std::vector<int64_t> op_number(static_cast<size_t>(graph.num_op_ids()), 0);
  for (size_t i = 0; i < first_order.size(); ++i) {
    op_number[static_cast<size_t>(first_order[i])] = static_cast<int64_t>(i);
  }
  RemoveNoOps(graph, sorted);
  result.ops_before = graph.NumLiveOps();

  std::vector<OpType> types;
  if (options.group_gemm) {
    types = {OpType::kGemmRcr, OpType::kGemmRcrBias, OpType::kGemmRcrBiasRelu,
             OpType::kGemmRcrBiasSigmoid};
  }
  types.push_back(OpType::kLayerNormSigmoidMul);
  types.push_back(OpType::kLayerNorm);

  for (OpType type : types) {
    TypeRoundResult round =
        GroupOpsOfType(graph, sorted, op_number, type, options.want_dumps, options.reach);
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
    sorted = SortTensors(graph, sorted);
    DropDeadTensors(graph, sorted);
  }
  result.op_order = SortedOps(graph, sorted);
  result.ops_after = static_cast<int64_t>(result.op_order.size());
  return result;
}

}  // namespace hfuse
