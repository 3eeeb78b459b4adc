// einsum-to-gemm, left-matmul-to-gemm, pointwise-conv-to-gemm. See canonical_gemms.h.
#include "hfuse/passes/canonical_gemms.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
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

}  // namespace hfuse
