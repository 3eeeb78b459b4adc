// The CUDA backend's memory plan: where each tensor of a graph lives for one
// set of bound dims, made once when the executor is built. Inputs, params
// and outputs get a buffer each (inputs and params in order of first use, so
// that a group's members' weights often sit at a constant stride);
// intermediates share one arena: the non-view outputs of one op form a unit,
// alive from the first op writing into it to the last op reading it, and
// units take the best-fitting free space of units that have ended, in
// execution order. Views (a tensor with `storage`) live in their storage's
// place. With a view plan (view_plan.h), every tensor lives in its root's
// place, ops the plan skips are no writers or readers, and the plan's
// constants that a launch reads get a region of their own ('c'), uploaded
// once. Plain C++ (no CUDA runtime): cuda_executor.cc allocates the buffers
// and tests/cuda/cuda_plan_test.cc checks the plan on any machine.
#pragma once

#include <cstdint>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/runtime/bound_dims.h"
#include "fusion_regions.h"
#include "view_plan.h"

namespace hfuse::cuda {

// Every tensor's place in its buffer starts at a multiple of this (bytes).
inline constexpr int64_t kBufferAlign = 256;

// The most ops one fused elementwise chain holds (fused_elementwise.h). A
// chain's kernel reads every input of the chain while it writes its last
// op's output, so within a run of elementwise ops the plan keeps each op's
// inputs alive up to this many ops on: no buffer a chain reads is handed to
// an output of the same chain.
inline constexpr int kMaxChainOps = 10;

struct MemoryPlan {
  std::vector<OpId> order;      // the execution order (StableTopologicalOrder)
  std::vector<int64_t> offset;  // per tensor id: byte offset in its buffer, or -1
  std::vector<char> region;     // per tensor id: 'i'nput, 'p'aram, 'o'utput, 'c'onstant, 'a'rena, or 0
  int64_t input_bytes = 0, param_bytes = 0, output_bytes = 0, constant_bytes = 0;
  int64_t arena_bytes = 0;   // the intermediates' arena
  int64_t tensor_bytes = 0;  // what the intermediates would take unshared
};

// With `fusion` (fusion_regions.h), the order is its order, and each
// region runs as one launch: every tensor a member reads stays alive to the
// region's last member, and every tensor a member writes is alive from the
// region's first, so that no buffer the region's kernel reads is one it writes.
// With group_operands_together (CudaOptions::group_operands_together), the
// A operands of a group GEMM's members that one region writes lie side by
// side, in the members' order.
MemoryPlan PlanDeviceMemory(const Graph& graph, const DimValues& dims, const ViewPlan* views = nullptr,
                            const FusionPlan* fusion = nullptr, bool group_operands_together = false);

// A tensor's bytes at these dims; throws InputError when the size wraps.
int64_t DeviceTensorBytes(const Graph& graph, const DimValues& dims, TensorId t);
// The tensor whose buffer holds t: its storage for a view, else t itself.
TensorId StorageOf(const Graph& graph, TensorId t);

}  // namespace hfuse::cuda
