// elide-split-concat. See strided_views.h.
#include "hfuse/passes/strided_views.h"

#include <algorithm>

#include "hfuse/ir/op_members.h"

namespace hfuse {
namespace {

bool LastDim(const Graph& g, const Op& op, TensorId ref) {
  const auto rank = static_cast<int64_t>(g.tensor(ref).shape.size());
  return op.attrs.dim == rank - 1 || op.attrs.dim == -1;
}

bool IsView(const Graph& g, TensorId t) { return g.tensor(t).storage != kNone; }

}  // namespace

bool ReadsStrided(const Op& op, size_t slot) {
  return !op.elided && IsMemberActivation(op, slot);
}

bool WritesStrided(const Op& op) {
  return !op.elided && (IsGemm(op.type) || IsGroupGemm(op.type) || IsLayerNorm(op.type) ||
                        IsGroupLayerNorm(op.type));
}

int64_t ElideSplitConcat(Graph& graph) {
  int64_t elided = 0;
  for (OpId id : graph.LiveOps()) {
    const Op& op = graph.op(id);
    if (op.type != OpType::kSplit || !LastDim(graph, op, op.inputs[0])) continue;
    if (IsView(graph, op.inputs[0])) continue;
    bool ok = true;
    for (TensorId out : op.outputs) {
      ok = ok && !graph.IsGraphOutput(out);
      for (OpId user : graph.tensor(out).users) {
        const Op& u = graph.op(user);
        for (size_t slot = 0; slot < u.inputs.size(); ++slot) {
          if (u.inputs[slot] == out && !ReadsStrided(u, slot)) ok = false;
        }
      }
    }
    if (!ok) continue;
    int64_t offset = 0;
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      Tensor& t = graph.mutable_tensor(op.outputs[i]);
      t.storage = op.inputs[0];
      t.storage_offset = offset;
      offset += op.attrs.split_sizes[i];
    }
    graph.mutable_op(id).elided = true;
    ++elided;
  }
  for (OpId id : graph.LiveOps()) {
    const Op& op = graph.op(id);
    if (op.type != OpType::kConcatenate || !LastDim(graph, op, op.outputs[0])) continue;
    std::vector<TensorId> ins = op.inputs;
    std::sort(ins.begin(), ins.end());
    bool ok = std::adjacent_find(ins.begin(), ins.end()) == ins.end();  // each input once
    for (TensorId in : op.inputs) {
      const Tensor& t = graph.tensor(in);
      ok = ok && t.producer != kNone && WritesStrided(graph.op(t.producer)) && !IsView(graph, in) &&
           t.users.size() == 1 && !graph.IsGraphOutput(in);
    }
    if (!ok) continue;
    int64_t offset = 0;
    for (TensorId in : op.inputs) {
      Tensor& t = graph.mutable_tensor(in);
      t.storage = op.outputs[0];
      t.storage_offset = offset;
      offset += t.shape.back().value;
    }
    graph.mutable_op(id).elided = true;
    ++elided;
  }
  return elided;
}

}  // namespace hfuse
