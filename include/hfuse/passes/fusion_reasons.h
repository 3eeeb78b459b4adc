// Why an op stayed out of every group: the vocabulary, and the recorder that
// fuse-group-ops fills at its decision points.
//
// Every GEMM or LayerNorm (gemm_rcr*, layernorm, layernorm_sigmoid_mul) that
// ends the pass outside a group, and under the hfuse rules every ONNX Gather
// that fuse-group-gathers leaves alone, gets exactly one Reason: a code from
// HFUSE_REASON_CODES and, in `rule`, the rule from HFUSE_REASON_RULES that
// decided (the failed filter, or what separates it from its nearest peer),
// with its evidence (the peer, the dependency path as op names). The two
// tables below are the whole vocabulary, message texts included: the report,
// `hfuse explain`, the pictures and README all speak it, so a rule's wording
// (e.g. the ways out for a dynamic-dim GEMM) is edited here and nowhere else.
//
// The planner calls the ReasonRecorder at each point where it decides (a
// filter fails, a member joins, a group forms, the cycle check drops a
// member, a leader ends alone, a 39-chunk has one member); the recorder never
// changes a decision. What it costs per decision is a store; only an op that
// ends alone is explained further (its nearest peers compared by the same
// rules, a bounded search for the dependency path), so that on graphs where
// nearly everything groups the pass runs as fast as without it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse {

enum class RuleSet : uint8_t;  // group_planner.h

// Reason codes: enumerator, code as printed, what it means.
#define HFUSE_REASON_CODES(X)                                                                    \
  X(kNotACandidate, "not-a-candidate",                                                         \
    "the op fails its type's candidate filter (GEMMs: alpha 1, 2-D static A, static weight "   \
    "and bias, A/B alignment above 1; Gathers: axis 0 of a constant float table, ids "        \
    "computed at run time) and is never offered to a group")                                   \
  X(kOnlyCandidateOfType, "only-candidate-of-type",                                            \
    "no other op of its type is a candidate in the graph")                                     \
  X(kNoCompatiblePeer, "no-compatible-peer",                                                   \
    "every other candidate of its type fails a compatibility rule against it (or against the " \
    "leader of the group it was offered to); names the nearest such peer and the rule")        \
  X(kCycleRisk, "cycle-risk",                                                                  \
    "its compatible peers depend on it or it on them (grouping would make a cycle), or the "   \
    "peers that joined it were dropped by the cycle check; gives the path as op names")       \
  X(kDroppedByCycleCheck, "dropped-by-cycle-check",                                            \
    "it joined a group, but another member reaches it through groups formed earlier, so it "   \
    "was dropped and, as in the seed, never offered again; gives the path")                    \
  X(kChunkOfOne, "chunk-of-one",                                                               \
    "its LayerNorm group had more than 39 members and, cut into chunks of 39 (by normalized "  \
    "size, descending), it was the one left in the last chunk; no group of one (fix (e))")    \
  X(kOnlyMemberOfSplit, "only-member-of-split",                                                \
    "it is the one GEMM a one-output split feeds (no group of one, fix (e)), and the greedy "  \
    "scan found it no peer either")

enum class ReasonCode : uint8_t {
#define HFUSE_REASON_ENUM(e, code, doc) e,
  HFUSE_REASON_CODES(HFUSE_REASON_ENUM)
#undef HFUSE_REASON_ENUM
};

// Rules: enumerator, id as printed, message (fmt syntax; arguments in order).
// Filters (not-a-candidate) first, then what separates two candidates.
#define HFUSE_REASON_RULES(X)                                                                    \
  X(kGroupGemmOff, "group-gemm-off", "GEMM grouping is off (--no-group-gemm)")                  \
  X(kAlpha, "alpha", "alpha = {} (only alpha 1 groups)")                                         \
  X(kARank, "a-rank", "A ({}) has rank {} (only 2-D GEMMs group)")                               \
  X(kADynamic, "a-dynamic",                                                                      \
    "dynamic dim '{}' in A ({}): under --rules seed GEMMs group only with static shapes; fix "   \
    "it with --dim NAME=VALUE (or export with a fixed batch), or use --rules hfuse")             \
  X(kWeightDynamic, "weight-dynamic", "weight {} has a dynamic dim '{}' (fix (d))")              \
  X(kBiasDynamic, "bias-dynamic", "bias {} has a dynamic dim '{}' (fix (d))")                    \
  X(kAlignment1, "alignment-1",                                                                  \
    "K = {}: A/B alignment 1 ({} needs K divisible by 2 for alignment 2 or more; --rules "     \
    "hfuse takes any K)")                                                                        \
  X(kInputCount, "input-count", "{} inputs vs {}")                                               \
  X(kGemmAlignment, "alignment", "A/B alignment {} vs {} (K = {} vs {})")                        \
  X(kDType, "dtype", "dtype of {} {} vs {}")                                                     \
  X(kM, "m", "M = {} vs {}")                                                                     \
  X(kEps, "eps", "eps {} vs {}")                                                                 \
  X(kNoGammaBeta, "gamma-beta", "{} has no gamma or no beta (groups with nothing)")              \
  X(kInputRank, "input-rank", "input rank {} vs {}")                                             \
  X(kNormalizedRank, "normalized-rank", "normalized_shape rank {} vs {}")                        \
  X(kBatchDims, "batch-dims", "batch dims [{}] vs [{}]")                                         \
  X(kSizeBucket, "size-bucket", "LayerNorm size bucket: N = {} vs {} ({})")                      \
  X(kOnlyOfType, "only-of-type", "the only {} op in the graph")                                  \
  X(kOthersNotCandidates, "others-not-candidates", "the other {} {} op(s) are not candidates")   \
  X(kSplitTaken, "split-taken",                                                                  \
    "the other candidates ({}) were all grouped by the split rule before the scan")             \
  X(kBelowGroup, "below-group",                                                                  \
    "it is compatible with {} but below the group that {} led (grouping would make a cycle): " \
    "path {}")                                                                                   \
  X(kPeerBelow, "peer-below",                                                                    \
    "compatible peer {} is below it (grouping would make a cycle): path {}")                    \
  X(kPeersDropped, "peers-dropped",                                                              \
    "the peers that joined it ({}) were dropped by the cycle check: path {}")                   \
  X(kReachedByMember, "reached-by-member",                                                       \
    "joined the group led by {}, but member {} reaches it through groups formed earlier: path " \
    "{}; dropped, and never offered again")                                                      \
  X(kChunk, "chunk",                                                                             \
    "its group of {} LayerNorms (led by {}) was cut into chunks of 39 by normalized size; the "  \
    "last chunk held only it")                                                                   \
  X(kSplitOfOne, "split-of-one", "split {} has one output and feeds only this GEMM; then: {}")   \
  X(kGatherForm, "gather-form",                                                                  \
    "output {} {} is not its ids' shape {} followed by the table's row {}")                       \
  X(kGatherAxis, "gather-axis", "axis {} of table {} (only lookups along axis 0 group)")          \
  X(kTableNotConstant, "table-not-constant",                                                     \
    "its data {} is computed in the graph, not a constant table (a param)")                      \
  X(kTableDType, "table-dtype", "table {} is {} {} (only float tables of static shape group)")   \
  X(kIdsConstant, "ids-constant",                                                                \
    "its ids {} are a constant: the lookup is computed once, at plan time (or is a view)")       \
  X(kIdsForm, "ids-form", "ids {} are {} of rank {} (int32 or int64 of rank 8 at most group)")

// Notes appended to a rule's text.
inline constexpr std::string_view kNotePathUntraced = "not traced (search budget spent)";
inline constexpr std::string_view kNoteNearest = " (compared with the nearest {} of {} peers)";

enum class ReasonRule : uint8_t {
#define HFUSE_REASON_RULE_ENUM(e, id, message) e,
  HFUSE_REASON_RULES(HFUSE_REASON_RULE_ENUM)
#undef HFUSE_REASON_RULE_ENUM
};

// The kind an op of this type is reported as: its op type, or "Gather" for
// kOpaque (the ONNX Gathers of fuse-group-gathers are the only opaque ops
// that get reasons).
std::string_view KindName(OpType type);
std::string_view ReasonCodeName(ReasonCode code);         // "no-compatible-peer"
std::string_view ReasonCodeDescription(ReasonCode code);  // the table's text
std::string_view ReasonRuleName(ReasonRule rule);         // "size-bucket"
std::string_view ReasonRuleMessage(ReasonRule rule);      // the table's text, unformatted
std::vector<ReasonCode> AllReasonCodes();

struct Reason {
  std::string op;    // the op's name
  OpType type;       // its type
  ReasonCode code;
  ReasonRule rule;
  std::string details;            // one line of text, the evidence spelled out
  std::string peer;               // the nearest peer, when there is one
  std::vector<std::string> path;  // a dependency path, as op names (group ops by name)
  OpId id = kNone;                // the op
};

// Reasons as text, grouped by code (codes in table order, each with its
// count and meaning, then one line per op in the given order):
//   no-compatible-peer (1): every other candidate of its type fails ...
//     t4.ln (layernorm) [size-bucket]: nearest peer t3.ln: ...
std::string ReasonsByCode(const std::vector<Reason>& reasons);
// The reasons of one type for --dump-dir: one line per op, in the given order.
std::string ReasonsDump(OpType type, const std::vector<Reason>& reasons);
// The same, for the ops of a round named `kind` ("gemm": the hfuse rules'
// one GEMM round).
std::string ReasonsDump(std::string_view kind, const std::vector<Reason>& reasons);
// "no-compatible-peer 3, not-a-candidate 1": the codes by count, most first
// (ties in table order), at most `top` of them.
std::string TopReasons(const std::vector<Reason>& reasons, size_t top);

// The filter that makes `gemm` no candidate, or false when it is one (mirrors
// IsGemmCandidate, or IsGatherCandidate for an ONNX Gather; checked by
// tests). Fills rule and details.
bool ExplainNotACandidate(const Graph& graph, OpId gemm, Reason& out, RuleSet rules);
// The first rule by which `other` may not join the group led by `leader`,
// with its text, or false when they are compatible (mirrors the planner's
// Compatible: input counts, one output, then GemmsCompatible or
// LayerNormsCompatible, in their order, or GathersCompatible for ONNX
// Gathers; checked by tests).
bool ExplainIncompatible(const Graph& graph, OpId leader, OpId other, RuleSet rules,
                         ReasonRule& rule, std::string& details);

// Filled by the planner during one round (one op type). Candidates are the
// round's indices into `cands` (see group_planner.cc).
class ReasonRecorder {
 public:
  explicit ReasonRecorder(RuleSet rules) : rules_(rules) {}

  // At most this many peers are compared when explaining an op left alone,
  // and at most kPathBudget ops visited per path search (kRoundBudget plus
  // half the graph's ops per round); past them the text says so instead of
  // guessing.
  static constexpr size_t kPeerScan = 256;
  static constexpr size_t kPathBudget = 512;
  static constexpr size_t kRoundBudget = size_t{1} << 18;

  // `cands` and `cand_of` are the planner's (filled as it finds candidates;
  // CandidatesFound once they are all there).
  void BeginRound(const Graph& graph, OpType type, const std::vector<OpId>& cands,
                  const std::vector<int32_t>& cand_of);
  void CandidatesFound() { leader_of_.assign(cands_->size(), kNone); }
  void NotACandidate(OpId op) { not_candidates_.push_back(op); }
  // The GEMM read a one-output split (the split rule's group of one).
  void SplitOfOne(OpId split, int32_t c) { split_of_one_.emplace_back(c, split); }
  void SplitGrouped(int32_t c) { leader_of_[static_cast<size_t>(c)] = kSplitRule; }
  // `class_of` per candidate (equal classes are needed for compatibility),
  // known once the planner has built it.
  void SetClasses(const std::vector<int32_t>* class_of) { class_of_ = class_of; }
  void Leads(int32_t k) { leader_of_[static_cast<size_t>(k)] = k; }
  void Joined(int32_t c, int32_t leader) { leader_of_[static_cast<size_t>(c)] = leader; }
  // The planner rewrote candidates led by `leader` as group op `group`.
  void Formed(OpId group, int32_t leader) { group_leader_[group] = leader; }
  // After the cycle check of the group led by `leader`: `reached[i]` says
  // whether group[i] was dropped; `kept` how many stayed. Call before the
  // group is rewritten.
  void CycleChecked(const Graph& graph, int32_t leader, const std::vector<int32_t>& group,
                    const std::vector<bool>& reached, size_t kept);
  // The leader k ended with nobody: called right after its scan (the
  // recorder knows who had been taken by whom).
  void LeftAlone(const Graph& graph, int32_t k);
  void ChunkOfOne(const Graph& graph, OpId op, int32_t leader, size_t group_size);
  // Explains the non-candidates and appends the round's reasons to `out`.
  void EndRound(const Graph& graph, std::vector<Reason>& out);

 private:
  static constexpr int32_t kSplitRule = -2;  // leader_of_: grouped by the split rule
  std::string Name(const Graph& graph, int32_t c) const;
  // The candidate index of op `id`, or kNone (also for ops made this round).
  int32_t CandOf(OpId id) const {
    return static_cast<size_t>(id) < cand_of_->size() ? (*cand_of_)[static_cast<size_t>(id)] : kNone;
  }
  // A path on the current graph from an op satisfying `is_source` to `to`
  // (backward search from `to`), as op names; empty when none was found
  // within the budget.
  template <typename IsSource>
  std::vector<std::string> PathInto(const Graph& graph, OpId to, IsSource&& is_source);
  std::string PathText(const std::vector<std::string>& path) const;

  RuleSet rules_;
  OpType type_ = OpType::kGemmRcr;
  bool all_gemms_ = false;  // the hfuse rules' one GEMM round: reasons take each op's kind
  const std::vector<OpId>* cands_ = nullptr;
  const std::vector<int32_t>* cand_of_ = nullptr;
  const std::vector<int32_t>* class_of_ = nullptr;
  std::vector<int32_t> leader_of_;  // per candidate: its leader, kNone, or kSplitRule
  // Built when first needed in a round: the candidates the greedy scan saw,
  // all and per class, in sorted order.
  std::vector<int32_t> scanned_;
  std::vector<std::vector<int32_t>> scanned_by_class_;
  std::unordered_map<OpId, int32_t> group_leader_;  // group ops of this round -> leader
  std::vector<OpId> not_candidates_;
  std::vector<std::pair<int32_t, OpId>> split_of_one_;
  std::vector<Reason> reasons_;
  size_t budget_left_ = kRoundBudget;
  std::vector<uint32_t> seen_;  // per op id: search stamp
  std::vector<OpId> next_;      // per op id: the next op on the path found
  std::vector<OpId> queue_;
  uint32_t stamp_ = 0;
};

}  // namespace hfuse
