// The CUDA backend: runs a graph (original or fused, with or without
// strided views) on one GPU.
//
// Construction plans everything once: a memory plan (inputs, params and
// outputs get their own buffers; intermediates share an arena, reusing the
// space of tensors whose lifetimes have ended; the outputs of one op are
// laid out together, params in order of first use, so a group's members
// often sit at a constant stride), one launch plan per op (cuBLASLt GEMMs
// with BIAS / RELU_BIAS epilogues; a group GEMM as one strided-batched
// cuBLASLt call when its members have one shape and constant strides, else
// one CUTLASS SM90 grouped GEMM with bias and activation in its epilogue
// (float16/bfloat16 with 16-byte aligned rows; src/cuda/cutlass_grouped_gemm.h),
// else one cublasGemmGroupedBatchedEx plus one grouped bias/activation
// kernel; one launch for any LayerNorm group; copies for splits and concatenates
// that are not views), and the device-side descriptor arrays those launches
// read. Run() then only enqueues launches on one stream, and can be
// captured once into a CUDA graph and replayed. Every CUDA and cuBLAS call
// is checked, and the last error after each launch; failures throw
// CudaError.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/runtime/bound_dims.h"
#include "hfuse/runtime/host_tensor.h"

namespace hfuse {

class CudaError : public std::runtime_error {
 public:
  explicit CudaError(const std::string& message) : std::runtime_error(message) {}
};

// True when a CUDA device is usable; `why` says why not otherwise.
bool CudaDeviceAvailable(std::string* why = nullptr);

struct CudaRunStats {
  int64_t launches = 0;       // kernel launches and copies per run
  int64_t host_launches = 0;  // of those, ops run on the host (the CPU kernel between copies)
  int64_t folded_ops = 0;     // ops computed once at plan time (plan_constants.h)
  int64_t view_ops = 0;       // ops that are views of their input: no launch
  int64_t arena_bytes = 0;    // intermediates' arena
  int64_t tensor_bytes = 0;   // what the intermediates would take unshared
  int64_t constant_bytes = 0; // the plan's constants on the device
  // Launches that sum float32 products on the tensor cores in 3xTF32 (the
  // grouped float32 kernel's tensor tiles, CudaOptions::tf32x3's calls):
  // float32's error, but measured 2-3x the CUDA cores' (compare.h).
  int64_t tf32x3_launches = 0;
  // Each op run on the host, "name (ONNX op_type): why", in plan order.
  std::vector<std::string> host_ops;
  // Each launch that only moves data (a copy: a concatenate's or a view's
  // parts, the 3xTF32 split) or runs elementwise ops that no neighbour's
  // kernel took in, "label: why", in plan order: the exceptions the profile
  // names (`hfuse bench`, `hfuse verify --device cuda`).
  std::vector<std::string> apart;
};

// The CUTLASS grouped GEMM's CTA tile: the plan-time rule, or forced (for
// measuring the rule). 128x64 exists for float16 only.
// How a group GEMM runs where the strided-batched cuBLASLt call cannot take
// it: by the rule (gemm_launches.cc), or forced, for measuring: CUTLASS at
// a tile (float16/bfloat16), the grouped float32 kernel (grouped_sgemm.h;
// single float32 GEMMs too, as groups of one), or one cuBLASLt call a member.
enum class GemmKernelChoice : uint8_t { kRule, k128x128, k128x64, kGroupedSgemm, kPerMember };

struct CudaOptions {
  // Group GEMMs of one shape at constant strides run as one strided-batched
  // cuBLASLt call; off, they take the grouped path like any other group.
  bool strided_batched = true;
  // Grouped GEMMs through CUTLASS where it can take them; off, through
  // cublasGemmGroupedBatchedEx and a separate epilogue kernel.
  bool cutlass = true;
  GemmKernelChoice gemm_kernel = GemmKernelChoice::kRule;
  // The grouped float32 kernel's tiles: -1 by its rule (grouped_sgemm.h),
  // else that SgemmConfig for every member that can take it (0: the
  // kernel before the tiled one, for measuring the rule).
  int sgemm_config = -1;
  // With sgemm_config -1, for measuring the rule: the tiled kernel with
  // the rule's configs whichever kernel the rule picks, and K split in
  // this many ranges for its tiled members (0: the rule's).
  bool sgemm_tiled = false;
  int sgemm_split = 0;
  // The grouped float32 kernel runs members that read one A as one member
  // over their weights side by side (grouped_sgemm.h, SgemmOptions::merge);
  // off, each apart, for measuring.
  bool sgemm_merge = true;
  // The grouped float32 kernel runs a group of deep members (K of
  // kSgemmStagedMinK or more) on no more 64 x 64 tiles than the SMs on its
  // sliced kernel (grouped_sgemm.h, SgemmOptions::staged; on the tensor
  // cores, two slices a tile). On by default: measured on an H100
  // (bench/RESULTS.md, 2026-12-07, two calls), DCNv2 197.3 against 201.4 us
  // a run at batch 2048 (195.4 against 202.0), PLE 117.8 against 120.1 at
  // 512, the other pairs of DCNv2, PLE, MMOE and AutoInt at 512 and 2048
  // within 1% or faster; off, for measuring (bench --gemm-paths).
  bool sgemm_staged = true;
  // The grouped float32 kernel runs a group of deep members (and narrow
  // ones of long K beside them) with the deep members' products on the
  // tensor cores as three TF32 products each (3xTF32: float32's error, not
  // TF32's; grouped_sgemm.h, SgemmOptions::tensor); off, on the CUDA cores
  // (measured on an H100, bench/RESULTS.md, 2026-12-06: DCNv2 213.5
  // against 222.4 us a run at batch 2048, PLE 298.3 against 302.6, MMOE
  // and AutoInt within 1%).
  bool sgemm_tensor = true;
  // With sgemm_tensor: the 3xTF32 parts of the weights (params) its tensor
  // tiles read are made once (after the weight is written), so the tiles
  // load them rather than split W in every tile that reads it
  // (grouped_sgemm.h, SgemmMember::w3; the same bits). On by default:
  // measured on an H100 (bench/RESULTS.md, 2026-12-07), DCNv2 198.9 against
  // 222.6 us a run at batch 2048, PLE 304.1 against 330.5; off, the tiles
  // split W themselves (bench --gemm-paths times it).
  bool sgemm_parts_w = true;
  // With sgemm_tensor: members of short K beside deep ones on the tensor
  // cores too (grouped_sgemm.h, SgemmOptions::tensor_short); on by
  // default: measured on an H100 (bench/RESULTS.md, 2026-12-07), DCNv2
  // 202.0 against 204.6 us a run at batch 2048 and 140.3 against 143.2 at
  // 512, PLE, MMOE and AutoInt within 1%.
  bool sgemm_tensor_short = true;
  // With sgemm_tensor: the tensor tiles' split-K (grouped_sgemm.h,
  // SgemmOptions::tensor_split): 0 by the rule (as many ranges, at most
  // kSgemmTensorMaxSplit, as keep the tiles no more than the SMs), 1 none,
  // N that many where the tiles are no more than the SMs (for measuring).
  int sgemm_tensor_split = 0;
  // Independent Gathers next to each other in the order (a model's
  // embedding lookups) run as one launch; off, one launch each.
  bool gather_batches = true;
  // Fused regions (connected float32 elementwise ops, reductions and
  // softmaxes: src/cuda/fusion_regions.h) and chains of float32
  // elementwise ops each read only by the next run as one kernel each;
  // off, one launch an op.
  bool elementwise_chains = true;
  // Fused regions of one kernel source (alike but for where their operands
  // and outputs lie), one after another in the order and touching nothing
  // another writes, run as one launch, a grid row a region (FiBiNet's
  // bilinear products: 83 regions of 8 in a few launches); off, a launch
  // a region.
  bool region_batches = true;
  // A float32 GEMM, or a group's members, whose outputs only a GELU, tanh
  // or SiLU reads (through views) take it into the epilogue: one launch of
  // the grouped float32 kernel, the GEMM's output never written (a
  // transformer's FFN; DCNv2's experts); off, the activations launch alone.
  bool gemm_activations = true;
  // A single GEMM on cuBLASLt whose output only an Add of a tensor of its
  // shape reads (through views: a residual, x + FFN(x)) adds that tensor
  // in as its C operand at beta 1, writing the Add's output: one launch,
  // the GEMM's output never written (FTTransformer's last residual before
  // its MLP); off, the Add launches alone.
  bool gemm_residuals = true;
  // The A operands of a group GEMM's members that one fused region writes
  // (each its own buffer, of one size) lie side by side in the arena, in
  // the members' order (memory_plan.h), so that one strided-batched call
  // can take the group (DIN's second attention layers, two cuBLASLt calls
  // of 40960 x 32 x 64 at batch 2048). On by measurement (`hfuse bench
  // --gemm-paths` on an H100, 2026-12-07, bench/RESULTS.md): DIN's graph
  // run 155.2 against 157.7 us at batch 2048 and 66.0 against 78.6 at 512
  // (DIN's other variants 73.8-89.8 there), FTTransformer's 168.4 against
  // 173.5 at 512; DCNv2, MMOE and TabTransformer within the noise. Off:
  // each buffer where the planner puts it.
  bool group_operands_together = true;
  // float32 GEMMs of one output column, alone or a group's members of one
  // epilogue, whose activation cuBLASLt's epilogue lacks (a tower's
  // sigmoid; not LeakyRelu, the GEMV kernel takes no alpha) run on the GEMV
  // kernel, the activation in it (kernels.h, LaunchGemv), not the grouped
  // float32 kernel's narrow tiles. On by measurement (`hfuse bench
  // --gemm-paths` on an H100, 2026-12-07): MMOE's graph run 170.8 against
  // 180.5 us at batch 2048 (its other variants 174.1-181.9); DIN, DCNv2,
  // FTTransformer and TabTransformer within the noise.
  bool gemv_activations = true;
  // Single float32 GEMMs (no residual C operand) on the grouped float32
  // kernel as groups of one (its 64 x 64 tiles, 3xTF32 where deep), not
  // cuBLASLt. Off by measurement (`hfuse bench --gemm-paths` on an H100,
  // 2026-12-07): slower in every model timed, DIN's graph run 166.4
  // against 157.7 us at batch 2048, FTTransformer's 648.7 against 492.8,
  // TabTransformer's 394.1 against 350.2.
  bool single_sgemm = false;
  // A GEMM, or a group's members, of K at most 64 whose outputs only one
  // fused region reads, one value a row, runs inside the region's kernel,
  // the products never written (fusion_regions.h, RegionProduct; DCNv2's
  // experts' up-projections in the mixture that weighs them): -1 by the
  // rule, where the products' 64 x 32 tiles are at least the SMs (DCNv2 on
  // an H100, bench/RESULTS.md: 448 tiles at batch 2048, 253.6 against
  // 264.5 us a run, and 213.5 against 250.2 once the kernel was
  // pipelined; 112 at 512, 162.7 against 156.1); 1 wherever it can,
  // 0 never (the GEMM launches alone and the region reads its outputs).
  int region_gemms = -1;
  // A float32 GEMM of one cuBLASLt call (one member, its weight a param)
  // runs as one TF32 GEMM of three times its depth over its operands split
  // in TF32 parts (3xTF32: float32's error, not TF32's; grouped_sgemm.h,
  // LaunchSplitTf32): the weight's parts made once after its value is set
  // (SetFeeds, ParamWritten), A's each run by one more launch. -1 by the
  // rule (gemm_launches.cc, Tf32x3Pays: large products), 1 for every such
  // GEMM, 0 never.
  int tf32x3 = -1;
  // With tf32x3, batched MatMuls too (attention's scores and mix); off,
  // single GEMMs only, for measuring.
  bool tf32x3_batched = true;
  // A GEMM, its activation and a second GEMM reading it, narrow (rows of
  // 8 to 64 in and out, the weights in 48 KiB), run as one kernel, the
  // hidden values never written (fusion_regions.h, FfnChain; ffn.h:
  // TabTransformer's and SAINT's 32 -> 128 -> 32 blocks; gated ones,
  // FTTransformer's GEGLU): -1 by the rule, blocks of at least kFfnMinRows
  // rows (ffn.h: measured on an H100, bench/RESULTS.md, 2026-12-07), gated
  // ones of kFfnGatedMinRows too (ffn.h, measured likewise); 1 wherever it
  // can, 0 never (the GEMMs and the activation launch as before).
  int ffn_chains = -1;
};

class CudaExecutor {
 public:
  // `input_addresses`: graph inputs whose buffers are the caller's device
  // memory at these addresses (dense, row-major, the tensor's dtype and
  // shape, aligned to 256 bytes as the executor's own buffers are): the
  // executor uploads nothing to them (their space in its own inputs' buffer
  // stays unused) and its launches (and CUDA graph) read them there. The
  // caller keeps that memory alive while the executor may run.
  CudaExecutor(const Graph& graph, const DimValues& dims, CudaOptions options = {},
               std::map<TensorId, void*> input_addresses = {});
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  // Uploads every input and param (checked like RunOnCpu).
  void SetFeeds(const TensorMap& feeds);
  // Fills every output and intermediate buffer with 0xFF bytes (NaN for
  // float types), so that elements a kernel fails to write show up.
  void Poison();
  // Enqueues one run and waits for it.
  void Run();
  // Runs through a CUDA graph captured on first use.
  void RunGraph();
  // The two halves of Run/RunGraph, on a caller's stream (null: Stream()):
  // Launch enqueues one run there without waiting (plain launches, or the
  // CUDA graph, which is captured on Stream() the first time and can be
  // launched on any stream); Finish waits for that stream and throws the
  // first error a host op raised. The executor's buffers are shared by all
  // its runs, so one run is in flight at a time.
  void Launch(bool use_graph, void* stream);
  void Finish(void* stream);
  TensorMap Outputs() const;

  // The device address of an input's, param's or output's buffer (dense,
  // row-major, in the tensor's dtype), for callers that copy feeds in or
  // read outputs in place (the session's device path). Run and RunGraph read
  // and write these buffers on Stream().
  void* TensorAddress(TensorId id) const;
  // A param's buffer was written (a feed copied into TensorAddress): what
  // the executor derives from it (the 3xTF32 parts of a weight,
  // CudaOptions::tf32x3) is made again before the next launch. SetFeeds
  // does this for every param it writes.
  void ParamWritten(TensorId id);
  void* Stream() const;  // the cudaStream_t launches go on

  // Median microseconds of `reps` runs after `warmup` runs, timed with CUDA
  // events around each run (plain launches, or graph replays).
  double MedianMicros(int warmup, int reps, bool use_graph);
  // Microseconds of each of `reps` runs, timed as MedianMicros does, no warm-up.
  std::vector<float> TimedRuns(int reps, bool use_graph);

  const CudaRunStats& stats() const;

  // Each launch timed on its own (median of `reps`), labelled by op.
  std::vector<std::pair<std::string, double>> ProfileLaunches(int reps);
  // Each launch's label, "<op name> (<kind>[, details])", in run order.
  const std::vector<std::string>& LaunchLabels() const;
  // Per launch, in the same order: the bytes its op moves at least (each
  // input read once, each output written once), for achieved bandwidth.
  const std::vector<double>& LaunchOpBytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hfuse
