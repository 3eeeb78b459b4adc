// hfuse's own CUDA kernels (everything that is not a GEMM), each one launch
// for any number of members. Host-callable launchers; all asynchronous on
// the given stream. Data types: 0 float16, 1 bfloat16, 2 float32 (DType).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

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
  int32_t vec;  // 1 when every access of this member can be 16 bytes wide
};

// Runs `count` members; `descs` and `row_starts` (count + 1 prefix sums of
// rows) are device arrays written once by the caller. One warp per row when
// every member allows 16-byte accesses (`all_vec`) and rows are short, else
// one block per row.
void LaunchGroupLayerNorm(int dtype, const LayerNormDesc* descs, const int64_t* row_starts,
                          int count, int64_t total_rows, int64_t max_n, bool all_vec, float eps,
                          bool sigmoid_mul, cudaStream_t stream);

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

}  // namespace hfuse::cuda
