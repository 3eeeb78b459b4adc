// The grouped float32 GEMM (grouped_sgemm.h).
#include "grouped_sgemm.h"

#include <algorithm>
#include <numeric>

#include "kernels.h"

namespace hfuse::cuda {
namespace {

constexpr int kTile = kSgemmTile, kDepth = 16, kThreads = 256;

__device__ __forceinline__ float Activation(int act, float v) {
  switch (act) {
    case 0: return fmaxf(v, 0.0f);
    case 1: return 1.0f / (1.0f + expf(-v));
    case 2: return tanhf(v);
    case 3: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case 4: return v / (1.0f + expf(-v));
    default: return v;
  }
}

// A narrow tile (SgemmTiles: a member at most kSgemmNarrow wide with a
// long K, a gate's few experts or a GEMV's one column): a 64 x 64 tile
// would leave most of its lanes idle and walk K 16 deep in a chain of
// dependent loads, on few blocks. Instead each warp takes one of the
// tile's 8 rows: its lanes stride along K (a coalesced read of the row of
// A, and of each row of W, which stays in L1), each keeping a partial sum
// per column; a butterfly of shuffles adds the lanes in a fixed order, and
// lane j writes column j.
__device__ __forceinline__ void NarrowRow(const SgemmMember& g, int64_t m0, float alpha) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t r = m0 + static_cast<int>(threadIdx.x) / 32;
  if (r >= g.m) return;
  float acc[kSgemmNarrow] = {};
  const float* a = g.a + r * g.lda;
#pragma unroll 4
  for (int64_t k = lane; k < g.k; k += 32) {
    const float av = a[k];
#pragma unroll
    for (int j = 0; j < kSgemmNarrow; ++j) {
      if (j < g.n) acc[j] = fmaf(av, g.w[j * g.k + k], acc[j]);
    }
  }
  float mine = 0.0f;
#pragma unroll
  for (int j = 0; j < kSgemmNarrow; ++j) {
    if (j >= g.n) break;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
    if (j == lane) mine = acc[j];
  }
  if (lane < g.n) {
    float v = alpha * mine;
    if (g.bias) v += g.bias[lane];
    g.y[r * g.ldy + lane] = Activation(g.act, v);
  }
}

// 256 threads a 64 x 64 tile: thread (ty, tx) holds rows ty + 16 i and
// columns tx + 16 j (i, j < 4), so a warp reads 16 neighbouring columns of
// W's tile and two rows of A's from shared memory; the tiles of A and W
// are read 16 deep along K, each thread loading 4 elements of each, with
// neighbouring threads on neighbouring k (coalesced: rows are K-contiguous),
// one step ahead of the products. Each element sums over k in order.
__global__ void __launch_bounds__(kThreads) GroupedSgemmKernel(const SgemmMember* members, const SgemmTile* tiles,
                                                               float alpha) {
  const SgemmTile t = tiles[blockIdx.x];
  const SgemmMember g = members[t.member];
  if (t.narrow) {  // the same for the whole block
    NarrowRow(g, t.m0, alpha);
    return;
  }
  __shared__ float as[kDepth][kTile + 4];
  __shared__ float ws[kDepth][kTile + 4];
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  float acc[4][4] = {};
  // The next 16 deep of A and W are loaded into registers while this
  // step's products run, so a step waits on memory once, not twice.
  float next_a[4], next_w[4];
  const auto fetch = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = tid + i * kThreads;
      const int r = e / kDepth, kk = e % kDepth;
      const int64_t gk = k0 + kk, gm = t.m0 + r, gn = t.n0 + r;
      next_a[i] = gm < g.m && gk < g.k ? g.a[gm * g.lda + gk] : 0.0f;
      next_w[i] = gn < g.n && gk < g.k ? g.w[gn * g.k + gk] : 0.0f;
    }
  };
  fetch(0);
  for (int64_t k0 = 0; k0 < g.k; k0 += kDepth) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = tid + i * kThreads;
      as[e % kDepth][e / kDepth] = next_a[i];
      ws[e % kDepth][e / kDepth] = next_w[i];
    }
    __syncthreads();
    if (k0 + kDepth < g.k) fetch(k0 + kDepth);
#pragma unroll
    for (int kk = 0; kk < kDepth; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = as[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = ws[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = t.m0 + ty + 16 * i;
    if (r >= g.m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = t.n0 + tx + 16 * j;
      if (c >= g.n) continue;
      float v = alpha * acc[i][j];
      if (g.bias) v += g.bias[c];
      g.y[r * g.ldy + c] = Activation(g.act, v);
    }
  }
}

}  // namespace

std::vector<SgemmTile> SgemmTiles(const std::vector<SgemmMember>& members) {
  std::vector<size_t> order(members.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // The most work first (a tile's work is its k), then by position: the
  // long tiles start early and the short ones fill in behind them.
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return members[x].k > members[y].k; });
  std::vector<SgemmTile> tiles;
  for (size_t i : order) {
    const SgemmMember& m = members[i];
    if (m.n <= kSgemmNarrow && m.k >= kSgemmNarrowMinK) {
      for (int64_t m0 = 0; m0 < m.m; m0 += kThreads / 32) tiles.push_back({static_cast<int32_t>(i), static_cast<int32_t>(m0), 0, 1});
      continue;
    }
    for (int64_t m0 = 0; m0 < m.m; m0 += kTile) {
      for (int64_t n0 = 0; n0 < m.n; n0 += kTile) {
        tiles.push_back({static_cast<int32_t>(i), static_cast<int32_t>(m0), static_cast<int32_t>(n0), 0});
      }
    }
  }
  return tiles;
}

void LaunchGroupedSgemm(const SgemmMember* members, const SgemmTile* tiles, int num_tiles, float alpha,
                        cudaStream_t stream) {
  if (num_tiles == 0) return;
  GroupedSgemmKernel<<<num_tiles, kThreads, 0, stream>>>(members, tiles, alpha);
}

}  // namespace hfuse::cuda
