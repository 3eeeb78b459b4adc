// The planning half of fuse-group-ops. See group_planner.h.
#include "hfuse/passes/group_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>

#include "candidate_reach.h"
#include "prefetch_ahead.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/passes/canonical_order.h"
#include "hfuse/passes/group_rewriter.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

bool AllStatic(const Shape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](const Dim& d) { return d.is_static(); });
}

int64_t FlatNormalizedSize(const Op& op) {
  int64_t n = 1;
  for (int64_t d : op.attrs.normalized_shape) n *= d;
  return n;
}

// Whether a split is one whose GEMM consumers are grouped first: split on
// dim 1, every dim from there on static.
bool IsFusableSplit(const Graph& graph, const Op& split) {
  const Shape& x = graph.tensor(split.inputs[0]).shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = split.attrs.dim < 0 ? split.attrs.dim + rank : split.attrs.dim;
  if (axis != 1) return false;
  return std::all_of(x.begin() + 1, x.end(), [](const Dim& d) { return d.is_static(); });
}

// What two candidates must share to be compatible (Compatible below implies
// equal keys); the scan of a leader looks only at candidates with its key,
// and Compatible still decides. GEMMs: inputs, alignment, dtypes, M.
// LayerNorms: eps, ranks, batch dims, dtype (the size rule is not an
// equivalence); one without gamma and beta is compatible with nothing.
// Gathers: the table's dtype.
void ClassKey(const Graph& graph, OpId id, int32_t unique, RuleSet rules,
              std::vector<int64_t>& key) {
  const Op& op = graph.op(id);
  // hfuse rules: GEMMs of every epilogue kind meet in one round, and their
  // input counts (bias or not) may differ; the bias's dtype is Compatible's.
  const bool mixed = rules == RuleSet::kHfuse && IsGemm(op.type);
  key.assign(1, mixed ? int64_t{-2} : static_cast<int64_t>(op.inputs.size()));
  if (op.type == OpType::kOpaque) {  // a Gather: its table's dtype
    key.push_back(static_cast<int64_t>(graph.tensor(op.inputs[0]).dtype));
    return;
  }
  auto dim = [&](const Dim& d) {
    key.push_back(d.dynamic);
    key.push_back(d.is_static() ? d.value : 0);
  };
  if (IsGemm(op.type)) {
    key.push_back(rules == RuleSet::kSeed ? GemmAlignment(graph, id) : 0);
    for (size_t i = 0; i < (mixed ? 2 : op.inputs.size()); ++i) {
      key.push_back(static_cast<int64_t>(graph.tensor(op.inputs[i]).dtype));
    }
    dim(graph.tensor(op.inputs[0]).shape[0]);
    return;
  }
  if (op.inputs.size() != 3) {
    key = {-1, unique};
    return;
  }
  const Tensor& x = graph.tensor(op.inputs[0]);
  const double eps = op.attrs.Eps() == 0.0 ? 0.0 : op.attrs.Eps();  // -0.0 == 0.0
  int64_t eps_bits = 0;
  static_assert(sizeof(eps_bits) == sizeof(eps));
  std::memcpy(&eps_bits, &eps, sizeof(eps));
  key.push_back(eps_bits);
  key.push_back(static_cast<int64_t>(x.shape.size()));
  key.push_back(static_cast<int64_t>(op.attrs.normalized_shape.size()));
  key.push_back(static_cast<int64_t>(x.dtype));
  for (size_t i = 0; i + op.attrs.normalized_shape.size() < x.shape.size(); ++i) dim(x.shape[i]);
}

// Candidates still on offer, for the leaders' scans: the candidates of each
// class in op-number order, cut into lists (one per chain when there are
// chains). Each list ends in a sentinel slot; removed slots are skipped with
// a union-find "next live slot", so no scan walks a removed candidate twice.
class OfferLists {
 public:
  OfferLists(const std::vector<int32_t>& class_of, int32_t num_classes,
             const std::vector<int64_t>& number, const CandidateReach& reach) {
    const size_t n = class_of.size();
    std::vector<int32_t> order(n);
    for (size_t c = 0; c < n; ++c) order[c] = static_cast<int32_t>(c);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return number[static_cast<size_t>(a)] < number[static_cast<size_t>(b)];
    });
    auto list_key = [&](int32_t c) {
      const int64_t chain = reach.has_chains() ? reach.chain_of(c) : 0;
      return int64_t{class_of[static_cast<size_t>(c)]} * (int64_t{reach.num_chains()} + 1) + chain;
    };
    std::unordered_map<int64_t, int32_t> list_of_key;
    std::vector<int32_t> list_of(n), sizes;
    classes_.resize(static_cast<size_t>(num_classes));
    for (int32_t c : order) {
      auto [it, fresh] = list_of_key.emplace(list_key(c), static_cast<int32_t>(sizes.size()));
      if (fresh) sizes.push_back(0);
      list_of[static_cast<size_t>(c)] = it->second;
      ++sizes[static_cast<size_t>(it->second)];
    }
    std::vector<int32_t> begin(sizes.size()), fill(sizes.size());
    int32_t slots = 0;
    for (size_t l = 0; l < sizes.size(); ++l) {
      begin[l] = fill[l] = slots;
      slots += sizes[l] + 1;
    }
    cand_.assign(static_cast<size_t>(slots), kNone);
    next_.resize(static_cast<size_t>(slots));
    for (int32_t s = 0; s < slots; ++s) next_[static_cast<size_t>(s)] = s;
    slot_of_.resize(n);
    for (int32_t c : order) {
      const auto l = static_cast<size_t>(list_of[static_cast<size_t>(c)]);
      if (fill[l] == begin[l])
        classes_[static_cast<size_t>(class_of[static_cast<size_t>(c)])].push_back(begin[l]);
      slot_of_[static_cast<size_t>(c)] = fill[l];
      cand_[static_cast<size_t>(fill[l]++)] = c;
    }
  }

  void Remove(int32_t c) {
    const int32_t s = slot_of_[static_cast<size_t>(c)];
    next_[static_cast<size_t>(s)] = s + 1;
  }
  // The first live slot at or after `s` in its list (maybe the sentinel).
  int32_t Live(int32_t s) {
    int32_t root = s;
    while (next_[static_cast<size_t>(root)] != root) root = next_[static_cast<size_t>(root)];
    while (s != root) {
      const int32_t up = next_[static_cast<size_t>(s)];
      next_[static_cast<size_t>(s)] = root;
      s = up;
    }
    return root;
  }
  int32_t at(int32_t slot) const { return cand_[static_cast<size_t>(slot)]; }  // kNone: the end
  // The first slots of the class's lists; lists found empty may be dropped.
  std::vector<int32_t>& lists(int32_t cls) { return classes_[static_cast<size_t>(cls)]; }

 private:
  std::vector<int32_t> cand_, next_, slot_of_;
  std::vector<std::vector<int32_t>> classes_;
};

// Candidates still on offer, for the leaders' scans without chains: per
// class, a tree over the class's candidates in rank order that holds, for
// each range, the lowest-numbered one on offer. A scan asks for the
// lowest-numbered candidate on offer ranked below the group's suffix (all
// from the suffix on are below the group), so it meets in number order just
// the candidates that the seed's scan would not skip as descendants, plus
// those in the window below the suffix.
class OfferTree {
 public:
  OfferTree(const std::vector<int32_t>& class_of, int32_t num_classes,
            const std::vector<int64_t>& number, const std::vector<int32_t>& rank)
      : number_(number) {
    const size_t n = class_of.size();
    std::vector<int32_t> sizes(static_cast<size_t>(num_classes), 0);
    for (int32_t cls : class_of) ++sizes[static_cast<size_t>(cls)];
    begin_.resize(static_cast<size_t>(num_classes) + 1, 0);
    tree_begin_.resize(static_cast<size_t>(num_classes), 0);
    cap_.resize(static_cast<size_t>(num_classes), 1);
    size_t nodes = 0;
    for (size_t cls = 0; cls < sizes.size(); ++cls) {
      begin_[cls + 1] = begin_[cls] + sizes[cls];
      while (cap_[cls] < sizes[cls]) cap_[cls] *= 2;
      tree_begin_[cls] = static_cast<int32_t>(nodes);
      nodes += 2 * static_cast<size_t>(cap_[cls]);
    }
    member_.resize(n);
    member_rank_.resize(n);
    local_.resize(n);
    tree_.assign(nodes, kNone);
    std::vector<int32_t> by_rank(n);
    for (size_t c = 0; c < n; ++c) by_rank[static_cast<size_t>(rank[c])] = static_cast<int32_t>(c);
    std::vector<int32_t> fill(begin_.begin(), begin_.end() - 1);
    for (int32_t c : by_rank) {
      const auto cls = static_cast<size_t>(class_of[static_cast<size_t>(c)]);
      local_[static_cast<size_t>(c)] = fill[cls] - begin_[cls];
      member_rank_[static_cast<size_t>(fill[cls])] = rank[static_cast<size_t>(c)];
      member_[static_cast<size_t>(fill[cls]++)] = c;
    }
    class_of_ = &class_of;
    for (size_t cls = 0; cls < sizes.size(); ++cls) {
      int32_t* t = &tree_[static_cast<size_t>(tree_begin_[cls])];
      for (int32_t i = 0; i < sizes[cls]; ++i)
        t[cap_[cls] + i] = member_[static_cast<size_t>(begin_[cls] + i)];
      for (int32_t i = cap_[cls] - 1; i > 0; --i) t[i] = Better(t[2 * i], t[2 * i + 1]);
    }
  }

  void Remove(int32_t c) { Set(c, kNone); }
  void Hide(int32_t c) {
    Set(c, kNone);
    hidden_.push_back(c);
  }
  void UnhideAll() {
    for (int32_t c : hidden_) Set(c, c);
    hidden_.clear();
  }
  // The lowest-numbered candidate on offer of class `cls` ranked below
  // `limit`, or kNone.
  int32_t Next(int32_t cls, int32_t limit) const {
    const auto k = static_cast<size_t>(cls);
    const auto first = member_rank_.begin() + begin_[k];
    const auto last = member_rank_.begin() + begin_[k + 1];
    const auto count = static_cast<int32_t>(std::lower_bound(first, last, limit) - first);
    const int32_t* t = &tree_[static_cast<size_t>(tree_begin_[k])];
    int32_t best = kNone;
    for (int32_t l = cap_[k], r = cap_[k] + count; l < r; l /= 2, r /= 2) {
      if (l & 1) best = Better(best, t[l++]);
      if (r & 1) best = Better(best, t[--r]);
    }
    return best;
  }

 private:
  int32_t Better(int32_t a, int32_t b) const {
    if (a == kNone) return b;
    if (b == kNone) return a;
    return number_[static_cast<size_t>(a)] < number_[static_cast<size_t>(b)] ? a : b;
  }
  void Set(int32_t c, int32_t value) {
    const auto cls = static_cast<size_t>((*class_of_)[static_cast<size_t>(c)]);
    int32_t* t = &tree_[static_cast<size_t>(tree_begin_[cls])];
    int32_t i = cap_[cls] + local_[static_cast<size_t>(c)];
    t[i] = value;
    for (i /= 2; i > 0; i /= 2) {
      const int32_t best = Better(t[2 * i], t[2 * i + 1]);
      if (t[i] == best) break;  // nothing above changes either
      t[i] = best;
    }
  }

  const std::vector<int64_t>& number_;
  const std::vector<int32_t>* class_of_ = nullptr;
  std::vector<int32_t> begin_, tree_begin_, cap_;  // per class
  std::vector<int32_t> member_, member_rank_;      // by class, in rank order
  std::vector<int32_t> local_;                     // candidate -> place in its class
  std::vector<int32_t> tree_;                      // node -> candidate, or kNone
  std::vector<int32_t> hidden_;
};

class Round {
 public:
  Round(Graph& graph, std::vector<int64_t>& op_number, OpType type, bool want_dumps,
        ReachStrategy reach, RuleSet rules, ReasonRecorder* reasons)
      : g_(graph),
        op_number_(op_number),
        type_(type),
        dumps_(want_dumps),
        strategy_(reach),
        rules_(rules),
        rec_(reasons) {
    for (int64_t n : op_number_) next_number_ = std::max(next_number_, n + 1);
  }

  TypeRoundResult Run(const std::vector<OpId>& sorted_ops) {
    // The ops' types, gathered in one pass (the op records lie far apart in
    // a large graph: they are asked for ahead), and which are the round's:
    // of its type, or for a gather round the ONNX Gathers among the opaque ops.
    const size_t n_sorted = sorted_ops.size();
    std::vector<OpType> types(n_sorted);
    std::vector<bool> mine(n_sorted);
    for (size_t i = 0; i < n_sorted; ++i) {
      if (i + 16 < n_sorted) __builtin_prefetch(&g_.op(sorted_ops[i + 16]));
      const Op& op = g_.op(sorted_ops[i]);
      types[i] = op.type;
      mine[i] = Mine(op.type) && (!gathers_ || IsOnnxGather(op));
    }
    const auto of_type = static_cast<size_t>(std::count(mine.begin(), mine.end(), true));
    if (of_type == 0) return {};
    if (rec_) rec_->BeginRound(g_, type_, cands_, cand_of_);
    // Candidates, in the sorted order (fix (d) inside IsGemmCandidate).
    cand_of_.assign(static_cast<size_t>(g_.num_op_ids()), kNone);
    cands_.reserve(of_type);
    number_.reserve(of_type);
    for (size_t i = 0; i < n_sorted; ++i) {
      PrefetchOpsAhead(g_, i, [&](size_t j) {
        return j < n_sorted && mine[j] ? &g_.op(sorted_ops[j]) : nullptr;
      });
      const OpId id = sorted_ops[i];
      if (!mine[i]) continue;
      if ((IsGemm(type_) && !IsGemmCandidate(g_, id, rules_)) ||
          (gathers_ && !IsGatherCandidate(g_, id))) {
        if (rec_) rec_->NotACandidate(id);
        continue;
      }
      cand_of_[static_cast<size_t>(id)] = static_cast<int32_t>(cands_.size());
      cands_.push_back(id);
      number_.push_back(op_number_[static_cast<size_t>(id)]);
    }
    const size_t n = cands_.size();
    if (rec_) rec_->CandidatesFound();
    CandidateReach reach(g_, sorted_ops, cands_, cand_of_, number_, strategy_);
    if (dumps_) DumpDependencies(reach);

    std::vector<bool> grouped(n, false);
    std::vector<bool> skip(n, false);  // taken by the split rule
    if (IsGemm(type_)) {
      for (size_t i = 0; i < n_sorted; ++i) {
        const OpId id = sorted_ops[i];
        if (types[i] != OpType::kSplit || !IsFusableSplit(g_, g_.op(id))) continue;
        std::vector<OpId> group = SplitGroup(id, reach);
        if (group.empty()) continue;
        for (OpId m : group) {
          skip[static_cast<size_t>(cand_of_[static_cast<size_t>(m)])] = true;
          if (rec_) rec_->SplitGrouped(cand_of_[static_cast<size_t>(m)]);
        }
        Rewrite(group, reach, kNone);
      }
    }

    std::map<std::vector<int64_t>, int32_t> classes;
    std::vector<int32_t> class_of(n);
    std::vector<int64_t> key;
    for (size_t k = 0; k < n; ++k) {
      PrefetchOpsAhead(g_, k, [&](size_t j) { return j < n ? &g_.op(cands_[j]) : nullptr; });
      ClassKey(g_, cands_[k], static_cast<int32_t>(k), rules_, key);
      auto it = classes.find(key);
      if (it == classes.end())
        it = classes.emplace(key, static_cast<int32_t>(classes.size())).first;
      class_of[k] = it->second;
    }
    if (rec_) rec_->SetClasses(&class_of);
    // The seed's scan of op_set minus the descendants, by op number. With
    // chains, a merge of the class's lists (a list is one chain's candidates
    // in number order, each reaching the next: once one is below the group,
    // so are all after it); else the candidates below the group's suffix.
    std::optional<OfferLists> lists;
    std::optional<OfferTree> tree;
    if (reach.has_chains()) {
      lists.emplace(class_of, static_cast<int32_t>(classes.size()), number_, reach);
    } else {
      tree.emplace(class_of, static_cast<int32_t>(classes.size()), number_, reach.ranks());
    }
    auto remove = [&](int32_t c) {
      if (lists) lists->Remove(c);
      if (tree) tree->Remove(c);
    };
    for (size_t k = 0; k < n; ++k) {
      if (skip[k]) remove(static_cast<int32_t>(k));  // never in the seed's op_set
    }
    std::vector<std::pair<int64_t, int32_t>> heap;  // (number, slot)
    for (size_t k = 0; k < n; ++k) {
      if (skip[k]) continue;
      remove(static_cast<int32_t>(k));  // the seed's op_set.discard(op)
      if (grouped[k]) continue;
      if (rec_) rec_->Leads(static_cast<int32_t>(k));
      const OpId leader = cands_[k];
      std::vector<int32_t> group = {static_cast<int32_t>(k)};
      reach.ClearGroup();
      reach.AddToGroup(static_cast<int32_t>(k));
      // Takes c into the group when it is not below it and is compatible;
      // returns whether it was below the group.
      auto offer = [&](int32_t c, bool& below) {
        below = reach.BelowGroup(c);
        if (below || !Compatible(leader, cands_[static_cast<size_t>(c)])) return false;
        group.push_back(c);
        grouped[static_cast<size_t>(c)] = true;
        if (rec_) rec_->Joined(c, static_cast<int32_t>(k));
        remove(c);
        reach.AddToGroup(c);  // must merge descendants together
        return true;
      };
      if (tree) {
        for (int32_t c; (c = tree->Next(class_of[k], reach.GroupSuffix())) != kNone;) {
          bool below = false;
          if (!offer(c, below)) tree->Hide(c);
        }
        tree->UnhideAll();
      } else {
        heap.clear();
        auto push = [&](int32_t slot) {
          const int32_t c = lists->at(slot);
          if (c == kNone) return;
          heap.emplace_back(number_[static_cast<size_t>(c)], slot);
          std::push_heap(heap.begin(), heap.end(), std::greater<>());
        };
        std::vector<int32_t>& firsts = lists->lists(class_of[k]);
        size_t kept = 0;
        for (int32_t first : firsts) {
          const int32_t slot = lists->Live(first);
          if (lists->at(slot) == kNone) continue;  // all taken: drop the list
          firsts[kept++] = first;
          push(slot);
        }
        firsts.resize(kept);
        while (!heap.empty()) {
          std::pop_heap(heap.begin(), heap.end(), std::greater<>());
          const int32_t slot = heap.back().second;
          heap.pop_back();
          bool below = false;
          const bool taken = offer(lists->at(slot), below);
          if (!taken && !below) push(lists->Live(slot + 1));
        }
      }
      if (rec_ && group.size() == 1) rec_->LeftAlone(g_, static_cast<int32_t>(k));
      // Members another member now reaches (through groups formed earlier)
      // are dropped, and not offered again.
      const std::vector<bool> reached = reach.ReachedFromOthers(group);
      std::vector<OpId> members;
      for (size_t i = 0; i < group.size(); ++i) {
        if (reached[i]) {
          ++result_.cycle_drops;
        } else {
          members.push_back(cands_[static_cast<size_t>(group[i])]);
        }
      }
      if (rec_ && group.size() > 1) {
        rec_->CycleChecked(g_, static_cast<int32_t>(k), group, reached, members.size());
      }
      if (IsLayerNorm(type_) && rules_ == RuleSet::kSeed && members.size() > kMaxLayerNormGroup) {
        std::stable_sort(members.begin(), members.end(), [&](OpId a, OpId b) {
          return FlatNormalizedSize(g_.op(a)) > FlatNormalizedSize(g_.op(b));
        });
        for (size_t begin = 0; begin < members.size(); begin += kMaxLayerNormGroup) {
          const size_t end = std::min(begin + kMaxLayerNormGroup, members.size());
          std::vector<OpId> chunk(members.begin() + static_cast<ptrdiff_t>(begin),
                                  members.begin() + static_cast<ptrdiff_t>(end));
          if (chunk.size() >= 2) {
            Rewrite(chunk, reach, static_cast<int32_t>(k));
          } else if (rec_) {  // fix (e): no group of one
            rec_->ChunkOfOne(g_, chunk[0], static_cast<int32_t>(k), members.size());
          }
        }
      } else if (members.size() >= 2) {
        Rewrite(members, reach, static_cast<int32_t>(k));
      }
      grouped[k] = true;
    }
    if (rec_) rec_->EndRound(g_, result_.reasons);
    return std::move(result_);
  }

 private:
  // Whether ops of this type are the round's: of its type, or under the
  // hfuse rules any GEMM kind in the round of the first (mixed epilogues).
  bool Mine(OpType type) const { return mixed_gemms_ ? IsGemm(type) : type == type_; }

  bool Compatible(OpId leader, OpId other) const {
    const Op& a = g_.op(leader);
    const Op& b = g_.op(other);
    if (a.inputs.empty() || a.outputs.size() != 1 ||
        (!mixed_gemms_ && a.inputs.size() != b.inputs.size())) {
      return false;
    }
    if (gathers_) return GathersCompatible(g_, leader, other);
    return IsGemm(type_) ? GemmsCompatible(g_, leader, other, rules_)
                         : LayerNormsCompatible(g_, leader, other, rules_);
  }

  std::vector<int32_t> Indices(const std::vector<OpId>& ops) const {
    std::vector<int32_t> out;
    for (OpId id : ops) out.push_back(cand_of_[static_cast<size_t>(id)]);
    return out;
  }

  // The GEMMs of this type reading a split's outputs, one each, or none.
  std::vector<OpId> SplitGroup(OpId split_id, CandidateReach& reach) {
    const Op& split = g_.op(split_id);
    std::vector<OpId> group;
    split_seen_.resize(cands_.size(), 0);
    ++split_stamp_;
    for (TensorId out : split.outputs) {
      const std::vector<OpId>& users = g_.tensor(out).users;
      if (users.empty()) return {};
      const OpId gemm = users.front();
      const Op& op = g_.op(gemm);
      if (!Mine(op.type) || !IsGemmCandidate(g_, gemm, rules_)) return {};
      // Fix (c): distinct GEMMs, each reading its output as A.
      uint32_t& seen = split_seen_[static_cast<size_t>(cand_of_[static_cast<size_t>(gemm)])];
      if (op.inputs[0] != out || seen == split_stamp_) return {};
      seen = split_stamp_;
      if (!group.empty() && !GemmsCompatible(g_, group.back(), gemm, rules_)) return {};
      group.push_back(gemm);
    }
    if (group.size() < 2) {  // fix (e)
      if (rec_ && group.size() == 1) {
        rec_->SplitOfOne(split_id, cand_of_[static_cast<size_t>(group[0])]);
      }
      return {};
    }
    const std::vector<bool> reached = reach.ReachedFromOthers(Indices(group));
    if (std::find(reached.begin(), reached.end(), true) != reached.end()) return {};
    return group;
  }

  // `leader`: the candidate that led the group (kNone: the split rule's).
  void Rewrite(std::vector<OpId>& members, CandidateReach& reach, int32_t leader) {
    const std::vector<int32_t> indices = Indices(members);
    const OpId group = gathers_ ? RewriteAsGatherGroup(g_, members) : RewriteAsGroup(g_, members);
    if (rec_) rec_->Formed(group, leader);
    reach.AddFused(indices);
    op_number_.resize(static_cast<size_t>(g_.num_op_ids()), 0);
    op_number_[static_cast<size_t>(group)] = next_number_++;
    result_.group_ops.push_back(group);
    std::vector<std::string> names;
    for (OpId m : members) names.push_back(g_.op(m).name);
    const auto& outs = g_.op(group).outputs;
    result_.new_outputs.insert(result_.new_outputs.end(), outs.begin(), outs.end());
    if (dumps_) {
      result_.groups_dump += fmt::format("[{}]\n\n", fmt::join(names, ","));
      for (OpId m : members) result_.groups_dump += PseudoCode(g_.op(m)) + "\n";
      result_.groups_dump += "\n";
    }
    result_.members.push_back(std::move(names));
  }

  std::string PseudoCode(const Op& op) const {
    std::vector<std::string> ins, outs;
    for (TensorId t : op.inputs) ins.push_back(g_.tensor(t).name);
    for (TensorId t : op.outputs) outs.push_back(g_.tensor(t).name);
    return fmt::format("({}) = {}({})  # {}", fmt::join(outs, ", "), OpTypeName(op.type),
                       fmt::join(ins, ", "), op.name);
  }

  void DumpDependencies(CandidateReach& reach) {
    for (size_t k = 0; k < cands_.size(); ++k) {
      std::vector<std::string> names;
      for (int32_t j : reach.Descendants(static_cast<int32_t>(k))) {
        names.push_back(g_.op(cands_[static_cast<size_t>(j)]).name);
      }
      result_.dependency_dump += fmt::format("{}[{}: [{}]];", k ? "\n\n" : "",
                                             g_.op(cands_[k]).name, fmt::join(names, ", "));
    }
    result_.dependency_dump += "\n";
  }

  Graph& g_;
  std::vector<int64_t>& op_number_;
  OpType type_;  // a GEMM or LayerNorm kind, or kOpaque for the ONNX Gathers
  bool gathers_ = type_ == OpType::kOpaque;
  bool dumps_;
  ReachStrategy strategy_;
  RuleSet rules_;
  bool mixed_gemms_ = rules_ == RuleSet::kHfuse && IsGemm(type_);  // after rules_: set from it
  ReasonRecorder* rec_;  // may be null: no reasons wanted
  int64_t next_number_ = 0;
  std::vector<OpId> cands_;           // in the round's sorted order
  std::vector<int32_t> cand_of_;      // op id -> index into cands_, or kNone
  std::vector<int64_t> number_;       // per candidate, its op number
  std::vector<uint32_t> split_seen_;  // per candidate: in the split group being built
  uint32_t split_stamp_ = 0;
  TypeRoundResult result_;
};

}  // namespace

const char* RuleSetName(RuleSet rules) { return rules == RuleSet::kHfuse ? "hfuse" : "seed"; }

bool ParseRuleSet(const std::string& name, RuleSet& rules) {
  if (name == "seed") {
    rules = RuleSet::kSeed;
  } else if (name == "hfuse") {
    rules = RuleSet::kHfuse;
  } else {
    return false;
  }
  return true;
}

int GemmAlignment(const Graph& graph, OpId gemm) {
  const Tensor& a = graph.tensor(graph.op(gemm).inputs[0]);
  const int64_t k = a.shape.back().value;
  for (int align : {8, 4, 2}) {
    if (align == 8 && a.dtype == DType::kFloat32) continue;
    if (k % align == 0) return align;
  }
  return 1;
}

bool IsGemmCandidate(const Graph& graph, OpId gemm, RuleSet rules) {
  const Op& op = graph.op(gemm);
  if (op.attrs.Alpha() != 1.0) return false;
  const Tensor& a = graph.tensor(op.inputs[0]);
  if (a.shape.size() != 2) return false;
  // hfuse rules: M may be a named dim (members then share it, below).
  if (rules == RuleSet::kSeed ? !AllStatic(a.shape) : !a.shape[1].is_static()) return false;
  for (size_t i = 1; i < op.inputs.size(); ++i) {  // fix (d): static weight and bias
    if (!AllStatic(graph.tensor(op.inputs[i]).shape)) return false;
  }
  return rules == RuleSet::kHfuse || GemmAlignment(graph, gemm) > 1;
}

bool GemmsCompatible(const Graph& graph, OpId leader, OpId other, RuleSet rules) {
  if (rules == RuleSet::kSeed && GemmAlignment(graph, leader) != GemmAlignment(graph, other)) {
    return false;
  }
  const Op& a = graph.op(leader);
  const Op& b = graph.op(other);
  // Fix (a): same dtypes and the same M.
  for (size_t i = 0; i < a.inputs.size() && i < b.inputs.size(); ++i) {
    if (graph.tensor(a.inputs[i]).dtype != graph.tensor(b.inputs[i]).dtype) return false;
  }
  return graph.tensor(a.inputs[0]).shape[0] == graph.tensor(b.inputs[0]).shape[0];
}

bool LayerNormSizesMatch(int64_t n1, int64_t n2) {
  if (n1 < 128 && n2 < 128) return true;  // no half4 kernel either way
  const int64_t align1 = n1 % 4 == 0 ? 4 : 1;
  const int64_t align2 = n2 % 4 == 0 ? 4 : 1;
  if (n1 <= 4096 && n2 <= 4096 && align1 != align2) return false;
  if (n1 >= 4 * n2 || 4 * n1 <= n2) return false;  // no 128 with 1024
  if (align1 == 4) {
    auto in_range = [](int64_t n) { return n >= 128 && n <= 4096; };
    return in_range(n1) == in_range(n2);  // prefer the half4 kernel
  }
  return true;
}

bool LayerNormsCompatible(const Graph& graph, OpId leader, OpId other, RuleSet rules) {
  if (leader == other) return true;
  const Op& a = graph.op(leader);
  const Op& b = graph.op(other);
  if (a.attrs.Eps() != b.attrs.Eps()) return false;
  if (a.inputs.size() != 3 || b.inputs.size() != 3) return false;  // gamma and beta given
  const Tensor& x1 = graph.tensor(a.inputs[0]);
  const Tensor& x2 = graph.tensor(b.inputs[0]);
  if (x1.shape.size() != x2.shape.size()) return false;
  if (a.attrs.normalized_shape.size() != b.attrs.normalized_shape.size()) return false;
  for (size_t i = 0; i < x1.shape.size() - a.attrs.normalized_shape.size(); ++i) {
    if (!(x1.shape[i] == x2.shape[i])) return false;
  }
  if (x1.dtype != x2.dtype) return false;  // fix (b)
  if (rules == RuleSet::kHfuse) return true;  // one launch takes any mix of sizes
  return LayerNormSizesMatch(FlatNormalizedSize(a), FlatNormalizedSize(b));
}

bool IsGatherCandidate(const Graph& graph, OpId gather) {
  const Op& op = graph.op(gather);
  if (!GatherOperandsAreInputs(op)) return false;
  const Tensor& table = graph.tensor(op.inputs[0]);
  const Tensor& ids = graph.tensor(op.inputs[1]);
  const Tensor& y = graph.tensor(op.outputs[0]);
  Shape row = ids.shape;
  if (!table.shape.empty()) row.insert(row.end(), table.shape.begin() + 1, table.shape.end());
  const int64_t axis = GatherAxis(op);
  const auto rank = static_cast<int64_t>(table.shape.size());
  return !table.shape.empty() && y.shape == row && y.dtype == table.dtype &&
         (axis == 0 || axis == -rank) && table.role == Role::kParam && IsFloat(table.dtype) &&
         AllStatic(table.shape) && ids.role != Role::kParam &&
         (ids.dtype == DType::kInt64 || ids.dtype == DType::kInt32) &&
         ids.shape.size() <= kMaxGatherIdsRank;
}

bool GathersCompatible(const Graph& graph, OpId leader, OpId other) {
  return graph.tensor(graph.op(leader).inputs[0]).dtype ==
         graph.tensor(graph.op(other).inputs[0]).dtype;
}

TypeRoundResult GroupGathers(Graph& graph, const std::vector<OpId>& sorted_ops,
                             std::vector<int64_t>& op_number, bool want_dumps, ReachStrategy reach,
                             ReasonRecorder* reasons) {
  return Round(graph, op_number, OpType::kOpaque, want_dumps, reach, RuleSet::kHfuse, reasons)
      .Run(sorted_ops);
}

TypeRoundResult GroupOpsOfType(Graph& graph, const std::vector<OpId>& sorted_ops,
                               std::vector<int64_t>& op_number, OpType type, bool want_dumps,
                               ReachStrategy reach, RuleSet rules, ReasonRecorder* reasons) {
  HFUSE_CHECK(IsGemm(type) || IsLayerNorm(type));
  return Round(graph, op_number, type, want_dumps, reach, rules, reasons).Run(sorted_ops);
}

}  // namespace hfuse
