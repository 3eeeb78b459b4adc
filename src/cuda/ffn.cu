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

// out[r] = b + x[r] . w over kIn, fmaf in the order of i.
template <int kIn, int kRows>
__device__ __forceinline__ void Dot(const float (&x)[kRows][kIn], const float4* w, float b, float (&out)[kRows]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) out[r] = b;
#pragma unroll
  for (int i = 0; i < kIn / 4; ++i) {
    const float4 v = w[i];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      out[r] = fmaf(x[r][4 * i], v.x, out[r]);
      out[r] = fmaf(x[r][4 * i + 1], v.y, out[r]);
      out[r] = fmaf(x[r][4 * i + 2], v.z, out[r]);
      out[r] = fmaf(x[r][4 * i + 3], v.w, out[r]);
    }
  }
}

// kRows rows a thread, kIn and kOut their widths. Shared memory: W1
// [hidden][kIn] (gated: the values' rows, then the gates'), W2^T
// [hidden][kOut], b1 [hidden] (gated: 2 hidden, as W1), b2 [kOut].
template <int kIn, int kOut, int kRows, bool kGeluOnly, bool kGated>
__global__ void __launch_bounds__(kFfnThreads) FfnKernel(FfnArgs a) {
  static_assert(kIn % 4 == 0 && kOut % 4 == 0, "rows of whole float4s");
  extern __shared__ float4 smem4[];
  const int h = a.hidden, w1_rows = kGated ? 2 * h : h;
  float* s_w1 = reinterpret_cast<float*>(smem4);
  float* s_w2t = s_w1 + w1_rows * kIn;
  float* s_b1 = s_w2t + h * kOut;
  float* s_b2 = s_b1 + w1_rows;
  // Row r of s_w1 (and b1): W1's row r (gated: the value's row, or the gate's past h).
  auto from = [&](int r) { return kGated ? (r < h ? a.value_row + r : a.gate_row + r - h) : r; };
  for (int i = threadIdx.x; i < w1_rows * kIn; i += kFfnThreads) {
    const int r = i / kIn;
    s_w1[i] = a.w1[from(r) * kIn + (i - r * kIn)];
  }
  for (int i = threadIdx.x; i < h * kOut; i += kFfnThreads) {
    const int j = i / kOut, o = i - j * kOut;
    s_w2t[i] = a.w2[o * h + j];
  }
  for (int i = threadIdx.x; i < w1_rows; i += kFfnThreads) s_b1[i] = a.b1 ? a.b1[from(i)] : 0.0f;
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
    Dot<kIn, kRows>(xr, w1j, s_b1[j], hr);
    if constexpr (kGated) {
      float gr[kRows];
      Dot<kIn, kRows>(xr, reinterpret_cast<const float4*>(s_w1 + (h + j) * kIn), s_b1[h + j], gr);
#pragma unroll
      for (int r = 0; r < kRows; ++r) hr[r] *= Activate<kGeluOnly>(a, gr[r]);
    } else {
#pragma unroll
      for (int r = 0; r < kRows; ++r) hr[r] = Activate<kGeluOnly>(a, hr[r]);
    }
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

template <int kIn, int kOut, int kRows, bool kGeluOnly, bool kGated>
void LaunchOf(const FfnArgs& a, cudaStream_t stream) {
  const auto smem = static_cast<size_t>(FfnSharedBytes(kIn, a.hidden, kOut, kGated));
  const int64_t per_block = static_cast<int64_t>(kFfnThreads) * kRows;
  FfnKernel<kIn, kOut, kRows, kGeluOnly, kGated>
      <<<static_cast<unsigned>((a.m + per_block - 1) / per_block), kFfnThreads, smem, stream>>>(a);
}

template <int kIn, int kOut, int kRows, bool kGated>
void LaunchAct(const FfnArgs& a, cudaStream_t stream) {
  a.act == kGelu ? LaunchOf<kIn, kOut, kRows, true, kGated>(a, stream)
                 : LaunchOf<kIn, kOut, kRows, false, kGated>(a, stream);
}

template <int kIn, int kOut, int kRows>
void LaunchGated(const FfnArgs& a, cudaStream_t stream) {
  a.gate_row >= 0 ? LaunchAct<kIn, kOut, kRows, true>(a, stream) : LaunchAct<kIn, kOut, kRows, false>(a, stream);
}

template <int kIn, int kOut>
void LaunchRows(const FfnArgs& a, cudaStream_t stream) {
  if constexpr (kIn + kOut <= 64) {
    if (a.rows_per_thread == 2) {
      LaunchGated<kIn, kOut, 2>(a, stream);
      return;
    }
  }
  LaunchGated<kIn, kOut, 1>(a, stream);
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
