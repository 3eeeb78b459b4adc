// fuse-mm-elementwise. See fuse_mm_elementwise.h.
#include "hfuse/passes/fuse_mm_elementwise.h"

#include <algorithm>

namespace hfuse {
namespace {

// The only op reading `op`'s single output, or kNone when there is another
// reader or the output is a graph output (then it must stay visible).
OpId SoleUser(const Graph& graph, OpId op) {
  const Op& o = graph.op(op);
  if (o.outputs.size() != 1 || graph.IsGraphOutput(o.outputs[0])) return kNone;
  const std::vector<OpId>& users = graph.tensor(o.outputs[0]).users;
  return users.size() == 1 ? users[0] : kNone;
}

// `consumer` disappears and `op` takes over its output, reading `extra` as a
// new last input when given. The tensor between them is erased.
void Absorb(Graph& graph, OpId op, OpId consumer, OpType type, TensorId extra) {
  const TensorId mid = graph.op(op).outputs[0];
  graph.TakeOverOutputs(op, consumer);  // `mid` loses its only user and its producer
  graph.EraseTensor(mid);
  if (extra != kNone) graph.AddOperand(op, extra);
  Op& o = graph.mutable_op(op);
  o.type = type;
  o.attrs.onnx = nullptr;  // no longer the node it was imported from
}

// gemm_rcr -> add(y, b) with b a [N] param of the GEMM's dtype.
bool FuseBias(Graph& graph, OpId gemm) {
  const OpId add = SoleUser(graph, gemm);
  if (add == kNone) return false;
  const Op& e = graph.op(add);
  if (e.type != OpType::kElementwise || e.attrs.func != EwFunc::kAdd || e.inputs.size() != 2) {
    return false;
  }
  const TensorId y = graph.op(gemm).outputs[0];
  const TensorId bias = e.inputs[0] == y ? e.inputs[1] : e.inputs[0];
  if (bias == y) return false;  // add(y, y)
  const Tensor& b = graph.tensor(bias);
  const Dim& n = graph.tensor(graph.op(gemm).inputs[1]).shape[0];
  if (b.role != Role::kParam || b.dtype != graph.tensor(y).dtype || b.shape.size() != 1 ||
      !b.shape[0].is_static() || !(b.shape[0] == n)) {
    return false;
  }
  Absorb(graph, gemm, add, OpType::kGemmRcrBias, bias);
  return true;
}

// An op that only re-describes its first input's shape (the IR's reshape;
// ONNX Reshape, Squeeze, Unsqueeze, Flatten, Identity).
bool ShapeOnly(const Op& op) {
  if (op.type == OpType::kReshape) return true;
  if (FamilyOf(op.type) != OpFamily::kOpaque || !op.attrs.onnx || !(op.attrs.onnx->domain.empty() || op.attrs.onnx->domain == "ai.onnx")) {
    return false;
  }
  const std::string& t = op.attrs.onnx->op_type;
  return t == "Reshape" || t == "Squeeze" || t == "Unsqueeze" || t == "Flatten" || t == "Identity";
}

// The unary elementwise op reading `op`'s output, or kNone.
OpId UnaryUser(const Graph& graph, OpId op) {
  const OpId u = SoleUser(graph, op);
  if (u == kNone) return kNone;
  const Op& e = graph.op(u);
  return e.type == OpType::kElementwise && e.inputs.size() == 1 && IsUnary(e.attrs.func) ? u : kNone;
}

// gemm_rcr_bias -> f(y), for each f some GEMM kind of op_kinds.def applies
// after its bias (relu, sigmoid); also through a shape-only op between them
// (a model's logit squeezed to [B] before its sigmoid: DIN's and DCNv2's
// last layers): the GEMM takes f, the shape op then makes f's output.
bool FuseActivation(Graph& graph, OpId gemm) {
  OpId act = UnaryUser(graph, gemm);
  OpId view = kNone;
  if (act == kNone) {
    view = SoleUser(graph, gemm);
    if (view == kNone || !ShapeOnly(graph.op(view)) || graph.op(view).inputs.empty() ||
        graph.op(view).inputs[0] != graph.op(gemm).outputs[0]) {
      return false;
    }
    act = UnaryUser(graph, view);
    if (act == kNone) return false;
  }
  const std::optional<OpType> kind = FindKind(OpFamily::kGemm, true, graph.op(act).attrs.func);
  if (!kind) return false;
  if (view == kNone) {
    Absorb(graph, gemm, act, *kind, kNone);
    return true;
  }
  const TensorId mid = graph.op(view).outputs[0];
  graph.TakeOverOutputs(view, act);  // the shape op now writes f's output
  graph.EraseTensor(mid);
  Op& o = graph.mutable_op(gemm);
  o.type = *kind;
  o.attrs.onnx = nullptr;
  return true;
}

}  // namespace

int64_t FuseMmElementwise(Graph& graph, const FuseMmElementwiseOptions& options) {
  int64_t absorbed = 0;
  for (OpId id : graph.LiveOps()) {
    if (!graph.op(id).alive) continue;  // absorbed by an earlier GEMM
    if (graph.op(id).type == OpType::kGemmRcr && FuseBias(graph, id)) ++absorbed;
    if (options.activations && graph.op(id).type == OpType::kGemmRcrBias &&
        FuseActivation(graph, id)) {
      ++absorbed;
    }
  }
  return absorbed;
}

}  // namespace hfuse
