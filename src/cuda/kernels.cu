// hfuse's own CUDA kernels. See kernels.h.
//
// LayerNorm: one block per row of any member (the member is found by a
// binary search over the row prefix sums, so a group of any size is one
// launch), 16-byte loads where the member's layout allows, statistics in
// fp32 (two passes over the row, which stays in L1/L2).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

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

template <int kThreads>
__device__ float BlockSum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (kThreads == 32) return v;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? partial[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
struct Pack {  // 16 bytes of T
  static constexpr int kN = 16 / sizeof(T);
  union {
    uint4 raw;
    T v[kN];
  };
};

__device__ int FindMember(const int64_t* starts, int count, int64_t index) {
  int lo = 0, hi = count;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (starts[mid] <= index) lo = mid; else hi = mid;
  }
  return lo;
}

template <typename T, int kThreads>
__global__ void __launch_bounds__(kThreads)
GroupLayerNormKernel(const LayerNormDesc* descs, const int64_t* row_starts, int count, float eps,
                     bool sigmoid_mul) {
  const int64_t row = blockIdx.x;
  __shared__ int member;
  if (threadIdx.x == 0) member = FindMember(row_starts, count, row);
  __syncthreads();
  const LayerNormDesc d = descs[member];
  const int64_t r = row - row_starts[member];
  const T* x = static_cast<const T*>(d.x) + r * d.x_stride;
  T* y = static_cast<T*>(d.y) + r * d.y_stride;
  const T* gamma = static_cast<const T*>(d.gamma);
  const T* beta = static_cast<const T*>(d.beta);
  const int64_t n = d.n;
  constexpr int kV = Pack<T>::kN;

  auto norm = [&](float v, int64_t j, float mean, float rstd) {
    float o = (v - mean) * rstd;
    if (gamma) o *= ToFloat(gamma[j]);
    if (beta) o += ToFloat(beta[j]);
    return sigmoid_mul ? v * Sigmoid(o) : o;
  };

  // Fast path: the row fits in registers (kMaxVecs 16-byte packs a thread),
  // so it is read from memory once.
  constexpr int kMaxVecs = 4;
  if (d.vec && n / kV <= kThreads * kMaxVecs) {
    Pack<T> p[kMaxVecs];
    const int64_t vecs = n / kV;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxVecs; ++i) {
      const int64_t v = threadIdx.x + static_cast<int64_t>(i) * kThreads;
      if (v < vecs) {
        p[i].raw = reinterpret_cast<const uint4*>(x)[v];
#pragma unroll
        for (int k = 0; k < kV; ++k) sum += ToFloat(p[i].v[k]);
      }
    }
    const float mean = BlockSum<kThreads>(sum) / static_cast<float>(n);
    float sq = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxVecs; ++i) {
      const int64_t v = threadIdx.x + static_cast<int64_t>(i) * kThreads;
      if (v < vecs) {
#pragma unroll
        for (int k = 0; k < kV; ++k) {
          const float c = ToFloat(p[i].v[k]) - mean;
          sq += c * c;
        }
      }
    }
    const float rstd = rsqrtf(BlockSum<kThreads>(sq) / static_cast<float>(n) + eps);
#pragma unroll
    for (int i = 0; i < kMaxVecs; ++i) {
      const int64_t v = threadIdx.x + static_cast<int64_t>(i) * kThreads;
      if (v < vecs) {
        Pack<T> q;
#pragma unroll
        for (int k = 0; k < kV; ++k) q.v[k] = FromFloat<T>(norm(ToFloat(p[i].v[k]), v * kV + k, mean, rstd));
        reinterpret_cast<uint4*>(y)[v] = q.raw;
      }
    }
    return;
  }

  float sum = 0.0f;
  if (d.vec) {
    for (int64_t i = threadIdx.x; i < n / kV; i += kThreads) {
      Pack<T> p;
      p.raw = reinterpret_cast<const uint4*>(x)[i];
#pragma unroll
      for (int k = 0; k < kV; ++k) sum += ToFloat(p.v[k]);
    }
  } else {
    for (int64_t j = threadIdx.x; j < n; j += kThreads) sum += ToFloat(x[j]);
  }
  const float mean = BlockSum<kThreads>(sum) / static_cast<float>(n);

  float sq = 0.0f;
  if (d.vec) {
    for (int64_t i = threadIdx.x; i < n / kV; i += kThreads) {
      Pack<T> p;
      p.raw = reinterpret_cast<const uint4*>(x)[i];
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        const float c = ToFloat(p.v[k]) - mean;
        sq += c * c;
      }
    }
  } else {
    for (int64_t j = threadIdx.x; j < n; j += kThreads) {
      const float c = ToFloat(x[j]) - mean;
      sq += c * c;
    }
  }
  const float rstd = rsqrtf(BlockSum<kThreads>(sq) / static_cast<float>(n) + eps);

  if (d.vec) {
    for (int64_t i = threadIdx.x; i < n / kV; i += kThreads) {
      Pack<T> p, q;
      p.raw = reinterpret_cast<const uint4*>(x)[i];
#pragma unroll
      for (int k = 0; k < kV; ++k) q.v[k] = FromFloat<T>(norm(ToFloat(p.v[k]), i * kV + k, mean, rstd));
      reinterpret_cast<uint4*>(y)[i] = q.raw;
    }
  } else {
    for (int64_t j = threadIdx.x; j < n; j += kThreads) y[j] = FromFloat<T>(norm(ToFloat(x[j]), j, mean, rstd));
  }
}

// One warp per row, the row in registers (kVecs 16-byte packs a lane), the
// sums by shuffles alone: for rows of up to 32 * kVecs * (16 / sizeof(T)).
template <typename T, int kVecs>
__global__ void __launch_bounds__(256)
WarpLayerNormKernel(const LayerNormDesc* descs, const int64_t* row_starts, int count,
                    int64_t total_rows, float eps, bool sigmoid_mul) {
  const int64_t row = blockIdx.x * 8LL + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= total_rows) return;
  const int member = FindMember(row_starts, count, row);
  const LayerNormDesc d = descs[member];
  const int64_t r = row - row_starts[member];
  const T* x = static_cast<const T*>(d.x) + r * d.x_stride;
  T* y = static_cast<T*>(d.y) + r * d.y_stride;
  const T* gamma = static_cast<const T*>(d.gamma);
  const T* beta = static_cast<const T*>(d.beta);
  constexpr int kV = Pack<T>::kN;
  const int vecs = static_cast<int>(d.n / kV);
  Pack<T> p[kVecs];
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = lane + i * 32;
    if (v < vecs) {
      p[i].raw = reinterpret_cast<const uint4*>(x)[v];
#pragma unroll
      for (int k = 0; k < kV; ++k) sum += ToFloat(p[i].v[k]);
    }
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float mean = sum / static_cast<float>(d.n);
  float sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    if (lane + i * 32 < vecs) {
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        const float c = ToFloat(p[i].v[k]) - mean;
        sq += c * c;
      }
    }
  }
  for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
  const float rstd = rsqrtf(sq / static_cast<float>(d.n) + eps);
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = lane + i * 32;
    if (v < vecs) {
      Pack<T> q;
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        const int j = v * kV + k;
        const float xv = ToFloat(p[i].v[k]);
        float o = (xv - mean) * rstd;
        if (gamma) o *= ToFloat(gamma[j]);
        if (beta) o += ToFloat(beta[j]);
        q.v[k] = FromFloat<T>(sigmoid_mul ? xv * Sigmoid(o) : o);
      }
      reinterpret_cast<uint4*>(y)[v] = q.raw;
    }
  }
}

template <typename T>
void LayerNormFor(const LayerNormDesc* descs, const int64_t* row_starts, int count,
                  int64_t total_rows, int64_t max_n, bool all_vec, float eps, bool sigmoid_mul,
                  cudaStream_t stream) {
  constexpr int kV = 16 / sizeof(T);
  if (all_vec && max_n <= 32 * 4 * kV) {
    const dim3 warps(static_cast<unsigned>((total_rows + 7) / 8));
    if (max_n <= 32 * kV) {
      WarpLayerNormKernel<T, 1><<<warps, 256, 0, stream>>>(descs, row_starts, count, total_rows, eps, sigmoid_mul);
    } else if (max_n <= 32 * 2 * kV) {
      WarpLayerNormKernel<T, 2><<<warps, 256, 0, stream>>>(descs, row_starts, count, total_rows, eps, sigmoid_mul);
    } else {
      WarpLayerNormKernel<T, 4><<<warps, 256, 0, stream>>>(descs, row_starts, count, total_rows, eps, sigmoid_mul);
    }
    return;
  }
  const dim3 grid(static_cast<unsigned>(total_rows));
  if (max_n <= 512) {
    GroupLayerNormKernel<T, 32><<<grid, 32, 0, stream>>>(descs, row_starts, count, eps, sigmoid_mul);
  } else if (max_n <= 2048) {
    GroupLayerNormKernel<T, 128><<<grid, 128, 0, stream>>>(descs, row_starts, count, eps, sigmoid_mul);
  } else {
    GroupLayerNormKernel<T, 256><<<grid, 256, 0, stream>>>(descs, row_starts, count, eps, sigmoid_mul);
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

}  // namespace

void LaunchGroupLayerNorm(int dtype, const LayerNormDesc* descs, const int64_t* row_starts,
                          int count, int64_t total_rows, int64_t max_n, bool all_vec, float eps,
                          bool sigmoid_mul, cudaStream_t stream) {
  if (total_rows == 0) return;
  if (dtype == 0) LayerNormFor<__half>(descs, row_starts, count, total_rows, max_n, all_vec, eps, sigmoid_mul, stream);
  if (dtype == 1) LayerNormFor<__nv_bfloat16>(descs, row_starts, count, total_rows, max_n, all_vec, eps, sigmoid_mul, stream);
  if (dtype == 2) LayerNormFor<float>(descs, row_starts, count, total_rows, max_n, all_vec, eps, sigmoid_mul, stream);
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

void LaunchElementwise(int dtype, const ElementwiseArgs& args, cudaStream_t stream) {
  if (args.numel == 0) return;
  const unsigned grid = GridFor(args.numel, 256);
  if (dtype == 0) ElementwiseKernel<__half><<<grid, 256, 0, stream>>>(args);
  if (dtype == 1) ElementwiseKernel<__nv_bfloat16><<<grid, 256, 0, stream>>>(args);
  if (dtype == 2) ElementwiseKernel<float><<<grid, 256, 0, stream>>>(args);
}

}  // namespace hfuse::cuda
