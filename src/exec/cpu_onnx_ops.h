// The ONNX operators that the CPU executor runs although hfuse keeps them
// opaque: what ranking models carry around their GEMMs (embedding Gathers,
// Casts, shape arithmetic, BatchNormalization, reductions, Conv, Einsum,
// batched MatMul, comparisons, Where, elementwise math on any dtype; the list
// is in README.md, "ONNX"). Constant inputs the node keeps come from
// OnnxNode::constant_values, by OnnxNode::input_slots. Every other opaque op
// fails with a message naming it, so that `hfuse run` never returns numbers
// for a graph it did not fully compute.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hfuse/runtime/host_tensor.h"
#include "hfuse/ir/graph.h"

namespace hfuse::cpu {

// A tensor as [outer, len, inner] along an operator's axis: how the CPU
// operators below and the CUDA kernels of the same operators read it.
struct AxisView {
  int64_t outer = 1, len = 1, inner = 1;
};
// Softmax and LogSoftmax of an input of shape `x`: over `len` (from opset
// 13 the axis alone; before, every dim from the axis on). Nothing when the
// axis is out of range.
std::optional<AxisView> SoftmaxView(const OnnxNode& node, const std::vector<int64_t>& x);
// The dims that ReduceSum, ReduceMean, ReduceMax, ReduceMin or ReduceProd
// of an input of rank `rank` reduces: `axes` (the values of input 1, from
// opset 13 or 18 on) or the axes attribute; every dim when there are none,
// or none with noop_with_empty_axes. Nothing when an axis is out of range.
std::optional<std::vector<bool>> ReducedDims(const OnnxNode& node, size_t rank,
                                             const std::vector<int64_t>* axes);
// The integer values of a constant the node keeps (input slot `slot`, a
// value -2 - c of OnnxNode::input_slots), or nothing.
std::optional<std::vector<int64_t>> ConstantInts(const OnnxNode& node, int32_t slot);
// Slice of an input of shape `x` (starts, ends, axes, steps as ONNX gives
// them: negative values count from the end, out-of-range ones clamp; axes
// empty: 0, 1, ...; steps empty: 1): per dim of x, the first index, the
// step and the count taken. Nothing when the lists differ in length, an
// axis is out of range or a step is 0.
struct SliceRange {
  std::vector<int64_t> first, step, count;
};
std::optional<SliceRange> SliceRanges(const std::vector<int64_t>& x, const std::vector<int64_t>& starts,
                                      const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                                      std::vector<int64_t> steps);
// The integer values of the node's input `slot` where they are known
// without running the graph: a constant the node keeps, or `known(k)` for
// the op's input k (null when unknown).
std::optional<std::vector<int64_t>> KnownInts(const OnnxNode& node, size_t slot,
                                              const std::vector<const HostTensor*>& known);
// Gather of `data` along its axis: the output is [outer, indices..., inner].
std::optional<AxisView> GatherView(const OnnxNode& node, const std::vector<int64_t>& data);

// Computes `node` (an opaque op named `op_name`) from `inputs` into `outputs`,
// which the caller has allocated with the shapes of the graph. Throws
// InputError for an operator or a form of one it cannot run. With `fast`,
// the operator's fast kernel (onnx_ops.def's Fast column) runs the forms it
// covers; the reference kernel runs the rest, and every form without it.
void RunOnnxOp(const std::string& op_name, const OnnxNode& node,
               const std::vector<const HostTensor*>& inputs,
               const std::vector<HostTensor*>& outputs, bool fast = false);

}  // namespace hfuse::cpu
