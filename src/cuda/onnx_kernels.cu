// The CUDA kernels of the opaque ONNX operators. See onnx_kernels.h.
//
// Every kernel is a grid-stride loop of one thread an output element (or a
// 4-byte word of a gathered row); the operand views are decoded from the
// element's index with the strides the host computed, whose dims it has
// merged first, so a contiguous operation runs with rank 1. Element types
// are switched at run time on each load and store: these ops move bytes,
// and a templated kernel per type combination would multiply the code for
// no measurable gain.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "float_funcs.cuh"
#include "onnx_kernels.h"

namespace hfuse::cuda {
namespace {

enum : int32_t { kF16, kBF16, kF32, kI64, kI32, kBool };

// An element as the kernel's arithmetic sees it: a float, or an integer.
struct Scalar {
  float f;
  int64_t n;
  bool is_int;
  __device__ float AsFloat() const { return is_int ? static_cast<float>(n) : f; }
  __device__ int64_t AsInt() const { return is_int ? n : static_cast<int64_t>(f); }
};

__device__ __forceinline__ Scalar Load(const void* p, int64_t i, int type) {
  switch (type) {
    case kF16: return {__half2float(static_cast<const __half*>(p)[i]), 0, false};
    case kBF16: return {__bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]), 0, false};
    case kF32: return {static_cast<const float*>(p)[i], 0, false};
    case kI64: return {0.0f, static_cast<const int64_t*>(p)[i], true};
    case kI32: return {0.0f, static_cast<const int32_t*>(p)[i], true};
    default: return {0.0f, static_cast<const uint8_t*>(p)[i] != 0 ? 1 : 0, true};
  }
}

// The value `v` would have once stored as `type` (ONNX Cast's semantics).
__device__ __forceinline__ Scalar ConvertTo(Scalar v, int type) {
  switch (type) {
    case kF16: return {__half2float(__float2half_rn(v.AsFloat())), 0, false};
    case kBF16: return {__bfloat162float(__float2bfloat16_rn(v.AsFloat())), 0, false};
    case kF32: return {v.AsFloat(), 0, false};
    case kI64: return {0.0f, v.AsInt(), true};
    case kI32: return {0.0f, static_cast<int32_t>(v.AsInt()), true};
    default: return {0.0f, (v.is_int ? v.n != 0 : v.f != 0.0f) ? 1 : 0, true};
  }
}

__device__ __forceinline__ Scalar Read(const StridedOperand& o, int64_t offset) {
  const Scalar v = Load(o.ptr, offset, o.type);
  return o.as == o.type ? v : ConvertTo(v, o.as);
}

__device__ __forceinline__ void Store(void* p, int64_t i, int type, Scalar v) {
  switch (type) {
    case kF16: static_cast<__half*>(p)[i] = __float2half_rn(v.AsFloat()); break;
    case kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v.AsFloat()); break;
    case kF32: static_cast<float*>(p)[i] = v.AsFloat(); break;
    case kI64: static_cast<int64_t*>(p)[i] = v.AsInt(); break;
    case kI32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v.AsInt()); break;
    default: static_cast<uint8_t*>(p)[i] = (v.is_int ? v.n != 0 : v.f != 0.0f) ? 1 : 0; break;
  }
}

__device__ __forceinline__ float FloatFunc(const OnnxElementwiseArgs& a, const float* x) {
  return FloatFuncOf(a.func, a.alpha, a.beta, x);
}

__device__ __forceinline__ int64_t IntFunc(const OnnxElementwiseArgs& a, const int64_t* x) {
  const int64_t u = x[0], v = x[1];
  switch (a.func) {
    case kCopy: return u;
    case kAdd: return u + v;
    case kSub: return u - v;
    case kMul: return u * v;
    case kDiv: return v == 0 ? 0 : u / v;
    case kPow: return static_cast<int64_t>(pow(static_cast<double>(u), static_cast<double>(v)));
    case kMax: return u > v ? u : v;
    case kMin: return u < v ? u : v;
    case kMod: {  // the sign of the divisor, as Python's %
      int64_t r = v == 0 ? 0 : u % v;
      if (r != 0 && (r < 0) != (v < 0)) r += v;
      return r;
    }
    case kFMod: return v == 0 ? 0 : u % v;
    case kEqual: return u == v;
    case kLess: return u < v;
    case kGreater: return u > v;
    case kLessOrEqual: return u <= v;
    case kGreaterOrEqual: return u >= v;
    case kAnd: return u != 0 && v != 0;
    case kOr: return u != 0 || v != 0;
    case kXor: return (u != 0) != (v != 0);
    case kWhere: return u != 0 ? v : x[2];
    case kMulAdd: return u * v + x[2];
    case kRelu: return u > 0 ? u : 0;
    case kNeg: return -u;
    case kAbs: return u < 0 ? -u : u;
    case kClip: {
      const auto lo = static_cast<int64_t>(a.alpha), hi = static_cast<int64_t>(a.beta);
      return u < lo ? lo : (u > hi ? hi : u);
    }
    case kNot: return u == 0;
    case kSign: return (u > 0) - (u < 0);
    default: return u;
  }
}

unsigned GridFor(int64_t work, int threads) {
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

#define HFUSE_GRID_STRIDE(e, n)                                                          \
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < (n); \
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Element e's offsets in every operand, decoded in Index arithmetic
// (uint32_t where the host found every offset to fit: a 64-bit division is
// tens of instructions, the bulk of the kernel's time otherwise). kIn, the
// operand count, is a template argument so that the offsets and values
// stay in registers (a loop to a run-time count puts them in local memory).
template <int kIn, typename Index, typename Offset>
__device__ __forceinline__ Offset Decode(const OnnxElementwiseArgs& a, Index e, Offset (&off)[3]) {
  Index rest = e;
  Offset out = 0;
  off[0] = off[1] = off[2] = 0;
  for (int d = a.rank - 1; d >= 0; --d) {
    const Index n = static_cast<Index>(a.shape[d]);
    const Index i = rest % n;
    rest /= n;
    out += static_cast<Offset>(i) * static_cast<Offset>(a.out_strides[d]);
#pragma unroll
    for (int k = 0; k < kIn; ++k) off[k] += static_cast<Offset>(i) * static_cast<Offset>(a.in[k].strides[d]);
  }
  return out;
}

template <int kIn, typename Index, typename Offset>
__device__ __forceinline__ void ElementwiseAt(const OnnxElementwiseArgs& a, Index e) {
  Offset off[3];
  const Offset out = Decode<kIn, Index, Offset>(a, e, off);
  if (a.all_f32) {
    float x[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < kIn; ++k) x[k] = static_cast<const float*>(a.in[k].ptr)[off[k]];
    static_cast<float*>(a.out)[out] = FloatFunc(a, x);
  } else if (a.integer) {
    int64_t x[3] = {0, 0, 0};
#pragma unroll
    for (int k = 0; k < kIn; ++k) x[k] = Read(a.in[k], off[k]).AsInt();
    Store(a.out, out, a.out_type, {0.0f, IntFunc(a, x), true});
  } else {
    float x[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < kIn; ++k) x[k] = Read(a.in[k], off[k]).AsFloat();
    Store(a.out, out, a.out_type, {FloatFunc(a, x), 0, false});
  }
}

#define HFUSE_GRID_STRIDE32(e, n)                                                          \
  for (uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < static_cast<uint32_t>(n); \
       e += gridDim.x * blockDim.x)

// Every element of one op, in the index arithmetic the host chose.
template <bool kNarrow, int kIn>
__device__ __forceinline__ void ElementwiseAll(const OnnxElementwiseArgs& a) {
  if constexpr (kNarrow) {
    HFUSE_GRID_STRIDE32(e, a.numel) ElementwiseAt<kIn, uint32_t, int32_t>(a, e);
  } else {
    HFUSE_GRID_STRIDE(e, a.numel) ElementwiseAt<kIn, int64_t, int64_t>(a, e);
  }
}

template <bool kNarrow>
__device__ __forceinline__ void ElementwiseOp(const OnnxElementwiseArgs& a) {
  switch (a.num_inputs) {
    case 1: ElementwiseAll<kNarrow, 1>(a); break;
    case 2: ElementwiseAll<kNarrow, 2>(a); break;
    default: ElementwiseAll<kNarrow, 3>(a); break;
  }
}

template <bool kNarrow, int kIn>
__global__ void OnnxElementwiseKernel(OnnxElementwiseArgs a) {
  ElementwiseAll<kNarrow, kIn>(a);
}

// The float32 path four elements a thread, with 16-byte loads and stores:
// the innermost dim is contiguous in the output (a multiple of 4 long),
// and each operand walks it contiguously (read as a float4) or not at all
// (one float, broadcast). The host checked the alignment of every vector
// access (VectorOk).
template <int kIn>
__global__ void OnnxElementwiseF32x4Kernel(OnnxElementwiseArgs a) {
  const int last = a.rank - 1;
  const uint32_t inner = static_cast<uint32_t>(a.shape[last]) / 4;
  const uint32_t vectors = static_cast<uint32_t>(a.numel) / 4;
  for (uint32_t v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += gridDim.x * blockDim.x) {
    uint32_t rest = v / inner;
    const int32_t i = static_cast<int32_t>(v - rest * inner) * 4;
    int32_t out = i, off[kIn];
#pragma unroll
    for (int k = 0; k < kIn; ++k) off[k] = i * static_cast<int32_t>(a.in[k].strides[last]);
    for (int d = last - 1; d >= 0; --d) {
      const uint32_t n = static_cast<uint32_t>(a.shape[d]);
      const uint32_t j = rest % n;
      rest /= n;
      out += static_cast<int32_t>(j) * static_cast<int32_t>(a.out_strides[d]);
#pragma unroll
      for (int k = 0; k < kIn; ++k) off[k] += static_cast<int32_t>(j) * static_cast<int32_t>(a.in[k].strides[d]);
    }
    float4 x[kIn];
#pragma unroll
    for (int k = 0; k < kIn; ++k) {
      const float* p = static_cast<const float*>(a.in[k].ptr) + off[k];
      if (a.in[k].strides[last] == 1) {
        x[k] = *reinterpret_cast<const float4*>(p);
      } else {
        const float s = *p;
        x[k] = make_float4(s, s, s, s);
      }
    }
    float u[3] = {0.0f, 0.0f, 0.0f};
    float4 y;
#pragma unroll
    for (int k = 0; k < kIn; ++k) u[k] = x[k].x;
    y.x = FloatFunc(a, u);
#pragma unroll
    for (int k = 0; k < kIn; ++k) u[k] = x[k].y;
    y.y = FloatFunc(a, u);
#pragma unroll
    for (int k = 0; k < kIn; ++k) u[k] = x[k].z;
    y.z = FloatFunc(a, u);
#pragma unroll
    for (int k = 0; k < kIn; ++k) u[k] = x[k].w;
    y.w = FloatFunc(a, u);
    *reinterpret_cast<float4*>(static_cast<float*>(a.out) + out) = y;
  }
}

// One op of the batch per grid row (blockIdx.y), its elements over the row's blocks.
template <bool kNarrow>
__global__ void OnnxElementwiseBatchKernel(const OnnxElementwiseArgs* args) {
  __shared__ OnnxElementwiseArgs a;
  if (threadIdx.x == 0) a = args[blockIdx.y];
  __syncthreads();
  ElementwiseOp<kNarrow>(a);
}

// Word w of gathered row `row` (o, i: the outer index and the id's place),
// loaded with the bias row's word added: false for an id out of range.
// *y_at: the byte where it goes. Loads only, so that a thread's several
// words are read at once before any is written.
template <typename Word, typename Index>
__device__ __forceinline__ bool GatherLoad(const GatherArgs& a, Index row, Index w, Index row_words, bool dense,
                                           Word* v, int64_t* y_at) {
  const Index o = row / static_cast<Index>(a.count), i = row - o * static_cast<Index>(a.count);
  int64_t off = i;
  if (!dense) {
    Index rest = i;
    off = 0;
    for (int d = a.index_rank - 1; d >= 0; --d) {
      off += static_cast<int64_t>(rest % static_cast<Index>(a.index_shape[d])) * a.index.strides[d];
      rest /= static_cast<Index>(a.index_shape[d]);
    }
  }
  int64_t at = Read(a.index, off).AsInt();
  if (at < 0) at += a.len;
  if (at < 0 || at >= a.len) return false;
  Word x = static_cast<const Word*>(a.data)[(static_cast<int64_t>(o) * a.len + at) * row_words + w];
  *y_at = (a.y_block_rows > 1 ? static_cast<int64_t>(row / static_cast<Index>(a.y_block_rows)) * a.y_block_bytes +
                                    static_cast<int64_t>(row % static_cast<Index>(a.y_block_rows)) * a.y_row_bytes
                              : static_cast<int64_t>(row) * a.y_row_bytes) +
          static_cast<int64_t>(w) * static_cast<int64_t>(sizeof(Word));
  if constexpr (sizeof(Word) == sizeof(float)) {
    if (a.add) x = __float_as_uint(__uint_as_float(x) + a.add[w]);
  } else if constexpr (sizeof(Word) == sizeof(float4)) {
    if (a.add) {
      const float4 b = reinterpret_cast<const float4*>(a.add)[w];
      x.x = __float_as_uint(__uint_as_float(x.x) + b.x);
      x.y = __float_as_uint(__uint_as_float(x.y) + b.y);
      x.z = __float_as_uint(__uint_as_float(x.z) + b.z);
      x.w = __float_as_uint(__uint_as_float(x.w) + b.w);
    }
  }
  *v = x;
  return true;
}

template <typename Word, typename Index>
__device__ __forceinline__ void GatherWord(const GatherArgs& a, Index row, Index w, Index row_words, bool dense) {
  Word v;
  int64_t y_at;
  if (!GatherLoad<Word, Index>(a, row, w, row_words, dense, &v, &y_at)) {
    *a.bad = 1;
    return;
  }
  *reinterpret_cast<Word*>(static_cast<char*>(a.y) + y_at) = v;
}

// Whether the ids are a dense tensor ([B] or [B, L]), the most common
// lookup: the id's place is then its offset, with no division per dim.
__device__ __forceinline__ bool DenseIds(const GatherArgs& a) {
  bool dense = true;
  int64_t stride = 1;
  for (int d = a.index_rank - 1; d >= 0; --d) {
    if (a.index_shape[d] != 1 && a.index.strides[d] != stride) dense = false;
    stride *= a.index_shape[d];
  }
  return dense;
}

// One thread a word of an output row (16 or 4 bytes where rows and
// pointers allow, else a byte), index math in 32 bits where the lookup is
// below 2^31 words (DIN's [2048, 20] history lookups took 45 us at 212 GB/s
// with 64-bit divisions, one word a thread, bench/RESULTS.md).
template <typename Word>
__device__ __forceinline__ void GatherOp(const GatherArgs& a, int64_t row_words) {
  const bool dense = DenseIds(a);
  const int64_t total = a.outer * a.count * row_words;
  if (total < (int64_t{1} << 31)) {
    const auto n = static_cast<uint32_t>(total), rw = static_cast<uint32_t>(row_words);
    for (uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x) {
      const uint32_t row = e / rw;
      GatherWord<Word, uint32_t>(a, row, e - row * rw, rw, dense);
    }
    return;
  }
  HFUSE_GRID_STRIDE(e, total) {
    const int64_t row = e / row_words;
    GatherWord<Word, int64_t>(a, row, e - row * row_words, row_words, dense);
  }
}

template <typename Word>
__global__ void GatherKernel(GatherArgs a, int64_t row_words) {
  GatherOp<Word>(a, row_words);
}

// A gather of a batch: kGatherUnroll words a thread, blockDim apart, all
// loaded before any is stored (the id load and the row load of each word
// wait on each other; a thread's words do not).
constexpr int kGatherBatchThreads = 256, kGatherUnroll = 4;
constexpr int64_t kGatherBatchMaxBlocks = 2048;  // a gather's blocks at most; larger ones loop

template <typename Word, typename Index>
__device__ __forceinline__ void GatherChunks(const GatherArgs& a, Index first, Index step, Index n, Index rw) {
  const bool dense = DenseIds(a);
  for (; first < n; first += step) {
    Word v[kGatherUnroll];
    int64_t y_at[kGatherUnroll];
    bool ok[kGatherUnroll];
    bool bad = false;
#pragma unroll
    for (int j = 0; j < kGatherUnroll; ++j) {
      const Index e = first + static_cast<Index>(j * kGatherBatchThreads + threadIdx.x);
      ok[j] = false;
      if (e < n) {
        const Index row = e / rw;
        ok[j] = GatherLoad<Word, Index>(a, row, e - row * rw, rw, dense, &v[j], &y_at[j]);
        bad = bad || !ok[j];
      }
    }
#pragma unroll
    for (int j = 0; j < kGatherUnroll; ++j) {
      if (ok[j]) *reinterpret_cast<Word*>(static_cast<char*>(a.y) + y_at[j]) = v[j];
    }
    if (bad) *a.bad = 1;
  }
}

template <typename Word>
__device__ __forceinline__ void GatherBlocks(const GatherArgs& a, int64_t local_block) {
  const int64_t rw = a.inner_bytes / static_cast<int64_t>(sizeof(Word));
  const int64_t total = a.outer * a.count * rw, chunk = int64_t{kGatherBatchThreads} * kGatherUnroll;
  if (total + chunk < (int64_t{1} << 31)) {
    GatherChunks<Word, uint32_t>(a, static_cast<uint32_t>(local_block * chunk), static_cast<uint32_t>(a.blocks * chunk),
                                 static_cast<uint32_t>(total), static_cast<uint32_t>(rw));
  } else {
    GatherChunks<Word, int64_t>(a, local_block * chunk, a.blocks * chunk, total, rw);
  }
}

// Block b of the launch works on gather block_gather[b], whose arguments
// the block's threads copy to shared memory a word each.
__global__ void __launch_bounds__(kGatherBatchThreads)
    GatherBatchKernel(const GatherArgs* args, const int32_t* block_gather) {
  static_assert(sizeof(GatherArgs) % sizeof(uint32_t) == 0 && sizeof(GatherArgs) / 4 <= kGatherBatchThreads);
  __shared__ GatherArgs a;
  const uint32_t* from = reinterpret_cast<const uint32_t*>(args + block_gather[blockIdx.x]);
  if (threadIdx.x < sizeof(GatherArgs) / 4) reinterpret_cast<uint32_t*>(&a)[threadIdx.x] = from[threadIdx.x];
  __syncthreads();
  const int64_t local = static_cast<int64_t>(blockIdx.x) - a.first_block;
  if (a.word_bytes == 16) {
    GatherBlocks<uint4>(a, local);
  } else if (a.word_bytes == 4) {
    GatherBlocks<uint32_t>(a, local);
  } else {
    GatherBlocks<uint8_t>(a, local);
  }
}

__device__ __forceinline__ int64_t IndexAt(const void* p, int64_t i, int32_t index64) {
  return index64 ? static_cast<const int64_t*>(p)[i] : static_cast<const int32_t*>(p)[i];
}

__device__ __forceinline__ void CopyBytes(char* dst, const char* src, int64_t n) {
  for (int64_t b = 0; b < n; ++b) dst[b] = src[b];
}

__global__ void GatherElementsKernel(GatherElementsArgs a) {
  HFUSE_GRID_STRIDE(e, a.numel) {
    int64_t at = IndexAt(a.index, e, a.index64);
    if (at < 0) at += a.axis_len;
    if (at < 0 || at >= a.axis_len) {
      *a.bad = 1;
      continue;
    }
    int64_t rest = e, src = 0;
    for (int d = a.rank - 1; d >= 0; --d) {
      const int64_t i = rest % a.shape[d];
      rest /= a.shape[d];
      src += (d == a.axis ? at : i) * a.data_strides[d];
    }
    CopyBytes(static_cast<char*>(a.y) + e * a.elem_bytes,
              static_cast<const char*>(a.data) + src * a.elem_bytes, a.elem_bytes);
  }
}

// One thread a byte of an output slice (slices are small: a row of a table).
__global__ void GatherNdKernel(GatherNdArgs a) {
  HFUSE_GRID_STRIDE(e, a.batches * a.per_batch * a.slice_bytes) {
    const int64_t j = e / a.slice_bytes, byte = e % a.slice_bytes;
    const int64_t b = j / a.per_batch;
    int64_t at = 0;
    bool ok = true;
    for (int q = 0; q < a.k; ++q) {
      int64_t v = IndexAt(a.index, j * a.k + q, a.index64);
      if (v < 0) v += a.dims[q];
      if (v < 0 || v >= a.dims[q]) ok = false;
      at = at * a.dims[q] + v;
    }
    if (!ok) {
      *a.bad = 1;
      continue;
    }
    static_cast<char*>(a.y)[e] =
        static_cast<const char*>(a.data)[b * a.data_batch_bytes + at * a.slice_bytes + byte];
  }
}

// One thread a line: lines are short (a sequence, a handful of fields).
__global__ void CumSumKernel(CumSumArgs a) {
  HFUSE_GRID_STRIDE(line, a.outer * a.inner) {
    const int64_t o = line / a.inner, i = line % a.inner;
    const bool integer = a.type >= kI64;
    double acc = 0.0;
    int64_t iacc = 0;
    for (int64_t j = 0; j < a.len; ++j) {
      const int64_t jj = a.reverse ? a.len - 1 - j : j;
      const int64_t at = (o * a.len + jj) * a.inner + i;
      const Scalar v = Load(a.x, at, a.type);
      if (!a.exclusive) {
        acc += v.AsFloat();
        iacc += v.AsInt();
      }
      Store(a.y, at, a.type, integer ? Scalar{0.0f, iacc, true} : Scalar{static_cast<float>(acc), 0, false});
      if (a.exclusive) {
        acc += v.AsFloat();
        iacc += v.AsInt();
      }
    }
  }
}

__global__ void PadKernel(PadArgs a) {
  HFUSE_GRID_STRIDE(e, a.numel) {
    int64_t rest = e, src = 0, stride = 1;
    bool outside = false;
    for (int d = a.rank - 1; d >= 0; --d) {
      const int64_t n = a.in_shape[d];
      int64_t at = rest % a.out_shape[d] - a.begin[d];
      rest /= a.out_shape[d];
      if (at < 0 || at >= n) {
        if (a.mode == 0) {
          outside = true;
        } else if (a.mode == 1 || n == 1) {
          at = at < 0 ? 0 : n - 1;
        } else {  // reflect, without repeating the edge
          const int64_t period = 2 * (n - 1);
          at = ((at % period) + period) % period;
          if (at >= n) at = period - at;
        }
      }
      src += at * stride;
      stride *= n;
    }
    Store(a.y, e, a.type,
          outside ? Scalar{static_cast<float>(a.value), static_cast<int64_t>(a.value), a.type >= kI64}
                  : Load(a.x, src, a.type));
  }
}

}  // namespace

void ClassifyElementwise(OnnxElementwiseArgs& a) {
  // The largest offset |sum (shape[d] - 1) * stride[d]| of each view.
  auto fits = [&](const int64_t* strides) {
    int64_t reach = 0;
    for (int d = 0; d < a.rank; ++d) reach += (a.shape[d] - 1) * (strides[d] < 0 ? -strides[d] : strides[d]);
    return reach < INT32_MAX;
  };
  bool narrow = a.numel < INT32_MAX && fits(a.out_strides);
  bool f32 = !a.integer && a.out_type == kF32;
  for (int k = 0; k < a.num_inputs; ++k) {
    narrow = narrow && fits(a.in[k].strides);
    f32 = f32 && a.in[k].type == kF32 && a.in[k].as == kF32;
  }
  a.narrow = narrow ? 1 : 0;
  a.all_f32 = f32 ? 1 : 0;
}

namespace {
// Whether the float4 kernel can take the op (OnnxElementwiseF32x4Kernel).
bool VectorOk(const OnnxElementwiseArgs& a) {
  if (!a.narrow || !a.all_f32 || a.rank < 1) return false;
  const int last = a.rank - 1;
  if (a.shape[last] % 4 != 0 || a.out_strides[last] != 1) return false;
  auto aligned = [&](const void* p, const int64_t* strides) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
    for (int d = 0; d < last; ++d) {
      if (strides[d] % 4 != 0) return false;
    }
    return true;
  };
  if (!aligned(a.out, a.out_strides)) return false;
  for (int k = 0; k < a.num_inputs; ++k) {
    const int64_t s = a.in[k].strides[last];
    if (s != 0 && s != 1) return false;
    if (s == 1 && !aligned(a.in[k].ptr, a.in[k].strides)) return false;
  }
  return true;
}
}  // namespace

void LaunchOnnxElementwise(const OnnxElementwiseArgs& args, cudaStream_t stream) {
  if (args.numel == 0) return;
  if (VectorOk(args)) {
    const unsigned grid = GridFor(args.numel / 4, 256);
    switch (args.num_inputs) {
      case 1: OnnxElementwiseF32x4Kernel<1><<<grid, 256, 0, stream>>>(args); return;
      case 2: OnnxElementwiseF32x4Kernel<2><<<grid, 256, 0, stream>>>(args); return;
      case 3: OnnxElementwiseF32x4Kernel<3><<<grid, 256, 0, stream>>>(args); return;
      default: break;
    }
  }
  const unsigned grid = GridFor(args.numel, 256);
  switch (args.num_inputs * 2 + (args.narrow ? 1 : 0)) {
    case 2: OnnxElementwiseKernel<false, 1><<<grid, 256, 0, stream>>>(args); break;
    case 3: OnnxElementwiseKernel<true, 1><<<grid, 256, 0, stream>>>(args); break;
    case 4: OnnxElementwiseKernel<false, 2><<<grid, 256, 0, stream>>>(args); break;
    case 5: OnnxElementwiseKernel<true, 2><<<grid, 256, 0, stream>>>(args); break;
    case 6: OnnxElementwiseKernel<false, 3><<<grid, 256, 0, stream>>>(args); break;
    default: OnnxElementwiseKernel<true, 3><<<grid, 256, 0, stream>>>(args); break;
  }
}

void LaunchOnnxElementwiseBatch(const OnnxElementwiseArgs* args, int count, int64_t max_numel, bool narrow,
                                cudaStream_t stream) {
  if (count == 0 || max_numel == 0) return;
  const dim3 grid(GridFor(max_numel, 256), static_cast<unsigned>(count));
  if (narrow) {
    OnnxElementwiseBatchKernel<true><<<grid, 256, 0, stream>>>(args);
  } else {
    OnnxElementwiseBatchKernel<false><<<grid, 256, 0, stream>>>(args);
  }
}

bool GatherWords(const GatherArgs& a) {
  return a.inner_bytes % 4 == 0 && a.y_row_bytes % 4 == 0 && a.y_block_bytes % 4 == 0 &&
         reinterpret_cast<uintptr_t>(a.data) % 4 == 0 && reinterpret_cast<uintptr_t>(a.y) % 4 == 0;
}

int GatherWordBytes(const GatherArgs& a) {
  const bool quads = a.inner_bytes % 16 == 0 && a.y_row_bytes % 16 == 0 && a.y_block_bytes % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(a.data) % 16 == 0 && reinterpret_cast<uintptr_t>(a.y) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(a.add) % 16 == 0;
  return quads ? 16 : GatherWords(a) ? 4 : 1;
}

void LaunchOnnxGather(const GatherArgs& a, cudaStream_t stream) {
  if (a.outer * a.count * a.inner_bytes == 0) return;
  const int word = GatherWordBytes(a);
  const int64_t row_words = a.inner_bytes / word;
  const unsigned grid = GridFor(a.outer * a.count * row_words, 256);
  if (word == 16) {
    GatherKernel<uint4><<<grid, 256, 0, stream>>>(a, row_words);
  } else if (word == 4) {
    GatherKernel<uint32_t><<<grid, 256, 0, stream>>>(a, row_words);
  } else {
    GatherKernel<uint8_t><<<grid, 256, 0, stream>>>(a, row_words);
  }
}

std::vector<int32_t> LayGatherBatch(std::vector<GatherArgs>& args) {
  std::vector<int32_t> block_gather;
  const int64_t chunk = int64_t{kGatherBatchThreads} * kGatherUnroll;
  for (size_t g = 0; g < args.size(); ++g) {
    GatherArgs& a = args[g];
    a.word_bytes = GatherWordBytes(a);
    const int64_t words = a.outer * a.count * (a.inner_bytes / a.word_bytes);
    a.first_block = static_cast<int32_t>(block_gather.size());
    a.blocks = static_cast<int32_t>(std::min((words + chunk - 1) / chunk, kGatherBatchMaxBlocks));
    block_gather.insert(block_gather.end(), static_cast<size_t>(a.blocks), static_cast<int32_t>(g));
  }
  return block_gather;
}

void LaunchOnnxGatherBatch(const GatherArgs* args, const int32_t* block_gather, int64_t blocks, cudaStream_t stream) {
  if (blocks == 0) return;
  GatherBatchKernel<<<static_cast<unsigned>(blocks), kGatherBatchThreads, 0, stream>>>(args, block_gather);
}

void LaunchGatherElements(const GatherElementsArgs& args, cudaStream_t stream) {
  if (args.numel == 0) return;
  GatherElementsKernel<<<GridFor(args.numel, 256), 256, 0, stream>>>(args);
}

void LaunchGatherNd(const GatherNdArgs& args, cudaStream_t stream) {
  const int64_t work = args.batches * args.per_batch * args.slice_bytes;
  if (work == 0) return;
  GatherNdKernel<<<GridFor(work, 256), 256, 0, stream>>>(args);
}

void LaunchCumSum(const CumSumArgs& args, cudaStream_t stream) {
  if (args.outer * args.inner * args.len == 0) return;
  CumSumKernel<<<GridFor(args.outer * args.inner, 128), 128, 0, stream>>>(args);
}

void LaunchPad(const PadArgs& args, cudaStream_t stream) {
  if (args.numel == 0) return;
  PadKernel<<<GridFor(args.numel, 256), 256, 0, stream>>>(args);
}

}  // namespace hfuse::cuda
