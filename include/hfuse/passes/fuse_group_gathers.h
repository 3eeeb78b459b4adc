// fuse-group-gathers: a model's embedding lookups as one group op (the
// table-batched embedding of FBGEMM and TorchRec), under the hfuse rules.
//
// Before:                                         After:
//   e0 = opaque(t0, ids0) {onnx = Gather}  # emb0   (e0, e1, e2) = group_gather(t0, ids0,
//   e1 = opaque(t1, c1) {onnx = Gather}  # emb1        t1, c1, t2, ids2)
//   e2 = opaque(t2, ids2) {onnx = Gather}  # emb2      {members = [emb0, emb1, emb2]}
//   x = concatenate(e0, e1, e2) {dim = 1}           x = concatenate(e0, e1, e2) {dim = 1}
//
// Each member keeps its table, ids and output tensor (names and users
// unchanged); the group's inputs are member after member (op_members.h,
// GatherMemberOf), its members in op-id order (the model's), and
// attrs.onnx->member_names keeps their op names, so that an out-of-range id
// is reported against the Gather the model had, exactly as unfused. The CPU
// executor runs each member with the Gather's own kernel (bitwise the same
// bytes); the CUDA executor runs the group as one launch of its batched
// gather kernel, which also takes in a following bias Add and Concat.
//
// Preconditions and rules (group_planner.h: IsGatherCandidate,
// GathersCompatible):
//  - a candidate is an ONNX Gather kept opaque, along axis 0 of a table that
//    is a float param of static shape (an embedding table: constant, so
//    grouping moves no computation), whose ids are int32 or int64 of rank 8
//    at most and computed at run time (an input, a Cast or Slice of one:
//    whatever the gather kernel reads in place; ids that are a param make
//    the lookup a plan-time constant, which grouping would undo);
//  - members share the table's dtype (any widths, rows and ids shapes mix);
//  - members are independent: the greedy scan, reachability structure
//    (candidate_reach.h) and cycle check of fuse-group-ops (rules 3 and 4),
//    over the candidates in the pipeline's op order (fuse-group-ops' final
//    order when it ran, else a stable topological order), so a lookup whose
//    ids come from another lookup's result never joins it;
//  - a group has two members or more; every Gather left out gets a reason
//    (fusion_reasons.h), as GEMMs and LayerNorms do.
// Under the seed rules it does nothing (AITemplate has no such pass, and the
// seed rules' output stays byte for byte the seed's).
//
// When it does not pay: lookups of a few wide rows each are as fast one
// launch each; a group of tables with rows of odd byte widths moves bytes
// rather than 4-byte words for all its members (the batched kernel picks
// one word size per launch). Neither is measured as a loss on the models of
// bench/, so no size rule keeps a group apart.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/passes/group_planner.h"

namespace hfuse {

struct FuseGroupGathersOptions {
  // kSeed: the pass changes nothing.
  RuleSet rules = RuleSet::kHfuse;
  ReachStrategy reach = ReachStrategy::kAuto;
  bool explain = true;      // record a reason for each Gather left out
  bool want_dumps = false;  // fuse_group_gather_{groups,reasons}.txt
};

struct FuseGroupGathersResult {
  std::vector<FusedGroup> groups;  // in creation order
  std::vector<Reason> ungrouped;   // type kOpaque, in decision order
  int64_t dropped_by_cycle_check = 0;
  std::vector<std::pair<std::string, std::string>> dumps;
};

// Runs the pass; the graph must verify. `op_order`, when not empty, is a
// topological order of the live ops (fuse-group-ops' final order): the
// candidates are scanned in it, and it comes back as the order of the new
// graph (each group where its first member was, moved later only as far
// as its members' inputs require).
FuseGroupGathersResult FuseGroupGathers(Graph& graph, const FuseGroupGathersOptions& options,
                                        std::vector<OpId>& op_order);

}  // namespace hfuse
