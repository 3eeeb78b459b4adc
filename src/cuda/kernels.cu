// hfuse's own CUDA kernels. See kernels.h.
//
// LayerNorm: one launch for a group of any size and any mix of widths. The
// host cuts each member into tiles of rows (LayerNormTile), each handled by
// one block with a number of threads per row fitted to the member's width,
// so narrow and wide members run side by side without idle lanes; 16-byte
// loads and stores where the member's layout allows, statistics in fp32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "kernels.h"

namespace hfuse::cuda {
namespace {

__device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ToFloat(float v) { return v; }
template <typename T> __device__ __forceinline__ T FromFloat(float v);
template <> __device__ __forceinline__ __half FromFloat<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ float FromFloat<float>(float v) { return v; }

__device__ __forceinline__ float Sigmoid(float v) { return 1.0f / (1.0f + __expf(-v)); }

template <typename T>
struct Pack {  // 16 bytes of T
  static constexpr int kN = 16 / sizeof(T);
  union {
    uint4 raw;
    T v[kN];
  };
};

// Sum over the `lanes` threads of a row (aligned groups within a warp).
__device__ __forceinline__ float RowSum(float v, int lanes) {
  for (int o = lanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__device__ __forceinline__ float Normalize(float v, float mean, float rstd, float g, float b,
                                           bool sigmoid_mul) {
  const float o = (v - mean) * rstd * g + b;
  return sigmoid_mul ? v * Sigmoid(o) : o;
}

// One block per tile (rows of one member); `lanes` threads per row. The fast
// path keeps the row in registers (kLayerNormPacks 16-byte packs a thread)
// and loads gamma and beta 16 bytes at a time; otherwise 32 threads loop
// over the row three times. Statistics in fp32, two passes (exact mean,
// then the centred sum of squares).
// 50 registers a thread; capping it at 40 for more blocks a multiprocessor
// spills (ptxas -v). A persistent grid over the tiles was measured too and
// was 8% slower on the towers LayerNorm group (63.5 against 58.9 us).
template <typename T>
__global__ void __launch_bounds__(kLayerNormThreads)
TiledLayerNormKernel(const LayerNormDesc* descs, const LayerNormTile* tiles, float eps,
                     bool sigmoid_mul) {
  const LayerNormTile t = tiles[blockIdx.x];
  const LayerNormDesc d = descs[t.member];
  const int lanes = d.lanes;
  const int sub = static_cast<int>(threadIdx.x) / lanes;  // the row within the tile
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  // Threads past the tile's rows still take part in the shuffles (all 32
  // lanes of a warp), with nothing to read.
  const bool active = sub < t.rows;
  const int64_t r = t.row0 + (active ? sub : 0);
  const T* x = static_cast<const T*>(d.x) + r * d.x_stride;
  T* y = static_cast<T*>(d.y) + r * d.y_stride;
  const T* gamma = static_cast<const T*>(d.gamma);
  const T* beta = static_cast<const T*>(d.beta);
  const int64_t n = d.n;
  const float inv_n = 1.0f / static_cast<float>(n);
  constexpr int kV = Pack<T>::kN;
  const int64_t vecs = n / kV;

  if (d.vec && vecs <= static_cast<int64_t>(lanes) * kLayerNormPacks) {
    // Every row of the tile has the member's gamma and beta: the block
    // stages them in shared memory once, while its rows' loads are in flight.
    __shared__ uint4 s_gamma[32 * kLayerNormPacks], s_beta[32 * kLayerNormPacks];
    Pack<T> p[kLayerNormPacks];
#pragma unroll
    for (int i = 0; i < kLayerNormPacks; ++i) {
      const int64_t v = lane + static_cast<int64_t>(i) * lanes;
      if (active && v < vecs) p[i].raw = __ldcs(reinterpret_cast<const uint4*>(x) + v);  // read once
    }
    for (int v = static_cast<int>(threadIdx.x); v < vecs; v += kLayerNormThreads) {
      if (gamma) s_gamma[v] = __ldg(reinterpret_cast<const uint4*>(gamma) + v);
      if (beta) s_beta[v] = __ldg(reinterpret_cast<const uint4*>(beta) + v);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kLayerNormPacks; ++i) {
      const int64_t v = lane + static_cast<int64_t>(i) * lanes;
      if (active && v < vecs) {
#pragma unroll
        for (int k = 0; k < kV; ++k) sum += ToFloat(p[i].v[k]);
      }
    }
    const float mean = RowSum(sum, lanes) * inv_n;
    float sq = 0.0f;
#pragma unroll
    for (int i = 0; i < kLayerNormPacks; ++i) {
      const int64_t v = lane + static_cast<int64_t>(i) * lanes;
      if (active && v < vecs) {
#pragma unroll
        for (int k = 0; k < kV; ++k) {
          const float c = ToFloat(p[i].v[k]) - mean;
          sq += c * c;
        }
      }
    }
    const float rstd = rsqrtf(RowSum(sq, lanes) * inv_n + eps);
    __syncthreads();  // gamma and beta staged
    if (!active) return;
#pragma unroll
    for (int i = 0; i < kLayerNormPacks; ++i) {
      const int64_t v = lane + static_cast<int64_t>(i) * lanes;
      if (v < vecs) {
        Pack<T> g, b, q;
        if (gamma) g.raw = s_gamma[v];
        if (beta) b.raw = s_beta[v];
#pragma unroll
        for (int k = 0; k < kV; ++k) {
          q.v[k] = FromFloat<T>(Normalize<T>(ToFloat(p[i].v[k]), mean, rstd,
                                             gamma ? ToFloat(g.v[k]) : 1.0f,
                                             beta ? ToFloat(b.v[k]) : 0.0f, sigmoid_mul));
        }
        __stcs(reinterpret_cast<uint4*>(y) + v, q.raw);
      }
    }
    return;
  }

  // General path: any n and layout, 32 threads a row (lanes is 32 here).
  float sum = 0.0f;
  if (active) {
    if (d.vec) {
      for (int64_t i = lane; i < vecs; i += lanes) {
        Pack<T> p;
        p.raw = reinterpret_cast<const uint4*>(x)[i];
#pragma unroll
        for (int k = 0; k < kV; ++k) sum += ToFloat(p.v[k]);
      }
    } else {
      for (int64_t j = lane; j < n; j += lanes) sum += ToFloat(x[j]);
    }
  }
  const float mean = RowSum(sum, lanes) * inv_n;
  float sq = 0.0f;
  if (active) {
    for (int64_t j = lane; j < n; j += lanes) {
      const float c = ToFloat(x[j]) - mean;
      sq += c * c;
    }
  }
  const float rstd = rsqrtf(RowSum(sq, lanes) * inv_n + eps);
  if (!active) return;
  for (int64_t j = lane; j < n; j += lanes) {
    y[j] = FromFloat<T>(Normalize<T>(ToFloat(x[j]), mean, rstd, gamma ? ToFloat(gamma[j]) : 1.0f,
                                     beta ? ToFloat(beta[j]) : 0.0f, sigmoid_mul));
  }
}

// EwFunc `func` (its values are the codes); unary ones ignore b.
__device__ float ApplyFunc(int func, float a, float b, bool first) {
  switch (func) {
    case 0: return fmaxf(a, 0.0f);
    case 1: return Sigmoid(a);
    case 2: return tanhf(a);
    case 3: return 0.5f * a * (1.0f + erff(a * 0.70710678118654752f));
    case 4: return a * Sigmoid(a);
    default: break;
  }
  if (first) return b;
  switch (func) {
    case 5: return a + b;
    case 6: return a - b;
    case 7: return a * b;
    default: return a / b;
  }
}

// One block per tile of rows of one member (the host lays out the tiles),
// 16-byte accesses where the member's layout allows: no search, no division.
template <typename T>
__global__ void GroupEpilogueKernel(const EpilogueDesc* descs, const EpilogueTile* tiles, int act) {
  const EpilogueTile t = tiles[blockIdx.x];
  const EpilogueDesc d = descs[t.member];
  const T* bias = static_cast<const T*>(d.bias);
  const int cols = static_cast<int>(d.cols);
  auto apply = [&](float v, int j) {
    if (bias) v += ToFloat(bias[j]);
    if (act != kNoActivation) v = ApplyFunc(act, v, 0.0f, true);
    return v;
  };
  constexpr int kV = Pack<T>::kN;
  // Threads over the tile's (row, column-pack) pairs, so short rows still
  // keep every thread busy.
  const int per_row = d.vec ? cols / kV : cols;
  const int work = t.rows * per_row;
  for (int i = threadIdx.x; i < work; i += blockDim.x) {
    const int rr = i / per_row;
    const int c = i - rr * per_row;
    T* y = static_cast<T*>(d.y) + static_cast<int64_t>(t.row0 + rr) * d.ld;
    if (d.vec) {
      Pack<T> p;
      p.raw = reinterpret_cast<const uint4*>(y)[c];
#pragma unroll
      for (int k = 0; k < kV; ++k) p.v[k] = FromFloat<T>(apply(ToFloat(p.v[k]), c * kV + k));
      reinterpret_cast<uint4*>(y)[c] = p.raw;
    } else {
      y[c] = FromFloat<T>(apply(ToFloat(y[c]), c));
    }
  }
}

template <typename T>
__global__ void ElementwiseKernel(ElementwiseArgs args) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < args.numel;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = e;
    int64_t offset[4] = {0, 0, 0, 0};
    for (int d = args.rank - 1; d >= 0; --d) {
      const int64_t i = rest % args.shape[d];
      rest /= args.shape[d];
      for (int k = 0; k < args.num_inputs; ++k) offset[k] += i * args.in_strides[k][d];
    }
    float acc = 0.0f;
    for (int k = 0; k < args.num_inputs; ++k) {
      const float v = ToFloat(static_cast<const T*>(args.in[k])[offset[k]]);
      acc = args.func <= 4 ? ApplyFunc(args.func, v, 0.0f, true) : ApplyFunc(args.func, acc, v, k == 0);
    }
    static_cast<T*>(args.out)[e] = FromFloat<T>(acc);
  }
}

unsigned GridFor(int64_t work, int threads) {
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

__device__ __forceinline__ float ReduceInit(int kind) {
  return kind == kReduceMax ? -INFINITY : kind == kReduceMin ? INFINITY : kind == kReduceProd ? 1.0f : 0.0f;
}
// acc folded with one element v (the element's term: |v|, v*v, or v).
__device__ __forceinline__ float ReduceStep(int kind, float acc, float v) {
  switch (kind) {
    case kReduceMax: return fmaxf(acc, v);
    case kReduceMin: return fminf(acc, v);
    case kReduceProd: return acc * v;
    case kReduceL1: return acc + fabsf(v);
    case kReduceL2:
    case kReduceSumSquare: return acc + v * v;
    default: return acc + v;
  }
}
// Two partial results combined.
__device__ __forceinline__ float ReduceCombine(int kind, float a, float b) {
  switch (kind) {
    case kReduceMax: return fmaxf(a, b);
    case kReduceMin: return fminf(a, b);
    case kReduceProd: return a * b;
    default: return a + b;
  }
}
__device__ __forceinline__ float ReduceFinish(int kind, float acc, int64_t count) {
  if (kind == kReduceMean) return acc / static_cast<float>(count > 0 ? count : 1);
  if (kind == kReduceL2) return sqrtf(acc);
  return acc;
}

// The reduced dims one run of neighbours: x seen as [outer, len, inner],
// y[o, i] = reduce over j of x[o, j, i]. One thread an output, the threads
// of a warp on neighbouring i (coalesced), no index division per element.
template <typename T>
__global__ void ReduceLinesKernel(const T* x, T* y, int64_t outer, int64_t len, int64_t inner, int kind) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < outer * inner;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = r / inner, i = r - o * inner;
    const T* p = x + o * len * inner + i;
    float acc = ReduceInit(kind);
    for (int64_t j = 0; j < len; ++j) acc = ReduceStep(kind, acc, ToFloat(p[j * inner]));
    y[r] = FromFloat<T>(ReduceFinish(kind, acc, len));
  }
}

// The same with inner == 1 and rows at least a warp long: one warp a row.
template <typename T>
__global__ void ReduceRowsKernel(const T* x, T* y, int64_t rows, int64_t len, int kind) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t r = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; r < rows; r += warps) {
    const T* xr = x + r * len;
    float acc = ReduceInit(kind);
    for (int64_t j = lane; j < len; j += 32) acc = ReduceStep(kind, acc, ToFloat(xr[j]));
    for (int o = 16; o > 0; o >>= 1) acc = ReduceCombine(kind, acc, __shfl_xor_sync(0xffffffffu, acc, o));
    if (lane == 0) y[r] = FromFloat<T>(ReduceFinish(kind, acc, len));
  }
}

// The same with few outputs over long lines (a mean over the batch, as
// Dice's statistics): a block of 8 warps a tile of 32 neighbouring i, the
// warps splitting j, combined through shared memory.
template <typename T>
__global__ void ReduceColumnsKernel(const T* x, T* y, int64_t len, int64_t inner, int kind) {
  __shared__ float part[8][33];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t o = blockIdx.x, i = static_cast<int64_t>(blockIdx.y) * 32 + lane;
  float acc = ReduceInit(kind);
  if (i < inner) {
    const T* p = x + o * len * inner + i;
    for (int64_t j = warp; j < len; j += 8) acc = ReduceStep(kind, acc, ToFloat(p[j * inner]));
  }
  part[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && i < inner) {
    for (int w = 1; w < 8; ++w) acc = ReduceCombine(kind, acc, part[w][lane]);
    y[o * inner + i] = FromFloat<T>(ReduceFinish(kind, acc, len));
  }
}

struct GemvBatch {
  GemvMember member[kMaxGemvMembers];
};

// A row's lanes and whether it reads packs of four (GemvMember's comment).
template <typename T>
__host__ __device__ inline GemvShape GemvShapeOf(const GemvMember& g) {
  constexpr auto kPack = static_cast<uintptr_t>(4 * sizeof(T));
  GemvShape s;
  s.packs = g.k % 4 == 0 && g.lda % 4 == 0 && reinterpret_cast<uintptr_t>(g.a) % kPack == 0 &&
            reinterpret_cast<uintptr_t>(g.w) % kPack == 0;
  const int64_t items = s.packs ? g.k / 4 : g.k;
  while (s.lanes < 32 && s.lanes < items) s.lanes *= 2;
  return s;
}

template <typename T>
struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
};

template <typename T>
__global__ void GemvKernel(GemvBatch batch, float alpha, int act) {
  const GemvMember& g = batch.member[blockIdx.y];
  const T* a = static_cast<const T*>(g.a);
  const T* w = static_cast<const T*>(g.w);
  const T* bias = static_cast<const T*>(g.bias);
  T* y = static_cast<T*>(g.y);
  const GemvShape shape = GemvShapeOf<T>(g);
  const int lanes = shape.lanes, rows_a_warp = 32 / lanes;
  const int lane = static_cast<int>(threadIdx.x % 32), sub = lane % lanes;
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  // Each warp takes rows_a_warp rows at a time (a warp's loop the same for
  // all its lanes: the shuffles need them all).
  for (int64_t first = warp * rows_a_warp; first < g.m; first += warps * rows_a_warp) {
    const int64_t r = first + lane / lanes;
    float acc = 0.0f;
    if (r < g.m) {
      const T* ar = a + r * g.lda;
      if (shape.packs) {
        const auto* ap = reinterpret_cast<const Pack4<T>*>(ar);
        const auto* wp = reinterpret_cast<const Pack4<T>*>(w);
#pragma unroll 4
        for (int64_t j = sub; j < g.k / 4; j += lanes) {
          const Pack4<T> x = ap[j], v = wp[j];
#pragma unroll
          for (int e = 0; e < 4; ++e) acc = fmaf(ToFloat(x.v[e]), ToFloat(v.v[e]), acc);
        }
      } else {
#pragma unroll 4
        for (int64_t j = sub; j < g.k; j += lanes) acc = fmaf(ToFloat(ar[j]), ToFloat(w[j]), acc);
      }
    }
    acc = RowSum(acc, lanes);  // (lanes of one row: an aligned group of the warp)
    if (r < g.m && sub == 0) {
      float v = alpha * acc + (bias ? ToFloat(bias[0]) : 0.0f);
      if (act != kNoActivation) v = ApplyFunc(act, v, 0.0f, true);
      y[r * g.ldy] = FromFloat<T>(v);
    }
  }
}

// One thread an output element: its kept coordinates, then every
// combination of the reduced ones (last dim fastest), accumulated in fp32.
template <typename T>
__global__ void ReduceKernel(ReduceArgs a) {
  int64_t stride[6];
  int64_t s = 1;
  for (int d = a.rank - 1; d >= 0; --d) {
    stride[d] = s;
    s *= a.shape[d];
  }
  const T* x = static_cast<const T*>(a.x);
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < a.out_numel;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t base = 0, rest = o;
    for (int d = a.rank - 1; d >= 0; --d) {
      if (a.reduced[d]) continue;
      base += (rest % a.shape[d]) * stride[d];
      rest /= a.shape[d];
    }
    float acc = a.kind == kReduceMax ? -INFINITY : a.kind == kReduceMin ? INFINITY
              : a.kind == kReduceProd ? 1.0f : 0.0f;
    for (int64_t r = 0; r < a.count; ++r) {
      int64_t at = base, left = r;
      for (int d = a.rank - 1; d >= 0; --d) {
        if (!a.reduced[d]) continue;
        at += (left % a.shape[d]) * stride[d];
        left /= a.shape[d];
      }
      const float v = ToFloat(x[at]);
      switch (a.kind) {
        case kReduceMax: acc = fmaxf(acc, v); break;
        case kReduceMin: acc = fminf(acc, v); break;
        case kReduceProd: acc *= v; break;
        case kReduceL1: acc += fabsf(v); break;
        case kReduceL2:
        case kReduceSumSquare: acc += v * v; break;
        default: acc += v; break;
      }
    }
    if (a.kind == kReduceMean) acc /= static_cast<float>(a.count > 0 ? a.count : 1);
    if (a.kind == kReduceL2) acc = sqrtf(acc);
    static_cast<T*>(a.y)[o] = FromFloat<T>(acc);
  }
}

// One thread a row (o, i): the max, the sum of exponentials, then the outputs.
template <typename T>
__global__ void SoftmaxKernel(const T* x, T* y, int64_t outer, int64_t len, int64_t inner, bool log) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < outer * inner;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (r / inner) * len * inner + r % inner;
    float high = -INFINITY;
    for (int64_t j = 0; j < len; ++j) high = fmaxf(high, ToFloat(x[base + j * inner]));
    float sum = 0.0f;
    for (int64_t j = 0; j < len; ++j) sum += expf(ToFloat(x[base + j * inner]) - high);
    const float log_sum = logf(sum);
    for (int64_t j = 0; j < len; ++j) {
      const float v = ToFloat(x[base + j * inner]) - high;
      y[base + j * inner] = FromFloat<T>(log ? v - log_sum : expf(v) / sum);
    }
  }
}

// Rows of a contiguous last axis (inner == 1) at least a warp long: one
// warp a row, so that long rows (attention over a sequence, or a batch) are
// read in parallel and coalesced.
template <typename T>
__global__ void SoftmaxRowsKernel(const T* x, T* y, int64_t rows, int64_t len, bool log) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t r = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; r < rows; r += warps) {
    const T* xr = x + r * len;
    T* yr = y + r * len;
    float high = -INFINITY;
    for (int64_t j = lane; j < len; j += 32) high = fmaxf(high, ToFloat(xr[j]));
    for (int o = 16; o > 0; o >>= 1) high = fmaxf(high, __shfl_xor_sync(0xffffffffu, high, o));
    float sum = 0.0f;
    for (int64_t j = lane; j < len; j += 32) sum += expf(ToFloat(xr[j]) - high);
    sum = RowSum(sum, 32);
    const float log_sum = logf(sum);
    for (int64_t j = lane; j < len; j += 32) {
      const float v = ToFloat(xr[j]) - high;
      yr[j] = FromFloat<T>(log ? v - log_sum : expf(v) / sum);
    }
  }
}

// Rows of a contiguous last axis shorter than a warp (attention over a
// few columns): a block takes as many rows as it has threads, reads them
// into shared memory with coalesced loads, each thread works out its row
// there, and the block writes the tile back coalesced. One thread a row
// straight from global memory (SoftmaxKernel) reads each warp's rows at a
// stride of the row length, three times: 96 us (460 GB/s) for
// TabTransformer's attention at batch 2048.
template <typename T>
__global__ void SoftmaxShortRowsKernel(const T* x, T* y, int64_t rows, int len, bool log) {
  extern __shared__ float tile[];  // blockDim.x rows of len
  const int64_t tile_rows = blockDim.x;
  for (int64_t r0 = blockIdx.x * tile_rows; r0 < rows; r0 += static_cast<int64_t>(gridDim.x) * tile_rows) {
    const int n_rows = static_cast<int>(rows - r0 < tile_rows ? rows - r0 : tile_rows);
    const int n = n_rows * len;
    const T* xs = x + r0 * len;
    for (int e = threadIdx.x; e < n; e += blockDim.x) tile[e] = ToFloat(xs[e]);
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < n_rows) {
      float* row = tile + threadIdx.x * len;
      float high = -INFINITY;
      for (int j = 0; j < len; ++j) high = fmaxf(high, row[j]);
      float sum = 0.0f;
      for (int j = 0; j < len; ++j) sum += expf(row[j] - high);
      const float log_sum = logf(sum);
      for (int j = 0; j < len; ++j) {
        const float v = row[j] - high;
        row[j] = log ? v - log_sum : expf(v) / sum;
      }
    }
    __syncthreads();
    T* ys = y + r0 * len;
    for (int e = threadIdx.x; e < n; e += blockDim.x) ys[e] = FromFloat<T>(tile[e]);
    __syncthreads();
  }
}

}  // namespace

int LayerNormLanes(int64_t n, int elem_bytes, bool vec) {
  const int64_t packs = n * elem_bytes / 16;
  if (!vec || packs > 32 * kLayerNormPacks) return 32;
  int lanes = 1;
  while (lanes < 32 && lanes * kLayerNormPacks < packs) lanes *= 2;
  return lanes;
}

void LaunchGroupLayerNorm(int dtype, const LayerNormDesc* descs, const LayerNormTile* tiles,
                          int num_tiles, float eps, bool sigmoid_mul, cudaStream_t stream) {
  if (num_tiles == 0) return;
  const dim3 grid(static_cast<unsigned>(num_tiles));
  if (dtype == 0) TiledLayerNormKernel<__half><<<grid, kLayerNormThreads, 0, stream>>>(descs, tiles, eps, sigmoid_mul);
  if (dtype == 1) TiledLayerNormKernel<__nv_bfloat16><<<grid, kLayerNormThreads, 0, stream>>>(descs, tiles, eps, sigmoid_mul);
  if (dtype == 2) TiledLayerNormKernel<float><<<grid, kLayerNormThreads, 0, stream>>>(descs, tiles, eps, sigmoid_mul);
}

void LaunchGroupEpilogue(int dtype, const EpilogueDesc* descs, const EpilogueTile* tiles,
                         int num_tiles, int act, cudaStream_t stream) {
  if (num_tiles == 0) return;
  const int a = act;
  const dim3 grid(static_cast<unsigned>(num_tiles));
  if (dtype == 0) GroupEpilogueKernel<__half><<<grid, 256, 0, stream>>>(descs, tiles, a);
  if (dtype == 1) GroupEpilogueKernel<__nv_bfloat16><<<grid, 256, 0, stream>>>(descs, tiles, a);
  if (dtype == 2) GroupEpilogueKernel<float><<<grid, 256, 0, stream>>>(descs, tiles, a);
}

namespace {
template <typename T>
void LaunchReduceLines(const ReduceArgs& a, int64_t outer, int64_t len, int64_t inner, cudaStream_t stream) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  if (inner == 1 && len >= 32) {
    ReduceRowsKernel<T><<<GridFor(outer * 32, 256), 256, 0, stream>>>(x, y, outer, len, a.kind);
  } else if (len >= 64 && outer * inner < 32768 && outer < 65536) {
    const dim3 grid(static_cast<unsigned>(outer), static_cast<unsigned>((inner + 31) / 32));
    ReduceColumnsKernel<T><<<grid, 256, 0, stream>>>(x, y, len, inner, a.kind);
  } else {
    ReduceLinesKernel<T><<<GridFor(outer * inner, 128), 128, 0, stream>>>(x, y, outer, len, inner, a.kind);
  }
}
}  // namespace

void LaunchReduce(int dtype, const ReduceArgs& args, cudaStream_t stream) {
  if (args.out_numel == 0) return;
  // The reduced dims (of more than one element) one run of neighbours: x is
  // [outer, len, inner], read without decoding indices.
  int first = -1, last = -1;
  bool one_run = true;
  for (int d = 0; d < args.rank; ++d) {
    if (!args.reduced[d] || args.shape[d] == 1) continue;
    if (first < 0) first = d;
    for (int e = last + 1; last >= 0 && e < d; ++e) one_run = one_run && args.shape[e] == 1;
    last = d;
  }
  if (one_run) {
    int64_t outer = 1, len = 1, inner = 1;
    for (int d = 0; d < args.rank; ++d) {
      (first < 0 || d < first ? outer : d > last ? inner : len) *= args.shape[d];
    }
    if (first < 0) inner = 1, outer = args.out_numel;
    if (dtype == 0) LaunchReduceLines<__half>(args, outer, len, inner, stream);
    if (dtype == 1) LaunchReduceLines<__nv_bfloat16>(args, outer, len, inner, stream);
    if (dtype == 2) LaunchReduceLines<float>(args, outer, len, inner, stream);
    return;
  }
  const unsigned grid = GridFor(args.out_numel, 128);
  if (dtype == 0) ReduceKernel<__half><<<grid, 128, 0, stream>>>(args);
  if (dtype == 1) ReduceKernel<__nv_bfloat16><<<grid, 128, 0, stream>>>(args);
  if (dtype == 2) ReduceKernel<float><<<grid, 128, 0, stream>>>(args);
}

void LaunchGemv(int dtype, const GemvMember* members, int count, float alpha, int act, cudaStream_t stream) {
  for (int first = 0; first < count; first += kMaxGemvMembers) {
    GemvBatch batch{};
    const int n = count - first < kMaxGemvMembers ? count - first : kMaxGemvMembers;
    int64_t threads = 0;  // the most a member takes: its rows times their lanes
    for (int i = 0; i < n; ++i) {
      const GemvMember& g = batch.member[i] = members[first + i];
      const int lanes = dtype == 2 ? GemvShapeOf<float>(g).lanes : GemvShapeOf<__half>(g).lanes;
      threads = g.m * lanes > threads ? g.m * lanes : threads;
    }
    if (threads == 0) continue;
    const dim3 grid(GridFor(threads, 256), static_cast<unsigned>(n));
    if (dtype == 0) GemvKernel<__half><<<grid, 256, 0, stream>>>(batch, alpha, act);
    if (dtype == 1) GemvKernel<__nv_bfloat16><<<grid, 256, 0, stream>>>(batch, alpha, act);
    if (dtype == 2) GemvKernel<float><<<grid, 256, 0, stream>>>(batch, alpha, act);
  }
}

void LaunchSoftmax(int dtype, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                   bool log, cudaStream_t stream) {
  if (outer * inner == 0 || len == 0) return;
  if (inner == 1 && len >= 32) {
    const unsigned g = GridFor(outer * 32, 256);
    if (dtype == 0) SoftmaxRowsKernel<<<g, 256, 0, stream>>>(static_cast<const __half*>(x), static_cast<__half*>(y), outer, len, log);
    if (dtype == 1) SoftmaxRowsKernel<<<g, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(y), outer, len, log);
    if (dtype == 2) SoftmaxRowsKernel<<<g, 256, 0, stream>>>(static_cast<const float*>(x), static_cast<float*>(y), outer, len, log);
    return;
  }
  if (inner == 1) {
    constexpr int kThreads = 256;
    const unsigned g = GridFor(outer, kThreads);
    const size_t smem = static_cast<size_t>(kThreads) * static_cast<size_t>(len) * sizeof(float);
    const int l = static_cast<int>(len);
    if (dtype == 0) SoftmaxShortRowsKernel<<<g, kThreads, smem, stream>>>(static_cast<const __half*>(x), static_cast<__half*>(y), outer, l, log);
    if (dtype == 1) SoftmaxShortRowsKernel<<<g, kThreads, smem, stream>>>(static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(y), outer, l, log);
    if (dtype == 2) SoftmaxShortRowsKernel<<<g, kThreads, smem, stream>>>(static_cast<const float*>(x), static_cast<float*>(y), outer, l, log);
    return;
  }
  const unsigned grid = GridFor(outer * inner, 128);
  if (dtype == 0) SoftmaxKernel<<<grid, 128, 0, stream>>>(static_cast<const __half*>(x), static_cast<__half*>(y), outer, len, inner, log);
  if (dtype == 1) SoftmaxKernel<<<grid, 128, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(y), outer, len, inner, log);
  if (dtype == 2) SoftmaxKernel<<<grid, 128, 0, stream>>>(static_cast<const float*>(x), static_cast<float*>(y), outer, len, inner, log);
}

void LaunchElementwise(int dtype, const ElementwiseArgs& args, cudaStream_t stream) {
  if (args.numel == 0) return;
  const unsigned grid = GridFor(args.numel, 256);
  if (dtype == 0) ElementwiseKernel<__half><<<grid, 256, 0, stream>>>(args);
  if (dtype == 1) ElementwiseKernel<__nv_bfloat16><<<grid, 256, 0, stream>>>(args);
  if (dtype == 2) ElementwiseKernel<float><<<grid, 256, 0, stream>>>(args);
}

}  // namespace hfuse::cuda
