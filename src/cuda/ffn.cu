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

// A block: kFfnRows rows of x; W1^T, b1, W2^T and b2 in shared memory,
// x's rows transposed, and one chunk of kFfnChunk hidden units at a time
// (FfnLayout). Phase 1, a chunk of H = act(x W1^T + b1): a thread a tile
// of 4 rows by 8 hidden units in registers (t % 16 the rows, t / 16 the
// units), x's 4 and W1's 8 values read as float4s at each k, written into
// shared memory transposed; phase 2, y += H W2^T over the chunk: a thread
// 4 rows by kPer of y's columns, kept in registers across the chunks.
template <int kIn, int kOut, bool kGeluOnly>
__global__ void __launch_bounds__(kFfnThreads) FfnKernel(FfnArgs a) {
  static_assert(kIn % 4 == 0 && kOut % 8 == 0 && kFfnThreads == 256 && kFfnRows == 64 && kFfnChunk == 128,
                "the tiles below");
  constexpr int kPer = kOut >= 16 ? kOut / 16 : 1;  // y's columns a thread
  extern __shared__ float4 smem4[];
  const FfnLayout l = FfnLayoutOf(kIn, a.hidden, kOut);
  float* s = reinterpret_cast<float*>(smem4);
  float *w1t = s + l.w1t, *b1 = s + l.b1, *w2t = s + l.w2t, *b2 = s + l.b2, *xs = s + l.xs, *hs = s + l.hs;
  const int h = a.hidden, hp = l.hp, t = threadIdx.x;
  for (int i = t; i < kIn * hp; i += kFfnThreads) {
    const int k = i / hp, j = i - k * hp;
    w1t[i] = j < h ? a.w1[j * kIn + k] : 0.0f;
  }
  for (int i = t; i < hp; i += kFfnThreads) b1[i] = a.b1 && i < h ? a.b1[i] : 0.0f;
  for (int i = t; i < h * kOut; i += kFfnThreads) {
    const int j = i / kOut, o = i - j * kOut;
    w2t[i] = a.w2[o * h + j];
  }
  for (int i = t; i < kOut; i += kFfnThreads) b2[i] = a.b2 ? a.b2[i] : 0.0f;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kFfnRows;
  for (int i = t; i < kFfnRows * (kIn / 4); i += kFfnThreads) {
    const int r = i / (kIn / 4), c = (i - r * (kIn / 4)) * 4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // rows past the end: zeros (not written)
    if (first + r < a.m) v = *reinterpret_cast<const float4*>(a.x + (first + r) * a.ldx + c);
    xs[(c + 0) * kFfnRows + r] = v.x, xs[(c + 1) * kFfnRows + r] = v.y;
    xs[(c + 2) * kFfnRows + r] = v.z, xs[(c + 3) * kFfnRows + r] = v.w;
  }
  __syncthreads();

  const int rg = (t % 16) * 4, cg = (t / 16) * 8, og = (t / 16) * kPer;
  const bool writes = og < kOut;  // (y of 8 columns: half the threads)
  float y[4][kPer];
#pragma unroll
  for (int o = 0; o < kPer; ++o) {
    const float bo = writes ? b2[og + o] : 0.0f;
#pragma unroll
    for (int r = 0; r < 4; ++r) y[r][o] = bo;
  }
  for (int hc = 0; hc < hp; hc += kFfnChunk) {
    if (hc + cg < hp) {
      float acc[4][8];
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const float bc = b1[hc + cg + c];
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[r][c] = bc;
      }
#pragma unroll
      for (int k = 0; k < kIn; ++k) {
        const float4 xv = *reinterpret_cast<const float4*>(xs + k * kFfnRows + rg);
        const float4 w0 = *reinterpret_cast<const float4*>(w1t + k * hp + hc + cg);
        const float4 w1 = *reinterpret_cast<const float4*>(w1t + k * hp + hc + cg + 4);
        const float xr[4] = {xv.x, xv.y, xv.z, xv.w}, wc[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
        for (int r = 0; r < 4; ++r) {
#pragma unroll
          for (int c = 0; c < 8; ++c) acc[r][c] = fmaf(xr[r], wc[c], acc[r][c]);
        }
      }
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        *reinterpret_cast<float4*>(hs + (cg + c) * kFfnRows + rg) =
            make_float4(Activate<kGeluOnly>(a, acc[0][c]), Activate<kGeluOnly>(a, acc[1][c]),
                        Activate<kGeluOnly>(a, acc[2][c]), Activate<kGeluOnly>(a, acc[3][c]));
      }
    }
    __syncthreads();
    const int n = h - hc < kFfnChunk ? h - hc : kFfnChunk;  // (the padded units are never read)
    if (writes) {
#pragma unroll 4
      for (int k = 0; k < n; ++k) {
        const float4 hv = *reinterpret_cast<const float4*>(hs + k * kFfnRows + rg);
        const float hr[4] = {hv.x, hv.y, hv.z, hv.w};
        const float* w = w2t + (hc + k) * kOut + og;
#pragma unroll
        for (int o = 0; o < kPer; ++o) {
          const float wo = w[o];
#pragma unroll
          for (int r = 0; r < 4; ++r) y[r][o] = fmaf(hr[r], wo, y[r][o]);
        }
      }
    }
    __syncthreads();
  }
  if (!writes) return;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    if (first + rg + r >= a.m) continue;
    float* dst = a.y + (first + rg + r) * a.ldy + og;
#pragma unroll
    for (int o = 0; o < kPer; ++o) dst[o] = y[r][o];
  }
}

template <int kIn, int kOut>
void LaunchOf(const FfnArgs& a, cudaStream_t stream, bool prepare) {
  auto* kernel = a.act == kGelu ? FfnKernel<kIn, kOut, true> : FfnKernel<kIn, kOut, false>;
  const auto smem = static_cast<int>(FfnSharedBytes(kIn, a.hidden, kOut));
  if (prepare) {  // past the 48 KiB a launch has without opting in: set once, at plan time (not in a capture)
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    return;
  }
  kernel<<<static_cast<unsigned>((a.m + kFfnRows - 1) / kFfnRows), kFfnThreads, static_cast<size_t>(smem), stream>>>(
      a);
}

template <int kIn>
void LaunchIn(const FfnArgs& a, cudaStream_t stream, bool prepare) {
  switch (a.out) {
    case 8: LaunchOf<kIn, 8>(a, stream, prepare); break;
    case 16: LaunchOf<kIn, 16>(a, stream, prepare); break;
    case 32: LaunchOf<kIn, 32>(a, stream, prepare); break;
    default: LaunchOf<kIn, 64>(a, stream, prepare); break;
  }
}

void Dispatch(const FfnArgs& a, cudaStream_t stream, bool prepare) {
  switch (a.in) {
    case 8: LaunchIn<8>(a, stream, prepare); break;
    case 16: LaunchIn<16>(a, stream, prepare); break;
    case 32: LaunchIn<32>(a, stream, prepare); break;
    default: LaunchIn<64>(a, stream, prepare); break;
  }
}

}  // namespace

void PrepareFfn(const FfnArgs& a) { Dispatch(a, nullptr, true); }

void LaunchFfn(const FfnArgs& a, cudaStream_t stream) {
  if (a.m > 0) Dispatch(a, stream, false);  // (the planner took only widths of kFfnWidths and its shared memory)
}

}  // namespace hfuse::cuda
