// The ONNX operators that the CPU executor runs although hfuse keeps them
// opaque: what ranking models carry around their GEMMs (embedding Gathers,
// Casts, shape arithmetic, BatchNormalization, reductions, Conv, Einsum,
// batched MatMul, comparisons, Where, elementwise math on any dtype; the list
// is in README.md, "ONNX"). Constant inputs the node keeps come from
// OnnxNode::constant_values, by OnnxNode::input_slots. Every other opaque op
// fails with a message naming it, so that `hfuse run` never returns numbers
// for a graph it did not fully compute.
#pragma once

#include <string>
#include <vector>

#include "hfuse/runtime/host_tensor.h"
#include "hfuse/ir/graph.h"

namespace hfuse::cpu {

// Computes `node` (an opaque op named `op_name`) from `inputs` into `outputs`,
// which the caller has allocated with the shapes of the graph. Throws
// InputError for an operator or a form of one it cannot run.
void RunOnnxOp(const std::string& op_name, const OnnxNode& node,
               const std::vector<const HostTensor*>& inputs,
               const std::vector<HostTensor*>& outputs);

}  // namespace hfuse::cpu
