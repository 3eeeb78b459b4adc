// A grouped float32 GEMM in one launch, for the groups the CUTLASS kernels
// here do not take (they are float16/bfloat16 tensor-core kernels): the
// experts, gates and towers of a ranking model exported in float32, where
// each member is a small product (a batch of rows through a layer of tens
// to hundreds of units) and one cuBLASLt call a member costs a launch each.
// y_i = act_i(alpha * A_i W_i^T + bias_i) for every member i, in exact
// float32 arithmetic (CUDA cores, no TF32), each member with its own
// bias and activation.
//
// Each block computes one 64 x 64 tile of one member's output, or for a
// member at most kSgemmNarrow wide with K at least kSgemmNarrowMinK, 8 rows
// by all its columns, a warp a row (with a short K the 64 x 64 tile is
// faster: FiBiNet's 325 products of 16 by 16): the host
// lays the tiles out once (GroupedSgemmPlan), members with the most work
// first, and uploads the members and tiles at plan time; the kernel reads
// its tile's member from the table, so no search and no division.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace hfuse::cuda {

inline constexpr int kSgemmTile = 64, kSgemmNarrow = 16, kSgemmNarrowMinK = 64;

struct SgemmMember {
  const float* a;     // [m, k], row stride lda
  const float* w;     // [n, k], packed
  const float* bias;  // [n], or null
  float* y;           // [m, n], row stride ldy
  int64_t m, n, k, lda, ldy;
  int32_t act;        // an EwFunc code (kernels.h), or kNoActivation
};
struct SgemmTile {
  int32_t member;
  int32_t m0, n0;
  int32_t narrow;  // 1: rows m0 to m0 + 7, every column, a warp a row
};

// The tiles of `members` (each with m, n, k above 0), largest members first.
std::vector<SgemmTile> SgemmTiles(const std::vector<SgemmMember>& members);

// One launch over `num_tiles` tiles (device arrays written at plan time).
void LaunchGroupedSgemm(const SgemmMember* members, const SgemmTile* tiles, int num_tiles, float alpha,
                        cudaStream_t stream);

}  // namespace hfuse::cuda
