// hfuse's CUTLASS grouped GEMM: one launch of CUTLASS 4.2's SM90 ptr-array
// grouped kernel (TMA loads, wgmma, warp-specialized cooperative schedule,
// TMA epilogue) for a group_gemm_rcr* op, Y_i = act(A_i . W_i^T + bias_i),
// with the bias and the activation applied in the kernel's epilogue (an
// epilogue visitor tree: accumulator + per-member bias row, then the GEMM
// kind's activation chosen at plan time), so no second pass over the outputs.
//
// Everything is planned once: problem shapes, pointers, strides and bias
// pointers go to the device when the plan is made; Run() is one kernel launch
// that a CUDA graph can capture. This header is plain C++ (no CUTLASS), so
// the executor compiles without CUTLASS's headers; each instantiation (dtype
// x tile) lives in its own .cu file (cutlass_gemm_*.cu), since one costs
// about 90 s and 3.5 GB to compile.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels.h"

namespace hfuse::cuda {

// The kernels compiled: the cooperative schedule with 128x128x64 CTA tiles,
// and (float16 only) with 128x64x64 tiles, twice the CTAs for groups too
// small to fill the GPU; 1x1x1 clusters.
enum class GemmKernel : uint8_t { kTile128x128, kTile128x64 };
const char* GemmKernelName(GemmKernel kernel);

struct GroupedGemmMember {
  const void* a;     // [m, k], row stride lda
  const void* w;     // [n, k], packed
  const void* bias;  // [n], or null (then every member's is)
  void* y;           // [m, n], row stride ldy
  int64_t m, n, k, lda, ldy;
};

class CutlassGroupedGemm {
 public:
  virtual ~CutlassGroupedGemm() = default;
  virtual void Run(cudaStream_t stream) = 0;  // one launch; throws on failure
};

// Why CUTLASS cannot take these members (TMA needs 16-byte aligned bases and
// row strides: alignment 8 for 16-bit types; the epilogue has relu and
// sigmoid), or "" when it can. dtype: 0 float16, 1 bfloat16 (float32 stays
// on cuBLAS); act: an EwFunc value or kNoActivation.
std::string CutlassCannotTake(int dtype, const std::vector<GroupedGemmMember>& members, int act);

// The kernel the plan-time rule picks for these members (bench/RESULTS.md,
// issue 12, has the measurement behind it).
GemmKernel ChooseGemmKernel(int dtype, const std::vector<GroupedGemmMember>& members, int num_sms);

// Plans the grouped GEMM (members with m, n or k zero must be left out by
// the caller); the members run largest first, whatever their order here.
// `act`: an EwFunc value (unary) or kNoActivation, as the other kernels take.
// Throws std::runtime_error when CUTLASS refuses them.
std::unique_ptr<CutlassGroupedGemm> MakeCutlassGroupedGemm(
    int dtype, GemmKernel kernel, const std::vector<GroupedGemmMember>& members, int act);

// The per-instantiation factories, one per .cu file.
std::unique_ptr<CutlassGroupedGemm> MakeCutlassGemmF16Tile128x128(
    const std::vector<GroupedGemmMember>& members, int act);
std::unique_ptr<CutlassGroupedGemm> MakeCutlassGemmF16Tile128x64(
    const std::vector<GroupedGemmMember>& members, int act);
std::unique_ptr<CutlassGroupedGemm> MakeCutlassGemmBF16Tile128x128(
    const std::vector<GroupedGemmMember>& members, int act);

}  // namespace hfuse::cuda
