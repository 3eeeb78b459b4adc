// fold-batchnorm. See fold_batchnorm.h.
#include "hfuse/passes/fold_batchnorm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "hfuse/passes/rewrite_helpers.h"

namespace hfuse {
namespace {

// A float32 param's values, when it has `n` of them.
std::optional<std::vector<float>> Values(const Graph& g, TensorId id, int64_t n) {
  const Tensor& t = g.tensor(id);
  if (t.role != Role::kParam || !t.data || t.dtype != DType::kFloat32 ||
      t.data->size() != static_cast<size_t>(n) * 4) {
    return std::nullopt;
  }
  std::vector<float> v(static_cast<size_t>(n));
  std::memcpy(v.data(), t.data->data(), t.data->size());
  return v;
}

TensorId NewParam(Graph& g, const std::string& base, Shape shape, const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return AddParamTensor(g, base, std::move(shape), DType::kFloat32, std::move(bytes));
}

bool IsInferenceBatchNorm(const Op& op) {
  return op.type == OpType::kOpaque && op.attrs.onnx && op.attrs.onnx->domain.empty() &&
         op.attrs.onnx->op_type == "BatchNormalization" && op.inputs.size() == 5 &&
         op.outputs.size() == 1;
}

// An inference BatchNormalization of `n` channels as y = (x - mean) · s +
// beta, s = scale / sqrt(var + epsilon), or nothing where its statistics
// are not float32 params of n values.
struct Affine {
  std::vector<float> mean, beta, s;
};
std::optional<Affine> AffineOf(const Graph& g, const Op& bn, int64_t n) {
  auto scale = Values(g, bn.inputs[1], n), beta = Values(g, bn.inputs[2], n), mean = Values(g, bn.inputs[3], n),
       var = Values(g, bn.inputs[4], n);
  if (!scale || !beta || !mean || !var) return std::nullopt;
  double eps = 1e-5;
  if (auto it = bn.attrs.onnx->floats.find("epsilon"); it != bn.attrs.onnx->floats.end() && !it->second.empty()) {
    eps = it->second[0];
  }
  Affine a{std::move(*mean), std::move(*beta), std::move(*scale)};
  for (size_t j = 0; j < a.s.size(); ++j) a.s[j] /= std::sqrt((*var)[j] + static_cast<float>(eps));
  return a;
}

// Erases the params in `dropped` that nothing reads any more.
void DropUnread(Graph& g, std::vector<TensorId> dropped) {
  std::sort(dropped.begin(), dropped.end());
  dropped.erase(std::unique(dropped.begin(), dropped.end()), dropped.end());
  for (TensorId t : dropped) {
    const Tensor& tt = g.tensor(t);
    if (tt.alive && tt.role == Role::kParam && tt.users.empty() && !g.IsGraphOutput(t)) g.EraseTensor(t);
  }
}

// A GEMM's weight [n, k] and bias (zeros for a gemm_rcr), or nothing where
// they are not float32 params with values.
struct WeightBias {
  std::vector<float> w, b;
};
std::optional<WeightBias> WeightBiasOf(const Graph& g, const Op& gemm, int64_t n, int64_t k) {
  auto w = Values(g, gemm.inputs[1], n * k);
  auto b = gemm.type == OpType::kGemmRcrBias ? Values(g, gemm.inputs[2], n)
                                             : std::vector<float>(static_cast<size_t>(n), 0.0f);
  if (!w || !b) return std::nullopt;
  return WeightBias{std::move(*w), std::move(*b)};
}

// The GEMM reads `wb` as new params named after `base` (its weight of
// `w_shape`), a gemm_rcr_bias no longer the node it was imported from;
// the params it read before go where nothing else reads them, with those
// of `dropped` (the BatchNormalization's statistics).
void SetWeightBias(Graph& g, OpId gemm_id, const std::string& base, Shape w_shape, const WeightBias& wb,
                   std::vector<TensorId> dropped) {
  const auto n = static_cast<int64_t>(wb.b.size());
  const TensorId w2 = NewParam(g, base + "/folded_weight", std::move(w_shape), wb.w);
  const TensorId b2 = NewParam(g, base + "/folded_bias", {Dim::Static(n)}, wb.b);
  const std::vector<TensorId> ins = g.op(gemm_id).inputs;
  dropped.insert(dropped.end(), ins.begin() + 1, ins.end());
  g.SetOperand(gemm_id, 1, w2);
  if (ins.size() == 3) {
    g.SetOperand(gemm_id, 2, b2);
  } else {
    g.AddOperand(gemm_id, b2);
  }
  Op& op = g.mutable_op(gemm_id);
  op.type = OpType::kGemmRcrBias;
  op.attrs.onnx = nullptr;
  DropUnread(g, std::move(dropped));
}

// The after form (fold_batchnorm.h).
bool FoldAfter(Graph& g, OpId bn_id) {
  const Op& bn = g.op(bn_id);
  const TensorId y = bn.inputs[0];
  const OpId gemm_id = g.tensor(y).producer;
  if (gemm_id == kNone || g.IsGraphOutput(y) || g.tensor(y).users.size() != 1) return false;
  const Op& gemm = g.op(gemm_id);
  if (gemm.type != OpType::kGemmRcr && gemm.type != OpType::kGemmRcrBias) return false;
  const Tensor& yt = g.tensor(y);
  const Tensor& wt = g.tensor(gemm.inputs[1]);
  if (yt.shape.size() != 2 || !yt.shape[1].is_static() || wt.shape.size() != 2 ||
      !wt.shape[1].is_static()) {
    return false;
  }
  const int64_t n = yt.shape[1].value, k = wt.shape[1].value;
  std::optional<WeightBias> wb = WeightBiasOf(g, gemm, n, k);
  const std::optional<Affine> bn_affine = AffineOf(g, bn, n);
  if (!wb || !bn_affine) return false;
  for (int64_t j = 0; j < n; ++j) {
    const auto jj = static_cast<size_t>(j);
    const float s = bn_affine->s[jj];
    for (int64_t p = 0; p < k; ++p) wb->w[static_cast<size_t>(j * k + p)] *= s;
    wb->b[jj] = (wb->b[jj] - bn_affine->mean[jj]) * s + bn_affine->beta[jj];
  }
  const std::string base = bn.name;
  std::vector<TensorId> dropped = bn.inputs;
  const Shape w_shape = wt.shape;
  // The GEMM takes over z (the BatchNorm is detached; y has no producer) and reads the folded params.
  g.TakeOverOutputs(gemm_id, bn_id);
  g.EraseTensor(y);
  SetWeightBias(g, gemm_id, base, w_shape, *wb, std::move(dropped));
  return true;
}

// The before form: z = BatchNormalization(x) [M, C], read by a GEMM as
// A's columns [c0, c0 + C): as A itself, or as a part of A's concatenate
// along the last dim (TabMlp's continuous columns beside its embeddings).
bool FoldBefore(Graph& g, OpId bn_id) {
  const Op& bn = g.op(bn_id);
  const TensorId x = bn.inputs[0], z = bn.outputs[0];
  const Tensor& zt = g.tensor(z);
  if (g.IsGraphOutput(z) || zt.users.size() != 1 || zt.dtype != DType::kFloat32 || zt.shape.size() != 2 ||
      !zt.shape[1].is_static() || g.tensor(x).dtype != DType::kFloat32) {
    return false;
  }
  const int64_t c = zt.shape[1].value;
  OpId reader = zt.users[0];  // the op that reads z: the concatenate or the GEMM
  TensorId a = z;
  int64_t c0 = 0;
  if (g.op(reader).type == OpType::kConcatenate) {
    const Op& cat = g.op(reader);
    const TensorId out = cat.outputs[0];
    if (std::count(cat.inputs.begin(), cat.inputs.end(), z) != 1 || g.IsGraphOutput(out) ||
        g.tensor(out).users.size() != 1 || g.tensor(out).shape.size() != 2 || (cat.attrs.dim != 1 && cat.attrs.dim != -1)) {
      return false;
    }
    for (TensorId part : cat.inputs) {
      if (part == z) break;
      const Shape& ps = g.tensor(part).shape;
      if (ps.size() != 2 || !ps[1].is_static()) return false;
      c0 += ps[1].value;
    }
    a = out;
  }
  const OpId gemm_id = g.tensor(a).users[0];
  const Op& gemm = g.op(gemm_id);
  if ((gemm.type != OpType::kGemmRcr && gemm.type != OpType::kGemmRcrBias) || gemm.inputs[0] != a ||
      std::count(gemm.inputs.begin(), gemm.inputs.end(), a) != 1) {
    return false;
  }
  const Tensor& wt = g.tensor(gemm.inputs[1]);
  if (wt.shape.size() != 2 || !wt.shape[0].is_static() || !wt.shape[1].is_static()) return false;
  const int64_t n = wt.shape[0].value, k = wt.shape[1].value;
  if (c0 + c > k) return false;
  std::optional<WeightBias> wb = WeightBiasOf(g, gemm, n, k);
  const std::optional<Affine> bn_affine = AffineOf(g, bn, c);
  if (!wb || !bn_affine) return false;
  // y = alpha · (x · s + t) W^T + b = alpha · x (W diag(s))^T + (b + alpha · W t).
  const double alpha = gemm.attrs.Alpha();
  std::vector<double> t(static_cast<size_t>(c));
  for (size_t j = 0; j < t.size(); ++j) {
    t[j] = static_cast<double>(bn_affine->beta[j]) - static_cast<double>(bn_affine->mean[j]) * bn_affine->s[j];
  }
  for (int64_t row = 0; row < n; ++row) {
    double shift = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      const auto jj = static_cast<size_t>(j);
      float& wv = wb->w[static_cast<size_t>(row * k + c0 + j)];
      shift += static_cast<double>(wv) * t[jj];
      wv *= bn_affine->s[jj];
    }
    wb->b[static_cast<size_t>(row)] += static_cast<float>(alpha * shift);
  }
  const std::string base = bn.name;
  std::vector<TensorId> dropped(bn.inputs.begin() + 1, bn.inputs.end());  // x stays
  const Shape w_shape = wt.shape;
  // The reader takes x where it took z; the BatchNormalization and z go.
  const Op& r = g.op(reader);
  const size_t slot = static_cast<size_t>(std::find(r.inputs.begin(), r.inputs.end(), z) - r.inputs.begin());
  g.SetOperand(reader, slot, x);
  g.EraseOp(bn_id);
  SetWeightBias(g, gemm_id, base, w_shape, *wb, std::move(dropped));
  return true;
}

}  // namespace

int64_t FoldBatchNorm(Graph& graph) {
  int64_t folded = 0;
  for (OpId id : graph.LiveOps()) {
    if (graph.op(id).alive && IsInferenceBatchNorm(graph.op(id)) && (FoldAfter(graph, id) || FoldBefore(graph, id))) {
      ++folded;
    }
  }
  return folded;
}

}  // namespace hfuse
