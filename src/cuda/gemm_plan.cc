// The CUDA backend's GEMM member rules (gemm_plan.h): host code only.
#include "gemm_plan.h"

#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

namespace hfuse::cuda {

namespace {

bool IsLeakyRelu(const Op& op) {
  return op.type == OpType::kOpaque && op.attrs.onnx && op.attrs.onnx->domain.empty() &&
         op.attrs.onnx->op_type == "LeakyRelu";
}

}  // namespace

bool IsEpilogueActivation(const Op& op) {
  if (op.inputs.size() != 1 || op.outputs.size() != 1 || op.elided) return false;
  if (op.type == OpType::kElementwise) {
    return op.attrs.func == EwFunc::kRelu || op.attrs.func == EwFunc::kGelu || op.attrs.func == EwFunc::kTanh ||
           op.attrs.func == EwFunc::kSilu;
  }
  return IsLeakyRelu(op);
}

EpilogueActivation EpilogueActivationOf(const Op& op) {
  if (!IsLeakyRelu(op)) return {static_cast<int>(op.attrs.func)};
  const auto& floats = op.attrs.onnx->floats;
  const auto it = floats.find("alpha");
  return {kLeakyReluActivation, static_cast<float>(it == floats.end() || it->second.empty() ? 0.01 : it->second[0])};
}

std::string ActivationName(int act, float alpha) {
  if (act == kLeakyReluActivation) return fmt::format("leaky_relu({})", alpha);
  return std::string(EwFuncName(static_cast<EwFunc>(act)));
}

GemmMemberSplit SplitGemmMembers(const std::vector<DeviceGemm>& members) {
  GemmMemberSplit split;
  for (const DeviceGemm& m : members) {
    if (m.m == 0 || m.n == 0) continue;
    (m.k == 0 ? split.bias_only : split.products).push_back(m);
  }
  return split;
}

namespace {

// The op that alone reads t, through the ops `passes` lets it pass, for
// which `wanted` holds (ActivationReading, ResidualAddReading).
OpId ReaderThrough(const Graph& g, TensorId t, const std::function<bool(OpId)>& passes,
                   const std::function<bool(const Op&, TensorId)>& wanted, TensorId* read) {
  while (!g.IsGraphOutput(t) && g.tensor(t).users.size() == 1) {
    const OpId u = g.tensor(t).users[0];
    const Op& reader = g.op(u);
    if (reader.elided) break;
    if (wanted(reader, t)) {
      if (read) *read = t;
      return u;
    }
    if (!passes(u) || reader.outputs.size() != 1 || reader.inputs.empty() || reader.inputs[0] != t) break;
    t = reader.outputs[0];
  }
  return kNone;
}

}  // namespace

OpId ActivationReading(const Graph& g, TensorId t, const std::function<bool(OpId)>& passes, TensorId* read) {
  return ReaderThrough(g, t, passes, [](const Op& op, TensorId) { return IsEpilogueActivation(op); }, read);
}

OpId ResidualAddReading(const Graph& g, TensorId t, const std::function<bool(OpId)>& passes, TensorId* read,
                        TensorId* other) {
  TensorId added = kNone;
  const auto residual = [&](const Op& op, TensorId x) {
    if (op.type != OpType::kElementwise || op.attrs.func != EwFunc::kAdd || op.inputs.size() != 2 ||
        op.outputs.size() != 1) {
      return false;
    }
    added = op.inputs[0] == x ? op.inputs[1] : op.inputs[0];
    const Tensor &tx = g.tensor(x), &ta = g.tensor(added), &tz = g.tensor(op.outputs[0]);
    return added != x && ta.shape == tx.shape && tz.shape == tx.shape && ta.dtype == tx.dtype &&
           tz.dtype == tx.dtype;
  };
  const OpId add = ReaderThrough(g, t, passes, residual, read);
  if (add != kNone && other) *other = added;
  return add;
}

std::vector<std::vector<DeviceGemm>> SplitByEpilogue(const std::vector<DeviceGemm>& members) {
  std::vector<std::vector<DeviceGemm>> lists;
  for (const DeviceGemm& m : members) {
    auto same = [&](const std::vector<DeviceGemm>& l) {
      return (l[0].bias != nullptr) == (m.bias != nullptr) && l[0].act == m.act && l[0].act_alpha == m.act_alpha;
    };
    auto it = std::find_if(lists.begin(), lists.end(), same);
    if (it == lists.end()) {
      lists.push_back({m});
    } else {
      it->push_back(m);
    }
  }
  return lists;
}

bool IsStridedBatch(const std::vector<DeviceGemm>& ms) {
  if (ms.size() < 2) return true;
  const DeviceGemm& a = ms[0];
  const DeviceGemm& b = ms[1];
  for (std::size_t i = 1; i < ms.size(); ++i) {
    const DeviceGemm& c = ms[i];
    const auto step = static_cast<int64_t>(i);
    if (c.m != a.m || c.n != a.n || c.k != a.k || c.lda != a.lda || c.ldy != a.ldy) return false;
    if (c.a - a.a != step * (b.a - a.a) || c.w - a.w != step * (b.w - a.w) ||
        c.y - a.y != step * (b.y - a.y)) {
      return false;
    }
    if (a.bias && c.bias - a.bias != step * (b.bias - a.bias)) return false;
  }
  return b.a >= a.a && b.w >= a.w && b.y >= a.y && (!a.bias || b.bias >= a.bias);
}

std::optional<std::vector<DeviceGemm>> StridedBatchOrder(const std::vector<DeviceGemm>& members) {
  if (IsStridedBatch(members)) return members;
  std::vector<DeviceGemm> reversed(members.rbegin(), members.rend());
  if (IsStridedBatch(reversed)) return reversed;
  return std::nullopt;
}

bool FewCallsPay(const std::vector<DeviceGemm>& members, bool mixed) {
  if (members.size() > kLtMembersMax) return false;
  int64_t largest = 0;
  bool gemvs = true;
  for (const DeviceGemm& m : members) {
    largest = std::max(largest, m.m * m.n * m.k);
    gemvs = gemvs && m.n == 1;
  }
  int64_t bar = mixed ? kLtMixedMemberMinFmas : kLtMemberMinFmas;
  if (members.size() == 2) bar = std::min(bar, kLtPairMemberMinFmas);
  return largest >= bar || gemvs;
}

}  // namespace hfuse::cuda
