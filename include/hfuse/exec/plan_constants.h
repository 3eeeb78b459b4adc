// What a plan can compute once: the values of a graph's tensors that follow
// from its bound dims and its constants alone, as TensorRT evaluates shape
// tensors when it builds an engine. A plan is made per set of dim values,
// so Shape and Size of any tensor are known then, and so is every opaque
// ONNX op whose inputs are all known (the Gather/Slice/Concat/Unsqueeze
// chains of shape arithmetic, ConstantOfShape, Range, Reshape's and Expand's
// shape operands, a Cast or Transpose of a weight). Such ops are computed
// here by the CPU executor's own kernels (cpu_onnx_ops.h) and never run;
// an executor holds their results as constants of the plan.
//
// Which ops can fold is onnx_ops.def's Fold column: Shape (from the input's
// shape alone) or Value (from the inputs' values). Known to begin with:
// params that carry their values (ONNX initializers). An op folds only when
// each output is at most kMaxFoldBytes (a Expand of a weight to the batch
// is better done by a kernel than kept), and never one that writes a graph
// output (its buffer is the caller's).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/runtime/bound_dims.h"
#include "hfuse/runtime/host_tensor.h"

namespace hfuse {

inline constexpr int64_t kMaxFoldBytes = 1 << 20;

struct PlanConstants {
  std::map<TensorId, HostTensor> values;  // every tensor whose value is known
  std::vector<bool> folded;               // per op id: computed here
  int64_t folded_ops = 0;
};

PlanConstants FoldPlanConstants(const Graph& graph, const DimValues& dims);

}  // namespace hfuse
