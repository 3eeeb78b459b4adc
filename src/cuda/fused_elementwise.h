// Fused elementwise chains: a chain of float32 elementwise ops, each read
// only by the next (the CUDA planner finds them: cuda_executor_impl.h,
// PendingChain), as one kernel written for the chain and compiled at plan
// time by NVRTC, the CUDA toolkit's runtime compiler, as Inductor and XLA
// write a loop per fusion:
//
//   before: t0 = x * c; t1 = t0 + b; y = t1 + x      three launches, t0 and t1 in memory
//   after:  for e: y[e] = (x[e] * c[e / n] + b[e % n]) + x[e]        one launch
//
// The shape and strides are constants of the source (index arithmetic by
// constant divisors), every input is read once, the intermediates stay in
// registers, and each step is the formula its op's own kernel applies
// (float_funcs.def), so the chain computes what its ops alone do up to the
// compiler's contraction of a multiply and an add into one FMA. Kernels
// are cached by their source text for the process.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusion_regions.h"
#include "memory_plan.h"
#include "onnx_kernels.h"

namespace hfuse::cuda {

inline constexpr int kMaxFusedInputs = 6, kMaxFusedSteps = kMaxChainOps;

// Registers 0..kMaxFusedInputs-1 hold the inputs; step t computes func
// (an OnnxFunc of float_funcs.def) over its three argument registers into
// register kMaxFusedInputs + t; the last step's value is the output.
struct FusedStep {
  int32_t func;
  int8_t arg[3];
  float alpha, beta;
};
struct FusedElementwiseArgs {
  StridedOperand in[kMaxFusedInputs];  // float32, strides over the output's shape
  int32_t num_inputs, num_steps;
  FusedStep steps[kMaxFusedSteps];
  void* out;  // float32, row-major over shape
  int64_t out_strides[kMaxOnnxRank];
  int64_t shape[kMaxOnnxRank];
  int32_t rank;
  int64_t numel;  // below 2^31, as every operand's reach (the host checks)
};

// Whether float_funcs.def has a formula for func.
bool FusableFunc(int32_t func);

// The CUDA C++ source of the chain's kernel `hfuse_chain(in0, ..., out)`.
std::string FusedElementwiseSource(const FusedElementwiseArgs& args);

// The source compiled for `arch` ("sm_90"): a cubin. Needs no device;
// throws CudaError with NVRTC's log if it does not compile.
std::vector<char> CompileFusedSource(const std::string& source, const std::string& arch);

// The chain's kernel for the current device, compiled once per source.
cudaKernel_t FusedElementwiseKernel(const FusedElementwiseArgs& args);

// Launches `kernel` (FusedElementwiseKernel of args) over args' elements.
void LaunchFusedElementwise(cudaKernel_t kernel, const FusedElementwiseArgs& args, cudaStream_t stream);

// A fused region's kernel (fusion_regions.h), `hfuse_region(in0, ...,
// out0, ...)`: operand k read at in_k + its offset, from `strides[k]` (in
// elements, one per dim of the operand's `over` shape, any sign), output o
// written through its strides from out_o, the address of its first element
// (its place's plus RegionOutput::offset: the caller adds it, so regions
// that differ only in where they lie have one source, and one kernel for a
// batch of them: FusedRegionGroupSource). A group of LanesOf(region).lanes threads takes
// a row: each lane holds per_lane of its columns in registers; reductions
// are shuffles within the group; a region of one column takes
// RegionRowsPerThread rows a thread instead. Sizes, strides and the
// program are constants of the source; adjacent dims whose strides run on
// are one index term.
std::string FusedRegionSource(const FusionRegion& region, const std::vector<std::vector<int64_t>>& strides);

// The kernel `hfuse_region_group(table)` of regions alike (one
// FusedRegionSource, no products): grid row y runs region r's program on
// the addresses table[y * P .. y * P + P - 1] (P: r's operands, then its
// outputs), as hfuse_region would on them.
std::string FusedRegionGroupSource(const FusionRegion& region, const std::vector<std::vector<int64_t>>& strides);

// The kernel `name` of `source`, compiled by NVRTC for the current device
// once per source (cached for the process).
cudaKernel_t CompiledKernel(const std::string& source, const char* name);

// Rows a thread of a region's kernel takes: 4 for a region of one column
// whose steps are all maps and whose rows are a multiple of 4 (an operand
// or output whose four rows lie contiguous and 16-byte aligned goes through
// one float4), else 1.
int RegionRowsPerThread(const FusionRegion& region);

// A region that computes products (FusionRegion::products) has a kernel
// of its own (same name and operands, then each product's A, W and bias):
// LaunchProductRegion runs it, a block a tile of 64 of the products' M
// rows by 32 of their N columns, on the operands' (a product's: any),
// outputs' and products' addresses, in that order.
void LaunchProductRegion(cudaKernel_t kernel, int64_t m, int64_t n, const std::vector<const void*>& pointers,
                         cudaStream_t stream);

// Launches a group kernel (FusedRegionGroupSource) over `count` regions
// of `rows` rows each, `table` the device array of their addresses.
void LaunchFusedRegionGroup(cudaKernel_t kernel, int64_t rows, int lanes, int rows_per_thread,
                            const void* const* table, int count, cudaStream_t stream);

// Launches a region's kernel on its operands' and outputs' addresses.
void LaunchFusedRegion(cudaKernel_t kernel, int64_t rows, int lanes, int rows_per_thread,
                       const std::vector<const void*>& operands, const std::vector<void*>& outputs,
                       cudaStream_t stream);

}  // namespace hfuse::cuda
