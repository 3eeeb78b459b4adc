// Candidate reachability for one fuse-group-ops round. See candidate_reach.h.
#include "candidate_reach.h"

#include <algorithm>
#include <array>
#include <bit>
#include <span>

#include "hfuse/ir/op_members.h"
#include "hfuse/support/error.h"
#include "prefetch_ahead.h"

namespace hfuse {
namespace {

// Candidate ancestors kept per tensor to find a chain to extend: a few are
// enough for lanes and towers, and more only cost time; a candidate that
// finds none of them at a chain's tail starts a chain of its own.
constexpr size_t kHints = 3;

// What the sets of a round may hold in all before the next way is tried:
// window words (8 bytes each) and chain map entries (8 bytes each).
int64_t WindowBudget(const Graph& graph) {
  return (int64_t{1} << 22) + 4 * int64_t{graph.num_op_ids()};
}
int64_t EntryBudget(const Graph& graph) {
  return (int64_t{1} << 22) + 32 * int64_t{graph.num_op_ids()};
}

// The bits of word w that stand for ranks in [a, b).
uint64_t RangeMask(int32_t w, int32_t a, int32_t b) {
  const int32_t lo = std::max(a, w * 64) - w * 64;
  const int32_t hi = std::min(b, w * 64 + 64) - w * 64;
  if (lo >= hi) return 0;
  const uint64_t upto = hi == 64 ? ~uint64_t{0} : (uint64_t{1} << hi) - 1;
  return upto & ~((uint64_t{1} << lo) - 1);
}

// The distinct ops that read an output of `op`, in first-met order.
void Successors(const Graph& graph, OpId op, std::vector<uint32_t>& seen, uint32_t stamp,
                std::vector<OpId>& out) {
  out.clear();
  for (TensorId t : graph.op(op).outputs) {
    for (OpId user : graph.tensor(t).users) {
      if (seen[static_cast<size_t>(user)] != stamp) {
        seen[static_cast<size_t>(user)] = stamp;
        out.push_back(user);
      }
    }
  }
}

// Successors of each of `ops`, by position in `ops`, in one array.
struct SuccessorLists {
  std::vector<int32_t> begin;  // ops.size() + 1 offsets into list
  std::vector<OpId> list;
  std::span<const OpId> of(size_t i) const {
    return std::span<const OpId>(list).subspan(static_cast<size_t>(begin[i]),
                                               static_cast<size_t>(begin[i + 1] - begin[i]));
  }
};

SuccessorLists AllSuccessors(const Graph& graph, const std::vector<OpId>& ops) {
  SuccessorLists lists;
  lists.begin.reserve(ops.size() + 1);
  lists.begin.push_back(0);
  std::vector<uint32_t> seen(static_cast<size_t>(graph.num_op_ids()), 0);
  std::vector<OpId> succ;
  const size_t n = ops.size();
  for (size_t i = 0; i < n; ++i) {
    PrefetchOpsAhead(graph, i, [&](size_t j) { return j < n ? &graph.op(ops[j]) : nullptr; });
    Successors(graph, ops[i], seen, static_cast<uint32_t>(i) + 1, succ);
    lists.list.insert(lists.list.end(), succ.begin(), succ.end());
    lists.begin.push_back(static_cast<int32_t>(lists.list.size()));
  }
  return lists;
}

// Every op's set of candidates below it, computed backwards from its
// successors' sets and the successors themselves. Sets live in a pool and
// are shared where an op adds nothing to its successor's (set 0 is the
// empty one); an op's set is dropped once all its predecessors have read it,
// except a candidate's. `Sets` merges: Merge(successors, set_of) returns a
// new set's id, or -1 when over its budget; Release(id) drops one.
template <typename Sets>
bool BackwardSets(const Graph& graph, const std::vector<OpId>& sorted_ops,
                  const std::vector<int32_t>& cand_of, Sets& sets, std::vector<int32_t>& set_of) {
  const auto n_ops = static_cast<size_t>(graph.num_op_ids());
  set_of.assign(n_ops, 0);
  std::vector<int32_t> refs(1, 1);
  std::vector<int32_t> preds_left(n_ops, 0);
  const SuccessorLists successors = AllSuccessors(graph, sorted_ops);
  for (OpId s : successors.list) ++preds_left[static_cast<size_t>(s)];
  for (size_t i = sorted_ops.size(); i-- > 0;) {
    const OpId v = sorted_ops[i];
    const std::span<const OpId> succ = successors.of(i);
    int32_t shared = -1;  // -1: no successor; -2: a merge is needed
    for (OpId s : succ) {
      const int32_t m = set_of[static_cast<size_t>(s)];
      if (cand_of[static_cast<size_t>(s)] != kNone || (shared >= 0 && shared != m)) {
        shared = -2;
        break;
      }
      shared = m;
    }
    int32_t set = 0;
    if (shared >= 0) {
      set = shared;
      ++refs[static_cast<size_t>(set)];
    } else if (shared == -2) {
      set = sets.Merge(succ, set_of);
      if (set < 0) return false;
      if (static_cast<size_t>(set) >= refs.size()) refs.resize(static_cast<size_t>(set) + 1, 0);
      refs[static_cast<size_t>(set)] = 1;
    }
    set_of[static_cast<size_t>(v)] = set;
    for (OpId s : succ) {
      if (--preds_left[static_cast<size_t>(s)] == 0 && cand_of[static_cast<size_t>(s)] == kNone) {
        const int32_t m = set_of[static_cast<size_t>(s)];
        if (m != 0 && --refs[static_cast<size_t>(m)] == 0) sets.Release(m);
      }
    }
  }
  return true;
}

// A pool of sets, reused through a free list; id 0 is the empty set.
template <typename T>
class Pool {
 public:
  Pool() : items_(1) {}
  int32_t New() {
    if (free_.empty()) {
      items_.emplace_back();
      return static_cast<int32_t>(items_.size() - 1);
    }
    const int32_t id = free_.back();
    free_.pop_back();
    return id;
  }
  void Free(int32_t id) {
    items_[static_cast<size_t>(id)] = T();
    free_.push_back(id);
  }
  T& operator[](int32_t id) { return items_[static_cast<size_t>(id)]; }

 private:
  std::vector<T> items_;
  std::vector<int32_t> free_;
};

}  // namespace

CandidateReach::CandidateReach(const Graph& graph, const std::vector<OpId>& sorted_ops,
                               const std::vector<OpId>& cands, const std::vector<int32_t>& cand_of,
                               const std::vector<int64_t>& number, ReachStrategy strategy)
    : g_(graph), cands_(cands), cand_of_(cand_of), n_(static_cast<int32_t>(cands.size())) {
  const bool any = strategy == ReachStrategy::kAuto;
  Rank(sorted_ops);
  if ((any || strategy == ReachStrategy::kWindows) && BuildWindows(sorted_ops)) {
    mode_ = Mode::kWindows;
  } else if ((any || strategy == ReachStrategy::kChains) && BuildChains(sorted_ops, number)) {
    mode_ = Mode::kChains;
  } else {
    BuildSearch(sorted_ops);
    mode_ = Mode::kSearch;
  }
  // A forced way must have been possible (tests force them on small graphs).
  HFUSE_CHECK(strategy != ReachStrategy::kWindows || mode_ == Mode::kWindows);
  HFUSE_CHECK(strategy != ReachStrategy::kChains || mode_ == Mode::kChains);
}

void CandidateReach::Rank(const std::vector<OpId>& sorted_ops) {
  std::vector<int32_t> level(static_cast<size_t>(g_.num_op_ids()), 0);
  for (OpId v : sorted_ops) {
    int32_t l = 0;
    for (TensorId in : g_.op(v).inputs) {
      const OpId p = g_.tensor(in).producer;
      if (p != kNone) l = std::max(l, level[static_cast<size_t>(p)] + 1);
    }
    level[static_cast<size_t>(v)] = l;
  }
  std::vector<int32_t> by_rank(cands_.size());
  for (size_t c = 0; c < by_rank.size(); ++c) by_rank[c] = static_cast<int32_t>(c);
  std::stable_sort(by_rank.begin(), by_rank.end(), [&](int32_t a, int32_t b) {
    return level[static_cast<size_t>(cands_[static_cast<size_t>(a)])] <
           level[static_cast<size_t>(cands_[static_cast<size_t>(b)])];
  });
  rank_.resize(cands_.size());
  for (size_t r = 0; r < by_rank.size(); ++r)
    rank_[static_cast<size_t>(by_rank[r])] = static_cast<int32_t>(r);
}

bool CandidateReach::BuildWindows(const std::vector<OpId>& sorted_ops) {
  const int32_t n = n_;
  // The union of successor sets and successor candidates, kept tight: ranks
  // just below the suffix that are all in the window join the suffix, and
  // words outside the set's lowest and highest bits are dropped.
  struct Sets {
    int32_t n;
    const std::vector<int32_t>& cand_of;
    const std::vector<int32_t>& rank;
    Pool<WindowSet> pool;
    int64_t live = 0, budget = 0;

    static void Normalize(WindowSet& s) {
      while (s.hi > 0) {
        const int32_t r = s.hi - 1;
        const int32_t w = r / 64 - s.lo_word;
        if (w < 0 || w >= static_cast<int32_t>(s.words.size())) break;
        const uint64_t mask = RangeMask(s.lo_word + w, (s.lo_word + w) * 64, s.hi);
        const uint64_t x = s.words[static_cast<size_t>(w)] & mask;
        if (x == mask) {
          s.hi = (s.lo_word + w) * 64;
          continue;
        }
        s.hi = (s.lo_word + w) * 64 + (63 - std::countl_zero(~x & mask)) + 1;
        break;
      }
      const int32_t end = std::max(0, (s.hi + 63) / 64 - s.lo_word);
      if (end < static_cast<int32_t>(s.words.size())) s.words.resize(static_cast<size_t>(end));
      if (!s.words.empty()) {
        const int32_t last = s.lo_word + static_cast<int32_t>(s.words.size()) - 1;
        s.words.back() &= RangeMask(last, last * 64, s.hi);
      }
      size_t lead = 0;
      while (lead < s.words.size() && s.words[lead] == 0) ++lead;
      if (lead > 0) {
        s.words.erase(s.words.begin(), s.words.begin() + static_cast<ptrdiff_t>(lead));
        s.lo_word += static_cast<int32_t>(lead);
      }
      while (!s.words.empty() && s.words.back() == 0) s.words.pop_back();
      if (s.words.empty()) s.lo_word = 0;
    }

    int32_t Merge(std::span<const OpId> succ, const std::vector<int32_t>& set_of) {
      // The window spans the words that any successor sets, below the suffix.
      int32_t hi = n, lo = INT32_MAX, top = -1;
      for (OpId s : succ) {
        const int32_t m = set_of[static_cast<size_t>(s)];
        if (m != 0) hi = std::min(hi, pool[m].hi);
      }
      for (OpId s : succ) {
        const int32_t c = cand_of[static_cast<size_t>(s)];
        const int32_t r = c == kNone ? kNone : rank[static_cast<size_t>(c)];
        if (r != kNone && r < hi) {
          lo = std::min(lo, r / 64);
          top = std::max(top, r / 64);
        }
        const int32_t m = set_of[static_cast<size_t>(s)];
        if (m == 0 || pool[m].words.empty()) continue;
        const WindowSet& from = pool[m];
        lo = std::min(lo, from.lo_word);
        top = std::max(top, from.lo_word + static_cast<int32_t>(from.words.size()) - 1);
      }
      const int32_t id = pool.New();
      WindowSet& set = pool[id];
      set.hi = hi;
      const int32_t end = std::min((hi + 63) / 64, top + 1);
      if (lo < end) {
        set.lo_word = lo;
        set.words.assign(static_cast<size_t>(end - lo), 0);
        for (OpId s : succ) {
          const int32_t c = cand_of[static_cast<size_t>(s)];
          const int32_t r = c == kNone ? kNone : rank[static_cast<size_t>(c)];
          if (r != kNone && r < hi)
            set.words[static_cast<size_t>(r / 64 - lo)] |= uint64_t{1} << (r % 64);
          const int32_t m = set_of[static_cast<size_t>(s)];
          if (m == 0) continue;
          const WindowSet& from = pool[m];
          for (size_t i = 0; i < from.words.size(); ++i) {
            const int32_t w = from.lo_word + static_cast<int32_t>(i);
            if (w >= end) break;
            set.words[static_cast<size_t>(w - lo)] |= from.words[i];
          }
        }
        Normalize(set);
        set.words.shrink_to_fit();
      }
      live += static_cast<int64_t>(set.words.size()) + 1;
      return live > budget ? -1 : id;
    }
    void Release(int32_t id) {
      live -= static_cast<int64_t>(pool[id].words.size()) + 1;
      pool.Free(id);
    }
  } sets{n, cand_of_, rank_, {}, 0, WindowBudget(g_)};
  sets.pool[0].hi = n;  // the empty set
  std::vector<int32_t> set_of;
  if (!BackwardSets(g_, sorted_ops, cand_of_, sets, set_of)) return false;
  int64_t total = 0;
  for (OpId op : cands_)
    total += static_cast<int64_t>(sets.pool[set_of[static_cast<size_t>(op)]].words.size()) + 1;
  if (total > sets.budget) return false;
  below_.resize(cands_.size());
  for (size_t c = 0; c < cands_.size(); ++c)
    below_[c] = sets.pool[set_of[static_cast<size_t>(cands_[c])]];

  const auto words = static_cast<size_t>((n + 63) / 64);
  fused_bits_.assign(words, 0);
  fused_id_.assign(cands_.size(), kNone);
  for (DenseSet* d : {&group_, &closure_}) {
    d->bits.assign(words, 0);
    d->hi = n;
  }
  return true;
}

void CandidateReach::Reset(DenseSet& set) const {
  std::fill(set.bits.begin() + set.lo_word, set.bits.begin() + set.end_word, 0);
  set.lo_word = set.end_word = 0;
  set.hi = n_;
}

template <typename OnNew>
void CandidateReach::Add(DenseSet& into, const WindowSet& from, OnNew&& on_new) const {
  const int32_t old_hi = into.hi;
  const int32_t hi = std::min(old_hi, from.hi);
  // Ranks that the lower suffix start takes in.
  for (int32_t w = hi / 64; w < (old_hi + 63) / 64; ++w) {
    const uint64_t added = RangeMask(w, hi, old_hi) & ~into.bits[static_cast<size_t>(w)];
    if (added) on_new(w, added);
  }
  into.hi = hi;
  for (size_t i = 0; i < from.words.size(); ++i) {
    const int32_t w = from.lo_word + static_cast<int32_t>(i);
    if (w * 64 >= hi) break;
    uint64_t& word = into.bits[static_cast<size_t>(w)];
    const uint64_t added = from.words[i] & ~word & RangeMask(w, 0, hi);
    if (!added) continue;
    if (into.lo_word == into.end_word) {
      into.lo_word = w;
      into.end_word = w + 1;
    } else {
      into.lo_word = std::min(into.lo_word, w);
      into.end_word = std::max(into.end_word, w + 1);
    }
    word |= added;
    on_new(w, added);
  }
}

bool CandidateReach::Contains(const DenseSet& set, int32_t rank) {
  return rank >= set.hi || ((set.bits[static_cast<size_t>(rank / 64)] >> (rank % 64)) & 1);
}

bool CandidateReach::BuildChains(const std::vector<OpId>& sorted_ops,
                                 const std::vector<int64_t>& number) {
  const size_t n_cands = cands_.size();
  auto number_of = [&](int32_t c) { return number[static_cast<size_t>(c)]; };

  // Forward: for every tensor, up to kHints candidates above it, those with
  // the highest numbers (the nearest, usually). A group op's output follows
  // only its own member's inputs, so that lanes keep apart through groups.
  std::vector<int32_t> hints(static_cast<size_t>(g_.num_tensor_ids()) * kHints, kNone);
  auto offer = [&](int32_t* slot, int32_t c) {
    size_t i = 0;
    while (i < kHints && slot[i] != kNone && slot[i] != c && number_of(slot[i]) > number_of(c)) ++i;
    if (i == kHints || slot[i] == c) return;
    // Insert at i; drop a later copy of c, or the last entry.
    size_t end = i;
    while (end + 1 < kHints && slot[end] != kNone && slot[end] != c) ++end;
    for (size_t j = end; j > i; --j) slot[j] = slot[j - 1];
    slot[i] = c;
  };
  auto offer_from = [&](int32_t* slot, TensorId in) {
    const OpId p = g_.tensor(in).producer;
    if (p != kNone && cand_of_[static_cast<size_t>(p)] != kNone)
      offer(slot, cand_of_[static_cast<size_t>(p)]);
    const int32_t* from = &hints[static_cast<size_t>(in) * kHints];
    for (size_t i = 0; i < kHints && from[i] != kNone; ++i) offer(slot, from[i]);
  };
  for (OpId v : sorted_ops) {
    const Op& op = g_.op(v);
    const size_t members = op.outputs.size();
    for (size_t i = 0; i < members; ++i) {
      int32_t* slot = &hints[static_cast<size_t>(op.outputs[i]) * kHints];
      ForEachMemberInput(op, i, [&](size_t k) { offer_from(slot, op.inputs[k]); });
    }
  }

  // Chains, in number order: extend the chain of the highest-numbered hint
  // that is still a chain's tail, so that chains are sorted by number.
  std::vector<int32_t> by_number(n_cands);
  for (size_t c = 0; c < n_cands; ++c) by_number[c] = static_cast<int32_t>(c);
  std::sort(by_number.begin(), by_number.end(),
            [&](int32_t a, int32_t b) { return number_of(a) < number_of(b); });
  chain_.assign(n_cands, kNone);
  pos_.assign(n_cands, 0);
  std::vector<bool> tail(n_cands, false);
  std::array<int32_t, kHints> mine;
  for (int32_t c : by_number) {
    mine.fill(kNone);
    for (TensorId in : g_.op(cands_[static_cast<size_t>(c)]).inputs) offer_from(mine.data(), in);
    int32_t best = kNone;
    for (int32_t u : mine) {
      if (u != kNone && tail[static_cast<size_t>(u)] && number_of(u) < number_of(c) &&
          (best == kNone || number_of(u) > number_of(best))) {
        best = u;
      }
    }
    if (best == kNone) {
      chain_[static_cast<size_t>(c)] = num_chains_++;
    } else {
      chain_[static_cast<size_t>(c)] = chain_[static_cast<size_t>(best)];
      pos_[static_cast<size_t>(c)] = pos_[static_cast<size_t>(best)] + 1;
      tail[static_cast<size_t>(best)] = false;
    }
    tail[static_cast<size_t>(c)] = true;
  }
  hints = {};

  struct Sets {
    const std::vector<int32_t>& cand_of;
    const std::vector<int32_t>& chain;
    const std::vector<int32_t>& pos;
    Pool<std::vector<Entry>> pool;
    std::vector<int32_t> low, changed;
    int64_t live = 0, budget = 0;
    int32_t Merge(std::span<const OpId> succ, const std::vector<int32_t>& set_of) {
      changed.clear();
      auto lower = [&](int32_t ch, int32_t p) {
        int32_t& l = low[static_cast<size_t>(ch)];
        if (p < l) {
          if (l == kFar) changed.push_back(ch);
          l = p;
        }
      };
      for (OpId s : succ) {
        const int32_t c = cand_of[static_cast<size_t>(s)];
        if (c != kNone) lower(chain[static_cast<size_t>(c)], pos[static_cast<size_t>(c)]);
        const int32_t m = set_of[static_cast<size_t>(s)];
        if (m != 0) {
          for (const Entry& e : pool[m]) lower(e.chain, e.pos);
        }
      }
      const int32_t id = pool.New();
      std::vector<Entry>& entries = pool[id];
      entries.reserve(changed.size());
      for (int32_t ch : changed) {
        entries.push_back({ch, low[static_cast<size_t>(ch)]});
        low[static_cast<size_t>(ch)] = kFar;
      }
      live += static_cast<int64_t>(entries.size());
      return live > budget ? -1 : id;
    }
    void Release(int32_t id) {
      live -= static_cast<int64_t>(pool[id].size());
      pool.Free(id);
    }
  } sets{cand_of_,
         chain_,
         pos_,
         {},
         std::vector<int32_t>(static_cast<size_t>(num_chains_), kFar),
         {},
         0,
         EntryBudget(g_)};
  std::vector<int32_t> set_of;
  if (!BackwardSets(g_, sorted_ops, cand_of_, sets, set_of)) return false;
  // Candidates keep their maps, copied out so that the pool can go (a
  // candidate shares a map only with a non-candidate successor's).
  int64_t total = 0;
  for (size_t c = 0; c < n_cands; ++c) {
    const int32_t m = set_of[static_cast<size_t>(cands_[c])];
    if (m != 0) total += static_cast<int64_t>(sets.pool[m].size());
  }
  if (total > sets.budget) return false;
  reach_.resize(n_cands);
  for (size_t c = 0; c < n_cands; ++c) {
    const int32_t m = set_of[static_cast<size_t>(cands_[c])];
    if (m != 0) reach_[c] = sets.pool[m];
  }
  group_low_.assign(static_cast<size_t>(num_chains_), kFar);
  closure_low_.assign(static_cast<size_t>(num_chains_), kFar);
  fused_on_chain_.resize(static_cast<size_t>(num_chains_));
  fused_max_pos_.assign(static_cast<size_t>(num_chains_), -1);
  return true;
}

void CandidateReach::BuildSearch(const std::vector<OpId>& sorted_ops) {
  const auto n_ops = static_cast<size_t>(g_.num_op_ids());
  chain_.clear();
  pos_.clear();
  reach_.clear();
  num_chains_ = 0;
  // G0 as it is now: the rewrites of this round must not change question 1.
  succ_begin_.assign(n_ops + 1, 0);
  mark_.assign(n_ops, 0);
  std::vector<OpId> succ;
  for (OpId v : sorted_ops) {
    Successors(g_, v, mark_, static_cast<uint32_t>(v) + 1, succ);
    succ_begin_[static_cast<size_t>(v) + 1] = static_cast<int32_t>(succ.size());
  }
  for (size_t v = 0; v < n_ops; ++v) succ_begin_[v + 1] += succ_begin_[v];
  succ_.assign(static_cast<size_t>(succ_begin_[n_ops]), kNone);
  std::fill(mark_.begin(), mark_.end(), 0);
  for (OpId v : sorted_ops) {
    Successors(g_, v, mark_, static_cast<uint32_t>(v) + 1, succ);
    std::copy(succ.begin(), succ.end(), succ_.begin() + succ_begin_[static_cast<size_t>(v)]);
  }
  std::fill(mark_.begin(), mark_.end(), 0);
  stamp_ = 1;
}

void CandidateReach::Fold(int32_t c, std::vector<int32_t>& low,
                          std::vector<int32_t>& changed) const {
  for (const Entry& e : reach_[static_cast<size_t>(c)]) {
    int32_t& l = low[static_cast<size_t>(e.chain)];
    if (e.pos < l) {
      l = e.pos;
      changed.push_back(e.chain);
    }
  }
}

void CandidateReach::ClearGroup() {
  switch (mode_) {
    case Mode::kWindows: Reset(group_); break;
    case Mode::kChains:
      for (int32_t ch : group_changed_) group_low_[static_cast<size_t>(ch)] = kFar;
      group_changed_.clear();
      break;
    case Mode::kSearch:
      if (++stamp_ == 0) {
        std::fill(mark_.begin(), mark_.end(), 0);
        stamp_ = 1;
      }
      break;
  }
}

void CandidateReach::AddToGroup(int32_t c) {
  switch (mode_) {
    case Mode::kWindows:
      Add(group_, below_[static_cast<size_t>(c)], [](int32_t, uint64_t) {});
      return;
    case Mode::kChains: Fold(c, group_low_, group_changed_); return;
    case Mode::kSearch: break;
  }
  stack_.assign(1, cands_[static_cast<size_t>(c)]);
  while (!stack_.empty()) {
    const auto v = static_cast<size_t>(stack_.back());
    stack_.pop_back();
    for (int32_t i = succ_begin_[v]; i < succ_begin_[v + 1]; ++i) {
      const OpId s = succ_[static_cast<size_t>(i)];
      if (mark_[static_cast<size_t>(s)] != stamp_) {
        mark_[static_cast<size_t>(s)] = stamp_;
        stack_.push_back(s);
      }
    }
  }
}

bool CandidateReach::BelowGroup(int32_t c) const {
  switch (mode_) {
    case Mode::kWindows: return Contains(group_, rank_[static_cast<size_t>(c)]);
    case Mode::kChains:
      return group_low_[static_cast<size_t>(chain_[static_cast<size_t>(c)])] <=
             pos_[static_cast<size_t>(c)];
    case Mode::kSearch: break;
  }
  return mark_[static_cast<size_t>(cands_[static_cast<size_t>(c)])] == stamp_;
}

int32_t CandidateReach::GroupSuffix() const { return mode_ == Mode::kWindows ? group_.hi : n_; }

void CandidateReach::AddFused(const std::vector<int32_t>& members) {
  const auto id = static_cast<int32_t>(fused_.size());
  switch (mode_) {
    case Mode::kWindows: {
      fused_.push_back(members);
      fused_seen_.push_back(0);
      // The members' union, kept as one set: the closure adds it at once.
      DenseSet& u = closure_;
      Reset(u);
      for (int32_t c : members) {
        Add(u, below_[static_cast<size_t>(c)], [](int32_t, uint64_t) {});
        const int32_t r = rank_[static_cast<size_t>(c)];
        fused_bits_[static_cast<size_t>(r) / 64] |= uint64_t{1} << (r % 64);
        fused_id_[static_cast<size_t>(r)] = id;
      }
      WindowSet set;
      set.hi = u.hi;
      const int32_t end = std::min(u.end_word, (u.hi + 63) / 64);
      if (u.lo_word < end) {
        set.lo_word = u.lo_word;
        set.words.assign(u.bits.begin() + u.lo_word, u.bits.begin() + end);
        set.words.back() &= RangeMask(end - 1, 0, u.hi);
      }
      fused_below_.push_back(std::move(set));
      Reset(u);
      return;
    }
    case Mode::kChains:
      fused_.push_back(members);
      fused_seen_.push_back(0);
      for (int32_t c : members) {
        const auto ch = static_cast<size_t>(chain_[static_cast<size_t>(c)]);
        fused_on_chain_[ch].emplace_back(pos_[static_cast<size_t>(c)], id);
        fused_max_pos_[ch] = std::max(fused_max_pos_[ch], pos_[static_cast<size_t>(c)]);
      }
      return;
    case Mode::kSearch: return;  // the search walks the current graph itself
  }
}

std::vector<bool> CandidateReach::ReachedFromOthers(const std::vector<int32_t>& members) {
  std::vector<bool> reached(members.size(), false);
  if (mode_ != Mode::kSearch && ++closure_stamp_ == 0) {
    std::fill(fused_seen_.begin(), fused_seen_.end(), 0);
    closure_stamp_ = 1;
  }
  if (mode_ == Mode::kWindows) {
    // Reaching a member of a fused group reaches the group op, and through
    // it whatever any of its members reaches: each fused group met is added
    // whole, once.
    std::vector<int32_t> pending;
    auto on_new = [&](int32_t w, uint64_t added) {
      for (uint64_t hit = added & fused_bits_[static_cast<size_t>(w)]; hit; hit &= hit - 1) {
        const int32_t id = fused_id_[static_cast<size_t>(w * 64 + std::countr_zero(hit))];
        if (fused_seen_[static_cast<size_t>(id)] != closure_stamp_) {
          fused_seen_[static_cast<size_t>(id)] = closure_stamp_;
          pending.push_back(id);
        }
      }
    };
    Reset(closure_);
    for (int32_t m : members) Add(closure_, below_[static_cast<size_t>(m)], on_new);
    while (!pending.empty()) {
      const int32_t id = pending.back();
      pending.pop_back();
      Add(closure_, fused_below_[static_cast<size_t>(id)], on_new);
    }
    for (size_t i = 0; i < members.size(); ++i) {
      reached[i] = Contains(closure_, rank_[static_cast<size_t>(members[i])]);
    }
    Reset(closure_);
    return reached;
  }
  if (mode_ == Mode::kChains) {
    closure_changed_.clear();
    for (int32_t m : members) Fold(m, closure_low_, closure_changed_);
    // As above, chain by chain.
    for (size_t i = 0; i < closure_changed_.size(); ++i) {
      const auto ch = static_cast<size_t>(closure_changed_[i]);
      if (fused_max_pos_[ch] < closure_low_[ch]) continue;
      for (const auto& [pos, id] : fused_on_chain_[ch]) {
        if (pos < closure_low_[ch] || fused_seen_[static_cast<size_t>(id)] == closure_stamp_)
          continue;
        fused_seen_[static_cast<size_t>(id)] = closure_stamp_;
        for (int32_t f : fused_[static_cast<size_t>(id)]) Fold(f, closure_low_, closure_changed_);
      }
    }
    for (size_t i = 0; i < members.size(); ++i) {
      const auto c = static_cast<size_t>(members[i]);
      reached[i] = closure_low_[static_cast<size_t>(chain_[c])] <= pos_[c];
    }
    for (int32_t ch : closure_changed_) closure_low_[static_cast<size_t>(ch)] = kFar;
    return reached;
  }
  // One search of the current graph from all the members at once: a member
  // it meets is reached from another (the graph has no cycle).
  std::vector<bool> seen(static_cast<size_t>(g_.num_op_ids()), false);
  stack_.clear();
  auto visit_users = [&](OpId v) {
    for (TensorId t : g_.op(v).outputs) {
      for (OpId user : g_.tensor(t).users) {
        if (!seen[static_cast<size_t>(user)]) {
          seen[static_cast<size_t>(user)] = true;
          stack_.push_back(user);
        }
      }
    }
  };
  for (int32_t m : members) visit_users(cands_[static_cast<size_t>(m)]);
  while (!stack_.empty()) {
    const OpId v = stack_.back();
    stack_.pop_back();
    visit_users(v);
  }
  for (size_t i = 0; i < members.size(); ++i) {
    reached[i] = seen[static_cast<size_t>(cands_[static_cast<size_t>(members[i])])];
  }
  return reached;
}

std::vector<int32_t> CandidateReach::Descendants(int32_t c) {
  std::vector<int32_t> below;
  if (mode_ == Mode::kChains) {
    std::vector<int32_t> low(static_cast<size_t>(num_chains_), kFar), changed;
    Fold(c, low, changed);
    for (size_t j = 0; j < cands_.size(); ++j) {
      if (low[static_cast<size_t>(chain_[j])] <= pos_[j]) below.push_back(static_cast<int32_t>(j));
    }
    return below;
  }
  ClearGroup();
  AddToGroup(c);
  for (size_t j = 0; j < cands_.size(); ++j) {
    if (BelowGroup(static_cast<int32_t>(j))) below.push_back(static_cast<int32_t>(j));
  }
  ClearGroup();
  return below;
}

}  // namespace hfuse
