// hfuse's own CUDA kernels (everything that is not a GEMM), each one launch
// for any number of members. Host-callable launchers; all asynchronous on
// the given stream. Data types: 0 float16, 1 bfloat16, 2 float32 (DType).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_codes.h"

namespace hfuse::cuda {

// One LayerNorm member: rows of n values, read and written with row strides
// (elements), so split and concatenate views need no copy.
struct LayerNormDesc {
  const void* x;
  void* y;
  const void* gamma;  // may be null (1)
  const void* beta;   // may be null (0)
  int64_t rows;
  int64_t n;
  int64_t x_stride;
  int64_t y_stride;
  int32_t vec;    // 1 when every access of this member can be 16 bytes wide
  int32_t lanes;  // threads per row: a power of 2, 1 to 32 (LayerNormLanes)
};

// A block's work: rows [row0, row0 + rows) of one member, one row per
// `lanes` threads of the block's 256 (rows <= 256 / lanes).
struct LayerNormTile {
  int32_t member;
  int32_t rows;
  int64_t row0;
};
inline constexpr int kLayerNormThreads = 256;
// Up to this many 16-byte packs a thread keep the row in registers (read
// once); wider rows, and rows that cannot be read 16 bytes at a time, are
// read three times by 32 threads (from L1/L2 after the first).
inline constexpr int kLayerNormPacks = 4;

// Threads per row for a member of `n` values of `elem_bytes` each: the
// fewest (a power of 2) whose kLayerNormPacks packs a thread hold the row, so
// each thread has several 16-byte loads in flight; 32 for the general path.
int LayerNormLanes(int64_t n, int elem_bytes, bool vec);

// Runs every tile of a LayerNorm group in one launch; `descs` and `tiles` are
// device arrays written once by the caller, at plan time.
void LaunchGroupLayerNorm(int dtype, const LayerNormDesc* descs, const LayerNormTile* tiles,
                          int num_tiles, float eps, bool sigmoid_mul, cudaStream_t stream);

// Bias and activation after a GEMM, for a group of outputs in one launch:
// y[r * ld + j] = act(y[r * ld + j] + bias[j]).
struct EpilogueDesc {
  void* y;
  const void* bias;  // may be null
  int64_t rows;
  int64_t cols;
  int64_t ld;
  int32_t vec;  // 1 when every row can be accessed 16 bytes at a time
};
struct EpilogueTile {  // rows [row0, row0 + rows) of member `member`
  int32_t member;
  int32_t row0;
  int32_t rows;
};
// The activation: an EwFunc value (unary: relu, sigmoid, tanh, gelu, silu),
// the GEMM kind's (op_kinds.def), or kNoActivation.
inline constexpr int kNoActivation = -1;
// One block per tile.
void LaunchGroupEpilogue(int dtype, const EpilogueDesc* descs, const EpilogueTile* tiles,
                         int num_tiles, int act, cudaStream_t stream);

// Elementwise with numpy broadcasting over up to 4 inputs of rank <= 6.
struct ElementwiseArgs {
  const void* in[4];
  int64_t in_strides[4][6];  // 0 on broadcast dims
  void* out;
  int64_t shape[6];
  int32_t rank;
  int32_t num_inputs;
  int32_t func;  // EwFunc
  int64_t numel;
};
void LaunchElementwise(int dtype, const ElementwiseArgs& args, cudaStream_t stream);

// ONNX ReduceSum / Mean / Max / Min / Prod / L1 / L2 / SumSquare (a ReduceKind) of x
// (rank <= 6, contiguous) over the dims where reduced[d] != 0, into y of
// the same rank with those dims 1; fp32 accumulation; dtype as above.
struct ReduceArgs {
  const void* x;
  void* y;
  int64_t shape[6];
  int32_t reduced[6];
  int32_t rank;
  int32_t kind;
  int64_t out_numel;
  int64_t count;  // elements reduced into each output
};
void LaunchReduce(int dtype, const ReduceArgs& args, cudaStream_t stream);

// GEMMs of one output column (N = 1: DCN's vector cross layers, the last
// layer of a tower or of an attention unit): y[r] = alpha * dot(a[r, :k],
// w[:k]) (+ bias[0], then the activation `act`: an EwFunc as the epilogue
// kernel's, or kNoActivation), a row stride lda, y's ldy; fp32
// accumulation; dtype as above. Up to kMaxGemvMembers of them (a group's
// members: DIN's two attention units' last layers) in one launch, a grid
// row a member. cuBLASLt took 11 us for [2048, 429] x [429, 1] in float32
// (320 GB/s), a warp a row a few. A row takes the fewest lanes of a warp,
// a power of two up to 32, that cover its k (GemvShape), in packs of four
// elements where k, lda and the addresses allow: a warp a row ran DIN's
// two [40960, 32] x [32, 1] in 18.7 us on an H200 (580 GB/s; 2026-12-07),
// each lane loading one element and waiting on five shuffles for it.
struct GemvMember {
  const void* a;
  const void* w;
  const void* bias;  // or null
  void* y;
  int64_t lda, ldy, m, k;
};
struct GemvShape {
  int lanes = 1;       // a row's lanes: 1 to 32, an aligned group of its warp
  bool packs = false;  // reads packs of four: k and lda multiples of 4, a and w aligned to 4 elements
};
inline constexpr int kMaxGemvMembers = 16;
void LaunchGemv(int dtype, const GemvMember* members, int count, float alpha, int act, cudaStream_t stream);
// ONNX Softmax (or LogSoftmax) over `len` of x seen as [outer, len, inner],
// in fp32 (cpu::SoftmaxView gives the view); dtype as above.
void LaunchSoftmax(int dtype, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                   bool log, cudaStream_t stream);

}  // namespace hfuse::cuda
