// Shared graph edits of the rewriting passes. See rewrite_helpers.h.
#include "hfuse/passes/rewrite_helpers.h"

#include <fmt/format.h>

#include <memory>

namespace hfuse {

TensorId AddFreshTensor(Graph& graph, const std::string& base, Shape shape, DType dtype) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  for (int n = 0;; ++n) {
    t.name = n == 0 ? base : fmt::format("{}_{}", base, n);
    if (const TensorId id = graph.TryAddTensor(t); id != kNone) return id;
  }
}

TensorId AddParamTensor(Graph& graph, const std::string& base, Shape shape, DType dtype,
                        std::vector<uint8_t> data) {
  Tensor t;
  t.role = Role::kParam;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = std::make_shared<std::vector<uint8_t>>(std::move(data));
  for (int n = 0;; ++n) {
    t.name = n == 0 ? base : fmt::format("{}_{}", base, n);
    if (const TensorId id = graph.TryAddTensor(t); id != kNone) return id;
  }
}

OpId AddReshape(Graph& graph, const std::string& base, TensorId in, TensorId out) {
  Op op;
  op.type = OpType::kReshape;
  op.inputs = {in};
  op.outputs = {out};
  for (const Dim& d : graph.tensor(out).shape) op.attrs.shape.push_back(d.is_static() ? d.value : -1);
  for (int n = 0;; ++n) {
    op.name = n == 0 ? base : fmt::format("{}_{}", base, n);
    if (const OpId id = graph.AddOp(op); id != kNone) return id;
  }
}

}  // namespace hfuse
