// Why an op stayed out of every group. See fusion_reasons.h.
#include "hfuse/passes/fusion_reasons.h"

#include <fmt/format.h>

#include <algorithm>

#include "hfuse/ir/op_members.h"
#include "hfuse/passes/group_planner.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

struct CodeInfo {
  std::string_view name, doc;
};
constexpr CodeInfo kCodes[] = {
#define HFUSE_REASON_CODE_INFO(e, code, doc) {code, doc},
    HFUSE_REASON_CODES(HFUSE_REASON_CODE_INFO)
#undef HFUSE_REASON_CODE_INFO
};
struct RuleInfo {
  std::string_view name, message;
};
constexpr RuleInfo kRules[] = {
#define HFUSE_REASON_RULE_INFO(e, id, message) {id, message},
    HFUSE_REASON_RULES(HFUSE_REASON_RULE_INFO)
#undef HFUSE_REASON_RULE_INFO
};

// The rule's message with its arguments.
template <typename... Args>
std::string Say(ReasonRule rule, Args&&... args) {
  return fmt::format(fmt::runtime(kRules[static_cast<size_t>(rule)].message),
                     std::forward<Args>(args)...);
}

std::string DimText(const Graph& graph, const Dim& d) {
  return d.is_static() ? fmt::format("{}", d.value)
                       : graph.dims()[static_cast<size_t>(d.dynamic)].name;
}

// The name of the first dynamic dim of `shape`, or empty.
std::string FirstDynamic(const Graph& graph, const Shape& shape) {
  for (const Dim& d : shape) {
    if (!d.is_static()) return DimText(graph, d);
  }
  return {};
}

int64_t FlatSize(const Op& op) {
  int64_t n = 1;
  for (int64_t d : op.attrs.normalized_shape) n *= d;
  return n;
}

// Why LayerNormSizesMatch(n1, n2) is false (it must be).
std::string SizeMismatch(int64_t n1, int64_t n2) {
  const int64_t align1 = n1 % 4 == 0 ? 4 : 1;
  const int64_t align2 = n2 % 4 == 0 ? 4 : 1;
  if (n1 <= 4096 && n2 <= 4096 && align1 != align2) {
    return fmt::format("alignment {} vs {}", align1, align2);
  }
  if (n1 >= 4 * n2 || 4 * n1 <= n2) return "one is 4 times the other or more";
  return "one in the half4 range 128..4096, the other not";
}

const char* OperandName(bool gemm, size_t i) {
  if (!gemm) return i == 0 ? "input" : i == 1 ? "gamma" : "beta";
  return i == 0 ? "A" : i == 1 ? "weight" : "bias";
}

}  // namespace

std::string_view KindName(OpType type) {
  return type == OpType::kOpaque ? std::string_view("Gather") : OpTypeName(type);
}

std::string_view ReasonCodeName(ReasonCode code) { return kCodes[static_cast<size_t>(code)].name; }
std::string_view ReasonCodeDescription(ReasonCode code) {
  return kCodes[static_cast<size_t>(code)].doc;
}
std::string_view ReasonRuleName(ReasonRule rule) { return kRules[static_cast<size_t>(rule)].name; }
std::string_view ReasonRuleMessage(ReasonRule rule) {
  return kRules[static_cast<size_t>(rule)].message;
}

std::string ReasonsByCode(const std::vector<Reason>& reasons) {
  std::string text;
  for (size_t code = 0; code < std::size(kCodes); ++code) {
    size_t count = 0;
    for (const Reason& r : reasons) count += static_cast<size_t>(r.code) == code;
    if (count == 0) continue;
    text += fmt::format("{} ({}): {}\n", kCodes[code].name, count, kCodes[code].doc);
    for (const Reason& r : reasons) {
      if (static_cast<size_t>(r.code) != code) continue;
      text += fmt::format("  {} ({}) [{}]: {}\n", r.op, KindName(r.type), ReasonRuleName(r.rule),
                          r.details);
    }
  }
  return text;
}

std::string ReasonsDump(OpType type, const std::vector<Reason>& reasons) {
  return ReasonsDump(KindName(type), reasons);
}

std::string ReasonsDump(std::string_view kind, const std::vector<Reason>& reasons) {
  std::string text = fmt::format("# {} {} op(s) outside every group\n", reasons.size(), kind);
  for (const Reason& r : reasons) {
    text += fmt::format("{}: {} [{}]: {}\n", r.op, ReasonCodeName(r.code), ReasonRuleName(r.rule),
                        r.details);
  }
  return text;
}

std::string TopReasons(const std::vector<Reason>& reasons, size_t top) {
  std::vector<std::pair<size_t, size_t>> counts(std::size(kCodes));  // (count, code)
  for (size_t code = 0; code < counts.size(); ++code) counts[code] = {0, code};
  for (const Reason& r : reasons) ++counts[static_cast<size_t>(r.code)].first;
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> parts;
  for (const auto& [count, code] : counts) {
    if (count == 0 || parts.size() == top) break;
    parts.push_back(fmt::format("{} {}", kCodes[code].name, count));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<ReasonCode> AllReasonCodes() {
  std::vector<ReasonCode> codes;
  for (size_t i = 0; i < std::size(kCodes); ++i) codes.push_back(static_cast<ReasonCode>(i));
  return codes;
}

namespace {

// ExplainNotACandidate for an ONNX Gather: IsGatherCandidate's tests, in order.
bool ExplainGatherNotACandidate(const Graph& graph, OpId gather, Reason& out) {
  const Op& op = graph.op(gather);
  out.code = ReasonCode::kNotACandidate;
  if (!GatherOperandsAreInputs(op)) {
    // An operand the node keeps as its own constant: indices (folded, or
    // of a type the IR lacks), or data of such a type.
    const OnnxNode& node = *op.attrs.onnx;
    auto slot = [&](size_t k) { return k < node.input_slots.size() ? node.input_slots[k] : kNone; };
    auto kept_name = [&](size_t k) {
      const int32_t c = -2 - slot(k);
      return c >= 0 && static_cast<size_t>(c) < node.constants.size() ? node.constants[static_cast<size_t>(c)].first
                                                                       : std::string("?");
    };
    if (slot(0) >= 0 && static_cast<size_t>(slot(0)) < op.inputs.size() && slot(1) <= -2) {
      // Mostly a column of an input picked by a constant (X[:, i]): say
      // the first rule it fails, in IsGatherCandidate's order.
      const Tensor& data = graph.tensor(op.inputs[static_cast<size_t>(slot(0))]);
      const int64_t axis = GatherAxis(op);
      if (!data.shape.empty() && axis != 0 && axis != -static_cast<int64_t>(data.shape.size())) {
        out.rule = ReasonRule::kGatherAxis;
        out.details = Say(out.rule, axis, data.name);
      } else if (data.role != Role::kParam) {
        out.rule = ReasonRule::kTableNotConstant;
        out.details = Say(out.rule, data.name);
      } else {
        out.rule = ReasonRule::kIdsConstant;
        out.details = Say(out.rule, kept_name(1));
      }
    } else {
      out.rule = ReasonRule::kTableDType;
      out.details = Say(out.rule, slot(0) <= -2 ? kept_name(0) : std::string("(none)"),
                        "a constant of the node", "of a type the IR does not carry");
    }
    HFUSE_CHECK(!IsGatherCandidate(graph, gather));
    return true;
  }
  const Tensor& table = graph.tensor(op.inputs[0]);
  const Tensor& ids = graph.tensor(op.inputs[1]);
  const Tensor& y = graph.tensor(op.outputs[0]);
  Shape row = ids.shape;
  if (!table.shape.empty()) row.insert(row.end(), table.shape.begin() + 1, table.shape.end());
  auto text = [&](const Shape& s) { return ShapeString(graph, s); };
  const int64_t axis = GatherAxis(op);
  if (!table.shape.empty() && axis != 0 && axis != -static_cast<int64_t>(table.shape.size())) {
    out.rule = ReasonRule::kGatherAxis;
    out.details = Say(out.rule, axis, table.name);
  } else if (table.shape.empty() || !(y.shape == row) || y.dtype != table.dtype) {
    out.rule = ReasonRule::kGatherForm;
    out.details = Say(out.rule, y.name, text(y.shape), text(ids.shape),
                      table.shape.empty() ? std::string("[]")
                                          : text(Shape(table.shape.begin() + 1, table.shape.end())));
  } else if (table.role != Role::kParam) {
    out.rule = ReasonRule::kTableNotConstant;
    out.details = Say(out.rule, table.name);
  } else if (!IsFloat(table.dtype) || !FirstDynamic(graph, table.shape).empty()) {
    out.rule = ReasonRule::kTableDType;
    out.details = Say(out.rule, table.name, DTypeName(table.dtype), text(table.shape));
  } else if (ids.role == Role::kParam) {
    out.rule = ReasonRule::kIdsConstant;
    out.details = Say(out.rule, ids.name);
  } else if ((ids.dtype != DType::kInt64 && ids.dtype != DType::kInt32) ||
             ids.shape.size() > kMaxGatherIdsRank) {
    out.rule = ReasonRule::kIdsForm;
    out.details = Say(out.rule, ids.name, DTypeName(ids.dtype), ids.shape.size());
  } else {
    HFUSE_CHECK(IsGatherCandidate(graph, gather));
    return false;
  }
  HFUSE_CHECK(!IsGatherCandidate(graph, gather));
  return true;
}

}  // namespace

bool ExplainNotACandidate(const Graph& graph, OpId gemm, Reason& out, RuleSet rules) {
  const Op& op = graph.op(gemm);
  if (op.type == OpType::kOpaque) return ExplainGatherNotACandidate(graph, gemm, out);
  out.code = ReasonCode::kNotACandidate;
  if (op.attrs.Alpha() != 1.0) {
    out.rule = ReasonRule::kAlpha;
    out.details = Say(out.rule, op.attrs.Alpha());
    return true;
  }
  const Tensor& a = graph.tensor(op.inputs[0]);
  if (a.shape.size() != 2) {
    out.rule = ReasonRule::kARank;
    out.details = Say(out.rule, a.name, a.shape.size());
    return true;
  }
  // The hfuse rules take a named M (group_planner.h); K must be static.
  const Shape checked = rules == RuleSet::kSeed ? a.shape : Shape{a.shape.back()};
  if (std::string dyn = FirstDynamic(graph, checked); !dyn.empty()) {
    out.rule = ReasonRule::kADynamic;
    out.details = Say(out.rule, dyn, a.name);
    return true;
  }
  for (size_t i = 1; i < op.inputs.size(); ++i) {
    const Tensor& t = graph.tensor(op.inputs[i]);
    if (std::string dyn = FirstDynamic(graph, t.shape); !dyn.empty()) {
      out.rule = i == 1 ? ReasonRule::kWeightDynamic : ReasonRule::kBiasDynamic;
      out.details = Say(out.rule, t.name, dyn);
      return true;
    }
  }
  if (rules == RuleSet::kSeed && GemmAlignment(graph, gemm) <= 1) {
    out.rule = ReasonRule::kAlignment1;
    out.details = Say(out.rule, a.shape.back().value, DTypeName(a.dtype));
    return true;
  }
  return false;
}

bool ExplainIncompatible(const Graph& graph, OpId leader, OpId other, RuleSet rules,
                         ReasonRule& rule, std::string& details) {
  const Op& a = graph.op(leader);
  const Op& b = graph.op(other);
  if (a.type == OpType::kOpaque) {  // ONNX Gathers
    const DType da = graph.tensor(a.inputs[0]).dtype, db = graph.tensor(b.inputs[0]).dtype;
    if (da != db) {
      rule = ReasonRule::kDType;
      details = Say(rule, "table", DTypeName(da), DTypeName(db));
      return true;
    }
    HFUSE_CHECK(GathersCompatible(graph, leader, other));
    return false;
  }
  const bool gemm = IsGemm(a.type);
  if (!gemm && (a.inputs.size() != 3 || b.inputs.size() != 3) && leader != other) {
    rule = ReasonRule::kNoGammaBeta;
    details = Say(rule, a.inputs.size() != 3 ? a.name : b.name);
    return true;
  }
  // Under the hfuse rules GEMMs of different epilogues group: bias or not.
  const bool any_arity = gemm && rules == RuleSet::kHfuse;
  if (a.inputs.empty() || (!any_arity && a.inputs.size() != b.inputs.size()) ||
      a.outputs.size() != 1) {
    rule = ReasonRule::kInputCount;
    details = Say(rule, a.inputs.size(), b.inputs.size());
    return true;
  }
  if (leader == other) return false;
  if (gemm) {
    const int align_a = GemmAlignment(graph, leader);
    const int align_b = GemmAlignment(graph, other);
    const Tensor& xa = graph.tensor(a.inputs[0]);
    const Tensor& xb = graph.tensor(b.inputs[0]);
    if (rules == RuleSet::kSeed && align_a != align_b) {
      rule = ReasonRule::kGemmAlignment;
      details = Say(rule, align_a, align_b, xa.shape.back().value, xb.shape.back().value);
      return true;
    }
    for (size_t i = 0; i < std::min(a.inputs.size(), b.inputs.size()); ++i) {
      const DType da = graph.tensor(a.inputs[i]).dtype, db = graph.tensor(b.inputs[i]).dtype;
      if (da != db) {
        rule = ReasonRule::kDType;
        details = Say(rule, OperandName(true, i), DTypeName(da), DTypeName(db));
        return true;
      }
    }
    if (!(xa.shape[0] == xb.shape[0])) {
      rule = ReasonRule::kM;
      details = Say(rule, DimText(graph, xa.shape[0]), DimText(graph, xb.shape[0]));
      return true;
    }
    HFUSE_CHECK(GemmsCompatible(graph, leader, other, rules));
    return false;
  }
  if (a.attrs.Eps() != b.attrs.Eps()) {
    rule = ReasonRule::kEps;
    details = Say(rule, a.attrs.Eps(), b.attrs.Eps());
    return true;
  }
  const Tensor& x1 = graph.tensor(a.inputs[0]);
  const Tensor& x2 = graph.tensor(b.inputs[0]);
  if (x1.shape.size() != x2.shape.size()) {
    rule = ReasonRule::kInputRank;
    details = Say(rule, x1.shape.size(), x2.shape.size());
    return true;
  }
  const size_t norm = a.attrs.normalized_shape.size();
  if (norm != b.attrs.normalized_shape.size()) {
    rule = ReasonRule::kNormalizedRank;
    details = Say(rule, norm, b.attrs.normalized_shape.size());
    return true;
  }
  for (size_t i = 0; i < x1.shape.size() - norm; ++i) {
    if (!(x1.shape[i] == x2.shape[i])) {
      std::vector<std::string> d1, d2;
      for (size_t j = 0; j < x1.shape.size() - norm; ++j) {
        d1.push_back(DimText(graph, x1.shape[j]));
        d2.push_back(DimText(graph, x2.shape[j]));
      }
      rule = ReasonRule::kBatchDims;
      details = Say(rule, fmt::join(d1, ", "), fmt::join(d2, ", "));
      return true;
    }
  }
  if (x1.dtype != x2.dtype) {
    rule = ReasonRule::kDType;
    details = Say(rule, "input", DTypeName(x1.dtype), DTypeName(x2.dtype));
    return true;
  }
  const int64_t n1 = FlatSize(a), n2 = FlatSize(b);
  if (rules == RuleSet::kSeed && !LayerNormSizesMatch(n1, n2)) {
    rule = ReasonRule::kSizeBucket;
    details = Say(rule, n1, n2, SizeMismatch(n1, n2));
    return true;
  }
  HFUSE_CHECK(LayerNormsCompatible(graph, leader, other, rules));
  return false;
}

void ReasonRecorder::BeginRound(const Graph& graph, OpType type, const std::vector<OpId>& cands,
                                const std::vector<int32_t>& cand_of) {
  type_ = type;
  all_gemms_ = rules_ == RuleSet::kHfuse && IsGemm(type);
  cands_ = &cands;
  cand_of_ = &cand_of;
  class_of_ = nullptr;
  leader_of_.clear();
  scanned_.clear();
  scanned_by_class_.clear();
  group_leader_.clear();
  not_candidates_.clear();
  split_of_one_.clear();
  reasons_.clear();
  // Searches may visit, per round, a fixed amount plus half the graph.
  budget_left_ = kRoundBudget + static_cast<size_t>(graph.num_op_ids()) / 2;
}

std::string ReasonRecorder::Name(const Graph& graph, int32_t c) const {
  return graph.op((*cands_)[static_cast<size_t>(c)]).name;
}

template <typename IsSource>
std::vector<std::string> ReasonRecorder::PathInto(const Graph& graph, OpId to,
                                                  IsSource&& is_source) {
  seen_.resize(static_cast<size_t>(graph.num_op_ids()), 0);
  next_.resize(seen_.size(), kNone);
  if (++stamp_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
    stamp_ = 1;
  }
  // Breadth first, so the path is a shortest one; next_[op] is the op after
  // it on the way to `to`.
  queue_.assign(1, to);
  seen_[static_cast<size_t>(to)] = stamp_;
  const size_t budget = std::min(kPathBudget, budget_left_);
  size_t head = 0;
  for (; head < queue_.size() && head < budget; ++head) {
    const OpId id = queue_[head];
    for (TensorId in : graph.op(id).inputs) {
      const OpId p = graph.tensor(in).producer;
      if (p == kNone || seen_[static_cast<size_t>(p)] == stamp_) continue;
      seen_[static_cast<size_t>(p)] = stamp_;
      next_[static_cast<size_t>(p)] = id;
      if (is_source(p)) {
        budget_left_ -= std::min(budget_left_, head + 1);
        std::vector<std::string> path;
        for (OpId at = p;; at = next_[static_cast<size_t>(at)]) {
          path.push_back(graph.op(at).name);
          if (at == to) break;
        }
        return path;
      }
      queue_.push_back(p);
    }
  }
  budget_left_ -= std::min(budget_left_, head);
  return {};
}

std::string ReasonRecorder::PathText(const std::vector<std::string>& path) const {
  if (path.empty()) return std::string(kNotePathUntraced);
  return fmt::format("{}", fmt::join(path, " -> "));
}

void ReasonRecorder::CycleChecked(const Graph& graph, int32_t leader,
                                  const std::vector<int32_t>& group,
                                  const std::vector<bool>& reached, size_t kept) {
  std::vector<std::string> dropped;
  std::vector<std::string> first_path;
  const std::string leader_name = Name(graph, leader);
  for (size_t i = 0; i < group.size(); ++i) {
    if (!reached[i]) continue;
    const OpId target = (*cands_)[static_cast<size_t>(group[i])];
    std::vector<std::string> path = PathInto(graph, target, [&](OpId p) {
      const int32_t c = CandOf(p);
      return c != kNone && leader_of_[static_cast<size_t>(c)] == leader;
    });
    Reason r{graph.op(target).name, type_, ReasonCode::kDroppedByCycleCheck,
             ReasonRule::kReachedByMember, "", "", path, target};
    r.peer = path.empty() ? std::string("another member") : path.front();
    r.details = Say(r.rule, leader_name, r.peer, PathText(path));
    if (first_path.empty()) first_path = path;
    dropped.push_back(r.op);
    reasons_.push_back(std::move(r));
  }
  if (kept != 1 || dropped.empty()) return;
  for (size_t i = 0; i < group.size(); ++i) {
    if (reached[i]) continue;
    Reason r{Name(graph, group[i]), type_, ReasonCode::kCycleRisk, ReasonRule::kPeersDropped,
             "", dropped.front(), first_path, (*cands_)[static_cast<size_t>(group[i])]};
    r.details = Say(r.rule, fmt::join(dropped, ", "), PathText(first_path));
    reasons_.push_back(std::move(r));
  }
}

void ReasonRecorder::LeftAlone(const Graph& graph, int32_t k) {
  const auto n = static_cast<int32_t>(cands_->size());
  const OpId self = (*cands_)[static_cast<size_t>(k)];
  Reason r{graph.op(self).name, type_, ReasonCode::kNoCompatiblePeer, ReasonRule::kInputCount,
           "", "", {}, self};
  if (n == 1) {
    r.code = ReasonCode::kOnlyCandidateOfType;
    if (not_candidates_.empty()) {
      r.rule = ReasonRule::kOnlyOfType;
      r.details = Say(r.rule, all_gemms_ ? std::string_view("GEMM") : KindName(type_));
    } else {
      r.rule = ReasonRule::kOthersNotCandidates;
      r.details = Say(r.rule, not_candidates_.size(),
                      all_gemms_ ? std::string_view("GEMM") : KindName(type_));
    }
    reasons_.push_back(std::move(r));
    return;
  }
  // Built once per round, when first needed: the candidates the greedy scan
  // saw (not taken by the split rule), all and per class, in sorted order.
  const std::vector<int32_t>& cls = *class_of_;
  if (scanned_.empty()) {
    for (int32_t c = 0; c < n; ++c) {
      if (leader_of_[static_cast<size_t>(c)] == kSplitRule) continue;
      scanned_.push_back(c);
      const auto cl = static_cast<size_t>(cls[static_cast<size_t>(c)]);
      if (cl >= scanned_by_class_.size()) scanned_by_class_.resize(cl + 1);
      scanned_by_class_[cl].push_back(c);
    }
  }
  if (scanned_.size() == 1) {
    r.rule = ReasonRule::kSplitTaken;
    r.details = Say(r.rule, n - 1);
    reasons_.push_back(std::move(r));
    return;
  }
  // The comparison the planner made for peer c: against c's leader when that
  // one led before k (k was offered to it), else k led and c was offered.
  auto partner = [&](int32_t c, OpId& leader, OpId& other) {
    const int32_t l = leader_of_[static_cast<size_t>(c)];
    if (l != kNone && l < k) {
      leader = (*cands_)[static_cast<size_t>(l)];
      other = self;
    } else {
      leader = self;
      other = (*cands_)[static_cast<size_t>(c)];
    }
  };
  auto in_group_of = [&](int32_t c) {
    const int32_t l = leader_of_[static_cast<size_t>(c)];
    return l >= 0 && l < k && l != c
               ? fmt::format(" (in the group led by {}, compared with it)", Name(graph, l))
               : std::string();
  };
  // Only peers of k's class can be compatible: those, nearest first (earlier
  // on ties), up to kPeerScan.
  const std::vector<int32_t>& mine = scanned_by_class_[static_cast<size_t>(cls[static_cast<size_t>(k)])];
  const auto pos = std::lower_bound(mine.begin(), mine.end(), k) - mine.begin();
  const auto size = static_cast<ptrdiff_t>(mine.size());
  int32_t nearest = kNone;
  ReasonRule nearest_rule = ReasonRule::kInputCount;
  std::string nearest_text;
  size_t compared = 0;
  for (ptrdiff_t d = 1; compared < kPeerScan && (pos - d >= 0 || pos + d < size); ++d) {
    for (ptrdiff_t at : {pos - d, pos + d}) {
      if (at < 0 || at >= size || compared >= kPeerScan) continue;
      const int32_t c = mine[static_cast<size_t>(at)];
      ++compared;
      OpId leader = kNone, other = kNone;
      partner(c, leader, other);
      ReasonRule rule = ReasonRule::kInputCount;
      std::string text;
      if (ExplainIncompatible(graph, leader, other, rules_, rule, text)) {
        if (nearest == kNone) {
          nearest = c;
          nearest_rule = rule;
          nearest_text = std::move(text);
        }
        continue;
      }
      // Compatible: one was below the other's group when they met.
      r.code = ReasonCode::kCycleRisk;
      r.peer = graph.op(leader == self ? other : leader).name;
      if (leader == self) {
        r.rule = ReasonRule::kPeerBelow;
        r.path = PathInto(graph, other, [&](OpId p) { return p == self; });
        r.details = Say(r.rule, r.peer, PathText(r.path));
      } else {
        const int32_t l = leader_of_[static_cast<size_t>(c)];
        r.rule = ReasonRule::kBelowGroup;
        r.path = PathInto(graph, self, [&](OpId p) {
          if (auto it = group_leader_.find(p); it != group_leader_.end()) return it->second == l;
          const int32_t pc = CandOf(p);
          return pc != kNone && leader_of_[static_cast<size_t>(pc)] == l;
        });
        r.details = Say(r.rule, r.peer, r.peer, PathText(r.path));
      }
      reasons_.push_back(std::move(r));
      return;
    }
  }
  if (nearest == kNone) {
    // No other candidate of its class: the nearest candidate of any class.
    const auto at = std::lower_bound(scanned_.begin(), scanned_.end(), k) - scanned_.begin();
    const bool before = at > 0;
    const bool after = at + 1 < static_cast<ptrdiff_t>(scanned_.size());
    nearest = before ? scanned_[static_cast<size_t>(at - 1)] : scanned_[static_cast<size_t>(at + 1)];
    if (before && after && scanned_[static_cast<size_t>(at + 1)] - k < k - nearest) {
      nearest = scanned_[static_cast<size_t>(at + 1)];
    }
    OpId leader = kNone, other = kNone;
    partner(nearest, leader, other);
    HFUSE_CHECK(ExplainIncompatible(graph, leader, other, rules_, nearest_rule, nearest_text));
  }
  r.peer = Name(graph, nearest);
  r.rule = nearest_rule;
  r.details = fmt::format("nearest peer {}{}: {}", r.peer, in_group_of(nearest), nearest_text);
  if (compared < mine.size() - 1) {
    r.details += fmt::format(fmt::runtime(kNoteNearest), compared, mine.size() - 1);
  }
  reasons_.push_back(std::move(r));
}

void ReasonRecorder::ChunkOfOne(const Graph& graph, OpId op, int32_t leader,
                                size_t group_size) {
  Reason r{graph.op(op).name, type_, ReasonCode::kChunkOfOne, ReasonRule::kChunk, "", "", {}, op};
  r.peer = Name(graph, leader);
  r.details = Say(r.rule, group_size, r.peer);
  reasons_.push_back(std::move(r));
}

void ReasonRecorder::EndRound(const Graph& graph, std::vector<Reason>& out) {
  for (OpId id : not_candidates_) {
    Reason r{graph.op(id).name, all_gemms_ ? graph.op(id).type : type_, ReasonCode::kNotACandidate,
             ReasonRule::kAlpha, "", "", {}, id};
    HFUSE_CHECK(ExplainNotACandidate(graph, id, r, rules_));
    out.push_back(std::move(r));
  }
  for (const auto& [c, split] : split_of_one_) {
    const std::string& name = Name(graph, c);
    for (Reason& r : reasons_) {
      if (r.op != name || (r.code != ReasonCode::kNoCompatiblePeer &&
                           r.code != ReasonCode::kOnlyCandidateOfType)) {
        continue;
      }
      r.code = ReasonCode::kOnlyMemberOfSplit;
      r.details = Say(ReasonRule::kSplitOfOne, graph.op(split).name, r.details);
      r.rule = ReasonRule::kSplitOfOne;
    }
  }
  for (Reason& r : reasons_) {
    if (all_gemms_ && r.id != kNone) r.type = graph.op(r.id).type;
    out.push_back(std::move(r));
  }
  reasons_.clear();
}

}  // namespace hfuse
