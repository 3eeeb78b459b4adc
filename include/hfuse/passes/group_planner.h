// The planning half of fuse-group-ops: which ops of one type form groups.
//
// This is AITemplate's `_group_ops_by_type` (shared/seed), decision for
// decision, with the fixes listed in README.md:
//
//  1. Candidates are the ops of the type, in the current sorted order, that
//     pass the type's filter (GEMM: alpha 1, 2-D static A, static weight and
//     bias, A/B alignment above 1).
//  2. GEMM types only: the GEMMs reading the outputs of a split on dim 1 are
//     grouped first, one group per split, whatever their size.
//  3. Greedy grouping: each candidate not yet grouped leads a group; the
//     others that are not its descendants, taken by op number, join when
//     compatible with the leader, adding their descendants to the group's.
//  4. Members that now have another member as an ancestor (new paths through
//     groups formed earlier) are dropped, and not offered again.
//  5. Each group is rewritten as soon as it is formed, so the ancestor check
//     of the next group sees it. LayerNorm groups above 39 are cut into
//     chunks of 39 after sorting by normalized size, descending (seed
//     rules; RuleSet below says what the hfuse rules change).
//
// The seed computes this with a descendant set per tensor and a graph walk
// per pair of members, cubic in the graph's size; hfuse answers the same
// questions from one reachability structure per round (see
// src/passes/candidate_reach.h) and scans only candidates that can still
// join, so that a round is about linear on towers and lanes graphs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/fusion_reasons.h"

namespace hfuse {

// Which grouping rules run. kSeed: AITemplate's, decision for decision (the
// default; every conformance case). kHfuse: the rules for hfuse's own GPU
// kernels, which differ from the seed's only where hfuse's kernels make a
// seed limit moot. Each difference is listed here, in one place:
//  - LayerNorm groups have no member cap: the seed's 39 came from
//    AITemplate passing member arguments as kernel parameters (4 KB then);
//    hfuse's kernel reads them from a device array, any number in one launch.
//  - LayerNorm sizes need not match (_check_layernorm_n_match): hfuse's
//    kernel picks the threads per row for each member, so mixed widths run
//    in one launch as fast as in separate ones (bench/RESULTS.md, issue 12).
//  - GEMMs whose A is [M, K] with M a named dynamic dim are candidates, and
//    group with GEMMs of the same named M (the seed takes static A only):
//    the executors bind the dim before they run, so a group runs at the
//    bound batch like its members.
//  - GEMMs of any K group, odd K included, and members need not share an
//    alignment: the seed's rule is for AITemplate's kernels; hfuse's GPU
//    path picks a kernel per member by its alignment.
//  - GEMMs that differ only in their epilogue (no bias, bias, bias + ReLU,
//    bias + sigmoid) group, each member keeping its own (a group of more
//    than one kind is a group_gemm_rcr_mixed): the seed groups by op type,
//    one round per kind; hfuse runs the GEMM kinds as one round, the first
//    kind's, since its CPU and float32 GPU kernels apply an epilogue per
//    member (float16/bfloat16 groups run one CUTLASS launch per epilogue).
//    Members still share dtypes (A, W, and the bias where both have one)
//    and M.
enum class RuleSet : uint8_t { kSeed, kHfuse };
const char* RuleSetName(RuleSet rules);
// "seed" or "hfuse"; false for anything else.
bool ParseRuleSet(const std::string& name, RuleSet& rules);

// The seed's rules, exposed for tests.
int GemmAlignment(const Graph& graph, OpId gemm);
bool IsGemmCandidate(const Graph& graph, OpId gemm, RuleSet rules = RuleSet::kSeed);
bool GemmsCompatible(const Graph& graph, OpId leader, OpId other,
                     RuleSet rules = RuleSet::kSeed);
bool LayerNormSizesMatch(int64_t n1, int64_t n2);
bool LayerNormsCompatible(const Graph& graph, OpId leader, OpId other,
                          RuleSet rules = RuleSet::kSeed);

inline constexpr size_t kMaxLayerNormGroup = 39;  // seed rules only

// Gathers (fuse-group-gathers, passes/fuse_group_gathers.h, which says why
// each rule holds). A candidate is an ONNX Gather (IsOnnxGather) of two
// operand inputs (GatherOperandsAreInputs) along axis
// 0 of a table that is a float param of static shape, whose ids are int32
// or int64 of rank kMaxGatherIdsRank at most and no param, and whose output
// is the ids' shape then the table's row. Two are compatible when their
// tables share a dtype.
inline constexpr size_t kMaxGatherIdsRank = 8;  // the CUDA gather kernel's
bool IsGatherCandidate(const Graph& graph, OpId gather);
bool GathersCompatible(const Graph& graph, OpId leader, OpId other);

// How a round answers "is this candidate below the group?" and "does another
// member reach this one?" (src/passes/candidate_reach.h). All give the same
// groups: kAuto takes window sets (a suffix of the sorted candidates plus a
// bitset window) while they stay small, else chains of candidates with
// per-chain reach maps, else graph searches; the others force one way, for
// tests.
enum class ReachStrategy : uint8_t { kAuto, kWindows, kChains, kSearch };

struct TypeRoundResult {
  std::vector<OpId> group_ops;                 // in creation order
  std::vector<std::vector<std::string>> members;  // member names, group order
  std::vector<TensorId> new_outputs;           // group outputs in creation order
  int64_t cycle_drops = 0;                     // members dropped by the cycle check
  std::string dependency_dump;                 // the seed's debug dumps
  std::string groups_dump;
  // Why each op of the type that stayed out of every group did (when a
  // ReasonRecorder was given), in decision order.
  std::vector<Reason> reasons;
};

// Groups the ops of `type` (a gemm or layernorm type) and rewrites each group;
// under the hfuse rules a GEMM type's round takes the GEMMs of every kind
// (fuse-group-ops runs it once, for the first GEMM kind).
// `sorted_ops` is SortedOps of the current sorted tensor list; `op_number`
// the op numbers of rule 5, indexed by op id (group ops get numbers after
// all others). `reasons`, when given, records why ops stayed out.
TypeRoundResult GroupOpsOfType(Graph& graph, const std::vector<OpId>& sorted_ops,
                               std::vector<int64_t>& op_number, OpType type, bool want_dumps,
                               ReachStrategy reach = ReachStrategy::kAuto,
                               RuleSet rules = RuleSet::kSeed,
                               ReasonRecorder* reasons = nullptr);

// The round of fuse-group-gathers: the greedy scan, reachability and cycle
// check of GroupOpsOfType (rules 3 and 4) over the ONNX Gathers, each group
// rewritten by RewriteAsGatherGroup. Reasons are recorded with type kOpaque.
TypeRoundResult GroupGathers(Graph& graph, const std::vector<OpId>& sorted_ops,
                             std::vector<int64_t>& op_number, bool want_dumps,
                             ReachStrategy reach = ReachStrategy::kAuto,
                             ReasonRecorder* reasons = nullptr);

}  // namespace hfuse
