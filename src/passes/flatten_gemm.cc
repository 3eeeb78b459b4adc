// flatten-gemm-inputs. See flatten_gemm.h.
#include "hfuse/passes/flatten_gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <tuple>

#include "hfuse/passes/rewrite_helpers.h"

namespace hfuse {
namespace {

bool AllStatic(const Shape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](const Dim& d) { return d.is_static(); });
}

// M of a flattened A: the static leading dims' product and the named ones
// (sorted; a derived dim taken apart into its factors).
struct FlatM {
  int64_t factor = 1;
  std::vector<int32_t> dims;
  friend bool operator<(const FlatM& a, const FlatM& b) {
    return std::tie(a.factor, a.dims) < std::tie(b.factor, b.dims);
  }
};

// What must agree for two GEMMs to group, as far as this pass can tell.
using Key = std::tuple<OpType, DType, FlatM>;

void AddFactors(const Graph& graph, int32_t dim, FlatM& m) {
  const DynamicDim& d = graph.dims()[static_cast<size_t>(dim)];
  if (d.product_of.empty()) {
    m.dims.push_back(dim);
    return;
  }
  m.factor *= d.factor;
  for (int32_t f : d.product_of) AddFactors(graph, f, m);
}

// The GEMM's key once flattened, or nothing when it cannot be.
std::optional<Key> KeyOf(const Graph& graph, const Op& op, bool dynamic_m) {
  if (!IsGemm(op.type)) return std::nullopt;
  const Tensor& a = graph.tensor(op.inputs[0]);
  if (a.shape.size() < 2 || !a.shape.back().is_static()) return std::nullopt;
  if (!dynamic_m && !AllStatic(a.shape)) return std::nullopt;
  for (size_t i = 1; i < op.inputs.size(); ++i) {
    if (!AllStatic(graph.tensor(op.inputs[i]).shape)) return std::nullopt;
  }
  FlatM m;
  for (size_t d = 0; d + 1 < a.shape.size(); ++d) {
    if (a.shape[d].is_static()) {
      if (__builtin_mul_overflow(m.factor, a.shape[d].value, &m.factor)) return std::nullopt;
    } else {
      AddFactors(graph, a.shape[d].dynamic, m);
    }
  }
  std::sort(m.dims.begin(), m.dims.end());
  return Key{op.type, a.dtype, m};
}

// M as a dim: static, one named dim, or the derived dim of the product.
Dim MDim(Graph& graph, const FlatM& m) { return DerivedDim(graph, m.factor, m.dims); }

// Whether a reshape to `shape` can be written: the IR's shape attribute
// holds one -1 at most.
bool OneNamedDim(const Shape& shape) {
  return std::count_if(shape.begin(), shape.end(), [](const Dim& d) { return !d.is_static(); }) <=
         1;
}

}  // namespace

int64_t FlattenGemmInputs(Graph& graph, const FlattenGemmInputsOptions& options) {
  std::map<Key, int> count;
  std::vector<OpId> wanted;
  for (OpId id : graph.LiveOps()) {
    const Op& op = graph.op(id);
    if (auto key = KeyOf(graph, op, options.dynamic_m)) {
      ++count[*key];
      const Shape& a = graph.tensor(op.inputs[0]).shape;
      if (a.size() > 2 && OneNamedDim(a) && OneNamedDim(graph.tensor(op.outputs[0]).shape)) {
        wanted.push_back(id);
      }
    }
  }
  std::map<TensorId, TensorId> flat;  // A -> its 2-D form
  int64_t flattened = 0;
  for (OpId id : wanted) {
    const Key key = *KeyOf(graph, graph.op(id), options.dynamic_m);
    if (count[key] < 2) continue;
    const TensorId a = graph.op(id).inputs[0];
    const TensorId y = graph.op(id).outputs[0];
    auto it = flat.find(a);
    if (it == flat.end()) {
      // Copies: adding tensors moves the graph's tensor storage.
      const std::string name = graph.tensor(a).name;
      const Shape shape = graph.tensor(a).shape;
      const Dim m = MDim(graph, std::get<2>(key));
      const TensorId a2 =
          AddFreshTensor(graph, name + "_2d", {m, shape.back()}, graph.tensor(a).dtype);
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
