// A narrow feed-forward block as one kernel: y = act(x W1^T + b1) W2^T + b2
// over rows of x, the hidden row never written, as the transformers of
// tabular models write it (pytorch-widedeep's TabTransformer and SAINT:
// 32 -> 128 -> 32, erf GELU, over batch x columns rows). hfuse ran it as
// a GEMM, the activation alone (cuBLASLt's GELU epilogue is the tanh
// form) and a second GEMM: three launches, the hidden tensor (4 x the
// rows) written and read back twice, and GEMMs of K 32 that cuBLAS runs
// far from the device's peak (bench/RESULTS.md).
//
// A gated block (GEGLU, FTTransformer's 32 -> 84 -> 42 -> 32: the first
// GEMM's output split in two halves, value * act(gate)) is the same
// kernel: y = (v * act(g)) W2^T + b2, v and g the rows of x W1^T + b1 at
// W1's rows value_row + j and gate_row + j.
//
// A thread computes a row (or two): x's rows and y's in registers, W1, b1,
// W2 (transposed) and b2 in shared memory, read as float4 broadcasts; for
// each hidden unit j, h = act(b1[j] + x . W1[j]) (gated: the value's dot
// product times act of the gate's) and y += h W2[:, j].
// Exact float32 (no TF32): fmaf in the order of j, as PyTorch's float32
// path computes up to the order of its sums.
//
// The planning (which chains, their operands) is in fusion_regions.h
// (FusionRegion::ffn).
#pragma once

#include <cstdint>

#if defined(HFUSE_HAVE_CUDA) || defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace hfuse::cuda {

// The widths x's and y's rows may have (each one of these: the registers a
// thread holds).
inline constexpr int kFfnWidths[] = {8, 16, 32, 64};
inline bool FfnWidth(int64_t w) {
  for (int k : kFfnWidths) {
    if (w == k) return true;
  }
  return false;
}
// The shared memory a block takes: W1, W2, b1 and b2 (W1 and b1 twice the
// hidden rows where gated), at most the 48 KiB a launch has without opting
// in (TabTransformer's 32 -> 128 -> 32: 33 KiB; FTTransformer's gated 32 ->
// 84 -> 42 -> 32: 16.2 KiB).
inline int64_t FfnSharedBytes(int64_t in, int64_t hidden, int64_t out, bool gated = false) {
  return ((gated ? 2 : 1) * hidden * (in + 1) + hidden * out + out) * 4;
}
inline constexpr int64_t kFfnMaxSharedBytes = 48 * 1024;

// One launch: rows [m, in] of x at stride ldx (elements), W1 [hidden, in]
// and W2 [out, hidden] row-major, b1 [hidden] and b2 [out] (either may be
// null: none), y [m, out] at stride ldy; float32 all. x and y 16-byte
// aligned with strides of a multiple of 4. The activation: an OnnxFunc of
// one operand with its alpha and beta (float_funcs.def). Gated
// (gate_row >= 0): W1 [2 hidden, in] and b1 [2 hidden], hidden unit j's
// value at row value_row + j and its gate at gate_row + j (the halves of
// the first GEMM's output, either first). Rows a thread: 1, or 2
// (FfnRowsPerThread).
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
  int32_t rows_per_thread;
  int32_t value_row = 0, gate_row = -1;  // gate_row -1: not gated
};

// A block's threads.
inline constexpr int kFfnThreads = 128;
// The rule (CudaOptions::ffn_chains): one kernel for a block of at least
// this many rows. Measured on an H100 (bench/RESULTS.md, 2026-12-07),
// against the GEMMs and the activation apart: TabTransformer's blocks of
// 53248 rows (batch 2048) 363.1 against 380.3 us a run, SAINT's of 79872
// 3502.7 against 3560.4; SAINT's of 19968 (512) 1092.3 against 1084.6,
// and fused_ffn_bench's 13312 rows 25.8 against 23.2 us.
inline constexpr int64_t kFfnMinRows = 32768;
// Gated blocks by the rule: as many rows as the ungated (the rule takes
// the larger of the two). Measured on an H100 (bench/RESULTS.md,
// 2026-12-07, thirty-first session): fused_ffn_bench's 32 -> 42 gated ->
// 32 block 46.9 against 79.2 us (three launches) at 79872 rows, 20.7
// against 22.9 at 19968; FTTransformer at batch 2048 (two blocks of 79872)
// 455.7 against 492.8 us a graph run, at 512 (19968) 175.0 against 173.5.
inline constexpr int64_t kFfnGatedMinRows = 32768;
// Two rows a thread where both rows' x and y fit its registers (in + out
// at most 64) and the blocks still number at least the SMs; else one.
// fused_ffn_bench on an H100 (132 SMs, 32 -> 128 -> 32, 2026-12-07): two
// rows 52.4 against 60.2 us at 53248 rows (208 blocks), 97.7 against
// 102.1 at 100003; one row 25.8 against 36.3 at 13312 (52 blocks of two).
inline int32_t FfnRowsPerThread(int64_t m, int64_t in, int64_t out, int sms) {
  return in + out <= 64 && m >= 2 * kFfnThreads * static_cast<int64_t>(sms) ? 2 : 1;
}

#if defined(HFUSE_HAVE_CUDA) || defined(__CUDACC__)
void LaunchFfn(const FfnArgs& args, cudaStream_t stream);
#endif

}  // namespace hfuse::cuda
