// Plan-time constants (plan_constants.h).
#include "hfuse/exec/plan_constants.h"

#include <algorithm>

#include "cpu_onnx_ops.h"
#include "hfuse/ir/analysis.h"
#include "hfuse/ir/onnx_ops.h"
#include "hfuse/support/checked.h"

namespace hfuse {
namespace {

HostTensor ParamValue(const Tensor& t, const DimValues& dims) {
  HostTensor v(t.dtype, ConcreteShape(t.shape, dims), t.name);
  if (t.data->size() == v.bytes.size()) v.bytes = *t.data;
  return v;
}

}  // namespace

PlanConstants FoldPlanConstants(const Graph& g, const DimValues& dims) {
  PlanConstants out;
  out.folded.assign(static_cast<size_t>(g.num_op_ids()), false);
  std::vector<bool> is_output(static_cast<size_t>(g.num_tensor_ids()), false);
  for (TensorId t : g.outputs()) is_output[static_cast<size_t>(t)] = true;
  auto known = [&](TensorId t) { return out.values.count(t) != 0; };
  for (TensorId t = 0; t < g.num_tensor_ids(); ++t) {
    const Tensor& tensor = g.tensor(t);
    if (tensor.alive && tensor.role == Role::kParam && tensor.data && tensor.storage == kNone) {
      HostTensor v = ParamValue(tensor, dims);
      if (v.bytes.size() == tensor.data->size()) out.values.emplace(t, std::move(v));
    }
  }
  for (OpId id : StableTopologicalOrder(g)) {
    const Op& op = g.op(id);
    if (op.elided || FamilyOf(op.type) != OpFamily::kOpaque || !op.attrs.onnx) continue;
    const OnnxNode& node = *op.attrs.onnx;
    const bool default_domain = node.domain.empty() || node.domain == "ai.onnx";
    const OnnxOpInfo* info = default_domain ? FindOnnxOp(node.op_type) : nullptr;
    if (!info) continue;
    const bool from_shape = info->fold == "Shape";
    if (!from_shape && !std::all_of(op.inputs.begin(), op.inputs.end(), known)) continue;
    bool small = true;
    for (TensorId y : op.outputs) {
      const Tensor& t = g.tensor(y);
      const int64_t bytes = ByteCountOf(ConcreteShape(t.shape, dims), DTypeBytes(t.dtype),
                                        "tensor '" + t.name + "'");
      if (bytes > kMaxFoldBytes || is_output[static_cast<size_t>(y)] || t.storage != kNone) small = false;
    }
    if (!small) continue;
    // Shape and Size read only their input's shape: a placeholder of that
    // shape stands in for a value nobody knows.
    std::vector<HostTensor> placeholders;
    std::vector<const HostTensor*> in;
    placeholders.reserve(op.inputs.size());
    for (TensorId t : op.inputs) {
      if (known(t)) {
        in.push_back(&out.values.at(t));
      } else {
        placeholders.emplace_back(g.tensor(t).dtype, std::vector<int64_t>{});
        placeholders.back().shape = ConcreteShape(g.tensor(t).shape, dims);
        in.push_back(&placeholders.back());
      }
    }
    std::vector<HostTensor> results;
    for (TensorId y : op.outputs) {
      results.emplace_back(g.tensor(y).dtype, ConcreteShape(g.tensor(y).shape, dims), g.tensor(y).name);
    }
    std::vector<HostTensor*> res;
    for (HostTensor& r : results) res.push_back(&r);
    cpu::RunOnnxOp(op.name, node, in, res);
    for (size_t k = 0; k < op.outputs.size(); ++k) out.values[op.outputs[k]] = std::move(results[k]);
    out.folded[static_cast<size_t>(id)] = true;
    ++out.folded_ops;
  }
  return out;
}

}  // namespace hfuse
