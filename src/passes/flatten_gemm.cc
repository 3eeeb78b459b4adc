// flatten-gemm-inputs. See flatten_gemm.h.
#include "hfuse/passes/flatten_gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

namespace hfuse {
namespace {

bool AllStatic(const Shape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](const Dim& d) { return d.is_static(); });
}

// What must agree for two GEMMs to group, as far as this pass can tell.
using Key = std::tuple<OpType, DType, int64_t>;

// The GEMM's key once flattened, or nothing when it cannot be.
std::optional<Key> KeyOf(const Graph& graph, const Op& op) {
  if (!IsGemm(op.type)) return std::nullopt;
  const Tensor& a = graph.tensor(op.inputs[0]);
  if (a.shape.size() < 2 || !AllStatic(a.shape)) return std::nullopt;
  for (size_t i = 1; i < op.inputs.size(); ++i) {
    if (!AllStatic(graph.tensor(op.inputs[i]).shape)) return std::nullopt;
  }
  int64_t m = 1;
  for (size_t d = 0; d + 1 < a.shape.size(); ++d) m *= a.shape[d].value;
  return Key{op.type, a.dtype, m};
}

TensorId AddFreshTensor(Graph& graph, const std::string& base, Shape shape, DType dtype) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  for (int n = 0;; ++n) {
    t.name = n == 0 ? base : fmt::format("{}_{}", base, n);
    const TensorId id = graph.AddTensor(t);
    if (id != kNone) return id;
  }
}

OpId AddReshape(Graph& graph, const std::string& base, TensorId in, TensorId out) {
  Op op;
  op.type = OpType::kReshape;
  op.inputs = {in};
  op.outputs = {out};
  for (const Dim& d : graph.tensor(out).shape) op.attrs.shape.push_back(d.value);
  for (int n = 0;; ++n) {
    op.name = n == 0 ? base : fmt::format("{}_{}", base, n);
    const OpId id = graph.AddOp(op);
    if (id != kNone) return id;
  }
}

}  // namespace

int64_t FlattenGemmInputs(Graph& graph) {
  std::map<Key, int> count;
  std::vector<OpId> wanted;
  for (OpId id : graph.LiveOps()) {
    const Op& op = graph.op(id);
    if (auto key = KeyOf(graph, op)) {
      ++count[*key];
      if (graph.tensor(op.inputs[0]).shape.size() > 2) wanted.push_back(id);
    }
  }
  std::map<TensorId, TensorId> flat;  // A -> its 2-D form
  int64_t flattened = 0;
  for (OpId id : wanted) {
    if (count[*KeyOf(graph, graph.op(id))] < 2) continue;
    const TensorId a = graph.op(id).inputs[0];
    const TensorId y = graph.op(id).outputs[0];
    auto it = flat.find(a);
    if (it == flat.end()) {
      // Copies: adding tensors moves the graph's tensor storage.
      const std::string name = graph.tensor(a).name;
      const Shape shape = graph.tensor(a).shape;
      int64_t m = 1;
      for (size_t d = 0; d + 1 < shape.size(); ++d) m *= shape[d].value;
      const TensorId a2 = AddFreshTensor(graph, name + "_2d", {Dim::Static(m), shape.back()},
                                         graph.tensor(a).dtype);
      AddReshape(graph, name + "/flatten", a, a2);
      it = flat.emplace(a, a2).first;
    }
    const TensorId a2 = it->second;
    // A -> A2 as the GEMM's first input (A is not among its other inputs:
    // those are at most 2-D).
    graph.SetOperand(id, 0, a2);
    // The GEMM writes a 2-D Y2, reshaped into Y for Y's readers.
    const Shape y2_shape = {graph.tensor(a2).shape[0], graph.tensor(y).shape.back()};
    const TensorId y2 =
        AddFreshTensor(graph, graph.tensor(y).name + "_2d", y2_shape, graph.tensor(y).dtype);
    graph.SetOutputs(id, {y2});  // Y is left for the reshape to produce
    graph.mutable_op(id).attrs.onnx = nullptr;  // no longer the node it was imported from
    AddReshape(graph, graph.op(id).name + "/unflatten", y2, y);
    ++flattened;
  }
  return flattened;
}

}  // namespace hfuse
