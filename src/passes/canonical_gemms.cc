// einsum-to-gemm, einsum-to-matmul, left-matmul-to-gemm, pointwise-conv-to-gemm.
// See canonical_gemms.h.
#include "hfuse/passes/canonical_gemms.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "hfuse/passes/rewrite_helpers.h"
#include "hfuse/support/error.h"
#include "hfuse/support/permute.h"

namespace hfuse {
namespace {

// The op, when it is an opaque ONNX node of the default domain of this
// type with `inputs` IR inputs (constants it keeps to itself not counted)
// and one output.
const OnnxNode* OnnxOp(const Graph& g, OpId id, std::string_view type, size_t inputs) {
  const Op& op = g.op(id);
  if (!op.alive || op.type != OpType::kOpaque || !op.attrs.onnx) return nullptr;
  const OnnxNode& node = *op.attrs.onnx;
  if (!node.domain.empty() || node.op_type != type || op.inputs.size() != inputs ||
      op.outputs.size() != 1) {
    return nullptr;
  }
  return &node;
}

bool AllStatic(const Shape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](const Dim& d) { return d.is_static(); });
}

// A float param with values, all dims static, of this rank.
bool IsConstant(const Graph& g, TensorId id, size_t rank) {
  const Tensor& t = g.tensor(id);
  if (t.role != Role::kParam || !t.data || !IsFloat(t.dtype) || t.shape.size() != rank ||
      !AllStatic(t.shape)) {
    return false;
  }
  int64_t n = DTypeBytes(t.dtype);
  for (const Dim& d : t.shape) n *= d.value;
  return t.data->size() == static_cast<size_t>(n);
}

// The activation as `shape`: the tensor it is a reshape of when that has
// the shape already (a reshape keeps the row-major order of the data), else
// a new reshape of it.
TensorId AsShape(Graph& g, TensorId x, const Shape& shape) {
  const OpId p = g.tensor(x).producer;
  if (p != kNone && g.op(p).inputs.size() == 1) {
    const Op& op = g.op(p);
    static const std::vector<std::string_view> kReshapes = {"Unsqueeze", "Reshape", "Squeeze",
                                                            "Flatten"};
    const bool reshape =
        op.type == OpType::kReshape ||
        (op.type == OpType::kOpaque && op.attrs.onnx && op.attrs.onnx->domain.empty() &&
         std::find(kReshapes.begin(), kReshapes.end(), op.attrs.onnx->op_type) != kReshapes.end());
    const TensorId in = op.inputs[0];
    if (reshape && g.tensor(in).shape == shape && g.tensor(in).dtype == g.tensor(x).dtype) {
      return in;
    }
  }
  const std::string name = g.tensor(x).name;
  const DType dtype = g.tensor(x).dtype;
  const TensorId x2 = AddFreshTensor(g, name + "_2d", shape, dtype);
  AddReshape(g, name + "/as_gemm_input", x, x2);
  return x2;
}

// Op `id` becomes gemm(A2 = `a` as `a_shape`, `w`[, `bias`]) writing a
// `y_shape` tensor that a reshape turns into its old output.
void BecomeGemm(Graph& g, OpId id, TensorId a, const Shape& a_shape, TensorId w,
                std::optional<TensorId> bias, const Shape& y_shape) {
  const std::vector<TensorId> old_inputs = g.op(id).inputs;
  const TensorId y = g.op(id).outputs[0];
  const TensorId a2 = a_shape == g.tensor(a).shape ? a : AsShape(g, a, a_shape);
  std::vector<TensorId> inputs = {a2, w};
  if (bias) inputs.push_back(*bias);
  // Rewire slot by slot, then drop the slots left over.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i < g.op(id).inputs.size()) {
      g.SetOperand(id, i, inputs[i]);
    } else {
      g.AddOperand(id, inputs[i]);
    }
  }
  HFUSE_CHECK(g.op(id).inputs.size() == inputs.size());  // a GEMM reads no more than its node
  Op& op = g.mutable_op(id);
  op.type = bias ? OpType::kGemmRcrBias : OpType::kGemmRcr;
  op.attrs = Attrs{};  // no longer the node it was imported from
  if (!(y_shape == g.tensor(y).shape)) {
    const TensorId y2 = AddFreshTensor(g, g.tensor(y).name + "_2d", y_shape, g.tensor(y).dtype);
    g.SetOutputs(id, {y2});
    AddReshape(g, g.op(id).name + "/from_gemm", y2, y);
  }
  // Params nobody reads any more (a weight moved into a new param).
  for (TensorId t : old_inputs) {
    const Tensor& tt = g.tensor(t);
    if (tt.alive && tt.role == Role::kParam && tt.users.empty() && !g.IsGraphOutput(t)) {
      g.EraseTensor(t);
    }
  }
}

// w [K, N] as a new [N, K] param (one per weight, however many ops read it).
TensorId Transposed(Graph& g, TensorId w, std::map<TensorId, TensorId>& done) {
  if (auto it = done.find(w); it != done.end()) return it->second;
  const Tensor& t = g.tensor(w);
  const int64_t k = t.shape[0].value, n = t.shape[1].value;
  const auto e = static_cast<size_t>(DTypeBytes(t.dtype));
  std::vector<uint8_t> out(t.data->size());
  PermuteBytes(t.data->data(), out.data(), {k, n}, {1, 0}, e);
  const std::string name = t.name + "_t";
  const DType dtype = t.dtype;
  const TensorId id =
      AddParamTensor(g, name, {Dim::Static(n), Dim::Static(k)}, dtype, std::move(out));
  done[w] = id;
  return id;
}

// Whether tensor `y` has shape `want`, or has it once the dims that ONNX's
// shape inference made up for it ('unk__N': libonnx 1.12 infers no Einsum
// output) are the ones the GEMM computes; then `y` takes `want`.
bool SettleShape(Graph& g, TensorId y, const Shape& want) {
  const Shape& have = g.tensor(y).shape;
  if (have == want) return true;
  if (have.size() != want.size()) return false;
  for (size_t d = 0; d < have.size(); ++d) {
    if (have[d] == want[d]) continue;
    if (have[d].is_static() ||
        !g.dims()[static_cast<size_t>(have[d].dynamic)].name.starts_with("unk__")) {
      return false;
    }
  }
  g.mutable_tensor(y).shape = want;
  return true;
}

// "ij,jk->ik" as its three subscript strings, or nothing (spaces dropped;
// an implicit output or "..." is not a form handled here).
std::optional<std::vector<std::string>> Subscripts(const OnnxNode& node) {
  auto it = node.strings.find("equation");
  if (it == node.strings.end()) return std::nullopt;
  std::string eq;
  for (char c : it->second) {
    if (c != ' ') eq += c;
  }
  const size_t arrow = eq.find("->");
  const size_t comma = eq.find(',');
  if (arrow == std::string::npos || comma == std::string::npos || comma > arrow) {
    return std::nullopt;
  }
  std::vector<std::string> s = {eq.substr(0, comma), eq.substr(comma + 1, arrow - comma - 1),
                                eq.substr(arrow + 2)};
  for (const std::string& part : s) {
    if (part.empty()) return std::nullopt;
    for (char c : part) {
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return std::nullopt;
      if (std::count(part.begin(), part.end(), c) != 1) return std::nullopt;
    }
  }
  return s;
}

// ---- einsum-to-matmul ---------------------------------------------------------

// The MatMul form of a two-operand Einsum (canonical_gemms.h): which
// operand is MatMul's first, the labels that become MatMul's batch dims
// (G: the batch labels, and free labels of one operand that the other
// broadcasts over), and each operand's matrix labels (its free labels not
// in G, merged into one dim). The contracted labels K are merged into one
// dim too, in the first operand's order.
struct MatMulPlan {
  int left = 0;
  std::string g;
  std::string mat[2];
  std::string k;
  // What it costs beyond the MatMul: reshapes and transposes of activations
  // and of the output (a constant operand's are folded into a new param).
  int reshapes = 0;
  int transposes = 0;
};

// An operand as the plan lays it out for MatMul.
struct OperandLayout {
  std::vector<int64_t> perm;  // its labels to [G it has..., mat, K] (or [K, mat])
  bool transpose = false;
  Shape shape;                // after the reshape (the transposed shape when none)
  bool reshape = false;
};

bool IsIdentity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Where each label of `labels` stands in `of`.
std::vector<int64_t> Positions(const std::string& labels, const std::string& of) {
  std::vector<int64_t> p;
  for (char c : labels) p.push_back(static_cast<int64_t>(of.find(c)));
  return p;
}

class EinsumMatMul {
 public:
  EinsumMatMul(Graph& g, const std::string (&subscripts)[3], const TensorId (&in)[2])
      : g_(g), out_(subscripts[2]) {
    for (int p = 0; p < 2; ++p) {
      labels_[p] = subscripts[p];
      in_[p] = in[p];
      constant_[p] = IsConstant(g, in[p], labels_[p].size());
    }
  }

  // Classifies the labels and checks the dims; false: not a form done here.
  bool Classify() {
    for (int p = 0; p < 2; ++p) {
      if (g_.tensor(in_[p]).shape.size() != labels_[p].size()) return false;
      for (size_t i = 0; i < labels_[p].size(); ++i) dim_.emplace(labels_[p][i], Shape{})
          .first->second.push_back(g_.tensor(in_[p]).shape[i]);
    }
    for (const auto& [label, dims] : dim_) {
      // A label of both operands has one size (no broadcasting outside "...").
      if (dims.size() == 2 && !(dims[0] == dims[1])) return false;
    }
    for (char c : out_) {
      if (!dim_.count(c)) return false;
    }
    for (char c : labels_[0]) {
      const bool other = labels_[1].find(c) != std::string::npos;
      const bool kept = out_.find(c) != std::string::npos;
      if (other && kept) batch_ += c;
      if (other && !kept) k_ += c;
      if (!other && kept) free_[0] += c;
      if (!other && !kept) return false;  // summed within one operand: not a MatMul
    }
    for (char c : labels_[1]) {
      const bool other = labels_[0].find(c) != std::string::npos;
      const bool kept = out_.find(c) != std::string::npos;
      if (!other && kept) free_[1] += c;
      if (!other && !kept) return false;
    }
    // Free and batch labels in the output's order.
    auto by_output = [&](std::string& labels) {
      std::sort(labels.begin(), labels.end(),
                [&](char a, char b) { return out_.find(a) < out_.find(b); });
    };
    by_output(batch_);
    by_output(free_[0]);
    by_output(free_[1]);
    return true;
  }

  // The plan of least cost, or nothing when no plan's reshapes can be
  // written (more than one dim of unknown size to infer): fewest
  // transposes (they move data), then fewest reshapes (views, but ops all
  // the same); the first of equals in a fixed order.
  std::optional<MatMulPlan> Best() {
    std::optional<MatMulPlan> best;
    for (int left = 0; left < 2; ++left) {
      for (const std::string& m0 : MatrixChoices(0)) {
        for (const std::string& m1 : MatrixChoices(1)) {
          MatMulPlan plan;
          plan.left = left;
          plan.mat[0] = m0;
          plan.mat[1] = m1;
          plan.k = k_;
          for (char c : out_) {
            auto in = [&](const std::string& labels) {
              return labels.find(c) != std::string::npos;
            };
            const bool moved = (in(free_[0]) && !in(m0)) || (in(free_[1]) && !in(m1));
            if (in(batch_) || moved) plan.g += c;
          }
          if (!Cost(plan)) continue;
          if (!best || std::tie(plan.transposes, plan.reshapes) <
                           std::tie(best->transposes, best->reshapes)) {
            best = plan;
          }
        }
      }
    }
    return best;
  }

  // Rewrites op `id` (the Einsum) into the plan's ops; it becomes the MatMul.
  void Rewrite(OpId id, const MatMulPlan& plan, std::map<std::string, TensorId>& folded) {
    const Op& einsum = g_.op(id);
    const std::string name = einsum.name;
    const int64_t opset = einsum.attrs.onnx->opset;
    const TensorId y = einsum.outputs[0];
    const DType dtype = g_.tensor(y).dtype;
    const std::vector<TensorId> old_inputs = einsum.inputs;
    TensorId operand[2];
    for (int role = 0; role < 2; ++role) {
      const int p = role == 0 ? plan.left : 1 - plan.left;
      const OperandLayout l = Layout(plan, p, role);
      const char* side = role == 0 ? "a" : "b";
      if (constant_[p]) {
        operand[role] = Folded(in_[p], l, folded);
        continue;
      }
      TensorId x = in_[p];
      if (l.transpose) {
        x = AddTranspose(fmt::format("{}/Transpose_{}", name, side), x, l.perm, opset);
      }
      if (l.reshape) {
        x = AddOnnxReshape(fmt::format("{}/Reshape_{}", name, side), x, l.shape, opset);
      }
      operand[role] = x;
    }
    // The MatMul: the Einsum op, its id and name kept.
    for (size_t i = 0; i < 2; ++i) g_.SetOperand(id, i, operand[i]);
    auto mm = std::make_shared<OnnxNode>();
    mm->op_type = "MatMul";
    mm->opset = opset;
    mm->input_slots = {0, 1};
    mm->output_slots = {0};
    g_.mutable_op(id).attrs.onnx = std::move(mm);
    // Its output [G, m, n], reshaped to [G, mat_L..., mat_R...] and
    // transposed to the Einsum's order as needed.
    const std::string& mat_l = plan.mat[plan.left];
    const std::string& mat_r = plan.mat[1 - plan.left];
    const std::string labels = plan.g + mat_l + mat_r;
    Shape mm_shape = Dims(plan.g);
    mm_shape.push_back(ProductOfDims(g_, Dims(mat_l)));
    mm_shape.push_back(ProductOfDims(g_, Dims(mat_r)));
    const bool reshape = mat_l.size() != 1 || mat_r.size() != 1;
    const std::vector<int64_t> perm = Positions(out_, labels);
    const bool transpose = !IsIdentity(perm);
    if (reshape || transpose) {
      TensorId cur = AddFreshTensor(g_, g_.tensor(y).name + "_mm", mm_shape, dtype);
      g_.SetOutputs(id, {cur});
      if (reshape) {
        const TensorId to = transpose ? AddFreshTensor(g_, g_.tensor(y).name + "_unmerged",
                                                       Dims(labels), dtype)
                                      : y;
        AddOnnxOp(fmt::format("{}/Reshape_out", name), "Reshape", cur, to, opset,
                  ReshapeTarget(g_.tensor(cur).shape, g_.tensor(to).shape));
        cur = to;
      }
      if (transpose) AddOnnxOp(fmt::format("{}/Transpose_out", name), "Transpose", cur, y, opset,
                               std::nullopt, perm);
    }
    for (TensorId t : old_inputs) {
      const Tensor& tt = g_.tensor(t);
      if (tt.alive && tt.role == Role::kParam && tt.users.empty() && !g_.IsGraphOutput(t)) {
        g_.EraseTensor(t);
      }
    }
  }

  // The Einsum's output shape, from its labels.
  Shape OutputShape() const { return Dims(out_); }

 private:
  Shape Dims(const std::string& labels) const {
    Shape s;
    for (char c : labels) s.push_back(dim_.at(c)[0]);
    return s;
  }

  // An operand's matrix labels: all its free labels merged, or one of them
  // (the others go to G, broadcast over by the other operand).
  std::vector<std::string> MatrixChoices(int p) const {
    std::vector<std::string> choices = {free_[p]};
    if (free_[p].size() > 1) {
      for (char c : free_[p]) choices.emplace_back(1, c);
    }
    return choices;
  }

  // Operand p as MatMul's operand `role` (0: first, [.., mat, K]; 1:
  // second, [.., K, mat]): the G labels it has, with a 1 for each it lacks
  // after its first (leading ones broadcast without).
  OperandLayout Layout(const MatMulPlan& plan, int p, int role) {
    const std::string& labels = labels_[p];
    auto has = [&](char c) { return labels.find(c) != std::string::npos; };
    std::string order;
    Shape shape;
    bool interior_one = false;
    for (char c : plan.g) {
      if (has(c)) {
        order += c;
        shape.push_back(dim_.at(c)[0]);
      } else if (!order.empty()) {
        shape.push_back(Dim::Static(1));
        interior_one = true;
      }
    }
    const std::string& mat = plan.mat[p];
    order += role == 0 ? mat + plan.k : plan.k + mat;
    const Dim m = ProductOfDims(g_, Dims(mat)), k = ProductOfDims(g_, Dims(plan.k));
    shape.push_back(role == 0 ? m : k);
    shape.push_back(role == 0 ? k : m);
    OperandLayout l;
    l.perm = Positions(order, labels);
    l.transpose = !IsIdentity(l.perm);
    l.reshape = interior_one || mat.size() != 1 || plan.k.size() != 1;
    l.shape = l.reshape ? shape : Dims(order);
    return l;
  }

  // Fills in the plan's cost; false when a reshape cannot be written.
  bool Cost(MatMulPlan& plan) {
    for (int role = 0; role < 2; ++role) {
      const int p = role == 0 ? plan.left : 1 - plan.left;
      const OperandLayout l = Layout(plan, p, role);
      if (constant_[p]) continue;
      plan.transposes += l.transpose;
      if (l.reshape) {
        Shape transposed;
        const Shape& shape = g_.tensor(in_[p]).shape;
        for (int64_t i : l.perm) transposed.push_back(shape[static_cast<size_t>(i)]);
        if (!ReshapeTarget(transposed, l.shape)) return false;
        ++plan.reshapes;
      }
    }
    const std::string& mat_l = plan.mat[plan.left];
    const std::string& mat_r = plan.mat[1 - plan.left];
    const std::string labels = plan.g + mat_l + mat_r;
    if (mat_l.size() != 1 || mat_r.size() != 1) {
      Shape mm = Dims(plan.g);
      mm.push_back(ProductOfDims(g_, Dims(mat_l)));
      mm.push_back(ProductOfDims(g_, Dims(mat_r)));
      if (!ReshapeTarget(mm, Dims(labels))) return false;
      ++plan.reshapes;
    }
    plan.transposes += !IsIdentity(Positions(out_, labels));
    return true;
  }

  // ONNX Reshape's shape operand from `in` to `out`: static sizes as they
  // are, 0 for a named dim at the same place in both (Reshape copies it),
  // -1 for the one other; nothing when two would need inferring, or a
  // static size is 0 (which Reshape would read as "copy").
  static std::optional<std::vector<int64_t>> ReshapeTarget(const Shape& in, const Shape& out) {
    std::vector<int64_t> target;
    bool inferred = false;
    for (size_t i = 0; i < out.size(); ++i) {
      const Dim& d = out[i];
      if (d.is_static()) {
        if (d.value == 0) return std::nullopt;
        target.push_back(d.value);
      } else if (i < in.size() && in[i] == d) {
        target.push_back(0);
      } else {
        if (inferred) return std::nullopt;
        inferred = true;
        target.push_back(-1);
      }
    }
    return target;
  }

  // A constant operand transposed and reshaped once, into a new param (one
  // per weight and layout, however many Einsums read it).
  TensorId Folded(TensorId w, const OperandLayout& l, std::map<std::string, TensorId>& folded) {
    const Tensor& t = g_.tensor(w);
    std::vector<int64_t> dims;
    for (const Dim& d : t.shape) dims.push_back(d.value);
    std::vector<int64_t> new_dims;
    for (const Dim& d : l.shape) new_dims.push_back(d.value);
    if (!l.transpose && new_dims == dims) return w;
    const std::string key =
        fmt::format("{}:{}:{}", w, fmt::join(l.perm, ","), fmt::join(new_dims, ","));
    if (auto it = folded.find(key); it != folded.end()) return it->second;
    std::vector<uint8_t> data(t.data->size());
    if (l.transpose) {
      const auto bytes = static_cast<size_t>(DTypeBytes(t.dtype));
      PermuteBytes(t.data->data(), data.data(), dims, l.perm, bytes);
    } else {
      data = *t.data;
    }
    const std::string name = t.name + (l.transpose ? "_t" : "_r");
    const DType dtype = t.dtype;
    const TensorId id = AddParamTensor(g_, name, l.shape, dtype, std::move(data));
    folded[key] = id;
    return id;
  }

  TensorId AddTranspose(const std::string& name, TensorId x, const std::vector<int64_t>& perm,
                        int64_t opset) {
    Shape shape;
    for (int64_t i : perm) shape.push_back(g_.tensor(x).shape[static_cast<size_t>(i)]);
    const TensorId out = AddFreshTensor(g_, g_.tensor(x).name + "_t", shape, g_.tensor(x).dtype);
    AddOnnxOp(name, "Transpose", x, out, opset, std::nullopt, perm);
    return out;
  }

  TensorId AddOnnxReshape(const std::string& name, TensorId x, const Shape& shape, int64_t opset) {
    const TensorId out = AddFreshTensor(g_, g_.tensor(x).name + "_r", shape, g_.tensor(x).dtype);
    AddOnnxOp(name, "Reshape", x, out, opset, ReshapeTarget(g_.tensor(x).shape, shape));
    return out;
  }

  // An opaque ONNX op a pass makes (graph.h, OnnxNode: no NodeProto; the
  // exporter writes it from these fields): `x` in, `out` out, Reshape's
  // shape as a constant it keeps, Transpose's perm as an attribute.
  void AddOnnxOp(const std::string& name, const std::string& type, TensorId x, TensorId out,
                 int64_t opset, std::optional<std::vector<int64_t>> shape,
                 std::vector<int64_t> perm = {}) {
    auto node = std::make_shared<OnnxNode>();
    node->op_type = type;
    node->opset = opset;
    node->input_slots = {0};
    node->output_slots = {0};
    if (type == "Transpose") node->ints["perm"] = std::move(perm);
    if (type == "Reshape") {
      HFUSE_CHECK(shape.has_value());  // Cost() checked that it can be written
      OnnxNode::Value v;
      v.dtype = DType::kInt64;
      v.dims = {static_cast<int64_t>(shape->size())};
      v.data.resize(shape->size() * 8);
      std::memcpy(v.data.data(), shape->data(), v.data.size());
      node->constants.emplace_back(name + "/shape", "");
      node->constant_values.push_back(std::move(v));
      node->input_slots.push_back(-2);
    }
    Op op;
    op.type = OpType::kOpaque;
    op.inputs = {x};
    op.outputs = {out};
    op.attrs.onnx = std::move(node);
    op.name = name;
    while (g_.AddOp(op) == kNone) op.name = g_.UniqueOpName(name);
  }

  Graph& g_;
  std::string labels_[2];
  TensorId in_[2];
  bool constant_[2];
  std::string out_;
  std::map<char, Shape> dim_;  // each label's dim, once per operand that has it
  std::string batch_, k_, free_[2];
};

}  // namespace

int64_t EinsumToGemm(Graph& g) {
  int64_t rewritten = 0;
  std::map<TensorId, TensorId> transposed;
  for (OpId id : g.LiveOps()) {
    const OnnxNode* node = OnnxOp(g, id, "Einsum", 2);
    if (!node) continue;
    auto s = Subscripts(*node);
    if (!s) continue;
    // The activation x and the constant w, whichever order they come in.
    size_t xi = 0;
    if (IsConstant(g, g.op(id).inputs[0], 2) && !IsConstant(g, g.op(id).inputs[1], 2)) xi = 1;
    const TensorId x = g.op(id).inputs[xi], w = g.op(id).inputs[1 - xi];
    const std::string& xs = (*s)[xi];
    const std::string& ws = (*s)[1 - xi];
    const std::string& out = (*s)[2];
    const Tensor& xt = g.tensor(x);
    if (!IsConstant(g, w, 2) || xt.role == Role::kParam || ws.size() != 2 || xs.size() < 2 ||
        xt.shape.size() != xs.size() || g.tensor(w).dtype != xt.dtype) {
      continue;
    }
    const char j = xs.back();
    const size_t jw = ws.find(j);
    if (jw == std::string::npos) continue;
    const char k = ws[1 - jw];
    if (xs.find(k) != std::string::npos || out != xs.substr(0, xs.size() - 1) + k) continue;
    const Dim& kdim = xt.shape.back();
    if (!kdim.is_static() || kdim.value != g.tensor(w).shape[jw].value) continue;
    // jw == 1: w is [N, K] already (gemm_rcr's layout); else its transpose.
    const TensorId wt = jw == 1 ? w : Transposed(g, w, transposed);
    Shape y_shape = g.tensor(x).shape;
    y_shape.back() = g.tensor(wt).shape[0];
    if (!SettleShape(g, g.op(id).outputs[0], y_shape)) continue;
    const Shape x_shape = g.tensor(x).shape;
    BecomeGemm(g, id, x, x_shape, wt, std::nullopt, y_shape);
    ++rewritten;
  }
  return rewritten;
}

int64_t LeftMatMulToGemm(Graph& g) {
  int64_t rewritten = 0;
  for (OpId id : g.LiveOps()) {
    if (!OnnxOp(g, id, "MatMul", 2)) continue;
    const TensorId w = g.op(id).inputs[0], x = g.op(id).inputs[1];
    const Tensor& xt = g.tensor(x);
    if (!IsConstant(g, w, 2) || xt.role == Role::kParam || xt.shape.size() != 3 ||
        g.tensor(w).dtype != xt.dtype) {
      continue;
    }
    const Dim& k = xt.shape[1];
    const Dim& one = xt.shape[2];
    if (!k.is_static() || k.value != g.tensor(w).shape[1].value || !one.is_static() ||
        one.value != 1) {
      continue;
    }
    const Dim m = xt.shape[0];
    const Shape a_shape = {m, k};
    const Shape y_shape = {m, g.tensor(w).shape[0]};
    if (!SettleShape(g, g.op(id).outputs[0], {m, y_shape[1], Dim::Static(1)})) continue;
    BecomeGemm(g, id, x, a_shape, w, std::nullopt, y_shape);
    ++rewritten;
  }
  return rewritten;
}

int64_t PointwiseConvToGemm(Graph& g) {
  int64_t rewritten = 0;
  for (OpId id : g.LiveOps()) {
    const OnnxNode* node = OnnxOp(g, id, "Conv", 2);
    if (!node) node = OnnxOp(g, id, "Conv", 3);
    if (!node) continue;
    const Op& op = g.op(id);
    const TensorId x = op.inputs[0], w = op.inputs[1];
    const Tensor& xt = g.tensor(x);
    const size_t rank = xt.shape.size();
    if (rank < 3 || !IsConstant(g, w, rank) || xt.role == Role::kParam ||
        g.tensor(w).dtype != xt.dtype) {
      continue;
    }
    // Kernel 1, stride 1, no padding, one group; every spatial dim 1.
    auto ints = [&](const char* name) {
      auto it = node->ints.find(name);
      return it == node->ints.end() ? std::vector<int64_t>{} : it->second;
    };
    auto all = [](const std::vector<int64_t>& v, int64_t want) {
      return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == want; });
    };
    auto pad = node->strings.find("auto_pad");
    if ((pad != node->strings.end() && pad->second != "NOTSET" && pad->second != "VALID") ||
        !all(ints("kernel_shape"), 1) || !all(ints("strides"), 1) || !all(ints("pads"), 0) ||
        !(ints("group").empty() || ints("group") == std::vector<int64_t>{1})) {
      continue;
    }
    const Shape& ws = g.tensor(w).shape;
    bool ones = true;
    for (size_t d = 2; d < rank; ++d) {
      ones = ones && ws[d].value == 1 && xt.shape[d].is_static() && xt.shape[d].value == 1;
    }
    const Dim& c = xt.shape[1];
    if (!ones || !c.is_static() || c.value != ws[1].value) continue;
    const int64_t o = ws[0].value;
    std::optional<TensorId> bias;
    if (op.inputs.size() == 3) {
      bias = op.inputs[2];
      if (!IsConstant(g, *bias, 1) || g.tensor(*bias).dtype != xt.dtype ||
          g.tensor(*bias).shape[0].value != o) {
        continue;
      }
    }
    Shape y_full = {xt.shape[0], Dim::Static(o)};
    y_full.resize(rank, Dim::Static(1));
    if (!SettleShape(g, op.outputs[0], y_full)) continue;
    // The weight as [O, C]: the same bytes.
    const Tensor& wt = g.tensor(w);
    const TensorId w2 = AddParamTensor(g, wt.name + "_2d", {Dim::Static(o), c}, wt.dtype, *wt.data);
    const Dim m = g.tensor(x).shape[0];
    BecomeGemm(g, id, x, {m, c}, w2, bias, {m, Dim::Static(o)});
    ++rewritten;
  }
  return rewritten;
}

int64_t EinsumToMatMul(Graph& g) {
  int64_t rewritten = 0;
  std::map<std::string, TensorId> folded;
  for (OpId id : g.LiveOps()) {
    const OnnxNode* node = OnnxOp(g, id, "Einsum", 2);
    if (!node) continue;
    auto s = Subscripts(*node);
    if (!s) continue;
    const Op& op = g.op(id);
    const TensorId a = op.inputs[0], b = op.inputs[1];
    const DType dtype = g.tensor(a).dtype;
    if (!IsFloat(dtype) || g.tensor(b).dtype != dtype || g.tensor(op.outputs[0]).dtype != dtype) {
      continue;
    }
    const std::string subscripts[3] = {(*s)[0], (*s)[1], (*s)[2]};
    const TensorId in[2] = {a, b};
    EinsumMatMul form(g, subscripts, in);
    if (!form.Classify()) continue;
    const std::optional<MatMulPlan> plan = form.Best();
    if (!plan || !SettleShape(g, op.outputs[0], form.OutputShape())) continue;
    form.Rewrite(id, *plan, folded);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace hfuse
