// Fused regions (fusion_regions.h): which ops form them, the order that
// keeps each together, and the host interpreter. Host code only.
#include "fusion_regions.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <queue>
#include <set>
#include <string_view>

#include "cpu_onnx_ops.h"
#include "hfuse/ir/analysis.h"
#include "hfuse/ir/onnx_ops.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/support/error.h"
#include "hfuse/support/half.h"
#include "kernel_codes.h"

namespace hfuse::cuda {
namespace {

int64_t AttrInt(const OnnxNode& node, const std::string& name, int64_t fallback) {
  auto it = node.ints.find(name);
  return it == node.ints.end() || it->second.empty() ? fallback : it->second[0];
}
float AttrFloat(const OnnxNode& node, const std::string& name, double fallback) {
  auto it = node.floats.find(name);
  return static_cast<float>(it == node.floats.end() || it->second.empty() ? fallback : it->second[0]);
}

int64_t Numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// The largest k with shape[k:] of `cols` elements, or -1.
int SplitOf(const std::vector<int64_t>& shape, int64_t cols) {
  int64_t p = 1;
  for (int k = static_cast<int>(shape.size()); k >= 0; --k) {
    if (k < static_cast<int>(shape.size())) p *= shape[static_cast<size_t>(k)];
    if (p == cols) {
      // the largest k: step back over nothing (a leading dim of 1 would also
      // give cols, and belongs to the rows)
      return k;
    }
    if (p > cols) break;
  }
  return -1;
}

// The column dims of a value of shape s in a domain of reference shape
// `ref` with column dims `cols`: the same elements in the same order, so
// either the columns are ref's trailing dims and s's trailing dims make as
// many elements, or s is ref up to dims of one. Nothing otherwise.
std::optional<std::vector<bool>> ColumnsOf(const std::vector<int64_t>& s, const std::vector<int64_t>& ref,
                                           const std::vector<bool>& cols) {
  if (Numel(s) != Numel(ref)) return std::nullopt;
  int64_t n = 1;
  bool trailing = true, seen = false;
  for (size_t d = 0; d < ref.size(); ++d) {
    if (cols[d]) {
      n *= ref[d];
      seen = true;
    } else if (seen && ref[d] != 1) {
      trailing = false;
    }
  }
  std::vector<bool> out(s.size(), false);
  if (trailing) {
    const int k = SplitOf(s, n);
    if (k < 0) return std::nullopt;
    for (size_t d = static_cast<size_t>(k); d < s.size(); ++d) out[d] = s[d] != 1;
    return out;
  }
  // Match the dims of more than one element, in order.
  size_t j = 0;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] == 1) continue;
    while (j < ref.size() && ref[j] == 1) ++j;
    if (j == ref.size() || ref[j] != s[d]) return std::nullopt;
    out[d] = cols[j++];
  }
  return out;
}

// Whether `in`, numpy-broadcast over `out` (columns `cols`), is one value a
// row: out's extent on its row dims, one on its column dims.
bool BroadcastsPerRow(const std::vector<int64_t>& in, const std::vector<int64_t>& out, const std::vector<bool>& cols) {
  if (in.size() > out.size()) return false;
  const size_t pad = out.size() - in.size();
  for (size_t d = 0; d < out.size(); ++d) {
    const int64_t e = d < pad ? 1 : in[d - pad];
    if (cols[d] ? e != 1 : e != out[d]) return false;
  }
  return true;
}

// The kinds of member, as the ONNX op_type says.
enum class MemberKind : uint8_t { kNone, kMap, kReduce, kSoftmax, kConcat, kMatVec, kLayerNorm };

// The OnnxFunc of the IR's elementwise functions (the CUDA planner's too).
std::optional<ElementwiseFunction> IrFunction(const Op& op) {
  static const std::map<EwFunc, OnnxFunc> kFuncs = {
      {EwFunc::kRelu, kRelu}, {EwFunc::kSigmoid, kSigmoid}, {EwFunc::kTanh, kTanh},
      {EwFunc::kGelu, kGelu}, {EwFunc::kSilu, kSwish},      {EwFunc::kAdd, kAdd},
      {EwFunc::kSub, kSub},   {EwFunc::kMul, kMul},         {EwFunc::kDiv, kDiv}};
  auto f = kFuncs.find(op.attrs.func);
  if (f == kFuncs.end() || op.inputs.size() != (IsUnary(op.attrs.func) ? 1u : 2u)) return std::nullopt;
  ElementwiseFunction e;
  e.func = f->second;
  e.alpha = 1.0f;  // Silu = Swish of alpha 1
  e.inputs = op.inputs.size();
  return e;
}

MemberKind KindOf(const Op& op) {
  if (FamilyOf(op.type) == OpFamily::kElementwise) return IrFunction(op) ? MemberKind::kMap : MemberKind::kNone;
  if (op.type == OpType::kConcatenate) return MemberKind::kConcat;
  if (op.type == OpType::kLayerNorm) return MemberKind::kLayerNorm;  // one, not a group (nor y = x * sigmoid(..))
  if (FamilyOf(op.type) != OpFamily::kOpaque || !op.attrs.onnx) return MemberKind::kNone;
  const OnnxNode& node = *op.attrs.onnx;
  if (!node.domain.empty() && node.domain != "ai.onnx") return MemberKind::kNone;
  const std::string& t = node.op_type;
  if (t == "Softmax" || t == "LogSoftmax") return MemberKind::kSoftmax;
  if (t == "MatMul") return MemberKind::kMatVec;  // where its shapes are a matrix by a vector (ReducedOf)
  if (t == "Concat") return MemberKind::kConcat;
  if (t.starts_with("Reduce")) return MemberKind::kReduce;
  static const std::set<std::string_view> kMaps = {
      "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "PRelu", "Relu", "Sigmoid", "Tanh",
      "Sqrt", "Exp", "Log", "Neg", "Abs", "Erf", "Reciprocal", "Softplus", "LeakyRelu", "Floor",
      "Ceil", "Elu", "HardSigmoid", "Sign", "Gelu", "Selu", "Softsign", "Swish", "Mish",
      // a copy with numpy broadcasting, where it is no view (its readers
      // could not read one): in a region, a read of its input
      "Expand"};
  return kMaps.contains(t) ? MemberKind::kMap : MemberKind::kNone;
}

ReduceKind ReduceKindOf(const std::string& t) {
  static const std::map<std::string_view, ReduceKind> kKinds = {
      {"ReduceSum", kReduceSum},   {"ReduceMean", kReduceMean}, {"ReduceMax", kReduceMax},
      {"ReduceMin", kReduceMin},   {"ReduceProd", kReduceProd}, {"ReduceL1", kReduceL1},
      {"ReduceL2", kReduceL2},     {"ReduceSumSquare", kReduceSumSquare}};
  return kKinds.at(t);
}

// How many recent regions an op that joins no producer's tries to join side by side.
constexpr size_t kSiblingsTried = 4;

class Planner {
 public:
  Planner(const Graph& g, const ViewPlan& v, const PlanConstants& c) : g_(g), v_(v), c_(c) {}

  FusionPlan Run(bool enabled, int64_t product_min_tiles, int64_t ffn_min_rows) {
    FusionPlan plan;
    const std::vector<OpId> order = StableTopologicalOrder(g_);
    pos_.assign(static_cast<size_t>(g_.num_op_ids()), -1);
    for (size_t i = 0; i < order.size(); ++i) pos_[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
    plan.region_of.assign(static_cast<size_t>(g_.num_op_ids()), -1);
    if (!enabled) {
      plan.order = order;
      return plan;
    }
    // Sets of ops grown producer to consumer; set_of: per op id, its set.
    std::vector<std::vector<OpId>>& sets = sets_;
    std::vector<int32_t>& set_of = set_of_;
    sets.clear();
    set_of.assign(static_cast<size_t>(g_.num_op_ids()), -1);
    gate_.assign(static_cast<size_t>(g_.num_op_ids()), 0);
    // Attention and feed-forward chains first, each a set of its own that
    // no other joins (fixed): their ops are no one else's members, and the
    // sets grown next see each chain as one node (Convex).
    chains_.clear();
    for (OpId id : order) {
      std::optional<FusionRegion> chain = AttentionAt(id);
      if (!chain && ffn_min_rows != kNoFfn && (chain = FfnAt(id))) {
        const int64_t need =
            chain->ffn->Gated() && ffn_min_rows > 0 ? std::max(ffn_min_rows, kFfnGatedMinRows) : ffn_min_rows;
        if (chain->ffn->m < need) {
          // (its activation's op: the ops are in order)
          plan.ffn_below_rule[chain->ops[1]] = {chain->ffn->m, need, chain->ffn->Gated()};
          chain.reset();
        }
      }
      // (an op in two chains, one's last MatMul the next one's first: the first only)
      if (!chain || std::any_of(chain->ops.begin(), chain->ops.end(),
                                [&](OpId o) { return set_of[static_cast<size_t>(o)] >= 0; })) {
        continue;
      }
      for (OpId o : chain->ops) set_of[static_cast<size_t>(o)] = static_cast<int32_t>(sets.size());
      sets.push_back(chain->ops);
      chains_[static_cast<int32_t>(sets.size() - 1)] = std::move(*chain);
    }
    auto fixed = [&](int32_t s) { return chains_.count(s) != 0; };
    for (OpId id : order) {
      if (set_of[static_cast<size_t>(id)] >= 0 || !Candidate(id)) continue;
      std::vector<int32_t> producers;
      for (TensorId t : g_.op(id).inputs) {
        const OpId p = ProducerOf(t);
        if (p != kNone && set_of[static_cast<size_t>(p)] >= 0 && !fixed(set_of[static_cast<size_t>(p)])) {
          producers.push_back(set_of[static_cast<size_t>(p)]);
        }
      }
      std::sort(producers.begin(), producers.end());
      producers.erase(std::unique(producers.begin(), producers.end()), producers.end());
      auto try_join = [&](const std::vector<int32_t>& join) {
        std::vector<OpId> m{id};
        for (int32_t s : join) m.insert(m.end(), sets[static_cast<size_t>(s)].begin(), sets[static_cast<size_t>(s)].end());
        SortByPos(m);
        if (!Convex(m) || !Analyze(m)) return false;
        const int32_t into = join.front();
        for (int32_t s : join) {
          if (s != into) sets[static_cast<size_t>(s)].clear();
        }
        sets[static_cast<size_t>(into)] = m;
        for (OpId o : m) set_of[static_cast<size_t>(o)] = into;
        return true;
      };
      // A Concat joins the set that makes its parts; one whose parts no
      // set makes starts a set of its own, which a member reading it may
      // join (a select step), or else is dropped.
      if (KindOf(g_.op(id)) == MemberKind::kConcat) {
        if (producers.size() == 1 && try_join(producers)) continue;
        if (producers.empty()) {
          set_of[static_cast<size_t>(id)] = static_cast<int32_t>(sets.size());
          sets.push_back({id});
        }
        continue;
      }
      bool joined = !producers.empty() && try_join(producers);
      // Else the latest set alone that takes it.
      for (size_t i = producers.size(); !joined && producers.size() > 1 && i-- > 0;) {
        joined = try_join({producers[i]});
      }
      // Else, side by side, a recent set it does not depend on, of the same
      // domain: independent ops of one shape (the tanh of each expert after
      // a group GEMM, the Dice of each attention unit) run as one launch.
      for (size_t i = sets.size(), tried = 0; !joined && i-- > 0 && tried < kSiblingsTried;) {
        if (sets[i].empty() || fixed(static_cast<int32_t>(i)) ||
            std::find(producers.begin(), producers.end(), static_cast<int32_t>(i)) != producers.end() ||
            (sets[i].size() == 1 && KindOf(g_.op(sets[i][0])) == MemberKind::kConcat)) {
          continue;
        }
        ++tried;
        joined = try_join({static_cast<int32_t>(i)});
      }
      if (!joined) {
        set_of[static_cast<size_t>(id)] = static_cast<int32_t>(sets.size());
        sets.push_back({id});
      }
    }
    // Whole sets side by side: a set that took in a Concat grew from it,
    // not beside a peer; independent sets of one domain (each gate's
    // weighted sum of its experts) still run as one launch.
    for (size_t i = 0; i < sets.size(); ++i) {
      if (sets[i].size() < 2 || fixed(static_cast<int32_t>(i))) continue;
      for (size_t j = i, tried = 0; j-- > 0 && tried < kSiblingsTried;) {
        if (sets[j].size() < 2 || fixed(static_cast<int32_t>(j))) continue;
        ++tried;
        std::vector<OpId> m = sets[j];
        m.insert(m.end(), sets[i].begin(), sets[i].end());
        SortByPos(m);
        if (!Convex(m) || !Analyze(m)) continue;
        for (OpId o : sets[i]) set_of[static_cast<size_t>(o)] = static_cast<int32_t>(j);
        sets[j] = std::move(m);
        sets[i].clear();
        break;
      }
    }
    // Gates into the sets that read them (the header's gate member): a
    // softmax whose readers (through views) are all of one other set moves
    // there where that set, with it, still forms a region, and its own set,
    // without it, still does (or is one op, or none: no region). Each
    // softmax of a set moves on its own, into its own readers' set.
    for (OpId id : order) {
      const int32_t from = set_of[static_cast<size_t>(id)];
      if (from < 0 || fixed(from) || KindOf(g_.op(id)) != MemberKind::kSoftmax) continue;
      const std::optional<std::vector<OpId>> readers = Readers(g_.op(id).outputs[0]);
      if (!readers || readers->empty()) continue;
      const int32_t into = set_of[static_cast<size_t>(readers->front())];
      if (into < 0 || into == from || fixed(into) ||
          !std::all_of(readers->begin(), readers->end(),
                       [&](OpId u) { return set_of[static_cast<size_t>(u)] == into; })) {
        continue;
      }
      const std::vector<OpId> before = sets[static_cast<size_t>(from)];
      std::vector<OpId>& left = sets[static_cast<size_t>(from)];
      std::vector<OpId>& joined = sets[static_cast<size_t>(into)];
      left.erase(std::find(left.begin(), left.end(), id));
      joined.push_back(id);
      SortByPos(joined);
      set_of[static_cast<size_t>(id)] = into;
      gate_[static_cast<size_t>(id)] = 1;
      if (Convex(joined) && Analyze(joined) && (left.size() < 2 || (Convex(left) && Analyze(left)))) continue;
      gate_[static_cast<size_t>(id)] = 0;
      set_of[static_cast<size_t>(id)] = from;
      joined.erase(std::find(joined.begin(), joined.end(), id));
      left = before;
    }
    for (size_t i = 0; i < sets.size(); ++i) {
      const std::vector<OpId>& m = sets[i];
      if (m.size() < 2) continue;
      std::optional<FusionRegion> r =
          fixed(static_cast<int32_t>(i)) ? chains_.at(static_cast<int32_t>(i)) : Analyze(m);
      HFUSE_CHECK(r.has_value());
      r->one_lane = OneLane(*r);
      if (!r->Chain()) TakeGemms(*r, i, product_min_tiles);
      for (OpId o : r->ops) plan.region_of[static_cast<size_t>(o)] = static_cast<int32_t>(plan.regions.size());
      plan.regions.push_back(std::move(*r));
    }
    plan.order = RegionOrder(order, plan);
    return plan;
  }

 private:
  // FusionRegion::one_lane: at most kOneLaneMaxCols columns, no chain,
  // and more operands the same along the row (read once a row) than not.
  bool OneLane(const FusionRegion& r) const {
    if (r.Chain() || r.cols < 2 || r.cols > kOneLaneMaxCols) return false;
    size_t same = 0;
    for (const RegionOperand& o : r.operands) {
      bool along = false;  // varies along the row
      if (!o.per_row) {
        const std::vector<int64_t> strides = OperandStrides(g_, v_, o);
        for (size_t d = 0; d < o.over.size(); ++d) {
          along = along || (o.cols[d] && o.over[d] > 1 && strides[d] != 0);
        }
      }
      if (!along) ++same;
    }
    return 2 * same > r.operands.size();
  }

  // The GEMM ops region r (set `set`) alone reads (FusionRegion::products):
  // members of one float type without activation, K at most kMaxProductK,
  // at least `min_tiles` tiles of 64 x 32, whose
  // outputs, each in a buffer of its own, it reads as one value a row of
  // several columns, element r its row r, all of one M and N; the
  // region's rows each in one thread (LanesOf), and the GEMM op with its
  // members still convex. (A region of one column after a GEMM is an
  // epilogue the GEMM kernels take: gemm_launches.cc, AbsorbActivations.)
  // Each such op joins its ops (and the set) and its outputs' operands
  // read the products.
  void TakeGemms(FusionRegion& r, size_t set, int64_t min_tiles) {
    if (LanesOf(r).lanes != 1 || r.cols < 2 || min_tiles == kNoProducts) return;
    // Per GEMM op read: the operands that read its outputs, or none where
    // one of them cannot.
    std::map<OpId, std::vector<size_t>> read;
    std::map<OpId, bool> ok;
    for (size_t k = 0; k < r.operands.size(); ++k) {
      const RegionOperand& o = r.operands[k];
      const TensorId t = OperandTensor(g_, o);
      const TensorId y = t == kNone ? kNone : LayoutOf(t).root;
      const OpId p = y == kNone ? kNone : g_.tensor(y).producer;
      if (p == kNone || !(IsGemm(g_.op(p).type) || IsGroupGemm(g_.op(p).type))) continue;
      read[p].push_back(k);
      const std::vector<int64_t> rm = RowMajorStrides(o.over), st = OperandStrides(g_, v_, o);
      bool same = o.view == kNone && o.per_row && !o.swap_last && LayoutOf(t).offset == 0 &&
                  Numel(o.over) == r.rows;
      for (size_t d = 0; d < o.over.size(); ++d) same = same && (o.over[d] == 1 || st[d] == rm[d]);
      ok.emplace(p, true).first->second &= same;
    }
    for (const auto& [p, operands] : read) {
      if (!ok[p]) continue;
      const Op& op = g_.op(p);
      std::vector<RegionProduct> products;
      bool fits = Runs(p) && r.products.size() + NumMembers(op) <= static_cast<size_t>(kMaxRegionProducts);
      for (size_t m = 0; fits && m < NumMembers(op); ++m) {
        const GemmMember gm = GemmMemberOf(op, m);
        const std::optional<std::vector<OpId>> readers = Readers(gm.y);
        auto in_set = [&](OpId u) { return set_of_[static_cast<size_t>(u)] == static_cast<int32_t>(set); };
        fits = (gm.kind == OpType::kGemmRcr || gm.kind == OpType::kGemmRcrBias) && readers &&
               std::all_of(readers->begin(), readers->end(), in_set);
        const DType type = g_.tensor(gm.y).dtype;
        for (TensorId t : {gm.a, gm.w, gm.bias, gm.y}) {
          fits = fits && (t == kNone || (RegionFloat(type) && g_.tensor(t).dtype == type &&
                                         LayoutOf(t).root != kNone && LayoutOf(t).root_dtype == type));
        }
        if (!fits) break;
        const std::vector<int64_t>& ys = Shape(gm.y);
        const std::vector<int64_t>& ws = Shape(gm.w);
        const Layout& yl = LayoutOf(gm.y);
        fits = !ys.empty() && ws.size() == 2 && ws[0] == ys.back() &&
               (gm.bias == kNone || Numel(Shape(gm.bias)) == ys.back()) && yl.root == gm.y && yl.offset == 0 &&
               IsRowMajor(yl, ys) &&
               RowStride(LayoutOf(gm.a), Shape(gm.a)).has_value() && IsRowMajor(LayoutOf(gm.w), ws) &&
               (gm.bias == kNone || IsRowMajor(LayoutOf(gm.bias), Shape(gm.bias)));
        if (!fits) break;
        RegionProduct q{p, m, gm.a, gm.w, gm.bias, gm.y, Numel(ys) / std::max<int64_t>(ys.back(), 1), ys.back(), ws[1],
                        *RowStride(LayoutOf(gm.a), Shape(gm.a)), type};
        // (a grid of at most 65535 tiles of 64 rows)
        fits = q.m * q.n == r.rows && q.k > 0 && q.k <= kMaxProductK && Numel(Shape(gm.a)) == q.m * q.k &&
               q.m <= 65535 * 64 && (q.m + 63) / 64 * ((q.n + 31) / 32) >= min_tiles &&
               (r.products.empty() || (r.products[0].m == q.m && r.products[0].n == q.n));
        products.push_back(q);
      }
      if (!fits) continue;
      std::vector<OpId> with = r.ops;
      with.push_back(p);
      SortByPos(with);
      if (!Convex(with)) continue;
      r.ops = with;
      sets_[set] = with;
      set_of_[static_cast<size_t>(p)] = static_cast<int32_t>(set);
      const auto first = static_cast<int32_t>(r.products.size());
      r.products.insert(r.products.end(), products.begin(), products.end());
      for (size_t k : operands) {
        const TensorId y = LayoutOf(OperandTensor(g_, r.operands[k])).root;
        for (size_t q = 0; q < products.size(); ++q) {
          if (products[q].y == y) r.operands[k].product = first + static_cast<int32_t>(q);
        }
      }
    }
  }

  const Graph& g_;
  const ViewPlan& v_;
  const PlanConstants& c_;
  std::vector<int64_t> pos_;
  // The sets grown so far (each in order; a joined set left empty) and,
  // per op id, its set or -1.
  std::vector<std::vector<OpId>> sets_;
  std::vector<int32_t> set_of_;
  // Per op id: 1 for a softmax moved into its readers' set as a gate.
  std::vector<char> gate_;
  // The attention and feed-forward chains' regions, by their set.
  std::map<int32_t, FusionRegion> chains_;

  bool IsOnnx(const Op& op, std::string_view type) const {
    return FamilyOf(op.type) == OpFamily::kOpaque && op.attrs.onnx &&
           (op.attrs.onnx->domain.empty() || op.attrs.onnx->domain == "ai.onnx") && op.attrs.onnx->op_type == type;
  }
  // t is read by exactly one op, `reader`, and is no graph output.
  bool OnlyReader(TensorId t, OpId reader) const {
    return t != kNone && !g_.IsGraphOutput(t) && g_.tensor(t).users.size() == 1 && g_.tensor(t).users[0] == reader;
  }

  // The attention chain (AttentionChain) whose last MatMul is m2, or nothing.
  std::optional<FusionRegion> AttentionAt(OpId m2) const {
    const Op& second = g_.op(m2);
    if (!IsOnnx(second, "MatMul") || !Runs(m2) || second.outputs.size() != 1) return std::nullopt;
    const TensorId p = NodeInput(second, 0), v = NodeInput(second, 1), o = second.outputs[0];
    if (p == kNone || v == kNone || g_.tensor(p).producer == kNone) return std::nullopt;
    const OpId sm = g_.tensor(p).producer;
    const Op& softmax = g_.op(sm);
    if (!IsOnnx(softmax, "Softmax") || !Runs(sm) || !OnlyReader(p, m2)) return std::nullopt;
    const auto rank = static_cast<int64_t>(Shape(p).size());
    int64_t axis = AttrInt(*softmax.attrs.onnx, "axis", softmax.attrs.onnx->opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    if (axis != rank - 1) return std::nullopt;  // (before opset 13, the rows from axis on: the same)
    TensorId x = NodeInput(softmax, 0);
    if (x == kNone || g_.tensor(x).producer == kNone || !OnlyReader(x, sm)) return std::nullopt;
    AttentionChain chain;
    std::vector<OpId> ops{sm, m2};
    OpId m1 = g_.tensor(x).producer;
    // A division or product by one constant between the MatMul and the softmax.
    const Op& mid = g_.op(m1);
    const bool ir = FamilyOf(mid.type) == OpFamily::kElementwise && mid.inputs.size() == 2;
    const bool mul = ir ? mid.attrs.func == EwFunc::kMul : IsOnnx(mid, "Mul");
    const bool div = ir ? mid.attrs.func == EwFunc::kDiv : IsOnnx(mid, "Div");
    if ((mul || div) && Runs(m1) && Slots(mid) == 2) {
      int32_t scores = -1;
      for (int32_t slot : {1, 0}) {
        if (div && slot == 0) break;
        if (const std::optional<float> c = ScalarOf(mid, static_cast<size_t>(slot)); c && NodeInput(mid, 1 - slot) != kNone) {
          chain.scale = *c;
          scores = 1 - slot;
          break;
        }
      }
      if (scores < 0) return std::nullopt;
      x = NodeInput(mid, static_cast<size_t>(scores));
      if (g_.tensor(x).producer == kNone || !OnlyReader(x, m1) || Shape(x) != Shape(mid.outputs[0])) return std::nullopt;
      chain.divide = div;
      ops.insert(ops.begin(), m1);
      m1 = g_.tensor(x).producer;
    }
    const Op& first = g_.op(m1);
    if (!IsOnnx(first, "MatMul") || !Runs(m1) || first.outputs.size() != 1) return std::nullopt;
    ops.insert(ops.begin(), m1);
    const TensorId q = NodeInput(first, 0), kt = NodeInput(first, 1);
    // V is no value of the chain (MatMul(p, p): its users list names the
    // MatMul once), which has no buffer.
    if (v == p || v == x || v == first.outputs[0]) return std::nullopt;
    // One type for all (RegionFloat: the kernel reads 16-bit ones into float32).
    if (o == kNone || !RegionFloat(g_.tensor(o).dtype)) return std::nullopt;
    const DType type = g_.tensor(o).dtype;
    for (TensorId t : {q, kt, v, o, x, p}) {
      if (t == kNone || g_.tensor(t).dtype != type) return std::nullopt;
    }
    for (TensorId t : {q, kt, v, o}) {
      const Layout& l = LayoutOf(t);
      if (l.root == kNone || l.root_dtype != type || Shape(t).size() < 2) return std::nullopt;
    }
    const std::vector<int64_t>&qs = Shape(q), &ks = Shape(kt), &vs = Shape(v), &os = Shape(o);
    const int64_t sq = qs[qs.size() - 2], d = qs.back(), sk = ks.back(), dv = vs.back();
    if (ks[ks.size() - 2] != d || vs[vs.size() - 2] != sk || os[os.size() - 2] != sq || os.back() != dv ||
        d < 1 || dv < 1 || d > kMaxAttentionHead || dv > kMaxAttentionHead || sk < 1 ||
        os.size() - 2 > static_cast<size_t>(kMaxAttentionBatchDims) || Shape(p).size() != os.size()) {
      return std::nullopt;
    }
    // Each operand's batch dims broadcast onto O's.
    for (const std::vector<int64_t>* s : {&qs, &ks, &vs}) {
      if (s->size() > os.size()) return std::nullopt;
      const size_t lead = os.size() - s->size();
      for (size_t i = 0; i + 2 < s->size(); ++i) {
        if ((*s)[i] != 1 && (*s)[i] != os[lead + i]) return std::nullopt;
      }
    }
    FusionRegion r;
    r.attention = chain;
    r.ops = ops;
    r.rows = Numel(os) / dv;
    r.cols = sk;
    for (const auto& [op, slot] : {std::pair{m1, 0}, {m1, 1}, {m2, 1}}) {
      RegionOperand operand;
      operand.op = op;
      operand.slot = slot;
      operand.over = Shape(NodeInput(g_.op(op), static_cast<size_t>(slot)));
      operand.dtype = type;
      r.operands.push_back(std::move(operand));
    }
    const Layout& ol = LayoutOf(o);
    r.outputs.push_back({o, 0, os, std::vector<bool>(os.size(), false), ol.root, ol.offset, ol.strides, type});
    return r;
  }

  // An elementwise op that runs (an IR one or an ONNX node) whose one
  // output is `out`, read (through views) only by `reader`: its function,
  // or nothing.
  std::optional<ElementwiseFunction> OnlyFeeds(TensorId out, OpId reader) const {
    const OpId id = out == kNone ? kNone : g_.tensor(out).producer;
    if (id == kNone || !Runs(id)) return std::nullopt;
    const Op& op = g_.op(id);
    const std::optional<std::vector<OpId>> readers = Readers(out);
    if (op.outputs.size() != 1 || op.outputs[0] != out || !readers || *readers != std::vector<OpId>{reader} ||
        KindOf(op) != MemberKind::kMap) {
      return std::nullopt;
    }
    std::string why;
    return FamilyOf(op.type) == OpFamily::kElementwise ? IrFunction(op) : ElementwiseFunctionOf(*op.attrs.onnx, why);
  }

  // The feed-forward chain (FfnChain) whose second GEMM is g2, or nothing.
  std::optional<FusionRegion> FfnAt(OpId g2) const {
    const Op& second = g_.op(g2);
    if (!IsGemm(second.type) || NumMembers(second) != 1 || !Runs(g2)) return std::nullopt;
    const GemmMember m2 = GemmMemberOf(second, 0);
    // The activation: its output (through views) read only by g2, as A; or,
    // gated, a Mul's so read, of a view of the first GEMM's output (the
    // value) and the activation's output, which only the Mul reads.
    const TensorId h = LayoutOf(m2.a).root;
    if (h == kNone || h == m2.w || h == m2.bias) return std::nullopt;
    std::optional<ElementwiseFunction> f = OnlyFeeds(h, g2);
    if (!f) return std::nullopt;
    const OpId top = g_.tensor(h).producer;
    OpId act_id = top;
    TensorId value = kNone;
    if (f->inputs == 2 && f->func == static_cast<int32_t>(kMul)) {
      for (size_t i = 0; i < 2 && value == kNone; ++i) {
        const TensorId gated = InputOf(g_.op(top), 1 - i);
        if (gated == kNone || LayoutOf(gated).root != gated || !(f = OnlyFeeds(gated, top))) continue;
        act_id = g_.tensor(gated).producer;
        value = InputOf(g_.op(top), i);
      }
      if (value == kNone) return std::nullopt;
    }
    const TensorId u = InputOf(g_.op(act_id), 0);
    if (!f || f->inputs != 1 || u == kNone || LayoutOf(u).root == kNone) return std::nullopt;
    // The first GEMM: its output (through views) read only by the
    // activation (gated: and the Mul, through the two halves).
    const TensorId y1 = LayoutOf(u).root;
    const OpId g1 = g_.tensor(y1).producer;
    if (g1 == kNone || !IsGemm(g_.op(g1).type) || NumMembers(g_.op(g1)) != 1 || !Runs(g1)) return std::nullopt;
    const GemmMember m1 = GemmMemberOf(g_.op(g1), 0);
    std::optional<std::vector<OpId>> y1_readers = Readers(y1);
    if (y1_readers) std::sort(y1_readers->begin(), y1_readers->end());
    std::vector<OpId> want_readers{act_id};
    if (value != kNone) want_readers = {std::min(act_id, top), std::max(act_id, top)};
    if (m1.y != y1 || !y1_readers || *y1_readers != want_readers) return std::nullopt;
    for (const GemmMember& m : {m1, m2}) {
      if (m.kind != OpType::kGemmRcr && m.kind != OpType::kGemmRcrBias) return std::nullopt;
    }
    // One type, float32; the weights and biases row-major, x's and y's rows
    // whole float4s apart (16-byte aligned: the buffers are 256).
    for (TensorId t : {m1.a, m1.w, m1.bias, m1.y, h, u, m2.w, m2.bias, m2.y}) {
      if (t != kNone && (g_.tensor(t).dtype != DType::kFloat32 || LayoutOf(t).root == kNone ||
                         LayoutOf(t).root_dtype != DType::kFloat32)) {
        return std::nullopt;
      }
    }
    const std::vector<int64_t>&w1s = Shape(m1.w), &w2s = Shape(m2.w), &xs = Shape(m1.a), &ys = Shape(m2.y);
    if (w1s.size() != 2 || w2s.size() != 2 || xs.empty() || ys.empty() || !IsRowMajor(LayoutOf(m1.w), w1s) ||
        !IsRowMajor(LayoutOf(m2.w), w2s)) {
      return std::nullopt;
    }
    for (TensorId b : {m1.bias, m2.bias}) {
      if (b != kNone && !IsRowMajor(LayoutOf(b), Shape(b))) return std::nullopt;
    }
    FfnChain c;
    c.x = m1.a, c.w1 = m1.w, c.b1 = m1.bias, c.w2 = m2.w, c.b2 = m2.bias, c.y = m2.y;
    c.in = w1s[1], c.hidden = w2s[1], c.out = w2s[0];
    c.m = Numel(xs) / std::max<int64_t>(c.in, 1);
    c.act = f->func, c.alpha = f->alpha, c.beta = f->beta;
    const int64_t w1_rows = value == kNone ? c.hidden : 2 * c.hidden;
    if (value != kNone) {
      // The halves: each `hidden` columns of y1's rows, one at 0, the other
      // at `hidden`, of the Mul's shape (no broadcast).
      const std::optional<int64_t> lv = RowStride(LayoutOf(value), Shape(value)), lu = RowStride(LayoutOf(u), Shape(u));
      const int64_t ov = LayoutOf(value).offset, ou = LayoutOf(u).offset;
      if (LayoutOf(value).root != y1 || Shape(value) != Shape(h) || Shape(u) != Shape(h) || Shape(h).empty() ||
          Shape(h).back() != c.hidden || lv != w1_rows || lu != w1_rows || ov + ou != c.hidden ||
          (ov != 0 && ou != 0) || g_.tensor(value).dtype != DType::kFloat32) {
        return std::nullopt;
      }
      c.value_row = ov, c.gate_row = ou;
    }
    const std::optional<int64_t> ldx = RowStride(LayoutOf(c.x), xs), ldy = RowStride(LayoutOf(c.y), ys);
    if (xs.back() != c.in || ys.back() != c.out || w1s[0] != w1_rows || Numel(ys) != c.m * c.out ||
        (c.b1 != kNone && Numel(Shape(c.b1)) != w1_rows) || (c.b2 != kNone && Numel(Shape(c.b2)) != c.out) ||
        Numel(Shape(u)) != c.m * c.hidden || Numel(Shape(h)) != c.m * c.hidden || !FfnWidth(c.in) ||
        !FfnWidth(c.out) || FfnSharedBytes(c.in, c.hidden, c.out, c.Gated()) > kFfnMaxSharedBytes || !ldx || !ldy ||
        *ldx % 4 != 0 || *ldy % 4 != 0 || LayoutOf(c.x).offset % 4 != 0 || LayoutOf(c.y).offset % 4 != 0) {
      return std::nullopt;
    }
    FusionRegion r;
    r.ffn = c;
    r.ops = {g1, act_id, g2};
    if (value != kNone) r.ops.push_back(top);
    SortByPos(r.ops);
    r.rows = c.m;
    r.cols = c.out;
    const Layout& yl = LayoutOf(c.y);
    r.outputs.push_back({c.y, 0, ys, std::vector<bool>(ys.size(), false), yl.root, yl.offset, yl.strides,
                         DType::kFloat32});
    return r;
  }

  const std::vector<int64_t>& Shape(TensorId t) const { return v_.shape[static_cast<size_t>(t)]; }
  const Layout& LayoutOf(TensorId t) const { return v_.layout[static_cast<size_t>(t)]; }
  bool Runs(OpId id) const { return !g_.op(id).elided && !v_.skip[static_cast<size_t>(id)]; }

  void SortByPos(std::vector<OpId>& m) const {
    std::sort(m.begin(), m.end(), [&](OpId a, OpId b) { return pos_[static_cast<size_t>(a)] < pos_[static_cast<size_t>(b)]; });
  }

  // An op that may be a member: a kind above, a float out (RegionFloat),
  // its output in a buffer of its own, row-major.
  bool Candidate(OpId id) const {
    const Op& op = g_.op(id);
    if (!op.alive || !Runs(id) || KindOf(op) == MemberKind::kNone || op.outputs.size() != 1) return false;
    // An Add of a bias row to an embedding lookup's rows (a Gather's, or a
    // member's of a group_gather): the batched lookup takes it in (the CUDA
    // planner's AddIntoGather), which costs no launch at all. (A residual
    // Add of as many elements it cannot take.)
    const bool add = op.attrs.onnx ? op.attrs.onnx->op_type == "Add"
                                   : FamilyOf(op.type) == OpFamily::kElementwise && op.attrs.func == EwFunc::kAdd;
    if (add && Slots(op) == 2) {
      for (size_t k = 0; k < 2; ++k) {
        const OpId p = ProducerOf(NodeInput(op, k));
        if (p == kNone) continue;
        const Op& producer = g_.op(p);
        const TensorId other = NodeInput(op, 1 - k);
        if ((IsGroupGather(producer.type) || (producer.attrs.onnx && producer.attrs.onnx->op_type == "Gather")) &&
            (other == kNone || Numel(Shape(other)) < Numel(Shape(op.outputs[0])))) {
          return false;
        }
      }
    }
    const TensorId y = op.outputs[0];
    const Layout& l = LayoutOf(y);
    // A Concat writes its parts through its output's layout, which may be
    // its slot in an outer concatenate written in place (ConcatInto); so
    // does any member whose output is such a slot (view_plan.h: an
    // elementwise op's output, or a LayerNorm's, laid out there; the
    // concatenate wholly in place or copying its other parts).
    const OpId outer = l.root != kNone && l.root != y ? g_.tensor(l.root).producer : kNone;
    const bool in_slot = outer != kNone && !v_.in_slot[static_cast<size_t>(outer)].empty();
    const bool placed = (KindOf(op) == MemberKind::kConcat && l.root != kNone) || in_slot;
    return RegionFloat(g_.tensor(y).dtype) && (placed || (l.root == y && l.offset == 0 && IsRowMajor(l, Shape(y)))) &&
           l.root_dtype == g_.tensor(y).dtype && Shape(y).size() <= 8;
  }

  // The op whose output t is the same elements of (t itself, or a reshape
  // view of it), or kNone.
  OpId ProducerOf(TensorId t) const {
    if (t == kNone) return kNone;
    const Layout& l = LayoutOf(t);
    if (l.root == kNone || l.offset != LayoutOf(l.root).offset || l.root_dtype != g_.tensor(l.root).dtype ||
        !IsRowMajor(l, Shape(t))) {
      return kNone;
    }
    return g_.tensor(l.root).producer;
  }

  TensorId NodeInput(const Op& op, size_t slot) const { return InputOf(op, slot); }
  const OnnxNode::Value* NodeConstant(const Op& op, size_t slot) const { return ConstantOf(op, slot); }
  size_t Slots(const Op& op) const {
    return !op.attrs.onnx || op.attrs.onnx->input_slots.empty() ? op.inputs.size() : op.attrs.onnx->input_slots.size();
  }

  // Whether an op outside `m` (or the graph's outputs) reads t, through views.
  bool ReadOutside(TensorId t, const std::vector<OpId>& m) const {
    if (g_.IsGraphOutput(t)) return true;
    for (OpId u : g_.tensor(t).users) {
      if (std::find(m.begin(), m.end(), u) != m.end()) continue;
      const Op& op = g_.op(u);
      if (op.elided) continue;
      if (!v_.view_op[static_cast<size_t>(u)]) return true;
      for (TensorId out : op.outputs) {
        if (ReadOutside(out, m)) return true;
      }
    }
    return false;
  }

  // The ops that read t, through views; nothing where a graph output is t
  // or a view of it.
  std::optional<std::vector<OpId>> Readers(TensorId t) const {
    if (g_.IsGraphOutput(t)) return std::nullopt;
    std::vector<OpId> out;
    for (OpId u : g_.tensor(t).users) {
      const Op& op = g_.op(u);
      if (op.elided) continue;
      if (!v_.view_op[static_cast<size_t>(u)]) {
        out.push_back(u);
        continue;
      }
      for (TensorId y : op.outputs) {
        const std::optional<std::vector<OpId>> through = Readers(y);
        if (!through) return std::nullopt;
        out.insert(out.end(), through->begin(), through->end());
      }
    }
    return out;
  }

  // No op that runs lies on a path between two members, in the graph where
  // every other set of two or more ops is one node (it will run as one
  // launch): each region convex on its own is not enough, since regions
  // A and B with a1 -> b2 and b1 -> a2 would wait for each other.
  bool Convex(const std::vector<OpId>& m) const {
    const size_t n = static_cast<size_t>(g_.num_op_ids());
    std::vector<char> in(n, 0), down(n, 0), up(n, 0);
    for (OpId o : m) in[static_cast<size_t>(o)] = 1;
    // The other set an op is contracted into, or nothing.
    auto set_of = [&](OpId o) -> const std::vector<OpId>* {
      const int32_t s = set_of_.empty() ? -1 : set_of_[static_cast<size_t>(o)];
      if (s < 0 || sets_[static_cast<size_t>(s)].size() < 2 || in[static_cast<size_t>(o)]) return nullptr;
      return &sets_[static_cast<size_t>(s)];
    };
    // The window the searches keep to: [lo, hi] of m, widened until no
    // other set straddles either end (a path that leaves the window
    // cannot come back into it but through such a set).
    int64_t lo = pos_[static_cast<size_t>(m.front())], hi = pos_[static_cast<size_t>(m.back())];
    for (bool widened = true; widened;) {
      widened = false;
      for (const std::vector<OpId>& set : sets_) {
        if (set.size() < 2 || in[static_cast<size_t>(set.front())]) continue;
        const int64_t first = pos_[static_cast<size_t>(set.front())], last = pos_[static_cast<size_t>(set.back())];
        if (first <= hi && last > hi) hi = last, widened = true;
        if (first < lo && last >= lo) lo = first, widened = true;
      }
    }
    std::vector<OpId> stack(m.begin(), m.end());
    auto reach_down = [&](OpId u) {
      if (pos_[static_cast<size_t>(u)] < 0 || pos_[static_cast<size_t>(u)] > hi || down[static_cast<size_t>(u)] ||
          in[static_cast<size_t>(u)]) {
        return;
      }
      down[static_cast<size_t>(u)] = 1;
      stack.push_back(u);
    };
    while (!stack.empty()) {  // below the members, above the last
      const OpId o = stack.back();
      stack.pop_back();
      if (const std::vector<OpId>* set = set_of(o)) {
        for (OpId u : *set) reach_down(u);
      }
      for (TensorId t : g_.op(o).outputs) {
        for (OpId u : g_.tensor(t).users) reach_down(u);
      }
    }
    stack.assign(m.begin(), m.end());
    bool cycle = false;
    auto reach_up = [&](OpId p) {
      const int64_t at = pos_[static_cast<size_t>(p)];
      if (at < 0 || at < lo || up[static_cast<size_t>(p)] || in[static_cast<size_t>(p)]) return;
      up[static_cast<size_t>(p)] = 1;
      if (down[static_cast<size_t>(p)] && (Runs(p) || set_of(p))) cycle = true;
      stack.push_back(p);
    };
    while (!stack.empty() && !cycle) {  // above the members, below the first
      const OpId o = stack.back();
      stack.pop_back();
      if (const std::vector<OpId>* set = set_of(o)) {
        for (OpId p : *set) reach_up(p);
      }
      for (TensorId t : g_.op(o).inputs) {
        if (t != kNone && g_.tensor(t).producer != kNone) reach_up(g_.tensor(t).producer);
      }
    }
    return !cycle;
  }

 public:
  // The region of members m (in order), or nothing where they cannot form one.
  std::optional<FusionRegion> Analyze(const std::vector<OpId>& m) const {
    FusionRegion r;
    r.ops = m;
    // The domain: a reference shape and its column dims. With reductions
    // (and softmaxes), the first one's input and the dims it reduces;
    // without, the members' sizes: all one (one column), or two, the
    // larger a multiple of the smaller (the trailing dims of the larger
    // make the columns, the smaller is one value a row).
    std::vector<int64_t> ref;
    std::vector<bool> ref_cols;
    for (OpId id : m) {
      const Op& op = g_.op(id);
      if (KindOf(op) == MemberKind::kMap || KindOf(op) == MemberKind::kConcat || gate_[static_cast<size_t>(id)]) {
        continue;
      }
      const std::optional<std::vector<bool>> red = ReducedOf(op);
      if (!red) return std::nullopt;
      const std::vector<int64_t>& xs = Shape(NodeInput(op, 0));
      if (ref.empty()) {
        ref = xs;
        ref_cols = *red;
      } else if (ColumnsOf(xs, ref, ref_cols) != *red) {
        return std::nullopt;
      }
    }
    // Without reductions, a Concat that members read sets the domain: its
    // axis the columns (a select step needs it so).
    for (OpId id : m) {
      if (!ref.empty()) break;
      const Op& op = g_.op(id);
      if (KindOf(op) != MemberKind::kConcat || !ReadByMember(id, m)) continue;
      const std::optional<size_t> axis = ConcatAxis(op);
      if (!axis) return std::nullopt;
      ref = Shape(op.outputs[0]);
      ref_cols.assign(ref.size(), false);
      ref_cols[*axis] = true;
    }
    if (ref.empty()) {
      std::set<int64_t> sizes;
      for (OpId o : m) {
        if (KindOf(g_.op(o)) != MemberKind::kConcat && !gate_[static_cast<size_t>(o)]) {
          sizes.insert(Numel(Shape(g_.op(o).outputs[0])));
        }
      }
      if (sizes.empty()) return std::nullopt;
      if (sizes.size() > 2) return std::nullopt;
      const int64_t big = *sizes.rbegin(), small = *sizes.begin();
      if (small <= 0 || big % small != 0) return std::nullopt;
      for (OpId o : m) {
        if (KindOf(g_.op(o)) != MemberKind::kConcat && !gate_[static_cast<size_t>(o)] &&
            Numel(Shape(g_.op(o).outputs[0])) == big) {
          ref = Shape(g_.op(o).outputs[0]);
          break;
        }
      }
      const int k = SplitOf(ref, big / small);
      if (k < 0) return std::nullopt;
      ref_cols.assign(ref.size(), false);
      for (size_t d = static_cast<size_t>(k); d < ref.size(); ++d) ref_cols[d] = ref[d] != 1;
    }
    r.rows = r.cols = 1;
    for (size_t d = 0; d < ref.size(); ++d) (ref_cols[d] ? r.cols : r.rows) *= ref[d];
    const int64_t rows = r.rows, cols = r.cols;
    if (cols > kMaxRegionCols || rows <= 0 || rows * cols >= (int64_t{1} << 31)) return std::nullopt;
    // A value of shape s: per element (its column dims), per row, or neither.
    auto per_element = [&](const std::vector<int64_t>& s) { return ColumnsOf(s, ref, ref_cols); };
    auto per_row = [&](const std::vector<int64_t>& s) { return Numel(s) == rows; };
    std::map<OpId, int32_t> step_of;
    std::map<std::tuple<TensorId, OpId, int32_t, std::vector<int64_t>, bool, bool, TensorId>, int32_t> operand_of;
    // Slot `slot` of member `op` read from memory over `over` (as `view`
    // would be: a gate's input).
    auto operand = [&](const Op& op, OpId id, size_t slot, const std::vector<int64_t>& over, bool row,
                       bool swap_last = false, TensorId view = kNone) -> std::optional<int32_t> {
      RegionOperand o{id, static_cast<int32_t>(slot), over, {}, row, swap_last, view};
      if (row) {
        o.cols.assign(over.size(), false);
      } else {
        std::optional<std::vector<bool>> c = per_element(over);
        if (!c) return std::nullopt;
        o.cols = *c;
      }
      const TensorId t = NodeInput(op, slot);
      if (t != kNone) {
        const Layout& l = LayoutOf(t);
        if (!RegionFloat(g_.tensor(t).dtype) || l.root == kNone || l.root_dtype != g_.tensor(t).dtype ||
            Shape(view != kNone ? view : t).size() > over.size()) {
          return std::nullopt;
        }
        // A member's value read any other way than as its elements would
        // be read while the region writes it; so would a buffer a member
        // writes into (a Concat member's slot in an outer concatenate).
        const OpId p = g_.tensor(l.root).producer;
        if (p != kNone && std::find(m.begin(), m.end(), p) != m.end()) return std::nullopt;
        for (OpId u : m) {
          if (LayoutOf(g_.op(u).outputs[0]).root == l.root) return std::nullopt;
        }
      } else {
        const OnnxNode::Value* c = NodeConstant(op, slot);
        if (!c || !RegionFloat(c->dtype) || c->dims.size() > over.size()) return std::nullopt;
      }
      // One operand per tensor and way of reading it (a node's constant per node).
      const auto key = std::make_tuple(t, t == kNone ? id : kNone, t == kNone ? o.slot : -1, over, row, swap_last, view);
      auto it = operand_of.find(key);
      if (it != operand_of.end()) return it->second;
      const auto k = static_cast<int32_t>(r.operands.size());
      r.operands.push_back(std::move(o));
      operand_of.emplace(key, k);
      return k;
    };
    // A gate's output read through view t over `over` (per element): its
    // softmax of its input read the same way, one step per way of reading
    // it. Only where each row of the domain reads one whole softmax lane in
    // order: the columns step along the axis, the rows only across lanes
    // (or not at all).
    std::map<std::tuple<OpId, TensorId, std::vector<int64_t>, bool>, int32_t> gate_step_of;
    auto gate = [&](OpId id, TensorId t, const std::vector<int64_t>& over, bool swap_last) -> std::optional<int32_t> {
      const auto key = std::make_tuple(id, t, over, swap_last);
      if (auto it = gate_step_of.find(key); it != gate_step_of.end()) return it->second;
      const Op& op = g_.op(id);
      const TensorId x = NodeInput(op, 0);
      const std::optional<std::vector<bool>> c = per_element(over);
      const std::optional<cpu::AxisView> a = x == kNone ? std::nullopt : cpu::SoftmaxView(*op.attrs.onnx, Shape(x));
      // (the output is its own row-major buffer, Candidate says; so must
      // the input be, for the view's strides to find its elements)
      if (!c || !a || a->len != cols || !RegionFloat(g_.tensor(t).dtype) || LayoutOf(t).offset != 0 ||
          !IsRowMajor(LayoutOf(x), Shape(x)) || Shape(x).size() > over.size()) {
        return std::nullopt;
      }
      std::vector<int64_t> from = Shape(t), strides = LayoutOf(t).strides;
      if (swap_last && from.size() >= 2) {
        std::swap(from[from.size() - 1], from[from.size() - 2]);
        std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
      }
      if (from.size() > over.size()) return std::nullopt;
      int64_t along = a->inner;  // the stride the next column dim (last first) must have
      for (size_t d = over.size(); d-- > 0;) {
        // numpy broadcasting: `from` right-aligned, 0 where it has 1 or no dim
        const bool has = d + from.size() >= over.size();
        const size_t f = has ? d + from.size() - over.size() : 0;
        const int64_t stride = !has || from[f] == 1 ? 0 : strides[f];
        if ((*c)[d]) {
          if (stride != along) return std::nullopt;
          along *= over[d];
        } else if (stride % (a->len * a->inner) != 0) {
          return std::nullopt;
        }
      }
      const std::optional<int32_t> k = operand(op, id, 0, over, false, swap_last, t);
      if (!k) return std::nullopt;
      RegionStep st;
      st.kind = op.attrs.onnx->op_type == "LogSoftmax" ? RegionStep::Kind::kLogSoftmax : RegionStep::Kind::kSoftmax;
      st.op = id;
      st.args[0] = -1 - *k;
      st.num_args = 1;
      const auto s = static_cast<int32_t>(r.steps.size());
      r.steps.push_back(st);
      gate_step_of.emplace(key, s);
      return s;
    };
    // Slot `slot` of member `op` read over `over` where no member's value
    // is its elements: a gate's value, or an operand (as an argument: a
    // step, or -1 - the operand).
    auto read = [&](const Op& op, OpId id, size_t slot, const std::vector<int64_t>& over, bool row,
                    bool swap_last = false) -> std::optional<int32_t> {
      const TensorId t = NodeInput(op, slot);
      const TensorId root = t == kNone ? kNone : LayoutOf(t).root;
      const OpId p = root == kNone ? kNone : g_.tensor(root).producer;
      if (p != kNone && gate_[static_cast<size_t>(p)] && std::find(m.begin(), m.end(), p) != m.end()) {
        if (row) return std::nullopt;
        return gate(p, t, over, swap_last);
      }
      const std::optional<int32_t> k = operand(op, id, slot, over, row, swap_last);
      if (!k) return std::nullopt;
      return -1 - *k;
    };
    for (OpId id : m) {
      const Op& op = g_.op(id);
      const MemberKind kind = KindOf(op);
      const std::vector<int64_t>& ys = Shape(op.outputs[0]);
      if (gate_[static_cast<size_t>(id)]) {
        // Its steps come where members read it; its output is not written.
        if (ReadOutside(op.outputs[0], m)) return std::nullopt;
        continue;
      }
      if (kind == MemberKind::kConcat && ReadByMember(id, m)) {
        if (!Select(op, id, m, r, step_of, ref, ref_cols, operand)) return std::nullopt;
        continue;
      }
      if (kind == MemberKind::kConcat) {
        if (!ConcatInto(op, id, m, r, step_of, per_element, per_row, operand)) return std::nullopt;
        continue;
      }
      RegionStep st;
      st.op = id;
      st.per_row = !per_element(ys);
      if (st.per_row && !per_row(ys)) return std::nullopt;
      // Argument `slot` read over `over`: a member's value (as its
      // elements, or a per-row value broadcast along the row), or an operand.
      auto argument = [&](size_t slot, const std::vector<int64_t>& over, bool row) -> std::optional<int32_t> {
        const TensorId t = NodeInput(op, slot);
        const OpId p = ProducerOf(t);
        auto it = p == kNone ? step_of.end() : step_of.find(p);
        if (it == step_of.end()) return read(op, id, slot, over, row);
        const RegionStep& from = r.steps[static_cast<size_t>(it->second)];
        const std::vector<int64_t>& ts = Shape(t);
        if (from.per_row) {
          if (!per_row(ts)) return std::nullopt;
          if (!row && !BroadcastsPerRow(ts, over, *per_element(over))) return std::nullopt;
        } else if (row || Numel(ts) != Numel(over) || !per_element(ts)) {
          return std::nullopt;
        }
        return it->second;
      };
      if (kind == MemberKind::kMap) {
        std::string why;
        const bool expand = op.attrs.onnx && op.attrs.onnx->op_type == "Expand";
        const std::optional<ElementwiseFunction> f =
            expand ? ElementwiseFunction{kCopy, 1.0f, 0.5f, 1}
                   : op.attrs.onnx ? ElementwiseFunctionOf(*op.attrs.onnx, why) : IrFunction(op);
        if (!f || (!expand && Slots(op) != f->inputs) || f->inputs > 3) return std::nullopt;
        st.kind = RegionStep::Kind::kMap;
        st.func = f->func;
        st.alpha = f->alpha;
        st.beta = f->beta;
        st.num_args = static_cast<int32_t>(f->inputs);
        // x ** 2 (Dice's variance, a LayerNorm written out): a product, not
        // powf (tens of instructions an element), its exponent not read.
        const bool square = st.func == kPow && ScalarOf(op, 1) == 2.0f;
        if (square) st.func = kMul;
        for (size_t k = 0; k < f->inputs; ++k) {
          const std::optional<int32_t> a = square && k == 1 ? st.args[0] : argument(k, ys, st.per_row);
          if (!a) return std::nullopt;
          st.args[k] = *a;
        }
      } else if (kind == MemberKind::kMatVec) {
        // A product over the domain (the vector read across the row), then its sum.
        if (!st.per_row) return std::nullopt;
        // (the vector is read from memory, or a gate's: a member's value
        // it cannot be, operand() says)
        const std::vector<int64_t>& xs = Shape(NodeInput(op, 0));
        const std::optional<int32_t> a = argument(0, xs, false);
        const std::optional<int32_t> b = read(op, id, 1, xs, false, true);
        if (!a || !b) return std::nullopt;
        RegionStep mul;
        mul.kind = RegionStep::Kind::kMap;
        mul.op = id;
        mul.func = kMul;
        mul.args[0] = *a;
        mul.args[1] = *b;
        mul.num_args = 2;
        r.steps.push_back(mul);
        st.kind = RegionStep::Kind::kReduce;
        st.func = kReduceSum;
        st.args[0] = static_cast<int32_t>(r.steps.size() - 1);
        st.num_args = 1;
      } else if (kind == MemberKind::kLayerNorm) {
        // The LayerNorm kernel's formulas, a step each: the mean, x - mean,
        // the mean of its square, 1 / sqrt(that + eps), their product, then
        // * gamma + beta (where it has them).
        if (st.per_row) return std::nullopt;
        const std::vector<int64_t>& xs = Shape(NodeInput(op, 0));
        const std::optional<int32_t> x = argument(0, xs, false);
        if (!x) return std::nullopt;
        auto push = [&](RegionStep::Kind k, int32_t func, std::initializer_list<int32_t> args, bool row) {
          RegionStep s;
          s.kind = k;
          s.op = id;
          s.func = func;
          if (func == kRsqrtAdd) s.alpha = static_cast<float>(op.attrs.Eps());
          for (int32_t a : args) s.args[s.num_args++] = a;
          s.per_row = row;
          r.steps.push_back(s);
          return static_cast<int32_t>(r.steps.size() - 1);
        };
        const int32_t mean = push(RegionStep::Kind::kReduce, kReduceMean, {*x}, true);
        const int32_t d = push(RegionStep::Kind::kMap, kSub, {*x, mean}, false);
        const int32_t sq = push(RegionStep::Kind::kMap, kMul, {d, d}, false);
        const int32_t var = push(RegionStep::Kind::kReduce, kReduceMean, {sq}, true);
        const int32_t rstd = push(RegionStep::Kind::kMap, kRsqrtAdd, {var}, true);
        std::optional<int32_t> gamma, beta;
        if (op.attrs.has_gamma && !(gamma = argument(1, xs, false))) return std::nullopt;
        if (op.attrs.has_beta && !(beta = argument(op.inputs.size() - 1, xs, false))) return std::nullopt;
        st.kind = RegionStep::Kind::kMap;
        st.func = kMul;
        st.args[0] = d;
        st.args[1] = rstd;
        st.num_args = 2;
        if (gamma || beta) {
          const int32_t y = push(RegionStep::Kind::kMap, kMul, {d, rstd}, false);
          st.func = gamma && beta ? kMulAdd : gamma ? kMul : kAdd;
          st.args[0] = y;
          st.args[1] = gamma ? *gamma : *beta;
          st.args[2] = gamma && beta ? *beta : 0;
          st.num_args = gamma && beta ? 3 : 2;
        }
      } else {
        if (st.per_row == (kind == MemberKind::kSoftmax)) return std::nullopt;
        const std::vector<int64_t>& xs = Shape(NodeInput(op, 0));
        const std::optional<int32_t> a = argument(0, xs, false);
        if (!a) return std::nullopt;
        st.args[0] = *a;
        st.num_args = 1;
        if (kind == MemberKind::kSoftmax) {
          st.kind = op.attrs.onnx->op_type == "LogSoftmax" ? RegionStep::Kind::kLogSoftmax : RegionStep::Kind::kSoftmax;
        } else {
          st.kind = RegionStep::Kind::kReduce;
          st.func = ReduceKindOf(op.attrs.onnx->op_type);
        }
      }
      step_of[id] = static_cast<int32_t>(r.steps.size());
      r.steps.push_back(st);
      if (ReadOutside(op.outputs[0], m)) {
        // Through its layout: its own buffer, row-major or not (view_plan.h).
        const Layout& yl = LayoutOf(op.outputs[0]);
        RegionOutput out{op.outputs[0], static_cast<int32_t>(r.steps.size() - 1), ys, {}, yl.root, yl.offset,
                         yl.strides};
        out.cols = st.per_row ? std::vector<bool>(ys.size(), false) : *per_element(ys);
        r.outputs.push_back(std::move(out));
      }
    }
    if (r.outputs.empty() || static_cast<int>(r.outputs.size()) > kMaxRegionOutputs ||
        static_cast<int>(r.operands.size()) > kMaxRegionOperands || static_cast<int>(r.steps.size()) > kMaxRegionSteps) {
      return std::nullopt;
    }
    for (RegionOperand& o : r.operands) {
      const TensorId t = OperandTensor(g_, o);
      o.dtype = t != kNone ? g_.tensor(t).dtype : OperandConstant(g_, o)->dtype;
    }
    for (RegionOutput& o : r.outputs) o.dtype = g_.tensor(o.place).dtype;
    return r;
  }

  // Input `slot` of op as one value known at plan time (a constant the
  // node keeps, or one the plan computed; float32, float16 or bfloat16),
  // in float32, or nothing.
  std::optional<float> ScalarOf(const Op& op, size_t slot) const {
    const TensorId t = NodeInput(op, slot);
    const std::vector<uint8_t>* bytes = nullptr;
    DType type = DType::kFloat32;
    if (t == kNone) {
      const OnnxNode::Value* c = NodeConstant(op, slot);
      if (c) bytes = &c->data, type = c->dtype;
    } else if (auto it = c_.values.find(t); it != c_.values.end()) {
      bytes = &it->second.bytes, type = it->second.dtype;
    } else if (g_.tensor(t).role == Role::kParam && g_.tensor(t).data) {
      bytes = g_.tensor(t).data.get(), type = g_.tensor(t).dtype;  // a weight that came with its values
    }
    if (!bytes || !RegionFloat(type) || bytes->size() != static_cast<size_t>(DTypeBytes(type))) return std::nullopt;
    if (type == DType::kFloat32) {
      float v;
      std::memcpy(&v, bytes->data(), sizeof v);
      return v;
    }
    uint16_t h;
    std::memcpy(&h, bytes->data(), sizeof h);
    return type == DType::kFloat16 ? HalfToFloat(h) : BFloat16ToFloat(h);
  }

  // The axis of a Concat member, or nothing.
  std::optional<size_t> ConcatAxis(const Op& op) const { return ConcatAxisOf(op, Shape(op.outputs[0]).size()); }

  // Whether a member of m reads op id's output (as its elements, through views).
  bool ReadByMember(OpId id, const std::vector<OpId>& m) const {
    for (OpId u : m) {
      for (TensorId t : g_.op(u).inputs) {
        if (ProducerOf(t) == id) return true;
      }
    }
    return false;
  }

  // A Concat members read (RegionStep::Kind::kSelect): along the domain's
  // one column dim, each part one value a row: a tensor of extent one on
  // the axis, read once a row, or a per-row value of the region. Its value
  // is written to memory only where an op outside reads it.
  template <typename Operand>
  bool Select(const Op& op, OpId id, const std::vector<OpId>& m, FusionRegion& r, std::map<OpId, int32_t>& step_of,
              const std::vector<int64_t>& ref, const std::vector<bool>& ref_cols, const Operand& operand) const {
    const TensorId y = op.outputs[0];
    const std::vector<int64_t>& ys = Shape(y);
    const std::optional<size_t> axis = ConcatAxis(op);
    const std::optional<std::vector<bool>> cols = ColumnsOf(ys, ref, ref_cols);
    if (!axis || !cols || ys[*axis] != r.cols) return false;
    for (size_t d = 0; d < ys.size(); ++d) {
      if ((*cols)[d] != (d == *axis)) return false;  // the axis, and only it, makes the columns
    }
    RegionStep st;
    st.kind = RegionStep::Kind::kSelect;
    st.op = id;
    for (size_t slot = 0; slot < Slots(op); ++slot) {
      const TensorId t = NodeInput(op, slot);
      if (t == kNone || Shape(t).size() != ys.size() || Shape(t)[*axis] != 1) return false;
      const OpId p = ProducerOf(t);
      auto from = p == kNone ? step_of.end() : step_of.find(p);
      if (from != step_of.end()) {
        if (!r.steps[static_cast<size_t>(from->second)].per_row) return false;
        st.parts.push_back(from->second);
        continue;
      }
      const std::optional<int32_t> k = operand(op, id, slot, ys, false);
      if (!k) return false;
      st.parts.push_back(-1 - *k);
    }
    if (static_cast<int64_t>(st.parts.size()) != r.cols) return false;
    step_of[id] = static_cast<int32_t>(r.steps.size());
    r.steps.push_back(st);
    if (ReadOutside(y, m)) {
      const Layout& yl = LayoutOf(y);  // its own buffer, or its slot in an outer concatenate
      r.outputs.push_back({y, static_cast<int32_t>(r.steps.size() - 1), ys, *cols, yl.root, yl.offset, yl.strides});
    }
    return true;
  }

  // A Concat member: each part, a member's per-element value or a tensor
  // copied (a kCopy step reading it), written into its slot of the output.
  template <typename PerElement, typename PerRow, typename Operand>
  bool ConcatInto(const Op& op, OpId id, const std::vector<OpId>& m, FusionRegion& r,
                  const std::map<OpId, int32_t>& step_of, const PerElement& per_element, const PerRow& per_row,
                  const Operand& operand) const {
    const TensorId y = op.outputs[0];
    const std::vector<int64_t>& ys = Shape(y);
    const Layout& yl = LayoutOf(y);  // its own buffer, or its slot in an outer concatenate
    const std::vector<int64_t>& ystrides = yl.strides;
    const std::optional<size_t> concat_axis = ConcatAxis(op);
    if (!concat_axis) return false;
    const size_t axis = *concat_axis;
    int64_t at = 0;
    for (size_t slot = 0; slot < Slots(op); ++slot) {
      const TensorId t = NodeInput(op, slot);
      if (t == kNone) return false;
      const std::vector<int64_t>& ps = Shape(t);
      if (ps.size() != ys.size()) return false;
      // Per element, or one value a row (DIN's two attention-pooled
      // vectors, sums over the history, stacked for the MLP).
      std::optional<std::vector<bool>> cols = per_element(ps);
      const bool row = !cols;
      if (row) {
        if (!per_row(ps)) return false;
        cols = std::vector<bool>(ps.size(), false);
      }
      const OpId p = ProducerOf(t);
      auto from = p == kNone ? step_of.end() : step_of.find(p);
      int32_t step = 0;
      if (from != step_of.end()) {
        if (r.steps[static_cast<size_t>(from->second)].per_row != row) return false;
        step = from->second;
      } else {
        const std::optional<int32_t> k = operand(op, id, slot, ps, row);
        if (!k) return false;
        RegionStep copy;
        copy.kind = RegionStep::Kind::kMap;
        copy.op = id;
        copy.func = kCopy;
        copy.args[0] = -1 - *k;
        copy.num_args = 1;
        copy.per_row = row;
        step = static_cast<int32_t>(r.steps.size());
        r.steps.push_back(copy);
      }
      r.outputs.push_back({t, step, ps, *cols, yl.root, yl.offset + at * ystrides[axis], ystrides});
      at += ps[axis];
    }
    (void)m;
    return at == ys[axis];
  }

  // The dims a reduction or softmax member reduces over its input (dims of
  // one left out), or nothing where it is not one the region takes.
  std::optional<std::vector<bool>> ReducedOf(const Op& op) const {
    const TensorId x = NodeInput(op, 0);
    if (x == kNone || !RegionFloat(g_.tensor(x).dtype)) return std::nullopt;
    const std::vector<int64_t>& xs = Shape(x);
    std::vector<bool> red(xs.size(), false);
    if (KindOf(op) == MemberKind::kMatVec) {
      // [.., M, K] x [.., K, 1], the batch dims the same: the sum is over K.
      const TensorId v = NodeInput(op, 1);
      if (v == kNone || !RegionFloat(g_.tensor(v).dtype) || xs.size() < 3) return std::nullopt;
      const std::vector<int64_t>& vs = Shape(v);
      if (vs.size() != xs.size() || vs.back() != 1 || vs[vs.size() - 2] != xs.back() || xs.back() <= 1) {
        return std::nullopt;
      }
      for (size_t d = 0; d + 2 < xs.size(); ++d) {
        if (vs[d] != xs[d] && vs[d] != 1) return std::nullopt;
      }
      red.back() = true;
      return red;
    }
    if (KindOf(op) == MemberKind::kLayerNorm) {
      // over its normalized shape, the trailing dims
      const std::vector<int64_t>& n = op.attrs.normalized_shape;
      if (n.empty() || n.size() > xs.size() || !std::equal(n.begin(), n.end(), xs.end() - static_cast<ptrdiff_t>(n.size()))) {
        return std::nullopt;
      }
      int64_t len = 1;
      for (size_t d = xs.size() - n.size(); d < xs.size(); ++d) {
        red[d] = xs[d] != 1;
        len *= xs[d];
      }
      if (len <= 1) return std::nullopt;
      return red;
    }
    if (KindOf(op) == MemberKind::kSoftmax) {
      const std::optional<cpu::AxisView> a = cpu::SoftmaxView(*op.attrs.onnx, xs);
      if (!a) return std::nullopt;
      // The dims the softmax runs over: those whose extents make `len`
      // between `outer` and `inner`.
      int64_t outer = 1;
      size_t d = 0;
      while (d < xs.size() && outer < a->outer) outer *= xs[d++];
      if (outer != a->outer) return std::nullopt;
      int64_t len = 1;
      for (; d < xs.size() && len < a->len; ++d) {
        len *= xs[d];
        red[d] = xs[d] != 1;
      }
      if (len != a->len || a->len <= 1) return std::nullopt;
      return red;
    }
    std::optional<std::vector<int64_t>> axes;
    if (Slots(op) > 1 && (NodeInput(op, 1) != kNone || NodeConstant(op, 1))) {
      std::vector<const HostTensor*> known;
      for (TensorId t : op.inputs) {
        auto it = c_.values.find(t);
        known.push_back(it == c_.values.end() ? nullptr : &it->second);
      }
      axes = cpu::KnownInts(*op.attrs.onnx, 1, known);
      if (!axes) return std::nullopt;  // axes computed at run time
    }
    const std::optional<std::vector<bool>> reduced = cpu::ReducedDims(*op.attrs.onnx, xs.size(), axes ? &*axes : nullptr);
    if (!reduced) return std::nullopt;
    int64_t len = 1;
    for (size_t d = 0; d < xs.size(); ++d) {
      red[d] = (*reduced)[d] && xs[d] != 1;
      if (red[d]) len *= xs[d];
    }
    if (len <= 1) return std::nullopt;
    return red;
  }

 private:
  // The stable order with each region's members together: Kahn's over the
  // graph with each region one node, the lowest first position first.
  std::vector<OpId> RegionOrder(const std::vector<OpId>& order, const FusionPlan& plan) const {
    const size_t n = static_cast<size_t>(g_.num_op_ids());
    const auto regions = static_cast<int64_t>(plan.regions.size());
    // Node ids: ops by id, regions after them.
    auto node_of = [&](OpId o) -> int64_t {
      const int32_t r = plan.region_of[static_cast<size_t>(o)];
      return r >= 0 ? static_cast<int64_t>(n) + r : o;
    };
    const size_t nodes = n + static_cast<size_t>(regions);
    std::vector<int64_t> key(nodes, INT64_MAX), pending(nodes, 0);
    std::vector<std::vector<int64_t>> next(nodes);
    std::vector<bool> live(nodes, false);
    // An op that runs depends on the ops that run and produce what it
    // reads, through any ops that run nothing (views: a view between two
    // members is no node of its own, or it would make a cycle); an op that
    // runs nothing comes after what it reads and holds nothing up.
    std::vector<std::vector<OpId>> running(n);  // per op: the running producers it reads through views
    std::vector<bool> done(n, false);
    std::function<const std::vector<OpId>&(OpId)> producers = [&](OpId o) -> const std::vector<OpId>& {
      std::vector<OpId>& out = running[static_cast<size_t>(o)];
      if (done[static_cast<size_t>(o)]) return out;
      done[static_cast<size_t>(o)] = true;
      for (TensorId t : g_.op(o).inputs) {
        if (t == kNone) continue;
        const OpId p = g_.tensor(t).producer;
        if (p == kNone || pos_[static_cast<size_t>(p)] < 0) continue;
        if (Runs(p)) {
          out.push_back(p);
        } else {
          const std::vector<OpId>& through = producers(p);
          out.insert(out.end(), through.begin(), through.end());
        }
      }
      return out;
    };
    for (OpId o : order) {
      const int64_t u = node_of(o);
      live[static_cast<size_t>(u)] = true;
      key[static_cast<size_t>(u)] = std::min(key[static_cast<size_t>(u)], pos_[static_cast<size_t>(o)]);
      for (OpId p : producers(o)) {
        const int64_t w = node_of(p);
        if (w != u) next[static_cast<size_t>(w)].push_back(u);
      }
    }
    for (auto& e : next) {
      std::sort(e.begin(), e.end());
      e.erase(std::unique(e.begin(), e.end()), e.end());
      for (int64_t u : e) ++pending[static_cast<size_t>(u)];
    }
    std::priority_queue<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>, std::greater<>> ready;
    for (size_t u = 0; u < nodes; ++u) {
      if (live[u] && pending[u] == 0) ready.emplace(key[u], static_cast<int64_t>(u));
    }
    std::vector<OpId> out;
    out.reserve(order.size());
    while (!ready.empty()) {
      const int64_t u = ready.top().second;
      ready.pop();
      if (u >= static_cast<int64_t>(n)) {
        const FusionRegion& r = plan.regions[static_cast<size_t>(u - static_cast<int64_t>(n))];
        out.insert(out.end(), r.ops.begin(), r.ops.end());
      } else {
        out.push_back(static_cast<OpId>(u));
      }
      for (int64_t w : next[static_cast<size_t>(u)]) {
        if (--pending[static_cast<size_t>(w)] == 0) ready.emplace(key[static_cast<size_t>(w)], w);
      }
    }
    HFUSE_CHECK(out.size() == order.size());  // regions are convex: no cycle between them
    return out;
  }
};

float ReduceInit(int32_t kind) {
  return kind == kReduceMax ? -INFINITY : kind == kReduceMin ? INFINITY : kind == kReduceProd ? 1.0f : 0.0f;
}
float ReduceTerm(int32_t kind, float acc, float v) {
  switch (kind) {
    case kReduceMax: return std::fmax(acc, v);
    case kReduceMin: return std::fmin(acc, v);
    case kReduceProd: return acc * v;
    case kReduceL1: return acc + std::fabs(v);
    case kReduceL2:
    case kReduceSumSquare: return acc + v * v;
    default: return acc + v;
  }
}
float ReduceCombine(int32_t kind, float a, float b) {
  switch (kind) {
    case kReduceMax: return std::fmax(a, b);
    case kReduceMin: return std::fmin(a, b);
    case kReduceProd: return a * b;
    default: return a + b;
  }
}
float ReduceFinish(int32_t kind, float acc, int64_t count) {
  if (kind == kReduceMean) return acc / static_cast<float>(count);
  if (kind == kReduceL2) return std::sqrt(acc);
  return acc;
}

float FloatFunc(int32_t func, float u, float v, float w, float alpha, float beta) {
  (void)u, (void)v, (void)w, (void)alpha, (void)beta;
  switch (func) {
#define HFUSE_FLOAT_FUNC(Func, expression) \
  case Func: return (expression);
#include "float_funcs.def"
#undef HFUSE_FLOAT_FUNC
    default: break;
  }
  HFUSE_CHECK(false && "no formula for this function");
  return 0.0f;
}

}  // namespace

std::optional<ElementwiseFunction> ElementwiseFunctionOf(const OnnxNode& node, std::string& why) {
  static const std::map<std::string_view, OnnxFunc> kFuncs = {
      {"Cast", kCopy},
      {"Add", kAdd}, {"Sub", kSub}, {"Mul", kMul}, {"Div", kDiv},
      {"Pow", kPow}, {"Max", kMax}, {"Min", kMin}, {"Mod", kMod},
      {"PRelu", kPRelu}, {"Equal", kEqual}, {"Less", kLess},
      {"Greater", kGreater}, {"LessOrEqual", kLessOrEqual},
      {"GreaterOrEqual", kGreaterOrEqual}, {"And", kAnd}, {"Or", kOr},
      {"Xor", kXor}, {"Where", kWhere}, {"Relu", kRelu},
      {"Sigmoid", kSigmoid}, {"Tanh", kTanh}, {"Sqrt", kSqrt}, {"Exp", kExp},
      {"Log", kLog}, {"Neg", kNeg}, {"Abs", kAbs}, {"Erf", kErf},
      {"Reciprocal", kReciprocal}, {"Softplus", kSoftplus},
      {"LeakyRelu", kLeakyRelu}, {"Clip", kClip}, {"Not", kNot},
      {"Floor", kFloor}, {"Ceil", kCeil}, {"Elu", kElu},
      {"HardSigmoid", kHardSigmoid}, {"Sign", kSign}, {"Gelu", kGelu},
      {"Selu", kSelu}, {"Softsign", kSoftsign}, {"Swish", kSwish},
      {"Mish", kMish}};
  const std::string& type = node.op_type;
  auto f = kFuncs.find(type);
  if (f == kFuncs.end()) {
    why = "no elementwise function";
    return std::nullopt;
  }
  ElementwiseFunction e;
  e.func = f->second;
  e.inputs = type == "Where" ? 3 : (e.func >= kRelu || type == "Cast") ? 1 : 2;
  if (type == "Mod" && AttrInt(node, "fmod", 0) != 0) e.func = kFMod;
  e.alpha = AttrFloat(node, "alpha", type == "LeakyRelu" ? 0.01 : type == "HardSigmoid" ? 0.2
                                      : type == "Selu"    ? 1.67326319217681884765625
                                                          : 1.0);
  e.beta = AttrFloat(node, "beta", 0.5);
  if (type == "Selu") e.beta = AttrFloat(node, "gamma", 1.05070102214813232421875);
  if (type == "Gelu") {
    auto it = node.strings.find("approximate");
    if (it != node.strings.end() && it->second == "tanh") {
      e.func = kGeluTanh;
    } else if (it != node.strings.end() && it->second != "none") {
      why = fmt::format("approximate '{}'", it->second);
      return std::nullopt;
    }
  }
  if (type == "Clip") {
    e.alpha = -INFINITY;
    e.beta = INFINITY;
    if (node.opset < 11) {
      e.alpha = AttrFloat(node, "min", -INFINITY);
      e.beta = AttrFloat(node, "max", INFINITY);
    }
  }
  return e;
}

TensorId InputOf(const Op& op, size_t slot) {
  if (!op.attrs.onnx) return slot < op.inputs.size() ? op.inputs[slot] : kNone;
  const OnnxNode& node = *op.attrs.onnx;
  const int32_t s = node.input_slots.empty() ? static_cast<int32_t>(slot)
                    : slot < node.input_slots.size() ? node.input_slots[slot]
                                                     : kNone;
  return s >= 0 && static_cast<size_t>(s) < op.inputs.size() ? op.inputs[static_cast<size_t>(s)] : kNone;
}

const OnnxNode::Value* ConstantOf(const Op& op, size_t slot) {
  if (!op.attrs.onnx) return nullptr;
  const OnnxNode& node = *op.attrs.onnx;
  if (slot >= node.input_slots.size() || node.input_slots[slot] > -2) return nullptr;
  return &node.constant_values[static_cast<size_t>(-2 - node.input_slots[slot])];
}

TensorId OperandTensor(const Graph& graph, const RegionOperand& o) {
  return InputOf(graph.op(o.op), static_cast<size_t>(o.slot));
}

const OnnxNode::Value* OperandConstant(const Graph& graph, const RegionOperand& o) {
  return ConstantOf(graph.op(o.op), static_cast<size_t>(o.slot));
}

std::vector<int64_t> OperandStrides(const Graph& graph, const ViewPlan& views, const RegionOperand& o) {
  std::vector<int64_t> from, strides;
  const TensorId t = o.view != kNone ? o.view : OperandTensor(graph, o);
  if (t != kNone) {
    from = views.shape[static_cast<size_t>(t)];
    strides = views.layout[static_cast<size_t>(t)].strides;
  } else {
    from = OperandConstant(graph, o)->dims;
    strides = RowMajorStrides(from);
  }
  if (o.swap_last && from.size() >= 2) {
    std::swap(from[from.size() - 1], from[from.size() - 2]);
    std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  }
  std::vector<int64_t> out(o.over.size(), 0);
  HFUSE_CHECK(from.size() <= o.over.size());
  for (size_t d = 0; d < from.size(); ++d) out[o.over.size() - from.size() + d] = from[d] == 1 ? 0 : strides[d];
  return out;
}

FusionPlan PlanFusionRegions(const Graph& graph, const ViewPlan& views, const PlanConstants& constants,
                             bool enabled, int64_t product_min_tiles, int64_t ffn_min_rows) {
  return Planner(graph, views, constants).Run(enabled, product_min_tiles, ffn_min_rows);
}

DevicePlan PlanViewsAndRegions(const Graph& graph, const DimValues& dims, const PlanConstants& constants,
                               bool enabled, int64_t product_min_tiles, int64_t ffn_min_rows) {
  DevicePlan first{PlanViews(graph, dims, constants), {}};
  first.fusion = PlanFusionRegions(graph, first.views, constants, enabled, product_min_tiles, ffn_min_rows);
  // The ops of the step regions (an attention or FFN region writes only
  // its output, at its own strides; the GEMMs a region computes write
  // nothing).
  std::vector<bool> members(static_cast<size_t>(graph.num_op_ids()), false);
  bool any = false;
  for (const FusionRegion& r : first.fusion.regions) {
    if (r.Chain()) continue;
    for (OpId id : r.ops) {
      const bool product = std::any_of(r.products.begin(), r.products.end(),
                                       [&](const RegionProduct& q) { return q.gemm == id; });
      if (!product) members[static_cast<size_t>(id)] = any = true;
    }
  }
  if (!any) return first;
  DevicePlan second{PlanViews(graph, dims, constants, &members), {}};
  second.fusion = PlanFusionRegions(graph, second.views, constants, enabled, product_min_tiles, ffn_min_rows);
  for (size_t id = 0; id < members.size(); ++id) {
    const int32_t r = second.fusion.region_of[id];
    // Each op the views were told of in a region of steps; no concatenate
    // that copies some parts beside those written in place in one (it
    // runs as a copy, which the views counted on).
    const bool kept = !members[id] || (r >= 0 && !second.fusion.regions[static_cast<size_t>(r)].Chain());
    const bool copy = second.views.in_slot[id].empty() || r < 0;
    if (!kept || !copy) return first;
  }
  return second;
}

AttentionTensors AttentionTensorsOf(const Graph& graph, const FusionRegion& r) {
  HFUSE_CHECK(r.attention && r.operands.size() == 3 && r.outputs.size() == 1);
  return {OperandTensor(graph, r.operands[0]), OperandTensor(graph, r.operands[1]),
          OperandTensor(graph, r.operands[2]), r.outputs[0].tensor};
}

AttentionArgs AttentionArgsOf(const Graph& graph, const ViewPlan& views, const FusionRegion& r) {
  const AttentionTensors t = AttentionTensorsOf(graph, r);
  auto shape = [&](TensorId x) -> const std::vector<int64_t>& { return views.shape[static_cast<size_t>(x)]; };
  auto strides = [&](TensorId x) -> const std::vector<int64_t>& { return views.layout[static_cast<size_t>(x)].strides; };
  const std::vector<int64_t>& os = shape(t.o);
  AttentionArgs a{};
  a.batch_dims = static_cast<int32_t>(os.size() - 2);
  a.batch = 1;
  for (int32_t i = 0; i < a.batch_dims; ++i) {
    a.batch_shape[i] = os[static_cast<size_t>(i)];
    a.batch *= os[static_cast<size_t>(i)];
  }
  // x's batch strides over O's batch dims (numpy: 0 where x has 1 or no dim).
  auto batch = [&](TensorId x, int64_t* out) {
    const std::vector<int64_t>& xs = shape(x);
    const size_t lead = os.size() - xs.size();
    for (size_t i = 0; i < static_cast<size_t>(a.batch_dims); ++i) {
      out[i] = i < lead || xs[i - lead] == 1 ? 0 : strides(x)[i - lead];
    }
  };
  batch(t.q, a.q_batch);
  batch(t.kt, a.kt_batch);
  batch(t.v, a.v_batch);
  batch(t.o, a.o_batch);
  auto last2 = [&](TensorId x, int64_t& row, int64_t& col) {
    const std::vector<int64_t>& st = strides(x);
    row = st[st.size() - 2];
    col = st.back();
  };
  last2(t.q, a.q_row, a.q_col);
  last2(t.kt, a.kt_d, a.kt_key);
  last2(t.v, a.v_key, a.v_col);
  last2(t.o, a.o_row, a.o_col);
  a.sq = static_cast<int32_t>(os[os.size() - 2]);
  a.dv = static_cast<int32_t>(os.back());
  a.d = static_cast<int32_t>(shape(t.q).back());
  a.sk = static_cast<int32_t>(shape(t.kt).back());
  a.scale = r.attention->scale;
  a.divide = r.attention->divide ? 1 : 0;
  a.dtype = graph.tensor(t.o).dtype;
  return a;
}

int64_t DomainOffset(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                     const std::vector<bool>& cols, int64_t row, int64_t col) {
  int64_t at = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    int64_t& rest = cols[d] ? col : row;
    at += (rest % shape[d]) * strides[d];
    rest /= shape[d];
  }
  return at;
}

FfnArgs FfnArgsOf(const ViewPlan& views, const FusionRegion& r, int sms) {
  HFUSE_CHECK(r.ffn.has_value());
  const FfnChain& c = *r.ffn;
  FfnArgs a{};
  a.m = c.m;
  a.ldx = *RowStride(views.layout[static_cast<size_t>(c.x)], views.shape[static_cast<size_t>(c.x)]);
  a.ldy = *RowStride(views.layout[static_cast<size_t>(c.y)], views.shape[static_cast<size_t>(c.y)]);
  a.in = static_cast<int32_t>(c.in);
  a.hidden = static_cast<int32_t>(c.hidden);
  a.out = static_cast<int32_t>(c.out);
  a.act = c.act;
  a.alpha = c.alpha;
  a.beta = c.beta;
  a.rows_per_thread = FfnRowsPerThread(c.m, c.in, c.out, sms);
  a.value_row = static_cast<int32_t>(c.value_row);
  a.gate_row = static_cast<int32_t>(c.gate_row);
  return a;
}

void EvaluateFfnRow(const FfnArgs& a, int64_t row) {
  const float* x = a.x + row * a.ldx;
  std::vector<float> y(static_cast<size_t>(a.out));
  for (int32_t o = 0; o < a.out; ++o) y[static_cast<size_t>(o)] = a.b2 ? a.b2[o] : 0.0f;
  auto dot = [&](int64_t r) {
    float v = a.b1 ? a.b1[r] : 0.0f;
    for (int32_t i = 0; i < a.in; ++i) v = std::fma(x[i], a.w1[r * a.in + i], v);
    return v;
  };
  for (int32_t j = 0; j < a.hidden; ++j) {
    auto act = [&](float v) { return FloatFunc(a.act, v, 0.0f, 0.0f, a.alpha, a.beta); };
    const float h = a.gate_row < 0 ? act(dot(j)) : dot(a.value_row + j) * act(dot(a.gate_row + j));
    for (int32_t o = 0; o < a.out; ++o) {
      float& v = y[static_cast<size_t>(o)];
      v = std::fma(h, a.w2[static_cast<int64_t>(o) * a.hidden + j], v);
    }
  }
  std::copy(y.begin(), y.end(), a.y + row * a.ldy);
}

RegionLanes LanesOf(int64_t cols) {
  RegionLanes l;
  while (l.lanes < 32 && l.lanes < cols) l.lanes *= 2;
  l.per_lane = (cols + l.lanes - 1) / l.lanes;
  return l;
}

RegionLanes LanesOf(const FusionRegion& r) {
  return r.one_lane ? RegionLanes{1, r.cols} : LanesOf(r.cols);
}

std::vector<std::vector<float>> EvaluateRegion(const FusionRegion& r,
                                               const std::function<float(size_t, int64_t, int64_t)>& read) {
  std::vector<std::vector<float>> outs(r.outputs.size());
  std::vector<std::vector<int64_t>> out_strides;
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    const bool per_row = r.steps[static_cast<size_t>(r.outputs[o].step)].per_row;
    outs[o].resize(static_cast<size_t>(per_row ? r.rows : r.rows * r.cols));
    out_strides.push_back(RowMajorStrides(r.outputs[o].shape));  // the values in their own order
  }
  const int64_t cols = r.cols;
  const RegionLanes lanes = LanesOf(r);
  std::vector<std::vector<float>> value(r.steps.size(), std::vector<float>(static_cast<size_t>(cols)));
  for (int64_t row = 0; row < r.rows; ++row) {
    auto arg = [&](int32_t a, int64_t c) {
      if (a >= 0) {
        const std::vector<float>& v = value[static_cast<size_t>(a)];
        return r.steps[static_cast<size_t>(a)].per_row ? v[0] : v[static_cast<size_t>(c)];
      }
      const size_t k = static_cast<size_t>(-1 - a);
      const RegionOperand& o = r.operands[k];
      return read(k, row, o.per_row ? 0 : c);
    };
    for (size_t s = 0; s < r.steps.size(); ++s) {
      const RegionStep& st = r.steps[s];
      std::vector<float>& v = value[s];
      const int64_t n = st.per_row ? 1 : cols;
      if (st.kind == RegionStep::Kind::kSelect) {
        for (int64_t c = 0; c < n; ++c) v[static_cast<size_t>(c)] = arg(st.parts[static_cast<size_t>(c)], c);
        continue;
      }
      if (st.kind == RegionStep::Kind::kMap) {
        for (int64_t c = 0; c < n; ++c) {
          const float u = arg(st.args[0], c);
          const float w1 = st.num_args > 1 ? arg(st.args[1], c) : u;
          const float w2 = st.num_args > 2 ? arg(st.args[2], c) : u;
          v[static_cast<size_t>(c)] = FloatFunc(st.func, u, w1, w2, st.alpha, st.beta);
        }
        continue;
      }
      // The kernel's order: each lane folds its columns, then the lanes
      // fold pairwise (xor shuffles: lane i with lane i ^ step).
      auto reduce = [&](int32_t kind, const std::function<float(int64_t)>& x) {
        std::vector<float> lane(static_cast<size_t>(lanes.lanes), ReduceInit(kind));
        for (int64_t c = 0; c < cols; ++c) {
          float& acc = lane[static_cast<size_t>(c % lanes.lanes)];
          acc = ReduceTerm(kind, acc, x(c));
        }
        for (int step = lanes.lanes / 2; step > 0; step /= 2) {
          for (int i = 0; i < step; ++i) {
            lane[static_cast<size_t>(i)] = ReduceCombine(kind, lane[static_cast<size_t>(i)], lane[static_cast<size_t>(i + step)]);
          }
        }
        return lane[0];
      };
      if (st.kind == RegionStep::Kind::kReduce) {
        v[0] = ReduceFinish(st.func, reduce(st.func, [&](int64_t c) { return arg(st.args[0], c); }), cols);
        continue;
      }
      const float high = reduce(kReduceMax, [&](int64_t c) { return arg(st.args[0], c); });
      const float sum = reduce(kReduceSum, [&](int64_t c) { return std::exp(arg(st.args[0], c) - high); });
      for (int64_t c = 0; c < cols; ++c) {
        const float x = arg(st.args[0], c);
        v[static_cast<size_t>(c)] = st.kind == RegionStep::Kind::kLogSoftmax ? x - high - std::log(sum)
                                                                              : std::exp(x - high) / sum;
      }
    }
    for (size_t o = 0; o < r.outputs.size(); ++o) {
      const RegionStep& st = r.steps[static_cast<size_t>(r.outputs[o].step)];
      const std::vector<float>& v = value[static_cast<size_t>(r.outputs[o].step)];
      const RegionOutput& out = r.outputs[o];
      for (int64_t c = 0; c < (st.per_row ? 1 : cols); ++c) {
        outs[o][static_cast<size_t>(DomainOffset(out.shape, out_strides[o], out.cols, row, c))] =
            v[static_cast<size_t>(c)];
      }
    }
  }
  return outs;
}

}  // namespace hfuse::cuda
