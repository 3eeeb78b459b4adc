// Import-time patterns. See import_patterns.h.
#include "import_patterns.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <optional>

#include "hfuse/support/error.h"
#include "hfuse/support/half.h"

namespace hfuse::import_patterns {
namespace {

// The value of a one-element param, or nothing.
std::optional<double> ScalarValue(const Graph& g, TensorId id) {
  const Tensor& t = g.tensor(id);
  if (t.role != Role::kParam || !t.data) return std::nullopt;
  for (const Dim& d : t.shape) {
    if (!d.is_static() || d.value != 1) return std::nullopt;
  }
  if (t.data->size() != static_cast<size_t>(DTypeBytes(t.dtype))) return std::nullopt;
  if (t.dtype == DType::kFloat32) {
    float f;
    std::memcpy(&f, t.data->data(), 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, t.data->data(), 2);
  return t.dtype == DType::kFloat16 ? HalfToFloat(h) : BFloat16ToFloat(h);
}

bool Near(std::optional<double> v, double want) {
  return v && std::abs(*v - want) <= 1e-3 * std::abs(want);
}

// The only reader of `t`, or kNone (several readers, or a graph output).
OpId SoleUser(const Graph& g, TensorId t) {
  if (g.IsGraphOutput(t) || g.tensor(t).users.size() != 1) return kNone;
  return g.tensor(t).users[0];
}

bool IsEw(const Graph& g, OpId op, EwFunc func, size_t inputs) {
  if (op == kNone) return false;
  const Op& o = g.op(op);
  return o.type == OpType::kElementwise && o.attrs.func == func && o.inputs.size() == inputs &&
         o.outputs.size() == 1;
}

// For a binary op reading `known`, the other operand (kNone if it reads
// `known` twice or not at all).
TensorId Other(const Graph& g, OpId op, TensorId known) {
  const Op& o = g.op(op);
  if (o.inputs[0] == known && o.inputs[1] != known) return o.inputs[1];
  if (o.inputs[1] == known && o.inputs[0] != known) return o.inputs[0];
  return kNone;
}

OpId Producer(const Graph& g, TensorId t) { return g.tensor(t).producer; }

// Detaches `chain` (producers before readers), erases the tensors inside it
// and adds `replacement`, which produces the chain's result.
void Replace(Graph& g, const std::vector<OpId>& chain, Op replacement) {
  std::vector<TensorId> inner;
  for (OpId op : chain) {
    for (TensorId out : g.op(op).outputs) {
      if (std::find(replacement.outputs.begin(), replacement.outputs.end(), out) ==
          replacement.outputs.end()) {
        inner.push_back(out);
      }
    }
  }
  for (OpId op : chain) g.DetachOp(op);
  for (TensorId t : inner) g.EraseTensor(t);
  const std::string base = replacement.name;
  for (int n = 1; g.AddOp(replacement) == kNone; ++n) {
    replacement.name = fmt::format("{}_{}", base, n);
  }
}

}  // namespace

int64_t FoldErfGelu(Graph& g) {
  int64_t folded = 0;
  for (OpId erf : g.LiveOps()) {
    const Op& e = g.op(erf);
    if (!e.alive || e.type != OpType::kOpaque || !e.attrs.onnx || e.attrs.onnx->op_type != "Erf" ||
        !e.attrs.onnx->domain.empty() || e.inputs.size() != 1 || e.outputs.size() != 1) {
      continue;
    }
    // t = x / sqrt(2)  or  x * (1 / sqrt(2))
    const TensorId t = e.inputs[0];
    const OpId scale = Producer(g, t);
    if (scale == kNone || SoleUser(g, t) != erf) continue;
    TensorId x = kNone;
    const std::vector<TensorId>& s_in = g.op(scale).inputs;
    if (IsEw(g, scale, EwFunc::kDiv, 2) && Near(ScalarValue(g, s_in[1]), std::numbers::sqrt2)) {
      x = s_in[0];
    } else if (IsEw(g, scale, EwFunc::kMul, 2)) {
      for (size_t i = 0; i < 2; ++i) {
        if (Near(ScalarValue(g, s_in[i]), std::numbers::sqrt2 / 2)) x = s_in[1 - i];
      }
    }
    if (x == kNone) continue;
    // a = erf + 1
    const OpId add = SoleUser(g, e.outputs[0]);
    if (!IsEw(g, add, EwFunc::kAdd, 2)) continue;
    const TensorId one = Other(g, add, e.outputs[0]);
    if (one == kNone || !Near(ScalarValue(g, one), 1.0)) continue;
    const TensorId a = g.op(add).outputs[0];
    const OpId mul = SoleUser(g, a);
    if (!IsEw(g, mul, EwFunc::kMul, 2)) continue;
    const TensorId other = Other(g, mul, a);
    if (other == kNone) continue;
    std::vector<OpId> chain = {scale, erf, add};
    TensorId z = kNone;
    if (other == x) {  // (x * a) * 0.5
      const OpId half = SoleUser(g, g.op(mul).outputs[0]);
      if (!IsEw(g, half, EwFunc::kMul, 2)) continue;
      const TensorId c = Other(g, half, g.op(mul).outputs[0]);
      if (c == kNone || !Near(ScalarValue(g, c), 0.5)) continue;
      chain.insert(chain.end(), {mul, half});
      z = g.op(half).outputs[0];
    } else if (Near(ScalarValue(g, other), 0.5)) {  // x * (a * 0.5)
      const OpId times_x = SoleUser(g, g.op(mul).outputs[0]);
      if (!IsEw(g, times_x, EwFunc::kMul, 2) || Other(g, times_x, g.op(mul).outputs[0]) != x) continue;
      chain.insert(chain.end(), {mul, times_x});
      z = g.op(times_x).outputs[0];
    } else {  // (x * 0.5) * a
      const OpId half = Producer(g, other);
      if (!IsEw(g, half, EwFunc::kMul, 2) || SoleUser(g, other) != mul) continue;
      const TensorId c = Other(g, half, x);
      if (c == kNone || !Near(ScalarValue(g, c), 0.5)) continue;
      chain.insert(chain.end(), {half, mul});
      z = g.op(mul).outputs[0];
    }
    if (!(g.tensor(z).shape == g.tensor(x).shape) || g.tensor(z).dtype != g.tensor(x).dtype) {
      continue;
    }
    Op gelu;
    gelu.type = OpType::kElementwise;
    gelu.attrs.func = EwFunc::kGelu;
    gelu.inputs = {x};
    gelu.outputs = {z};
    gelu.name = e.name;
    if (gelu.name.size() >= 3 && gelu.name.ends_with("Erf")) {
      gelu.name.replace(gelu.name.size() - 3, 3, "Gelu");
    } else {
      gelu.name += "/Gelu";
    }
    Replace(g, chain, std::move(gelu));
    ++folded;
  }
  return folded;
}

int64_t FuseLayerNormSigmoidMul(Graph& g) {
  int64_t fused = 0;
  for (OpId ln : g.LiveOps()) {
    const Op& l = g.op(ln);
    if (!l.alive || l.type != OpType::kLayerNorm || l.outputs.size() != 1) continue;
    const TensorId x = l.inputs[0];
    const OpId sig = SoleUser(g, l.outputs[0]);
    if (!IsEw(g, sig, EwFunc::kSigmoid, 1)) continue;
    const TensorId s = g.op(sig).outputs[0];
    const OpId mul = SoleUser(g, s);
    if (!IsEw(g, mul, EwFunc::kMul, 2) || Other(g, mul, s) != x) continue;
    // The LayerNorm takes over the product: same id, same name.
    const TensorId y = l.outputs[0];
    g.TakeOverOutputs(ln, mul);
    g.DetachOp(sig);
    g.EraseTensor(s);
    g.EraseTensor(y);
    Op& op = g.mutable_op(ln);
    op.type = OpType::kLayerNormSigmoidMul;
    op.attrs.onnx = nullptr;  // no longer the node it was imported from
    ++fused;
  }
  return fused;
}

}  // namespace hfuse::import_patterns
