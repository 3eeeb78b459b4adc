// fuse-group-ops: horizontal fusion of independent GEMMs and LayerNorms.
//
// Before:                                After:
//   x = split(in, [64, 32], dim=1)         x = split(in, [64, 32], dim=1)
//   y0 = gemm_rcr_bias(x.0, w0, b0)        (y0, y1) = group_gemm_rcr_bias(
//   y1 = gemm_rcr_bias(x.1, w1, b1)            x.0, w0, b0, x.1, w1, b1)
//   z0 = layernorm(y0, g0, be0)            (z0, z1) = group_layernorm(
//   z1 = layernorm(y1, g1, be1)                y0, y1, g0, g1, be0, be1)
//
// A reimplementation of AITemplate's fuse_group_ops (shared/seed), with the
// canonical order of the graph JSON spec deciding which ops meet in which
// order. Op types run in the seed's order: gemm_rcr, gemm_rcr_bias,
// gemm_rcr_bias_relu, gemm_rcr_bias_sigmoid (unless group_gemm is off), then
// layernorm_sigmoid_mul and layernorm; the graph is re-sorted after each type
// that formed a group. Under the hfuse rules the four GEMM kinds are one
// round, and GEMMs that differ only in their epilogue group:
//
//   y0 = gemm_rcr_bias(x, w0, b0)          (y1, y0) = group_gemm_rcr_mixed(
//   y1 = gemm_rcr_bias_relu(x, w1, b1)  =>     x, w1, b1, x, w0, b0)
//                                            {member_ops = [gemm_rcr_bias_relu,
//                                                           gemm_rcr_bias]}
//
// (a group of one kind is still that kind's group op). Preconditions and
// grouping rules: group_planner.h.
//
// When it does not pay: a group of large GEMMs runs no faster than the GEMMs
// one by one, and grouping adds a launch-argument setup; the seed leaves a
// size heuristic as a TODO, and so does hfuse, to keep its decisions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/group_planner.h"

namespace hfuse {

struct FuseGroupOpsOptions {
  bool group_gemm = true;  // the seed's fuse_group_gemm target option
  bool want_dumps = false;
  // How candidate reachability is computed; every choice gives the same
  // groups (tests force each one).
  ReachStrategy reach = ReachStrategy::kAuto;
  // Which grouping rules (group_planner.h): the seed's by default; the GPU
  // pipeline (hfuse bench) runs hfuse's.
  RuleSet rules = RuleSet::kSeed;
  // Record why each GEMM and LayerNorm that stays out of every group did
  // (FuseGroupOpsResult::ungrouped; see fusion_reasons.h). It changes no
  // decision.
  bool explain = true;
};

struct FusedGroup {
  OpType type;                       // the group op type
  std::vector<std::string> members;  // original op names, in the group's order
  OpId op = kNone;                   // the group op in the fused graph
  std::string name = {};             // the group op's name
  // group_gemm_rcr_mixed (hfuse rules): each member's GEMM kind, in the
  // group's order, which says its epilogue; empty for every other group.
  std::vector<OpType> member_ops = {};
};

struct FuseGroupOpsResult {
  RuleSet rules = RuleSet::kSeed;  // the rules that ran
  std::vector<FusedGroup> groups;  // in creation order
  int64_t ops_before = 0;          // ops after the clean-up
  int64_t ops_after = 0;
  std::vector<OpId> op_order;      // the final sorted order of the live ops
  // Members that joined a group and were dropped again by the cycle check
  // (another member reaches them through groups formed earlier).
  int64_t dropped_by_cycle_check = 0;
  // One reason per GEMM and LayerNorm of the fused graph that is in no
  // group, in the final op order (when options.explain); fuse-group-gathers
  // adds one per ONNX Gather (type kOpaque) and its groups to `groups`.
  std::vector<Reason> ungrouped;
  // The seed's debug dumps: file name -> contents; with want_dumps, one set
  // per GEMM and LayerNorm type, plus the type's reasons.
  std::vector<std::pair<std::string, std::string>> dumps;
};

// Member i of a group as reports print it: its name, and in a mixed GEMM
// group its epilogue, as its kind ("dnn.0 [gemm_rcr_bias_relu]").
std::string MemberLabel(const FusedGroup& group, size_t i);
// All members so, in the group's order.
std::vector<std::string> MemberLabels(const FusedGroup& group);

// What the summary lines call the ops `ungrouped` can hold: "GEMM/LayerNorm",
// or "GEMM/LayerNorm/Gather" when fuse-group-gathers added a group or a
// reason (the hfuse rules).
std::string_view UngroupedKinds(const FuseGroupOpsResult& result);

// Runs the pass; the graph must verify. Returns what it did.
FuseGroupOpsResult FuseGroupOps(Graph& graph, const FuseGroupOpsOptions& options = {});

}  // namespace hfuse
