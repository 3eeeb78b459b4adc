// The feed-forward kernel (ffn.h).
#include "ffn.h"

#include "float_funcs.cuh"

namespace hfuse::cuda {
namespace {

// The activation of one operand: the erf GELU (TabTransformer's and
// SAINT's) inlined, any other through float_funcs.def's switch.
template <bool kGeluOnly>
__device__ __forceinline__ float Activate(const FfnArgs& a, float v) {
  const float x[3] = {v, 0.0f, 0.0f};
  return FloatFuncOf(kGeluOnly ? static_cast<int32_t>(kGelu) : a.act, a.alpha, a.beta, x);
}

// kRows rows a thread, kIn and kOut their widths. Shared memory: W1
// [hidden][kIn], W2^T [hidden][kOut], b1 [hidden], b2 [kOut].
template <int kIn, int kOut, int kRows, bool kGeluOnly>
__global__ void __launch_bounds__(kFfnThreads) FfnKernel(FfnArgs a) {
  static_assert(kIn % 4 == 0 && kOut % 4 == 0, "rows of whole float4s");
  extern __shared__ float4 smem4[];
  const int h = a.hidden;
  float* s_w1 = reinterpret_cast<float*>(smem4);
  float* s_w2t = s_w1 + h * kIn;
  float* s_b1 = s_w2t + h * kOut;
  float* s_b2 = s_b1 + h;
  for (int i = threadIdx.x; i < h * kIn; i += kFfnThreads) s_w1[i] = a.w1[i];
  for (int i = threadIdx.x; i < h * kOut; i += kFfnThreads) {
    const int j = i / kOut, o = i - j * kOut;
    s_w2t[i] = a.w2[o * h + j];
  }
  for (int i = threadIdx.x; i < h; i += kFfnThreads) s_b1[i] = a.b1 ? a.b1[i] : 0.0f;
  for (int i = threadIdx.x; i < kOut; i += kFfnThreads) s_b2[i] = a.b2 ? a.b2[i] : 0.0f;
  __syncthreads();

  const int64_t first = static_cast<int64_t>(blockIdx.x) * kFfnThreads * kRows + threadIdx.x;
  float xr[kRows][kIn], yr[kRows][kOut];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    // A row past the end reads row 0 (and is not written).
    const int64_t row = first + static_cast<int64_t>(r) * kFfnThreads;
    const float4* src = reinterpret_cast<const float4*>(a.x + (row < a.m ? row : 0) * a.ldx);
#pragma unroll
    for (int i = 0; i < kIn / 4; ++i) {
      const float4 v = src[i];
      xr[r][4 * i] = v.x, xr[r][4 * i + 1] = v.y, xr[r][4 * i + 2] = v.z, xr[r][4 * i + 3] = v.w;
    }
#pragma unroll
    for (int o = 0; o < kOut; ++o) yr[r][o] = s_b2[o];
  }
#pragma unroll 2
  for (int j = 0; j < h; ++j) {
    const float4* w1j = reinterpret_cast<const float4*>(s_w1 + j * kIn);
    const float4* w2j = reinterpret_cast<const float4*>(s_w2t + j * kOut);
    float hr[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) hr[r] = s_b1[j];
#pragma unroll
    for (int i = 0; i < kIn / 4; ++i) {
      const float4 w = w1j[i];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        hr[r] = fmaf(xr[r][4 * i], w.x, hr[r]);
        hr[r] = fmaf(xr[r][4 * i + 1], w.y, hr[r]);
        hr[r] = fmaf(xr[r][4 * i + 2], w.z, hr[r]);
        hr[r] = fmaf(xr[r][4 * i + 3], w.w, hr[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) hr[r] = Activate<kGeluOnly>(a, hr[r]);
#pragma unroll
    for (int o = 0; o < kOut / 4; ++o) {
      const float4 w = w2j[o];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        yr[r][4 * o] = fmaf(hr[r], w.x, yr[r][4 * o]);
        yr[r][4 * o + 1] = fmaf(hr[r], w.y, yr[r][4 * o + 1]);
        yr[r][4 * o + 2] = fmaf(hr[r], w.z, yr[r][4 * o + 2]);
        yr[r][4 * o + 3] = fmaf(hr[r], w.w, yr[r][4 * o + 3]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = first + static_cast<int64_t>(r) * kFfnThreads;
    if (row >= a.m) continue;
    float4* dst = reinterpret_cast<float4*>(a.y + row * a.ldy);
#pragma unroll
    for (int o = 0; o < kOut / 4; ++o) {
      dst[o] = make_float4(yr[r][4 * o], yr[r][4 * o + 1], yr[r][4 * o + 2], yr[r][4 * o + 3]);
    }
  }
}

template <int kIn, int kOut, int kRows, bool kGeluOnly>
void LaunchOf(const FfnArgs& a, cudaStream_t stream) {
  const auto smem = static_cast<size_t>(FfnSharedBytes(kIn, a.hidden, kOut));
  const int64_t per_block = static_cast<int64_t>(kFfnThreads) * kRows;
  FfnKernel<kIn, kOut, kRows, kGeluOnly><<<static_cast<unsigned>((a.m + per_block - 1) / per_block), kFfnThreads, smem, stream>>>(a);
}

template <int kIn, int kOut>
void LaunchRows(const FfnArgs& a, cudaStream_t stream) {
  const bool gelu = a.act == kGelu;
  if constexpr (kIn + kOut <= 64) {
    if (a.rows_per_thread == 2) {
      gelu ? LaunchOf<kIn, kOut, 2, true>(a, stream) : LaunchOf<kIn, kOut, 2, false>(a, stream);
      return;
    }
  }
  gelu ? LaunchOf<kIn, kOut, 1, true>(a, stream) : LaunchOf<kIn, kOut, 1, false>(a, stream);
}

template <int kIn>
void LaunchIn(const FfnArgs& a, cudaStream_t stream) {
  switch (a.out) {
    case 8: LaunchRows<kIn, 8>(a, stream); break;
    case 16: LaunchRows<kIn, 16>(a, stream); break;
    case 32: LaunchRows<kIn, 32>(a, stream); break;
    default: LaunchRows<kIn, 64>(a, stream); break;
  }
}

}  // namespace

void LaunchFfn(const FfnArgs& a, cudaStream_t stream) {
  if (a.m == 0) return;  // (the planner took only widths of kFfnWidths and FfnSharedBytes within the limit)
  switch (a.in) {
    case 8: LaunchIn<8>(a, stream); break;
    case 16: LaunchIn<16>(a, stream); break;
    case 32: LaunchIn<32>(a, stream); break;
    default: LaunchIn<64>(a, stream); break;
  }
}

}  // namespace hfuse::cuda
