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

bool Fold(Graph& g, OpId bn_id) {
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
  auto w = Values(g, gemm.inputs[1], n * k);
  std::optional<std::vector<float>> b = gemm.type == OpType::kGemmRcrBias
                                             ? Values(g, gemm.inputs[2], n)
                                             : std::vector<float>(static_cast<size_t>(n), 0.0f);
  auto scale = Values(g, bn.inputs[1], n), beta = Values(g, bn.inputs[2], n),
       mean = Values(g, bn.inputs[3], n), var = Values(g, bn.inputs[4], n);
  if (!w || !b || !scale || !beta || !mean || !var) return false;
  double eps = 1e-5;
  if (auto it = bn.attrs.onnx->floats.find("epsilon");
      it != bn.attrs.onnx->floats.end() && !it->second.empty()) {
    eps = it->second[0];
  }
  for (int64_t j = 0; j < n; ++j) {
    const auto jj = static_cast<size_t>(j);
    const float s = (*scale)[jj] / std::sqrt((*var)[jj] + static_cast<float>(eps));
    for (int64_t p = 0; p < k; ++p) (*w)[static_cast<size_t>(j * k + p)] *= s;
    (*b)[jj] = ((*b)[jj] - (*mean)[jj]) * s + (*beta)[jj];
  }
  const std::string base = g.op(bn_id).name;
  const TensorId w2 = NewParam(g, base + "/folded_weight", wt.shape, *w);
  const TensorId b2 = NewParam(g, base + "/folded_bias", {Dim::Static(n)}, *b);
  std::vector<TensorId> dropped = g.op(bn_id).inputs;
  for (size_t i = 1; i < g.op(gemm_id).inputs.size(); ++i) dropped.push_back(g.op(gemm_id).inputs[i]);
  // The GEMM reads the folded params and takes over z; y goes.
  const bool had_bias = g.op(gemm_id).inputs.size() == 3;
  g.SetOperand(gemm_id, 1, w2);
  if (had_bias) {
    g.SetOperand(gemm_id, 2, b2);
  } else {
    g.AddOperand(gemm_id, b2);
  }
  g.TakeOverOutputs(gemm_id, bn_id);  // the BatchNorm is detached; y has no producer
  g.EraseTensor(y);
  Op& op = g.mutable_op(gemm_id);
  op.type = OpType::kGemmRcrBias;
  op.attrs.onnx = nullptr;  // no longer the node it was imported from
  // Params nobody reads any more (the unfolded weight, the statistics).
  std::sort(dropped.begin(), dropped.end());
  dropped.erase(std::unique(dropped.begin(), dropped.end()), dropped.end());
  for (TensorId t : dropped) {
    const Tensor& tt = g.tensor(t);
    if (tt.alive && tt.role == Role::kParam && tt.users.empty() && !g.IsGraphOutput(t)) {
      g.EraseTensor(t);
    }
  }
  return true;
}

}  // namespace

int64_t FoldBatchNorm(Graph& graph) {
  int64_t folded = 0;
  for (OpId id : graph.LiveOps()) {
    if (graph.op(id).alive && IsInferenceBatchNorm(graph.op(id)) && Fold(graph, id)) ++folded;
  }
  return folded;
}

}  // namespace hfuse
