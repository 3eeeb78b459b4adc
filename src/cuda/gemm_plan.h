// How the CUDA backend sorts the members of a GEMM op before it picks a
// library call: plain C++ over operand addresses and sizes (no CUDA
// runtime), so that the rules are unit-tested on any machine
// (tests/cuda/cuda_plan_test.cc) and written once for every planner in
// cuda_executor.cc (strided-batched cuBLASLt, CUTLASS grouped, cuBLAS
// grouped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hfuse/ir/graph.h"
#include "kernel_codes.h"

namespace hfuse::cuda {

// An activation the grouped float32 kernel may apply in a member's
// epilogue: the IR's one-input ReLU (after a GEMM of no bias, whose kind
// has no ReLU: FiBiNet's SENET layers), GELU, tanh or SiLU (its codes are EwFunc's),
// or ONNX LeakyRelu (kLeakyReluActivation) on float32. What
// gemm_launches.cc takes in (AbsorbActivations) and what the memory plan
// keeps a GEMM's inputs alive for.
bool IsEpilogueActivation(const Op& op);

// Such an activation as the kernel's member takes it: its code and slope
// (SgemmMember::act, act_alpha).
struct EpilogueActivation {
  int act;
  float alpha = 0.0f;
};
EpilogueActivation EpilogueActivationOf(const Op& op);

// Its name in a launch's label ("gelu", "leaky_relu(0.01)").
std::string ActivationName(int act, float alpha);

// The epilogue activation that alone reads t (no graph output), through
// ops `passes` lets it pass (views, each of one output reading t first)
// that alone read theirs; kNone if none. `read`: the tensor it reads (t,
// or the last view's output).
OpId ActivationReading(const Graph& g, TensorId t, const std::function<bool(OpId)>& passes,
                       TensorId* read = nullptr);

// The elementwise Add that alone reads t (no graph output), through ops
// `passes` lets it pass as ActivationReading's, and adds to it a tensor of
// its shape and type (a residual: no broadcast), its output of that shape
// too: what a single GEMM's cuBLASLt call adds in as its C operand
// (gemm_launches.cc, FindResidual; FTTransformer's x + FFN(x)); kNone if
// none. `read`: the tensor it reads (t, or the last view's output);
// `other`: the tensor it adds.
OpId ResidualAddReading(const Graph& g, TensorId t, const std::function<bool(OpId)>& passes,
                        TensorId* read = nullptr, TensorId* other = nullptr);

// One member GEMM as the device runs it, Y = A . W^T (+ bias): byte
// addresses in the session's buffers (so that strides between members are
// differences) and sizes in elements.
struct DeviceGemm {
  const char* a;     // [m, k], row stride lda
  const char* w;     // [n, k], packed
  const char* bias;  // [n], or null
  char* y;           // [m, n], row stride ldy
  int64_t m, n, k, lda, ldy;
  // The member's activation: an EwFunc code, or -1 (kernels.h's
  // kNoActivation). Members of a mixed group (group_gemm_rcr_mixed) differ in
  // it and in their bias; the paths that take one epilogue a launch get
  // members of one (SplitByEpilogue).
  int act = -1;
  float act_alpha = 0.0f;  // LeakyRelu's slope (act kLeakyReluActivation)
  // [m, n], row stride ldc, added to the product (cuBLASLt's C at beta 1:
  // a residual Add taken in, single GEMMs only), or null.
  const char* c = nullptr;
  int64_t ldc = 0;
};

// The members of a group by what they need. A member whose output is empty
// (M or N is 0) needs nothing and is in neither list; one with K = 0 has no
// products (y = bias, then the activation: the epilogue alone, on a cleared
// output); the rest run as GEMMs. Each list keeps the members' order.
struct GemmMemberSplit {
  std::vector<DeviceGemm> products;   // M, N, K all non-zero
  std::vector<DeviceGemm> bias_only;  // K = 0, M and N non-zero
};
GemmMemberSplit SplitGemmMembers(const std::vector<DeviceGemm>& members);

// The members by epilogue (bias or not, activation): one list per epilogue,
// lists in the order of their first member, each keeping the members'
// order. One list when all share one.
std::vector<std::vector<DeviceGemm>> SplitByEpilogue(const std::vector<DeviceGemm>& members);

// Members of one shape at constant strides between their A, W, Y (and bias)
// addresses, none going backwards, which one strided-batched call can run;
// true for one member. (cuBLASLt ran DIN's attention GEMMs 2.3x slower with
// a negative batch stride of A: 86.0 against 37.2 us, bench/RESULTS.md,
// 2026-12-04.)
bool IsStridedBatch(const std::vector<DeviceGemm>& members);
// The members in an order one strided-batched call runs them: as given, or
// reversed (the arena may place a later member's operands first; each
// member writes its own output, so the order is free); nothing when neither.
std::optional<std::vector<DeviceGemm>> StridedBatchOrder(const std::vector<DeviceGemm>& members);

// A float32 product of one library call (a single GEMM's cuBLASLt call,
// a batched MatMul's strided cuBLAS call: `batch` products of m x n x k)
// runs in 3xTF32 (CudaOptions::tf32x3, grouped_sgemm.h's LaunchSplitTf32)
// where that is estimated 15% faster, by the rates measured on an H100
// (bench/RESULTS.md, 2026-12-06, SAINT at batch 2048, each launch alone):
// cuBLAS's float32 GEMMs 36-45 TFLOP/s, its TF32 GEMMs of the split
// operands 172-362 (three times the FLOPs), the split kernel 2.3 TB/s
// (`split_elements` the elements of the operands split each run, 4 bytes
// read and 12 written each; a weight's parts are made once), 3 us a split
// launch. There, the intersample layers (2048 x 1248 x 1248 to
// 2048 x 1248 x 4992) and the scores q k^T (4 of 2048 x 2048 x 312) take
// it, 1.5-2.5x faster each; the mix p v (4 of 2048 x 312 x 2048) does not:
// splitting p (4 x 2048 x 2048) took 117 us, more than the 35 us saved
// (319 against 284 us). Nor do FiBiNet's 2048 x 256 x 10400 (its output
// is 32 tiles; A's split, 148 us, outweighs the GEMM: 1153 against 1025
// us a run) and the 128- to 256-wide layers of AutoInt, FTTransformer
// and SAINT's head (a GEMM of 15-33 us, against the split's 18 alone).
constexpr double kFloat32Flops = 40e12, kTf32Flops = 250e12, kSplitBytesPerSecond = 2.3e12;
constexpr double kSplitLaunchSeconds = 3e-6, kTf32x3Margin = 1.15;
inline bool Tf32x3Pays(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t split_elements, int splits) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0 || batch > 65535) return false;
  const double flops = 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) *
                       static_cast<double>(k);
  const double float32 = flops / kFloat32Flops;
  const double tf32x3 = 3 * flops / kTf32Flops + 16.0 * static_cast<double>(split_elements) / kSplitBytesPerSecond +
                        splits * kSplitLaunchSeconds;
  return float32 > kTf32x3Margin * tf32x3;
}

// Up to this many members CUTLASS cannot take (rows not 16-byte aligned;
// float16/bfloat16: however many): one cuBLASLt call each (gemm_launches.cc,
// PlanGemm); above, one cublasGemmGroupedBatchedEx. float32 groups take the
// grouped float32 kernel (grouped_sgemm.h): cublasGemmGroupedBatchedEx took
// 104 us for DCNv2's eight float32 members at batch 2048 (bench/RESULTS.md,
// issue 19), several times what eight cuBLASLt calls of those shapes take in
// a CUDA graph, and those eight calls several times the one grouped launch
// (bench/RESULTS.md, issue 20). `hfuse bench --gemm-paths` measures each path.
inline constexpr size_t kLtMembersMax = 4;
// A float32 group of at most kLtMembersMax members one of which takes this
// many multiply-adds (m * n * k), or all of them one column wide, runs one
// call a member (FewCallsPay).
inline constexpr int64_t kLtMemberMinFmas = int64_t{1} << 25;
// The same for a mixed group (its members of several epilogues), whose
// grouped launch is the less likely to pay.
inline constexpr int64_t kLtMixedMemberMinFmas = int64_t{1} << 24;
// The same for a group of two, which saves one launch only by grouping:
// TabTransformer's query and key-value projections at batch 512 (13312 x
// 32 x 32 and 13312 x 64 x 32, two such pairs) ran the model in 152.9 and
// 154.9 us on four cuBLASLt calls against 162.5 and 164.5 grouped (H100,
// bench/RESULTS.md, 2026-12-06, two calls); pairs of 2^24 (TabResnet's 512
// x 128 x 256) the same either way (59.2 against 59.0 us).
inline constexpr int64_t kLtPairMemberMinFmas = int64_t{3} << 23;

// The rule for a float32 group: one call a member where there are a few
// large members, whose cuBLAS kernels outrun the grouped one by more than
// the launches saved (bench/RESULTS.md, 2026-12-04: AITM's three 256 x 429
// towers, 117 against 138 us a run at batch 512; in a mixed group, DCN's
// cross-layer GEMV beside a 512 x 128 x 256 DNN layer, 2^24 multiply-adds,
// 53.3 against 61.2 us), or a few GEMVs, each then on the GEMV kernel
// (DeepFM's two: 43.7 against 45.7 us). Uniform groups of members of 2^24
// (PLE's and MMoE's 2048 x 64 x 128 towers, DCNv2's 2048 x 429 x 32
// up-projections) measured the same either way, in fewer launches grouped.
// `mixed`: the members are of several epilogues.
bool FewCallsPay(const std::vector<DeviceGemm>& members, bool mixed);

}  // namespace hfuse::cuda
