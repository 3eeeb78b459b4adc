// The fuse-group-ops driver: canonical order, then one round per op type.
#include "hfuse/passes/fuse_group_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "hfuse/passes/canonical_order.h"
#include "hfuse/passes/fusion_reasons.h"
#include "hfuse/passes/group_planner.h"

namespace hfuse {
namespace {

// The seed's two dumps for a type whose round ran; a type with no ops or no
// candidates gets them too, saying so (the seed writes nothing then).
void AddDumps(std::string_view name, const TypeRoundResult& round,
              std::vector<std::pair<std::string, std::string>>& dumps) {
  std::string dependency = round.dependency_dump, groups = round.groups_dump;
  if (dependency.empty() || dependency == "\n") {
    const bool none = round.reasons.empty();
    dependency = none ? fmt::format("# no {} ops in the graph: nothing to group\n", name)
                      : fmt::format("# {} {} op(s), none a candidate: see "
                                    "fuse_group_{}_reasons.txt\n",
                                    round.reasons.size(), name, name);
  }
  if (groups.empty()) {
    groups = fmt::format("# no {} group formed: see fuse_group_{}_reasons.txt\n", name, name);
  }
  dumps.emplace_back(fmt::format("fuse_group_{}_dependency_graph_filtered.txt", name),
                     std::move(dependency));
  dumps.emplace_back(fmt::format("fuse_group_{}_groups.txt", name), std::move(groups));
}

// Dumps for a GEMM type that --no-group-gemm kept from running.
void AddSkippedDumps(OpType type, const std::vector<Reason>& ungrouped,
                     std::vector<std::pair<std::string, std::string>>& dumps) {
  const std::string_view name = OpTypeName(type);
  const std::string note = fmt::format("# {} not grouped: {}\n", name,
                                       ReasonRuleMessage(ReasonRule::kGroupGemmOff));
  dumps.emplace_back(fmt::format("fuse_group_{}_dependency_graph_filtered.txt", name), note);
  dumps.emplace_back(fmt::format("fuse_group_{}_groups.txt", name), note);
  std::vector<Reason> mine;
  for (const Reason& r : ungrouped) {
    if (r.type == type) mine.push_back(r);
  }
  dumps.emplace_back(fmt::format("fuse_group_{}_reasons.txt", name), ReasonsDump(type, mine));
}

}  // namespace

std::string MemberLabel(const FusedGroup& group, size_t i) {
  if (i >= group.member_ops.size()) return group.members[i];
  return fmt::format("{} [{}]", group.members[i], OpTypeName(group.member_ops[i]));
}

std::vector<std::string> MemberLabels(const FusedGroup& group) {
  std::vector<std::string> labels;
  for (size_t i = 0; i < group.members.size(); ++i) labels.push_back(MemberLabel(group, i));
  return labels;
}

std::string_view UngroupedKinds(const FuseGroupOpsResult& result) {
  const bool gathers =
      std::any_of(result.groups.begin(), result.groups.end(),
                  [](const FusedGroup& g) { return g.type == OpType::kGroupGather; }) ||
      std::any_of(result.ungrouped.begin(), result.ungrouped.end(),
                  [](const Reason& r) { return r.type == OpType::kOpaque; });
  return gathers ? "GEMM/LayerNorm/Gather" : "GEMM/LayerNorm";
}

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
  // `all_types` has every kind, for the dumps; `types` those that run.
  std::vector<OpType> all_types;
  std::vector<OpType> layernorms;
  for (int i = 0; i < kNumOpTypes; ++i) {
    const auto type = static_cast<OpType>(i);
    if (IsGemm(type)) all_types.push_back(type);
    if (IsLayerNorm(type)) layernorms.insert(layernorms.begin(), type);
  }
  all_types.insert(all_types.end(), layernorms.begin(), layernorms.end());
  // Under the hfuse rules the GEMM kinds run as one round, that of the
  // first (members of different epilogues group: group_planner.h).
  const bool one_gemm_round = options.rules == RuleSet::kHfuse;
  std::vector<OpType> types;
  bool gemm_round = false;  // a GEMM kind's round is in `types`
  for (OpType type : all_types) {
    if (IsGemm(type) && (!options.group_gemm || (one_gemm_round && gemm_round))) continue;
    gemm_round = gemm_round || IsGemm(type);
    types.push_back(type);
  }
  std::optional<ReasonRecorder> recorder;
  if (options.explain) recorder.emplace(options.rules);
  if (options.explain && !options.group_gemm) {
    for (OpId id : sorted_ops) {
      const Op& op = graph.op(id);
      if (!IsGemm(op.type)) continue;
      result.ungrouped.push_back({op.name, op.type, ReasonCode::kNotACandidate,
                                  ReasonRule::kGroupGemmOff,
                                  std::string(ReasonRuleMessage(ReasonRule::kGroupGemmOff)), "", {},
                                  id});
    }
  }
  // Per type, for the dumps: whether its round ran, and its reasons.
  std::vector<std::pair<std::string_view, std::vector<Reason>>> reasons_by_type;

  for (OpType type : types) {
    TypeRoundResult round =
        GroupOpsOfType(graph, sorted_ops, op_number, type, options.want_dumps, options.reach,
                       options.rules, recorder ? &*recorder : nullptr);
    if (options.want_dumps) {
      const std::string_view name = one_gemm_round && IsGemm(type) ? "gemm" : OpTypeName(type);
      AddDumps(name, round, result.dumps);
      reasons_by_type.emplace_back(name, round.reasons);
    }
    result.dropped_by_cycle_check += round.cycle_drops;
    for (Reason& r : round.reasons) result.ungrouped.push_back(std::move(r));
    if (round.group_ops.empty()) continue;
    for (size_t i = 0; i < round.group_ops.size(); ++i) {
      const Op& group = graph.op(round.group_ops[i]);
      result.groups.push_back({group.type, std::move(round.members[i]), round.group_ops[i],
                               group.name, group.attrs.member_ops});
    }
    // Rule 7: the old list, its members' outputs now new tensors at the end.
    std::vector<bool> moved(static_cast<size_t>(graph.num_tensor_ids()), false);
    for (TensorId t : round.new_outputs) moved[static_cast<size_t>(t)] = true;
    std::erase_if(sorted, [&](TensorId t) { return moved[static_cast<size_t>(t)]; });
    sorted.insert(sorted.end(), round.new_outputs.begin(), round.new_outputs.end());
    sorted = SortTensors(graph, sorted, &sorted_ops);
    DropDeadTensors(graph, sorted);  // no op moves: sorted_ops stays
  }
  if (options.want_dumps) {
    for (OpType type : all_types) {
      if (options.group_gemm || !IsGemm(type)) continue;
      AddSkippedDumps(type, result.ungrouped, result.dumps);  // per kind, under any rules
    }
    for (const auto& [name, reasons] : reasons_by_type) {
      result.dumps.emplace_back(fmt::format("fuse_group_{}_reasons.txt", name),
                                ReasonsDump(name, reasons));
    }
  }
  result.op_order = sorted_ops;
  result.ops_after = static_cast<int64_t>(result.op_order.size());
  // Reasons in the final op order (ops left out are all still there).
  if (!result.ungrouped.empty()) {
    std::vector<int32_t> position(static_cast<size_t>(graph.num_op_ids()), 0);
    for (size_t i = 0; i < result.op_order.size(); ++i) {
      position[static_cast<size_t>(result.op_order[i])] = static_cast<int32_t>(i);
    }
    std::stable_sort(result.ungrouped.begin(), result.ungrouped.end(),
                     [&](const Reason& a, const Reason& b) {
                       return position[static_cast<size_t>(a.id)] < position[static_cast<size_t>(b.id)];
                     });
  }
  return result;
}

}  // namespace hfuse
