// Reachability among the candidates of one fuse-group-ops round (one op
// type), for the planner's two questions:
//
//   1. Is candidate c a descendant of the group being formed? (The seed's
//      `descendants` set: the union of the members' descendants on the graph
//      as it was when the round began, G0.)
//   2. Which members of a finished group does another member reach on the
//      current graph, in which the groups fused since the round began are
//      single ops? (The seed's `_has_cycle`, asked for every member.)
//
// Both come from one structure built per round. Question 2 needs no walk of
// the current graph: there, X reaches Y when G0 has a path from X to Y, or
// to a member of a fused group whose other members lead on to Y; so the set
// reached from the members is G0's descendant set, closed over the fused
// groups it touches. Three ways to hold G0's descendant sets, tried in turn:
//
//   Windows  Candidates are ranked by their level in G0 (the longest path
//       to them), then by the round's sorted order: a topological order, so
//       descendants rank higher, and one that keeps what lies at the same
//       depth together (the sorted order itself runs ahead along large
//       tensors). A set is a suffix of the ranks plus a bitset over a window
//       of ranks below it.
//       Descendant sets are near-suffixes on most graphs: in a wide graph
//       whose lanes read each other, whatever lies far enough below is
//       reached; in a chain, everything below; in towers, one or two ranks.
//       Sets are stored within a budget; a group's set has one suffix start
//       `hi`, below which the planner scans.
//   Chains   When windows span too far (deep towers sorted layer by layer:
//       each GEMM reaches one far rank per layer), the candidates are cut
//       into chains, sequences in which each reaches the next, built in
//       op-number order so that a chain is also sorted by number; a
//       candidate's map holds, per chain it reaches, the lowest position it
//       reaches, so a descendant set is a suffix of each chain.
//   Search   When the maps too would grow past their budget, descendants are
//       marked by a depth-first search of G0 from each member as it joins,
//       and question 2 is one search of the current graph from the members.
//
// All three are exact; tests/passes/fast_vs_reference_test.cc runs the pass
// with each against a literal implementation of the seed's algorithm.
#pragma once

#include <cstdint>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/group_planner.h"

namespace hfuse {

class CandidateReach {
 public:
  // `sorted_ops`: the live ops in the round's sorted order; `cands`: the
  // candidates, in that order (a candidate's index is its rank); `cand_of`:
  // op id -> index into `cands`, or kNone; `number`: per candidate, its op
  // number (all distinct).
  CandidateReach(const Graph& graph, const std::vector<OpId>& sorted_ops,
                 const std::vector<OpId>& cands, const std::vector<int32_t>& cand_of,
                 const std::vector<int64_t>& number, ReachStrategy strategy);

  // Whether chains were built. Each chain's candidates are in increasing op
  // number, each reaching the next.
  bool has_chains() const { return mode_ == Mode::kChains; }
  // Candidate c's rank (see Windows above); GroupSuffix is in ranks.
  int32_t rank_of(int32_t c) const { return rank_[static_cast<size_t>(c)]; }
  const std::vector<int32_t>& ranks() const { return rank_; }
  int32_t chain_of(int32_t c) const { return chain_[static_cast<size_t>(c)]; }
  int32_t num_chains() const { return num_chains_; }

  // The descendant set of the group being formed (question 1).
  void ClearGroup();
  void AddToGroup(int32_t c);
  bool BelowGroup(int32_t c) const;
  // Every candidate of this rank or above is below the group (without
  // windows: the number of candidates, as no suffix is known).
  int32_t GroupSuffix() const;

  // Records that these candidates were rewritten as one group op.
  void AddFused(const std::vector<int32_t>& members);
  // Question 2: result[i] is true when some other member reaches members[i]
  // on the current graph.
  std::vector<bool> ReachedFromOthers(const std::vector<int32_t>& members);

  // The candidates below `c` on G0, ascending; for the seed's debug dump.
  std::vector<int32_t> Descendants(int32_t c);

 private:
  enum class Mode : uint8_t { kWindows, kChains, kSearch };

  // A set of candidate ranks: [hi, n) plus the set bits of `words`, which
  // cover ranks [64 * lo_word, 64 * (lo_word + words.size())); bits at or
  // above hi mean nothing.
  struct WindowSet {
    int32_t hi = 0;
    int32_t lo_word = 0;
    std::vector<uint64_t> words;
  };
  // A WindowSet being grown in place: its window lives in a dense bit array
  // over all ranks, so that growing it never moves words.
  struct DenseSet {
    int32_t hi = 0;
    int32_t lo_word = 0, end_word = 0;  // words that may be set
    std::vector<uint64_t> bits;
  };
  struct Entry {
    int32_t chain;
    int32_t pos;
  };
  static constexpr int32_t kFar = INT32_MAX;  // "reaches nothing of this chain"

  void Rank(const std::vector<OpId>& sorted_ops);
  bool BuildWindows(const std::vector<OpId>& sorted_ops);
  bool BuildChains(const std::vector<OpId>& sorted_ops, const std::vector<int64_t>& number);
  void BuildSearch(const std::vector<OpId>& sorted_ops);

  void Reset(DenseSet& set) const;
  // Adds `from` to `into`; calls on_new(word index, newly set bits) for the
  // ranks it adds, when given.
  template <typename OnNew>
  void Add(DenseSet& into, const WindowSet& from, OnNew&& on_new) const;
  static bool Contains(const DenseSet& set, int32_t rank);

  // Chains: lowers `low` to the entries of candidate c's reach map, appending
  // the chains it lowered to `changed`.
  void Fold(int32_t c, std::vector<int32_t>& low, std::vector<int32_t>& changed) const;

  const Graph& g_;
  const std::vector<OpId>& cands_;
  const std::vector<int32_t>& cand_of_;
  const int32_t n_;  // candidates
  Mode mode_ = Mode::kSearch;
  std::vector<int32_t> rank_;                // per candidate
  std::vector<std::vector<int32_t>> fused_;  // fused groups (candidate indices)

  // Windows.
  std::vector<WindowSet> below_;        // per candidate
  std::vector<WindowSet> fused_below_;  // per fused group: its members' union
  std::vector<uint64_t> fused_bits_;    // ranks of fused members
  std::vector<int32_t> fused_id_;       // per rank, or kNone
  DenseSet group_, closure_;
  std::vector<uint32_t> fused_seen_;  // per fused group (also for chains)
  uint32_t closure_stamp_ = 0;

  // Chains.
  int32_t num_chains_ = 0;
  std::vector<int32_t> chain_, pos_;       // per candidate
  std::vector<std::vector<Entry>> reach_;  // per candidate: its reach map
  std::vector<int32_t> group_low_, group_changed_;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> fused_on_chain_;  // (pos, fused id)
  std::vector<int32_t> fused_max_pos_;                                    // per chain, -1 when none
  std::vector<int32_t> closure_low_, closure_changed_;

  // Search.
  std::vector<int32_t> succ_begin_, succ_;  // G0's successor ops, by op id
  std::vector<uint32_t> mark_;              // by op id
  uint32_t stamp_ = 1;
  std::vector<OpId> stack_;
};

}  // namespace hfuse
