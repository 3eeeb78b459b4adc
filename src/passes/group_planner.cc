// The planning half of fuse-group-ops. See group_planner.h.
#include "hfuse/passes/group_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "hfuse/ir/analysis.h"
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

// A fixed-size set of candidate indices.
class Bits {
 public:
  explicit Bits(size_t n = 0) : words_((n + 63) / 64, 0) {}
  bool test(size_t i) const { return (words_[i / 64] >> (i % 64)) & 1; }
  void set(size_t i) { words_[i / 64] |= uint64_t{1} << (i % 64); }
  Bits& operator|=(const Bits& o) {
    for (size_t w = 0; w < words_.size(); ++w) words_[w] |= o.words_[w];
    return *this;
  }

 private:
  std::vector<uint64_t> words_;
};

// The ops of one type that may be grouped, and what they depend on.
struct Candidates {
  std::vector<OpId> ops;             // in the sorted order
  std::vector<int32_t> index;        // op id -> position in `ops`, or kNone
  std::vector<Bits> descendants;     // per candidate: candidates below it
};

Candidates FindCandidates(const Graph& graph, const std::vector<OpId>& sorted_ops, OpType type) {
  Candidates c;
  c.index.assign(static_cast<size_t>(graph.num_op_ids()), kNone);
  for (OpId id : sorted_ops) {
    if (graph.op(id).type != type) continue;
    if (IsGemm(type) && !IsGemmCandidate(graph, id)) continue;
    c.index[static_cast<size_t>(id)] = static_cast<int32_t>(c.ops.size());
    c.ops.push_back(id);
  }
  // Exact descendants, in reverse topological order (fix (j)).
  std::vector<Bits> below(static_cast<size_t>(graph.num_op_ids()));
  for (auto it = sorted_ops.rbegin(); it != sorted_ops.rend(); ++it) {
    Bits bits(c.ops.size());
    for (TensorId out : graph.op(*it).outputs) {
      for (OpId user : graph.tensor(out).users) {
        bits |= below[static_cast<size_t>(user)];
        if (c.index[static_cast<size_t>(user)] != kNone) {
          bits.set(static_cast<size_t>(c.index[static_cast<size_t>(user)]));
        }
      }
    }
    below[static_cast<size_t>(*it)] = std::move(bits);
  }
  for (OpId id : c.ops) c.descendants.push_back(std::move(below[static_cast<size_t>(id)]));
  return c;
}

// True when some other member of `group` is an ancestor of group[i].
bool HasCycle(const Graph& graph, const std::vector<OpId>& group, size_t i) {
  if (group.size() < 2) return false;
  const std::vector<bool> ancestors = Ancestors(graph, group[i]);
  for (size_t j = 0; j < group.size(); ++j) {
    if (j != i && ancestors[static_cast<size_t>(group[j])]) return true;
  }
  return false;
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

class Round {
 public:
  Round(Graph& graph, std::vector<int64_t>& op_number, OpType type, bool want_dumps)
      : g_(graph), op_number_(op_number), type_(type), dumps_(want_dumps) {
    for (int64_t n : op_number_) next_number_ = std::max(next_number_, n + 1);
  }

  TypeRoundResult Run(const std::vector<TensorId>& sorted) {
    const std::vector<OpId> sorted_ops = SortedOps(g_, sorted);
    if (std::none_of(sorted_ops.begin(), sorted_ops.end(),
                     [&](OpId id) { return g_.op(id).type == type_; })) {
      return {};
    }
    Candidates c = FindCandidates(g_, sorted_ops, type_);
    if (dumps_) DumpDependencies(c);

    std::vector<bool> grouped(c.ops.size(), false);
    std::vector<bool> skip(c.ops.size(), false);  // taken by the split rule
    if (IsGemm(type_)) {
      for (OpId id : sorted_ops) {
        if (g_.op(id).type != OpType::kSplit || !IsFusableSplit(g_, g_.op(id))) continue;
        std::vector<OpId> group = SplitGroup(g_.op(id));
        if (group.empty()) continue;
        for (OpId m : group) skip[static_cast<size_t>(c.index[static_cast<size_t>(m)])] = true;
        Rewrite(group);
      }
    }

    std::vector<bool> available(c.ops.size());  // the seed's op_set
    for (size_t k = 0; k < c.ops.size(); ++k) available[k] = !skip[k];
    std::vector<size_t> by_number(c.ops.size());
    std::iota(by_number.begin(), by_number.end(), 0);
    std::stable_sort(by_number.begin(), by_number.end(), [&](size_t a, size_t b) {
      return op_number_[static_cast<size_t>(c.ops[a])] < op_number_[static_cast<size_t>(c.ops[b])];
    });

    for (size_t k = 0; k < c.ops.size(); ++k) {
      if (skip[k]) continue;
      available[k] = false;
      if (grouped[k]) continue;
      const OpId leader = c.ops[k];
      Bits descendants = c.descendants[k];
      std::vector<OpId> group = {leader};
      for (size_t j : by_number) {
        if (!available[j] || descendants.test(j)) continue;
        const OpId other = c.ops[j];
        if (!Compatible(leader, other)) continue;
        group.push_back(other);
        grouped[j] = true;
        available[j] = false;
        descendants |= c.descendants[j];
      }
      for (size_t i = 0; i < group.size();) {
        if (HasCycle(g_, group, i)) group.erase(group.begin() + static_cast<ptrdiff_t>(i));
        else ++i;
      }
      if (IsLayerNorm(type_) && group.size() > kMaxLayerNormGroup) {
        std::stable_sort(group.begin(), group.end(), [&](OpId a, OpId b) {
          return FlatNormalizedSize(g_.op(a)) > FlatNormalizedSize(g_.op(b));
        });
        for (size_t begin = 0; begin < group.size(); begin += kMaxLayerNormGroup) {
          const size_t end = std::min(begin + kMaxLayerNormGroup, group.size());
          std::vector<OpId> chunk(group.begin() + static_cast<ptrdiff_t>(begin),
                                  group.begin() + static_cast<ptrdiff_t>(end));
          if (chunk.size() >= 2) Rewrite(chunk);  // fix (e): no group of one
        }
      } else if (group.size() >= 2) {
        Rewrite(group);
      }
      grouped[k] = true;
    }
    return std::move(result_);
  }

 private:
  bool Compatible(OpId leader, OpId other) const {
    const Op& a = g_.op(leader);
    const Op& b = g_.op(other);
    if (a.inputs.empty() || a.inputs.size() != b.inputs.size() || a.outputs.size() != 1) {
      return false;
    }
    return IsGemm(type_) ? GemmsCompatible(g_, leader, other)
                         : LayerNormsCompatible(g_, leader, other);
  }

  // The GEMMs of this type reading a split's outputs, one each, or none.
  std::vector<OpId> SplitGroup(const Op& split) {
    std::vector<OpId> group;
    for (TensorId out : split.outputs) {
      const std::vector<OpId>& users = g_.tensor(out).users;
      if (users.empty()) return {};
      const OpId gemm = users.front();
      const Op& op = g_.op(gemm);
      if (op.type != type_ || !IsGemmCandidate(g_, gemm)) return {};
      // Fix (c): distinct GEMMs, each reading its output as A.
      if (op.inputs[0] != out || std::find(group.begin(), group.end(), gemm) != group.end()) {
        return {};
      }
      if (!group.empty() && !GemmsCompatible(g_, group.back(), gemm)) return {};
      group.push_back(gemm);
    }
    if (group.size() < 2) return {};  // fix (e)
    for (size_t i = 0; i < group.size(); ++i) {
      if (HasCycle(g_, group, i)) return {};
    }
    return group;
  }

  void Rewrite(std::vector<OpId>& members) {
    const OpId group = RewriteAsGroup(g_, members);
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

  void DumpDependencies(const Candidates& c) {
    for (size_t k = 0; k < c.ops.size(); ++k) {
      std::vector<std::string> names;
      for (size_t j = 0; j < c.ops.size(); ++j) {
        if (c.descendants[k].test(j)) names.push_back(g_.op(c.ops[j]).name);
      }
      result_.dependency_dump +=
          fmt::format("{}[{}: [{}]];", k ? "\n\n" : "", g_.op(c.ops[k]).name, fmt::join(names, ", "));
    }
    result_.dependency_dump += "\n";
  }

  Graph& g_;
  std::vector<int64_t>& op_number_;
  OpType type_;
  bool dumps_;
  int64_t next_number_ = 0;
  TypeRoundResult result_;
};

}  // namespace

int GemmAlignment(const Graph& graph, OpId gemm) {
  const Tensor& a = graph.tensor(graph.op(gemm).inputs[0]);
  const int64_t k = a.shape.back().value;
  for (int align : {8, 4, 2}) {
    if (align == 8 && a.dtype == DType::kFloat32) continue;
    if (k % align == 0) return align;
  }
  return 1;
}

bool IsGemmCandidate(const Graph& graph, OpId gemm) {
  const Op& op = graph.op(gemm);
  if (op.attrs.Alpha() != 1.0) return false;
  const Tensor& a = graph.tensor(op.inputs[0]);
  if (a.shape.size() != 2 || !AllStatic(a.shape)) return false;
  for (size_t i = 1; i < op.inputs.size(); ++i) {  // fix (d): static weight and bias
    if (!AllStatic(graph.tensor(op.inputs[i]).shape)) return false;
  }
  return GemmAlignment(graph, gemm) > 1;
}

bool GemmsCompatible(const Graph& graph, OpId leader, OpId other) {
  if (GemmAlignment(graph, leader) != GemmAlignment(graph, other)) return false;
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

bool LayerNormsCompatible(const Graph& graph, OpId leader, OpId other) {
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
  return LayerNormSizesMatch(FlatNormalizedSize(a), FlatNormalizedSize(b));
}

TypeRoundResult GroupOpsOfType(Graph& graph, const std::vector<TensorId>& sorted,
                               std::vector<int64_t>& op_number, OpType type, bool want_dumps) {
  HFUSE_CHECK(IsGemm(type) || IsLayerNorm(type));
  return Round(graph, op_number, type, want_dumps).Run(sorted);
}

}  // namespace hfuse
