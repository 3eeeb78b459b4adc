// The CPU reference executor: runs any graph of the spec, original or fused.
//
// Arithmetic is fp32; float16 and bfloat16 tensors are stored in their own
// type and converted on load and store with round-to-nearest-even, as a GPU
// kernel does. GEMMs go through OpenBLAS (cblas_sgemm); LayerNorm computes
// its statistics in fp32, two-pass. A group op runs each member with the
// same kernel as the ungrouped op, so on the CPU a fused graph gives results
// bitwise equal to the original's. Every other backend is checked against
// this one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hfuse/runtime/bound_dims.h"
#include "hfuse/runtime/host_tensor.h"
#include "hfuse/ir/graph.h"

namespace hfuse {

// A param's own values (Tensor::data, e.g. an ONNX initializer); throws
// InputError when it has none or their size does not fit its shape.
HostTensor ParamValue(const Tensor& tensor, const DimValues& dims);

// Counts every live tensor's bytes (support/checked.h) at these dims and
// throws InputError, naming the tensor, when a count overflows or a tensor,
// or all of them together (a run keeps every value), exceed the memory
// budget. RandomFeeds and RunOnCpu call it before they allocate anything.
void CheckTensorSizes(const Graph& graph, const DimValues& dims);

// Values for every input and param tensor of `graph`, drawn from a seeded
// generator: uniform in [-1, 1), rounded to the tensor's dtype; gammas
// (params read as a LayerNorm's gamma) uniform in [0.5, 1.5). A tensor's
// values depend only on the seed, its name and its shape, so two graphs
// with the same tensor names get the same values. A param that came with
// its values (Tensor::data) gets them instead.
TensorMap RandomFeeds(const Graph& graph, const DimValues& dims, uint64_t seed);

// Runs the graph on `feeds` (every input and param tensor, by name, with the
// right shape and dtype; checked; a param left out runs on its own values
// when it has them) and returns the graph outputs by name. Opaque ops run
// only for the few ONNX operators of src/exec/cpu_onnx_ops.h; others throw
// InputError.
TensorMap RunOnCpu(const Graph& graph, const TensorMap& feeds, const DimValues& dims);
// As RunOnCpu, and returns every live tensor's value, indexed by tensor id
// (for checking an execution plan against the reference, tensor by tensor).
std::vector<HostTensor> RunOnCpuKeepAll(const Graph& graph, const TensorMap& feeds, const DimValues& dims);

}  // namespace hfuse
