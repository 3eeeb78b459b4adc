// How the CUDA backend sorts the members of a GEMM op before it picks a
// library call: plain C++ over operand addresses and sizes (no CUDA
// runtime), so that the rules are unit-tested on any machine
// (tests/cuda/cuda_plan_test.cc) and written once for every planner in
// cuda_executor.cc (strided-batched cuBLASLt, CUTLASS grouped, cuBLAS
// grouped).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse::cuda {

// An activation the grouped float32 kernel may apply in a member's
// epilogue (its codes are EwFunc's): the IR's one-input GELU, tanh or
// SiLU. What gemm_launches.cc takes in (AbsorbActivations) and what the
// memory plan keeps a GEMM's inputs alive for.
inline bool IsEpilogueActivation(const Op& op) {
  return op.type == OpType::kElementwise && op.inputs.size() == 1 && op.outputs.size() == 1 && !op.elided &&
         (op.attrs.func == EwFunc::kGelu || op.attrs.func == EwFunc::kTanh || op.attrs.func == EwFunc::kSilu);
}

// The epilogue activation that alone reads t (no graph output), through
// ops `passes` lets it pass (views, each of one output reading t first)
// that alone read theirs; kNone if none. `read`: the tensor it reads (t,
// or the last view's output).
OpId ActivationReading(const Graph& g, TensorId t, const std::function<bool(OpId)>& passes,
                       TensorId* read = nullptr);

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
// where its products are many and deep: then the TF32 GEMM of three
// times the depth outruns cuBLAS's float32 one (the tensor cores' TF32
// rate is several times the CUDA cores' float32 rate), the split launches
// and their traffic (16 bytes an element of each split operand) included.
// SAINT's intersample layers (2048 x 1248 x 1248 to 2048 x 4992 x 1248)
// and attention (4 heads of 2048 x 2048 x 312) take it; a ranking model's
// towers (AITM's 512 x 256 x 429) do not. An estimate until measured:
// `hfuse bench --gemm-paths` times "3xTF32 for no single float32 GEMM"
// and "for every one".
constexpr int64_t kTf32x3MinMacs = int64_t{1} << 28;
constexpr int64_t kTf32x3MinK = 256;
inline bool Tf32x3Pays(int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  return k >= kTf32x3MinK && n >= 64 && m >= 64 && batch <= 65535 && batch * m * n * k >= kTf32x3MinMacs;
}

}  // namespace hfuse::cuda
