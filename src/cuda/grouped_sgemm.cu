// The grouped float32 GEMM (grouped_sgemm.h): the kernels, one a
// SgemmKernel, and the host's tile layout and shape rule.
#include "grouped_sgemm.h"

#include <algorithm>
#include <numeric>

#include "kernels.h"

namespace hfuse::cuda {
namespace {

constexpr int kThreads = 256, kDepth = 16;
// The staged tile (StagedTile): steps of K in flight, its rows' padded length.
constexpr int kStages = 4, kStagedLd = kDepth + 4;
constexpr int kStagedSmemFloats = kStages * 2 * 64 * kStagedLd;
// The tensor tile's: W's big and small parts apart (SgemmMember::w3).
constexpr int kTensorSmemFloats = kStages * 3 * 64 * kStagedLd;
template <bool kTensor, bool kPartsW>
constexpr int kSliceFloats = kTensor && kPartsW ? kTensorSmemFloats : kStagedSmemFloats;

__device__ __forceinline__ float Activation(int act, float slope, float v) {
  switch (act) {
    case kLeakyReluActivation: return v < 0.0f ? v * slope : v;
    case 0: return fmaxf(v, 0.0f);
    case 1: return 1.0f / (1.0f + expf(-v));
    case 2: return tanhf(v);
    case 3: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case 4: return v / (1.0f + expf(-v));
    default: return v;
  }
}

// Row `row` of member g's W, or null past its rows; a merged member's
// (SgemmMember::count) is its member's that has that column.
__device__ __forceinline__ const float* WeightRow(const SgemmMember* members, const SgemmMember& g, int64_t row) {
  if (row >= g.n) return nullptr;
  if (g.count == 0) return g.w + row * g.k;
  int s = g.first + g.count - 1;
  while (row < members[s].n0) --s;
  return members[s].w + (row - members[s].n0) * g.k;
}

// The same row's 3xTF32 parts (SgemmMember::w3): its big part; the small
// part is Kp(g.k) floats after it.
__device__ __forceinline__ int64_t Kp(int64_t k) { return (k + 3) / 4 * 4; }
__device__ __forceinline__ const float* WeightPartsRow(const SgemmMember* members, const SgemmMember& g,
                                                       int64_t row) {
  if (row >= g.n) return nullptr;
  if (g.count == 0) return g.w3 + row * 3 * Kp(g.k);
  int s = g.first + g.count - 1;
  while (row < members[s].n0) --s;
  return members[s].w3 + (row - members[s].n0) * 3 * Kp(g.k);
}

// Where column c of member g's output goes, and its epilogue.
struct OutColumn {
  float* y;            // row 0's element; row r's at y + r * ldy
  int64_t ldy;
  const float* bias;   // its bias, or null
  int32_t act;
  float slope;         // LeakyRelu's (kLeakyReluActivation)
};
__device__ __forceinline__ OutColumn OutputColumn(const SgemmMember* members, const SgemmMember& g, int64_t c) {
  if (g.count == 0) return {g.y + c, g.ldy, g.bias ? g.bias + c : nullptr, g.act, g.act_alpha};
  int s = g.first + g.count - 1;
  while (c < members[s].n0) --s;
  const SgemmMember& p = members[s];
  const int64_t j = c - p.n0;
  return {p.y + j, p.ldy, p.bias ? p.bias + j : nullptr, p.act, p.act_alpha};
}

// The epilogue of a 64 x 64 tile whose thread (ty, tx) holds rows
// ty + 16 i and columns tx + 16 j (the kernel before, the staged tile):
// alpha, each column's bias and activation, stored where its member's
// output is.
__device__ __forceinline__ void StoreTile64(const SgemmMember* members, const SgemmMember& g, const SgemmTile& t,
                                            int tx, int ty, const float (&acc)[4][4], float alpha) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t c = t.n0 + tx + 16 * j;
    if (c >= g.n) continue;
    const OutColumn o = OutputColumn(members, g, c);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t r = t.m0 + ty + 16 * i;
      if (r >= g.m) continue;
      float v = alpha * acc[i][j];
      if (o.bias) v += *o.bias;
      o.y[r * o.ldy] = Activation(o.act, o.slope, v);
    }
  }
}

// A narrow tile (kNarrow: a member at most kSgemmNarrow wide with a
// long K, a gate's few experts or a GEMV's one column): a 64 x 64 tile
// would leave most of its lanes idle and walk K 16 deep in a chain of
// dependent loads, on few blocks. Instead each warp takes one of the
// tile's 8 rows: its lanes stride along K (a coalesced read of the row of
// A, and of each row of W, which stays in L1), each keeping a partial sum
// per column; a butterfly of shuffles adds the lanes in a fixed order, and
// lane j writes column j. kUnrollK: the loop over K unrolled 4 times in
// the kernel before (as it was), 2 in the tiled kernel (4 would spill).
template <int kUnrollK>
__device__ __forceinline__ void NarrowRow(const SgemmMember& g, int64_t m0, float alpha) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t r = m0 + static_cast<int>(threadIdx.x) / 32;
  if (r >= g.m) return;
  float acc[kSgemmNarrow] = {};
  const float* a = g.a + r * g.lda;
#pragma unroll kUnrollK
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
    g.y[r * g.ldy + lane] = Activation(g.act, g.act_alpha, v);
  }
}

// ---- the kernel before (SgemmKernel::kLegacy) ------------------------------------------

// 256 threads a 64 x 64 tile: thread (ty, tx) holds rows ty + 16 i and
// columns tx + 16 j (i, j < 4), so a warp reads 16 neighbouring columns of
// W's tile and two rows of A's from shared memory; the tiles of A and W
// are read 16 deep along K, each thread loading 4 elements of each, with
// neighbouring threads on neighbouring k (coalesced: rows are K-contiguous),
// one step ahead of the products. Each element sums over k in order.
// Kept as it was: FiBiNet's groups run it (grouped_sgemm.h), and the
// benchmark measures the new kernels against it.
__global__ void __launch_bounds__(kThreads) LegacySgemmKernel(const SgemmMember* members, const SgemmTile* tiles,
                                                              float alpha) {
  constexpr int kTile = 64;
  const SgemmTile t = tiles[blockIdx.x];
  const SgemmMember g = members[t.member];
  if (t.config == static_cast<int32_t>(SgemmConfig::kNarrow)) {  // the same for the whole block
    NarrowRow<4>(g, t.m0, alpha);
    return;
  }
  __shared__ float as[kDepth][kTile + 4];
  __shared__ float ws[kDepth][kTile + 4];
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  float acc[4][4] = {};
  // The rows of W this thread loads, found once (a merged member's are
  // its members').
  const float* w_rows[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w_rows[i] = WeightRow(members, g, t.n0 + (tid + i * kThreads) / kDepth);
  // The next 16 deep of A and W are loaded into registers while this
  // step's products run, so a step waits on memory once, not twice.
  float next_a[4], next_w[4];
  const auto fetch = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = tid + i * kThreads;
      const int r = e / kDepth, kk = e % kDepth;
      const int64_t gk = k0 + kk, gm = t.m0 + r;
      next_a[i] = gm < g.m && gk < g.k ? g.a[gm * g.lda + gk] : 0.0f;
      next_w[i] = w_rows[i] && gk < g.k ? w_rows[i][gk] : 0.0f;
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
  StoreTile64(members, g, t, tx, ty, acc, alpha);
}

// ---- the tiled kernel (SgemmKernel::kTiled) ---------------------------------------

// A BM x BN tile, TM x TN outputs a thread. Shared memory holds the
// tiles of A and W K-major (as[k][row], ws[k][column], rows padded by 4
// floats), so a thread reads its rows and columns of one k as float4s:
// its TM rows are TM / 4 runs of 4 (run c of thread (ty, tx) starts at row
// c * kRowGroups * 4 + ty * 4, and its columns' at c * kColGroups * 4 +
// tx * 4), so the 8 threads of a quarter warp read 128 neighbouring bytes:
// no bank conflicts. Two buffers of K, D deep: the next slice is loaded
// from global memory into registers while this one's products run, then
// stored to the other buffer, one barrier a step.
template <int BM, int BN, int TM, int TN, int D>
struct TileShape {
  static constexpr int kRowGroups = BM / TM, kColGroups = BN / TN;
  static_assert(kRowGroups * kColGroups == kThreads, "a thread per TM x TN outputs");
  static_assert(TM % 4 == 0 && TN % 4 == 0, "float4 reads of shared memory");
  static constexpr int kLdA = BM + 4, kLdW = BN + 4;
  // A slice is ROWS x D floats, ROWS * D / 4 float4 chunks; a thread
  // loads chunk tid + 256 c (row chunk / (D / 4), k (chunk % (D / 4)) * 4).
  static constexpr int kChunksA = (BM * D / 4 + kThreads - 1) / kThreads;
  static constexpr int kChunksW = (BN * D / 4 + kThreads - 1) / kThreads;
  static constexpr int kSmemFloats = 2 * D * (kLdA + kLdW);
};
// The most shared memory of any tiled config (k256x16).
constexpr int kMaxSmemFloats =
    std::max({TileShape<128, 128, 8, 8, 8>::kSmemFloats, TileShape<128, 64, 8, 4, 16>::kSmemFloats,
              TileShape<64, 64, 4, 4, 16>::kSmemFloats, TileShape<128, 32, 4, 4, 16>::kSmemFloats,
              TileShape<256, 16, 4, 4, 16>::kSmemFloats});

// The rows a thread loads of a slice ROWS x D (a chunk a row's 4
// neighbouring k: chunk tid + 256 c is row (tid + 256 c) / (D / 4)):
// row_of(row), null for none.
template <int ROWS, int D, int CHUNKS, typename RowOf>
__device__ __forceinline__ void SliceRows(RowOf row_of, const float* (&p)[CHUNKS]) {
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int e = tid + c * kThreads;
    p[c] = ROWS * D / 4 % kThreads == 0 || e < ROWS * D / 4 ? row_of(e / (D / 4)) : nullptr;
  }
}

// The slice k0 .. k0 + D - 1 of the rows SliceRows found into registers, 0
// for no row and past k1. With `vec` (rows 16-byte aligned, k1 - k0 a
// multiple of 4 or k1 the end of a K that is one), a chunk is one float4
// load; else four loads of neighbouring floats.
template <int D, int CHUNKS>
__device__ __forceinline__ void LoadSlice(const float* const (&p)[CHUNKS], int k0, int k1, bool vec,
                                          float (&r)[CHUNKS * 4]) {
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int e = tid + c * kThreads;
    const int gk = k0 + (e % (D / 4)) * 4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (p[c] && gk < k1) {
      const float* q = p[c] + gk;
      if (vec) {
        v = __ldg(reinterpret_cast<const float4*>(q));
      } else {
        v.x = __ldg(q);
        if (gk + 1 < k1) v.y = __ldg(q + 1);
        if (gk + 2 < k1) v.z = __ldg(q + 2);
        if (gk + 3 < k1) v.w = __ldg(q + 3);
      }
    }
    r[4 * c] = v.x;
    r[4 * c + 1] = v.y;
    r[4 * c + 2] = v.z;
    r[4 * c + 3] = v.w;
  }
}

// The registers LoadSlice filled into a K-major buffer (s[k * LD + row]).
template <int ROWS, int D, int CHUNKS, int LD>
__device__ __forceinline__ void StoreSlice(float* s, const float (&r)[CHUNKS * 4]) {
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int e = tid + c * kThreads;
    if (ROWS * D / 4 % kThreads == 0 || e < ROWS * D / 4) {
      const int row = e / (D / 4), kq = (e % (D / 4)) * 4;
#pragma unroll
      for (int j = 0; j < 4; ++j) s[(kq + j) * LD + row] = r[4 * c + j];
    }
  }
}

// Split-K's end of a tile (grouped_sgemm.h): this range's sums, kVecs
// float4 a thread, into the workspace laid out by thread (coalesced, and
// each thread later reads back exactly the elements it holds); then the
// block that arrives last (an atomic counter a tile) adds every range's
// sums in range order into v, resets the counter for the next launch and
// returns true; the others return false.
template <int kVecs>
__device__ __forceinline__ bool AddRanges(const SgemmTile& t, float* partials, int32_t* counters, int tid,
                                          float4 (&v)[kVecs]) {
  constexpr int kTileVec = kVecs * kThreads;
  float4* mine = reinterpret_cast<float4*>(partials + t.partial) + t.split * kTileVec;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) mine[i * kThreads + tid] = v[i];
  __threadfence();  // the partial sums reach L2 before the counter says so
  __syncthreads();
  __shared__ int last;
  if (tid == 0) last = atomicAdd(counters + t.counter, 1) == t.splits - 1;
  __syncthreads();
  if (!last) return false;
  __threadfence();
  const float4* all = reinterpret_cast<const float4*>(partials + t.partial);
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    float4 s = __ldcg(all + i * kThreads + tid);  // L2: the other blocks' writes
    for (int p = 1; p < t.splits; ++p) {
      const float4 u = __ldcg(all + p * kTileVec + i * kThreads + tid);
      s.x += u.x, s.y += u.y, s.z += u.z, s.w += u.w;
    }
    v[i] = s;
  }
  if (tid == 0) counters[t.counter] = 0;  // every range has arrived: ready for the next launch
  return true;
}

// The tile and its member are read from global memory twice, for the
// products and again for the epilogue, rather than kept in registers
// across the loop: the 8 x 8 config needs all 128 it may have.
template <int BM, int BN, int TM, int TN, int D>
__device__ __forceinline__ void TiledTile(const SgemmMember* members, const SgemmTile* tiles, float alpha,
                                          float* smem, float* partials, int32_t* counters) {
  using S = TileShape<BM, BN, TM, TN, D>;
  constexpr int RG = S::kRowGroups, CG = S::kColGroups, LDA = S::kLdA, LDW = S::kLdW;
  const int tid = static_cast<int>(threadIdx.x), tx = tid % CG, ty = tid / CG;
  float* as = smem;                  // [2][D][LDA]
  float* ws = smem + 2 * D * LDA;    // [2][D][LDW]
  float acc[TM][TN];
  {
  const SgemmTile& t = tiles[blockIdx.x];
  const SgemmMember& g = members[t.member];
  const float* a_rows[S::kChunksA];
  const float* w_rows[S::kChunksW];
  SliceRows<BM, D, S::kChunksA>(
      [&](int row) { return t.m0 + row < g.m ? g.a + (t.m0 + row) * g.lda : nullptr; }, a_rows);
  SliceRows<BN, D, S::kChunksW>([&](int row) { return WeightRow(members, g, t.n0 + row); }, w_rows);
  const int k_begin = t.k0, k_end = t.k1;
  const bool vec_a = (t.flags & kSgemmVecA) != 0, vec_w = (t.flags & kSgemmVecW) != 0;

#pragma unroll
  for (int i = 0; i < TM; ++i) {
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  }
  float ra[S::kChunksA * 4], rw[S::kChunksW * 4];
  LoadSlice<D, S::kChunksA>(a_rows, k_begin, k_end, vec_a, ra);
  LoadSlice<D, S::kChunksW>(w_rows, k_begin, k_end, vec_w, rw);
  StoreSlice<BM, D, S::kChunksA, LDA>(as, ra);
  StoreSlice<BN, D, S::kChunksW, LDW>(ws, rw);
  __syncthreads();
  int buf = 0;
  for (int k0 = k_begin; k0 < k_end; k0 += D) {
    const bool more = k0 + D < k_end;
    if (more) {
      LoadSlice<D, S::kChunksA>(a_rows, k0 + D, k_end, vec_a, ra);
      LoadSlice<D, S::kChunksW>(w_rows, k0 + D, k_end, vec_w, rw);
    }
    const float* sa = as + buf * D * LDA + ty * 4;
    const float* sw = ws + buf * D * LDW + tx * 4;
    // Unrolled 2 k at a time with 8 x 8 or 8 x 4 outputs a thread, else 8:
    // the loads of shared memory hoisted for all of them would spill.
    constexpr int kUnroll = TM * TN >= 32 ? 2 : 8;
#pragma unroll kUnroll
    for (int kk = 0; kk < D; ++kk) {
      float fa[TM], fb[TN];
#pragma unroll
      for (int c = 0; c < TM / 4; ++c) {
        const float4 v = *reinterpret_cast<const float4*>(sa + kk * LDA + c * RG * 4);
        fa[4 * c] = v.x, fa[4 * c + 1] = v.y, fa[4 * c + 2] = v.z, fa[4 * c + 3] = v.w;
      }
#pragma unroll
      for (int c = 0; c < TN / 4; ++c) {
        const float4 v = *reinterpret_cast<const float4*>(sw + kk * LDW + c * CG * 4);
        fb[4 * c] = v.x, fb[4 * c + 1] = v.y, fb[4 * c + 2] = v.z, fb[4 * c + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
      }
    }
    // The other buffer was last read before the barrier that ended the
    // previous step, so it can be overwritten now.
    if (more) {
      StoreSlice<BM, D, S::kChunksA, LDA>(as + (buf ^ 1) * D * LDA, ra);
      StoreSlice<BN, D, S::kChunksW, LDW>(ws + (buf ^ 1) * D * LDW, rw);
    }
    __syncthreads();
    buf ^= 1;
  }
  }

  const SgemmTile& t = tiles[blockIdx.x];
  const SgemmMember& g = members[t.member];
  if (t.splits > 1) {
    float4 v[TM * TN / 4];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int q = 0; q < TN / 4; ++q) {
        v[i * (TN / 4) + q] = make_float4(acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2], acc[i][4 * q + 3]);
      }
    }
    if (!AddRanges(t, partials, counters, tid, v)) return;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int q = 0; q < TN / 4; ++q) {
        const float4 s = v[i * (TN / 4) + q];
        acc[i][4 * q] = s.x, acc[i][4 * q + 1] = s.y, acc[i][4 * q + 2] = s.z, acc[i][4 * q + 3] = s.w;
      }
    }
  }

  const bool vec_y = (t.flags & kSgemmVecY) != 0;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t r = t.m0 + (i / 4) * RG * 4 + ty * 4 + i % 4;
    if (r >= g.m) continue;
#pragma unroll
    for (int q = 0; q < TN / 4; ++q) {
      const int64_t c = t.n0 + q * CG * 4 + tx * 4;
      if (vec_y && c + 3 < g.n) {
        float4 b = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (g.bias) b = __ldg(reinterpret_cast<const float4*>(g.bias + c));
        float4 v;
        v.x = Activation(g.act, g.act_alpha, alpha * acc[i][4 * q] + b.x);
        v.y = Activation(g.act, g.act_alpha, alpha * acc[i][4 * q + 1] + b.y);
        v.z = Activation(g.act, g.act_alpha, alpha * acc[i][4 * q + 2] + b.z);
        v.w = Activation(g.act, g.act_alpha, alpha * acc[i][4 * q + 3] + b.w);
        *reinterpret_cast<float4*>(g.y + r * g.ldy + c) = v;  // vec_y: no merged member
        continue;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (c + j >= g.n) break;
        float v = alpha * acc[i][4 * q + j];
        const OutColumn o = OutputColumn(members, g, c + j);
        if (o.bias) v += *o.bias;
        o.y[r * o.ldy] = Activation(o.act, o.slope, v);
      }
    }
  }
}

// ---- the staged tile (SgemmConfig::kStaged64x64) -----------------------------------

// Copies global memory into shared without a register in between
// (cp.async, sm_80 and later): `bytes` of the 4 or 16 read, the rest of
// the destination zero (0 for a row past the member's or K past the range).
__device__ __forceinline__ void CopyAsync4(float* dst, const float* src, int bytes) {
  const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void CopyAsync16(float* dst, const float* src, int bytes) {
  const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void CommitAsync() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void WaitAsync() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The rows of a stage (64 rows x kDepth k) thread `tid` copies: with
// 16-byte copies (vec), row tid / 4 at k (tid % 4) * 4; else rows
// tid / 16 + 16 c at k tid % 16 (a warp two rows' 64 bytes). row_of(row):
// the row's first element, null past the member's rows.
template <typename RowOf>
__device__ __forceinline__ void StageRows(int tid, bool vec, RowOf row_of, const float* (&rows)[4]) {
#pragma unroll
  for (int c = 0; c < 4; ++c) rows[c] = vec ? (c == 0 ? row_of(tid / 4) : nullptr) : row_of(tid / 16 + 16 * c);
}

// Starts the copies of k0 .. k0 + kDepth - 1 of the rows StageRows found
// into stage buffer s (s[row * kStagedLd + k]), zeros for no row and past
// k_end; `any`: a valid address for the copies that read nothing.
__device__ __forceinline__ void CopyStage(int tid, float* s, const float* const (&rows)[4], bool vec, int k0,
                                          int k_end, const float* any) {
  if (vec) {
    const int k = k0 + (tid % 4) * 4;
    const bool in = rows[0] && k < k_end;
    CopyAsync16(s + (tid / 4) * kStagedLd + (tid % 4) * 4, in ? rows[0] + k : any, in ? 16 : 0);
    return;
  }
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int k = k0 + tid % 16;
    const bool in = rows[c] && k < k_end;
    CopyAsync4(s + (tid / 16 + 16 * c) * kStagedLd + tid % 16, in ? rows[c] + k : any, in ? 4 : 0);
  }
}

// ---- the tensor tile (SgemmConfig::kTensor64x64) ----------------------------------

// x as two TF32 values (grouped_sgemm.h, SgemmOptions::tensor): big, x
// rounded to nearest TF32, and small, what is left so rounded.
__device__ __forceinline__ void SplitTf32(float x, uint32_t& big, uint32_t& small) {
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(big) : "f"(x));
  const float rest = x - __uint_as_float(big);
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(small) : "f"(rest));
}

// d += a b over one m16n8k8 tile: a 16 x 8 (row), b 8 x 8 (col), the
// fragments of mma.sync's TF32 shape (lane l, g = l / 4, q = l % 4): a's
// registers hold (row, k) (g, q), (g + 8, q), (g, q + 4), (g + 8, q + 4);
// b's (k, column) (q, g), (q + 4, g); d's (row, column) (g, 2q),
// (g, 2q + 1), (g + 8, 2q), (g + 8, 2q + 1).
__device__ __forceinline__ void MmaTf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One stage's products of a 64 x 64 tile on the tensor cores: warp w
// takes rows 16 (w / 2) .. + 16 and columns 32 (w % 2) .. + 32, four
// m16n8 tiles (acc[j]: columns + 8 j), each k8 of the stage's 16 as three
// TF32 products, the small ones first. The stage holds rows of A and of W
// K-contiguous at a stride of kStagedLd (20) floats, so the lanes of a
// fragment's load, 8 rows (g) by 4 k (q), fall in 32 distinct banks.
// kPartsW: W's parts are in the stage already (sw big, sws small, as the
// split would make them), so only A's floats are split here; four warps
// read each float of W, so splitting W took two thirds of the splits.
template <bool kPartsW>
__device__ __forceinline__ void TensorProducts(const float* sa, const float* sw, const float* sws, int tid,
                                               float (&acc)[4][4]) {
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
  sa += ((warp / 2) * 16 + g) * kStagedLd + q;
  sw += ((warp % 2) * 32 + g) * kStagedLd + q;
  sws += ((warp % 2) * 32 + g) * kStagedLd + q;
#pragma unroll
  for (int k8 = 0; k8 < kDepth; k8 += 8) {
    uint32_t a_big[4], a_small[4];
    SplitTf32(sa[k8], a_big[0], a_small[0]);
    SplitTf32(sa[8 * kStagedLd + k8], a_big[1], a_small[1]);
    SplitTf32(sa[k8 + 4], a_big[2], a_small[2]);
    SplitTf32(sa[8 * kStagedLd + k8 + 4], a_big[3], a_small[3]);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t b0_big, b0_small, b1_big, b1_small;
      if constexpr (kPartsW) {
        b0_big = __float_as_uint(sw[8 * j * kStagedLd + k8]);
        b1_big = __float_as_uint(sw[8 * j * kStagedLd + k8 + 4]);
        b0_small = __float_as_uint(sws[8 * j * kStagedLd + k8]);
        b1_small = __float_as_uint(sws[8 * j * kStagedLd + k8 + 4]);
      } else {
        SplitTf32(sw[8 * j * kStagedLd + k8], b0_big, b0_small);
        SplitTf32(sw[8 * j * kStagedLd + k8 + 4], b1_big, b1_small);
      }
      MmaTf32(acc[j], a_small, b0_big, b1_big);
      MmaTf32(acc[j], a_big, b0_small, b1_small);
      MmaTf32(acc[j], a_big, b0_big, b1_big);
    }
  }
}

// The epilogue of a tensor tile (TensorProducts' fragments): alpha, each
// column's bias and activation, stored where its member's output is.
__device__ __forceinline__ void StoreTensorTile(const SgemmMember* members, const SgemmMember& g, const SgemmTile& t,
                                                int tid, const float (&acc)[4][4], float alpha) {
  const int warp = tid / 32, lane = tid % 32;
  const int64_t r0 = t.m0 + (warp / 2) * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // the fragment's two columns
      const int64_t c = t.n0 + (warp % 2) * 32 + 8 * j + 2 * (lane % 4) + h;
      if (c >= g.n) continue;
      const OutColumn o = OutputColumn(members, g, c);
#pragma unroll
      for (int v = 0; v < 2; ++v) {  // and two rows
        const int64_t r = r0 + 8 * v;
        if (r >= g.m) continue;
        float y = alpha * acc[j][2 * v + h];
        if (o.bias) y += *o.bias;
        o.y[r * o.ldy] = Activation(o.act, o.slope, y);
      }
    }
  }
}

// A 64 x 64 tile of a deep member (K of hundreds: DCNv2's and AutoInt's
// layers of K 429), 4 x 4 outputs a thread. The tiled configs above wait
// on global memory once a 16-deep step, with few blocks an SM (a member of
// 2048 rows and 132 columns is 96 such tiles): here kStages - 1 steps of
// A and W are in flight at once, copied straight into shared memory
// (cp.async: 16 bytes at a time where the rows are aligned, else 4), while
// the products of the oldest run. Shared memory keeps the rows as global
// memory has them, K-contiguous and padded to 20 floats, and a thread
// reads 4 k of a row as a float4: thread (ty, tx) holds rows ty + 16 i and
// columns tx + 16 j, and a warp is 4 rows of threads by 8 columns, so its
// reads of a k are 4 rows of A and 8 of W, in distinct banks (row strides
// of 80 bytes): one wavefront each.
//
// Two slices of 256 threads a tile (SgemmKernel::kSliced): slice s takes
// the steps s, s + kSlices, ... into buffers of its own, waiting at a
// barrier of its own, and at the end the slices' sums are added in slice
// order in shared memory (each output: its even steps' sum plus its odd
// steps', the same bits every run): a tile of K 429 is long, and where
// the tiles are no more than the SMs (DCNv2's merged experts and gates: 96
// at batch 2048) one slice alone leaves its SM mostly waiting on memory.
//
// kTensor (SgemmConfig::kTensor64x64): the same loads, the products on
// the tensor cores (TensorProducts) rather than the CUDA cores; with
// kPartsW (the tile's flag kSgemmPartsW), W's parts are loaded, big and
// small, 16 bytes at a time, rather than W.
constexpr int kSlices = 2;
template <int kSliceCount, bool kTensor, bool kPartsW = false>
__device__ __forceinline__ void StagedTile(const SgemmMember* members, const SgemmTile* tiles, float alpha,
                                           float* smem, float* partials = nullptr, int32_t* counters = nullptr) {
  constexpr int kTile = 64, kStageFloats = kTile * kStagedLd;
  constexpr int kSlice = kSliceFloats<kTensor, kPartsW>;
  const int slice = kSliceCount == 1 ? 0 : static_cast<int>(threadIdx.x) / kThreads;
  float* as = smem + slice * kSlice;         // [kStages][64][kStagedLd]
  float* ws = as + kStages * kStageFloats;   // [kStages][64][kStagedLd]
  float* wss = ws + kStages * kStageFloats;  // kPartsW: [kStages][64][kStagedLd], W's small parts
  const SgemmTile& t = tiles[blockIdx.x];
  const SgemmMember& g = members[t.member];
  const int tid = static_cast<int>(threadIdx.x) % kThreads, warp = tid / 32, lane = tid % 32;
  const int ty = (warp / 2) * 4 + lane / 8, tx = (warp % 2) * 8 + lane % 8;
  const bool vec_a = (t.flags & kSgemmVecA) != 0, vec_w = (t.flags & kSgemmVecW) != 0;
  const int k_begin = t.k0, k_end = t.k1;
  const float* a_rows[4];
  const float* w_rows[4];
  StageRows(tid, vec_a, [&](int row) { return t.m0 + row < g.m ? g.a + (t.m0 + row) * g.lda : nullptr; }, a_rows);
  const float* ws_rows[4] = {};  // kPartsW: the small parts' rows
  if constexpr (kPartsW) {
    StageRows(tid, true, [&](int row) { return WeightPartsRow(members, g, t.n0 + row); }, w_rows);
    ws_rows[0] = w_rows[0] ? w_rows[0] + Kp(g.k) : nullptr;  // (16-byte copies: a thread copies one row)
  } else {
    StageRows(tid, vec_w, [&](int row) { return WeightRow(members, g, t.n0 + row); }, w_rows);
  }
  const float* const any = g.a;
  // (a 16-byte copy's address is 16-byte aligned, even where it reads nothing)
  const float* const any_w = kPartsW ? (g.count > 0 ? members[g.first].w3 : g.w3) : any;
  const auto load = [&](int stage, int k0) {
    CopyStage(tid, as + stage * kStageFloats, a_rows, vec_a, k0, k_end, any);
    if constexpr (kPartsW) {
      // The parts' rows are kp long, zeros past K: a 16-byte copy that
      // starts below K may read past it.
      CopyStage(tid, ws + stage * kStageFloats, w_rows, true, k0, k_end, any_w);
      CopyStage(tid, wss + stage * kStageFloats, ws_rows, true, k0, k_end, any_w);
    } else {
      CopyStage(tid, ws + stage * kStageFloats, w_rows, vec_w, k0, k_end, any);
    }
  };

  float acc[4][4] = {};  // kTensor: acc[j] is the m16n8 tile j's fragment (TensorProducts)
  const int all_steps = (k_end - k_begin + kDepth - 1) / kDepth;
  const int steps = (all_steps - slice + kSliceCount - 1) / kSliceCount;  // this slice's: slice + kSliceCount * i
  const auto k_of = [&](int step) { return k_begin + (slice + kSliceCount * step) * kDepth; };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load(s, k_of(s));
    CommitAsync();
  }
  for (int step = 0; step < steps; ++step) {
    // This thread's copies of `step` have landed; after the barrier,
    // everyone's have, and every thread is done with step - 1's buffer,
    // which the copies of step + kStages - 1 overwrite.
    WaitAsync<kStages - 2>();
    asm volatile("bar.sync %0, %1;\n" ::"r"(1 + slice), "n"(kThreads));  // the slice's threads alone
    const int next = step + kStages - 1;
    if (next < steps) load(next % kStages, k_of(next));
    CommitAsync();
    if constexpr (kTensor) {
      TensorProducts<kPartsW>(as + (step % kStages) * kStageFloats, ws + (step % kStages) * kStageFloats,
                              wss + (step % kStages) * kStageFloats, tid, acc);
      continue;
    }
    const float* sa = as + (step % kStages) * kStageFloats + ty * kStagedLd;
    const float* sw = ws + (step % kStages) * kStageFloats + tx * kStagedLd;
#pragma unroll
    for (int kq = 0; kq < kDepth; kq += 4) {
      float4 a[4], w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = *reinterpret_cast<const float4*>(sa + 16 * i * kStagedLd + kq);
#pragma unroll
      for (int j = 0; j < 4; ++j) w[j] = *reinterpret_cast<const float4*>(sw + 16 * j * kStagedLd + kq);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc[i][j] = fmaf(a[i].x, w[j].x, acc[i][j]);
          acc[i][j] = fmaf(a[i].y, w[j].y, acc[i][j]);
          acc[i][j] = fmaf(a[i].z, w[j].z, acc[i][j]);
          acc[i][j] = fmaf(a[i].w, w[j].w, acc[i][j]);
        }
      }
    }
  }
  WaitAsync<0>();  // only empty groups are left; none outlives the block
  // The other slices' sums, by thread, into the shared memory their
  // buffers held; slice 0 adds them in slice order.
  if constexpr (kSliceCount > 1) {
    __syncthreads();
    if (slice > 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) smem[(slice - 1) * kSlice + (i * 4 + j) * kThreads + tid] = acc[i][j];
      }
    }
    __syncthreads();
    if (slice > 0) return;
    for (int p = 1; p < kSliceCount; ++p) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += smem[(p - 1) * kSlice + (i * 4 + j) * kThreads + tid];
      }
    }
  }
  if constexpr (kTensor && kSliceCount == 1) {
    // Split-K (SgemmOptions::tensor_split): the last range to arrive adds
    // them all in range order.
    if (t.splits > 1) {
      float4 v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
      if (!AddRanges(t, partials, counters, tid, v)) return;
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[j][0] = v[j].x, acc[j][1] = v[j].y, acc[j][2] = v[j].z, acc[j][3] = v[j].w;
    }
  }
  if constexpr (kTensor) {
    StoreTensorTile(members, g, t, tid, acc, alpha);
  } else {
    StoreTile64(members, g, t, tx, ty, acc, alpha);
  }
}

// One block a tile of any tiled config (a uniform branch on the tile's
// config), 2 blocks an SM: the 4 x 4 configs too take over 85 registers a
// thread (their loads in flight), so 3 would spill.
__global__ void __launch_bounds__(kThreads, 2)
    TiledSgemmKernel(const SgemmMember* members, const SgemmTile* tiles, float alpha, float* partials,
                     int32_t* counters) {
  __shared__ float4 smem4[kMaxSmemFloats / 4];
  float* smem = reinterpret_cast<float*>(smem4);
  const int32_t config = tiles[blockIdx.x].config;
  switch (static_cast<SgemmConfig>(config)) {
    case SgemmConfig::kNarrow: NarrowRow<2>(members[tiles[blockIdx.x].member], tiles[blockIdx.x].m0, alpha); return;
    case SgemmConfig::k64x64: TiledTile<64, 64, 4, 4, 16>(members, tiles, alpha, smem, partials, counters); return;
    case SgemmConfig::k128x32: TiledTile<128, 32, 4, 4, 16>(members, tiles, alpha, smem, partials, counters); return;
    case SgemmConfig::k256x16: TiledTile<256, 16, 4, 4, 16>(members, tiles, alpha, smem, partials, counters); return;
    case SgemmConfig::k128x128: TiledTile<128, 128, 8, 8, 8>(members, tiles, alpha, smem, partials, counters); return;
    case SgemmConfig::k128x64: TiledTile<128, 64, 8, 4, 16>(members, tiles, alpha, smem, partials, counters); return;
    case SgemmConfig::kStaged64x64: return;  // never here: the sliced kernel's
    case SgemmConfig::kTensor64x64: return;  // never here: the tensor kernels'
    case SgemmConfig::kLegacy: return;  // never here (SgemmTiles)
  }
}

// Every tile a staged one, kSlices slices of 256 threads a tile
// (SgemmKernel::kSliced); the slices' buffers are dynamic shared memory.
__global__ void __launch_bounds__(kThreads * kSlices, 1)
    SlicedSgemmKernel(const SgemmMember* members, const SgemmTile* tiles, float alpha) {
  extern __shared__ float4 dynamic_smem4[];
  StagedTile<kSlices, false>(members, tiles, alpha, reinterpret_cast<float*>(dynamic_smem4));
}

// Tensor tiles (SgemmKernel::kTensor), one slice of 256 threads a tile,
// 2 blocks an SM, and narrow tiles (the same branch for the whole block).
__global__ void __launch_bounds__(kThreads, 2)
    TensorSgemmKernel(const SgemmMember* members, const SgemmTile* tiles, float alpha, float* partials,
                      int32_t* counters) {
  extern __shared__ float4 dynamic_smem4[];
  if (tiles[blockIdx.x].config == static_cast<int32_t>(SgemmConfig::kNarrow)) {
    NarrowRow<2>(members[tiles[blockIdx.x].member], tiles[blockIdx.x].m0, alpha);
    return;
  }
  if (tiles[blockIdx.x].flags & kSgemmPartsW) {
    StagedTile<1, true, true>(members, tiles, alpha, reinterpret_cast<float*>(dynamic_smem4), partials, counters);
  } else {
    StagedTile<1, true, false>(members, tiles, alpha, reinterpret_cast<float*>(dynamic_smem4), partials, counters);
  }
}

// Tensor tiles only, kSlices slices of 256 threads a tile (SgemmKernel::kTensorSliced).
__global__ void __launch_bounds__(kThreads * kSlices, 1)
    SlicedTensorSgemmKernel(const SgemmMember* members, const SgemmTile* tiles, float alpha) {
  extern __shared__ float4 dynamic_smem4[];
  if (tiles[blockIdx.x].flags & kSgemmPartsW) {
    StagedTile<kSlices, true, true>(members, tiles, alpha, reinterpret_cast<float*>(dynamic_smem4));
  } else {
    StagedTile<kSlices, true, false>(members, tiles, alpha, reinterpret_cast<float*>(dynamic_smem4));
  }
}

// ---- the host: tile shapes, the rule, the layout --------------------------------------

struct ConfigShape {
  int rows, cols;  // of the output tile
};
constexpr ConfigShape kShapes[kSgemmConfigs] = {{64, 64}, {kThreads / 32, kSgemmNarrow}, {128, 128}, {128, 64},
                                                {64, 64}, {128, 32}, {256, 16}, {64, 64}, {64, 64}};

ConfigShape ShapeOf(SgemmConfig c) { return kShapes[static_cast<int>(c)]; }

// Whether a member is deep (the staged and tensor tiles' rule) or narrow
// with a long K (a kNarrow tile).
bool Deep(const SgemmMember& m) { return m.n > kSgemmNarrow && m.k >= kSgemmStagedMinK; }
bool NarrowLong(const SgemmMember& m) { return m.n <= kSgemmNarrow && m.k >= kSgemmNarrowMinK; }

// The tiled kernel's config of a member (the rule, grouped_sgemm.h).
SgemmConfig RuleConfig(const SgemmMember& m) {
  if (m.n <= kSgemmNarrow) return m.k >= kSgemmNarrowMinK ? SgemmConfig::kNarrow : SgemmConfig::k256x16;
  if (m.n <= 32) return SgemmConfig::k128x32;
  return SgemmConfig::k64x64;
}

// Whether the rule runs a group on the tiled kernel: where every member is
// a short product at most 16 wide (FiBiNet); elsewhere the kernel before
// it measured as fast or faster on the real models (bench/RESULTS.md,
// 2026-12-04, seventh session).
bool RuleTiled(const std::vector<SgemmMember>& members) {
  return std::all_of(members.begin(), members.end(), [](const SgemmMember& m) {
    return m.n <= kSgemmNarrow && m.k < kSgemmNarrowMinK;
  });
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Whether the rule runs a group on the sliced kernel (SgemmOptions::staged):
// every member deep (wider than a narrow tile, K of kSgemmStagedMinK or
// more) and their 64 x 64 tiles no more than the SMs.
bool RuleSliced(const std::vector<SgemmMember>& members, int sms) {
  int64_t tiles = 0;
  for (const SgemmMember& m : members) {
    if (!Deep(m)) return false;
    tiles += CeilDiv(m.m, 64) * CeilDiv(m.n, 64);
  }
  return tiles <= sms;
}

// Whether the rule runs a group on the tensor kernel (SgemmOptions::tensor):
// every member deep or narrow with a long K, at least one deep; with
// `short_too` (SgemmOptions::tensor_short), members wider than a narrow
// tile of any K may be beside them.
bool RuleTensor(const std::vector<SgemmMember>& members, bool short_too) {
  return std::all_of(members.begin(), members.end(),
                     [&](const SgemmMember& m) { return Deep(m) || NarrowLong(m) || (short_too && m.n > kSgemmNarrow); }) &&
         std::any_of(members.begin(), members.end(), Deep);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// A merged member's W is its members' (each aligned, or no float4 loads),
// its outputs theirs (stored a float each).
int32_t FlagsOf(const std::vector<SgemmMember>& table, const SgemmMember& m) {
  int32_t f = 0;
  if (m.k % 4 == 0 && m.lda % 4 == 0 && Aligned16(m.a)) f |= kSgemmVecA;
  bool w = m.k % 4 == 0;
  for (int32_t s = 0; s < m.count; ++s) w = w && Aligned16(table[static_cast<size_t>(m.first + s)].w);
  if (w && (m.count > 0 || Aligned16(m.w))) f |= kSgemmVecW;
  if (m.count == 0 && m.ldy % 4 == 0 && Aligned16(m.y) && (!m.bias || Aligned16(m.bias))) f |= kSgemmVecY;
  bool parts = m.count > 0 || (m.w3 && Aligned16(m.w3));  // (16-byte copies)
  for (int32_t s = 0; s < m.count; ++s) {
    const float* w3 = table[static_cast<size_t>(m.first + s)].w3;
    parts = parts && w3 && Aligned16(w3);
  }
  if (parts) f |= kSgemmPartsW;
  return f;
}

bool SameA(const SgemmMember& x, const SgemmMember& y) {
  return x.a == y.a && x.lda == y.lda && x.m == y.m && x.k == y.k;
}

// What runs (SgemmOptions::merge): indices into `table`, which starts as
// `members` and gains each merged member after copies of its members.
// Members that read one A and leave part of a 64-column tile idle (n not
// a multiple of 64) merge in order of first appearance, kSgemmMaxMerged at
// a time, where they are at least two, wider than kSgemmNarrow together
// (narrower, each keeps its narrow tile), take fewer 64-column tiles merged
// than apart and have at least sms / 2 tiles of 64 x 64 (SgemmOptions::sms).
// A member whose columns fill whole tiles gains nothing merged and would
// lose its float4 stores (PLE's experts of 64 measured 22.6 us apart and
// 31.4 merged at batch 512).
std::vector<size_t> Units(const std::vector<SgemmMember>& members, bool merge, int sms,
                          std::vector<SgemmMember>& table) {
  constexpr int64_t kCols = 64;
  table = members;
  std::vector<size_t> units;
  std::vector<bool> done(members.size(), false);
  const auto idle_columns = [&](size_t i) { return members[i].n % kCols != 0; };
  for (size_t i = 0; i < members.size(); ++i) {
    if (done[i]) continue;
    done[i] = true;
    if (!merge || !idle_columns(i)) {
      units.push_back(i);
      continue;
    }
    std::vector<size_t> same{i};
    for (size_t j = i + 1; j < members.size(); ++j) {
      if (!done[j] && idle_columns(j) && SameA(members[i], members[j])) same.push_back(j), done[j] = true;
    }
    for (size_t b = 0; b < same.size(); b += kSgemmMaxMerged) {
      const size_t e = std::min(same.size(), b + kSgemmMaxMerged);
      int64_t width = 0, apart = 0;
      for (size_t x = b; x < e; ++x) width += members[same[x]].n, apart += CeilDiv(members[same[x]].n, kCols);
      const int64_t col_tiles = CeilDiv(width, kCols);
      if (e - b < 2 || width <= kSgemmNarrow || col_tiles >= apart ||
          CeilDiv(members[same[b]].m, kCols) * col_tiles < sms / 2) {
        for (size_t x = b; x < e; ++x) units.push_back(same[x]);
        continue;
      }
      SgemmMember merged = members[same[b]];
      merged.w = merged.bias = merged.w3 = nullptr;
      merged.y = nullptr;
      merged.ldy = 0;
      merged.act = kNoActivation;
      merged.n = width;
      merged.first = static_cast<int32_t>(table.size());
      merged.count = static_cast<int32_t>(e - b);
      int64_t n0 = 0;
      for (size_t x = b; x < e; ++x) {
        SgemmMember part = members[same[x]];
        part.n0 = static_cast<int32_t>(n0);
        n0 += part.n;
        table.push_back(part);
      }
      units.push_back(table.size());
      table.push_back(merged);
    }
  }
  return units;
}

// A tile's multiply-adds a thread: the order in which tiles start.
int64_t ThreadFmas(const SgemmMember& m, const SgemmTile& t) {
  const auto c = static_cast<SgemmConfig>(t.config);
  if (c == SgemmConfig::kNarrow) return (m.k + 31) / 32 * kSgemmNarrow;
  const ConfigShape s = ShapeOf(c);
  return int64_t{t.k1 - t.k0} * s.rows * s.cols / kThreads;
}

}  // namespace

const char* SgemmConfigName(SgemmConfig c) {
  switch (c) {
    case SgemmConfig::kLegacy: return "legacy64x64";
    case SgemmConfig::kNarrow: return "narrow";
    case SgemmConfig::k128x128: return "128x128";
    case SgemmConfig::k128x64: return "128x64";
    case SgemmConfig::k64x64: return "64x64";
    case SgemmConfig::k128x32: return "128x32";
    case SgemmConfig::k256x16: return "256x16";
    case SgemmConfig::kStaged64x64: return "staged64x64";
    case SgemmConfig::kTensor64x64: return "tf32x3_64x64";
  }
  return "?";
}

SgemmTiling SgemmTiles(const std::vector<SgemmMember>& given, const SgemmOptions& options) {
  SgemmTiling out;
  const std::vector<size_t> units = Units(given, options.merge, options.sms, out.members);
  std::vector<SgemmMember> members;  // what runs, a unit each
  for (size_t u : units) members.push_back(out.members[u]);
  const size_t n = members.size();
  // Which kernel, and each member's config. Forced, the tensor config
  // runs two slices a tile where split-K asks for more than one range.
  const bool by_rule = options.config < 0 && !options.tiled;
  const bool tensor = options.config == static_cast<int>(SgemmConfig::kTensor64x64) ||
                      (by_rule && options.tensor && RuleTensor(members, options.tensor_short));
  const bool tensor_sliced = tensor && (options.config < 0 ? options.staged && RuleSliced(members, options.sms)
                                                           : options.split > 1);
  const bool sliced = !tensor && (options.config == static_cast<int>(SgemmConfig::kStaged64x64) ||
                                  (by_rule && options.staged && RuleSliced(members, options.sms)));
  const bool legacy = !tensor && !sliced &&
                      (options.config == static_cast<int>(SgemmConfig::kLegacy) || (by_rule && !RuleTiled(members)));
  std::vector<SgemmConfig> configs(n);
  for (size_t i = 0; i < n; ++i) {
    const SgemmMember& m = members[i];
    const bool narrow_fits = m.n <= kSgemmNarrow;
    if (tensor) {
      configs[i] = options.config < 0 && NarrowLong(m) ? SgemmConfig::kNarrow : SgemmConfig::kTensor64x64;
    } else if (sliced) {
      configs[i] = SgemmConfig::kStaged64x64;
    } else if (legacy) {
      configs[i] = narrow_fits && m.k >= kSgemmNarrowMinK ? SgemmConfig::kNarrow : SgemmConfig::kLegacy;
    } else if (options.config >= 0 && (options.config != static_cast<int>(SgemmConfig::kNarrow) || narrow_fits)) {
      configs[i] = static_cast<SgemmConfig>(options.config);
    } else {
      configs[i] = RuleConfig(m);
    }
  }
  out.kernel = tensor_sliced ? SgemmKernel::kTensorSliced
               : tensor      ? SgemmKernel::kTensor
               : sliced      ? SgemmKernel::kSliced
               : legacy      ? SgemmKernel::kLegacy
                             : SgemmKernel::kTiled;
  // Split-K (grouped_sgemm.h): how many ranges of K each member's tiles
  // take; the narrow, staged and tensor tiles and the kernel before take one.
  auto tiled = [&](size_t i) { return !tensor && !sliced && !legacy && configs[i] != SgemmConfig::kNarrow; };
  std::vector<int64_t> splits(n, 1);
  if (!legacy && options.split > 1) {
    for (size_t i = 0; i < n; ++i) {
      if (tiled(i)) splits[i] = std::min<int64_t>(options.split, CeilDiv(members[i].k, kDepth));
    }
  }
  // The tensor tiles' split-K (SgemmOptions::tensor_split): forced, where
  // they are no more than the SMs; by the rule, as many ranges as keep
  // them so.
  if (tensor && !tensor_sliced && options.tensor_split != 1) {
    int64_t tensor_tiles = 0;
    for (size_t i = 0; i < n; ++i) {
      if (configs[i] == SgemmConfig::kTensor64x64) tensor_tiles += CeilDiv(members[i].m, 64) * CeilDiv(members[i].n, 64);
    }
    int64_t ranges = 1;
    if (options.tensor_split > 1) {
      if (options.sms == 0 || tensor_tiles <= options.sms) ranges = options.tensor_split;
    } else if (by_rule && options.sms > 0 && tensor_tiles > 0) {
      ranges = std::min<int64_t>(kSgemmTensorMaxSplit, options.sms / tensor_tiles);
    }
    for (size_t i = 0; i < n && ranges > 1; ++i) {
      if (configs[i] == SgemmConfig::kTensor64x64) splits[i] = std::min<int64_t>(ranges, CeilDiv(members[i].k, kDepth));
    }
  }

  for (size_t i = 0; i < n; ++i) {
    const SgemmMember& m = members[i];
    const SgemmConfig c = configs[i];
    const ConfigShape s = ShapeOf(c);
    const int32_t flags = FlagsOf(out.members, m);
    // Ranges of K a multiple of kDepth deep, so a float4 chunk of 4 k is
    // wholly inside a range or wholly outside.
    const int64_t depth = CeilDiv(CeilDiv(m.k, splits[i]), kDepth) * kDepth;
    const int32_t parts = static_cast<int32_t>(CeilDiv(m.k, depth));
    const int64_t col_step = c == SgemmConfig::kNarrow ? m.n : s.cols;
    for (int64_t m0 = 0; m0 < m.m; m0 += s.rows) {
      for (int64_t n0 = 0; n0 < m.n; n0 += col_step) {
        SgemmTile t{};
        t.member = static_cast<int32_t>(units[i]);
        t.m0 = static_cast<int32_t>(m0);
        t.n0 = static_cast<int32_t>(n0);
        t.config = static_cast<int32_t>(c);
        t.flags = flags;
        t.splits = parts;
        if (parts > 1) {
          t.counter = out.counters++;
          t.partial = out.workspace_floats;
          out.workspace_floats += int64_t{parts} * s.rows * s.cols;
        }
        for (int32_t p = 0; p < parts; ++p) {
          t.split = p;
          t.k0 = static_cast<int32_t>(p * depth);
          t.k1 = static_cast<int32_t>(std::min(m.k, (p + 1) * depth));
          out.tiles.push_back(t);
        }
      }
    }
  }
  out.parts_w = std::any_of(out.tiles.begin(), out.tiles.end(), [](const SgemmTile& t) {
    return t.config == static_cast<int32_t>(SgemmConfig::kTensor64x64) && (t.flags & kSgemmPartsW) != 0;
  });
  // The most work first, then by position: the long tiles start early and
  // the short ones fill in behind them.
  std::vector<int64_t> cost(out.tiles.size());
  for (size_t i = 0; i < out.tiles.size(); ++i) cost[i] = ThreadFmas(out.members[out.tiles[i].member], out.tiles[i]);
  std::vector<size_t> order(out.tiles.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return cost[x] > cost[y]; });
  std::vector<SgemmTile> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back(out.tiles[i]);
  out.tiles = std::move(sorted);
  return out;
}

void LaunchGroupedSgemm(SgemmKernel kernel, const SgemmMember* members, const SgemmTile* tiles, int num_tiles,
                        float alpha, void* workspace, int64_t workspace_floats, bool parts_w, cudaStream_t stream) {
  if (num_tiles == 0) return;
  float* partials = static_cast<float*>(workspace);
  int32_t* counters = partials ? reinterpret_cast<int32_t*>(partials + workspace_floats) : nullptr;
  switch (kernel) {
    case SgemmKernel::kLegacy: LegacySgemmKernel<<<num_tiles, kThreads, 0, stream>>>(members, tiles, alpha); break;
    case SgemmKernel::kTiled:
      TiledSgemmKernel<<<num_tiles, kThreads, 0, stream>>>(members, tiles, alpha, partials, counters);
      break;
    case SgemmKernel::kSliced: {
      constexpr int kBytes = kSlices * kStagedSmemFloats * static_cast<int>(sizeof(float));
      static const bool ready = [] {  // over 48 KB of dynamic shared memory is asked for once
        return cudaFuncSetAttribute(SlicedSgemmKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes) ==
               cudaSuccess;
      }();
      (void)ready;  // a failure shows as the launch's error
      SlicedSgemmKernel<<<num_tiles, kThreads * kSlices, kBytes, stream>>>(members, tiles, alpha);
      break;
    }
    case SgemmKernel::kTensor: {
      // W's small parts take a third buffer (over 48 KB: asked for once).
      constexpr int kPartsBytes = kTensorSmemFloats * static_cast<int>(sizeof(float));
      if (parts_w) {
        static const bool ready = [] {
          return cudaFuncSetAttribute(TensorSgemmKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kPartsBytes) ==
                 cudaSuccess;
        }();
        (void)ready;
      }
      const int bytes = parts_w ? kPartsBytes : kStagedSmemFloats * static_cast<int>(sizeof(float));
      TensorSgemmKernel<<<num_tiles, kThreads, bytes, stream>>>(members, tiles, alpha, partials, counters);
      break;
    }
    case SgemmKernel::kTensorSliced: {
      constexpr int kBytes = kSlices * kTensorSmemFloats * static_cast<int>(sizeof(float));
      static const bool ready = [] {
        return cudaFuncSetAttribute(SlicedTensorSgemmKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes) ==
               cudaSuccess;
      }();
      (void)ready;
      const int bytes = parts_w ? kBytes : kSlices * kStagedSmemFloats * static_cast<int>(sizeof(float));
      SlicedTensorSgemmKernel<<<num_tiles, kThreads * kSlices, bytes, stream>>>(members, tiles, alpha);
      break;
    }
  }
}

namespace {

// Each output row (a block row of threads) of one matrix's parts
// (grouped_sgemm.h, LaunchSplitTf32): `outer` rows of `inner` elements
// read ld apart, element (o, i) valid where its K index is below k, its
// parts at o * so + part * sp + i.
__global__ void SplitTf32Kernel(const float* __restrict__ x, int64_t batch_stride, int64_t outer, int64_t inner,
                                int64_t ld, int64_t k, bool k_along_rows, bool w_order, int64_t so, int64_t sp,
                                int64_t out_stride, float* __restrict__ out) {
  const int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.y) + threadIdx.y;
  if (o >= outer) return;
  const float* xr = x + blockIdx.y * batch_stride + o * ld;
  float* row = out + blockIdx.y * out_stride + o * so;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    uint32_t big = 0, small = 0;
    if ((k_along_rows ? o : i) < k) SplitTf32(xr[i], big, small);
    const float b = __uint_as_float(big), s = __uint_as_float(small);
    row[i] = w_order ? b : s;
    row[sp + i] = w_order ? s : b;
    row[2 * sp + i] = b;
  }
}

}  // namespace

void LaunchSplitTf32(const Tf32Split& p, float* out, cudaStream_t stream) {
  const int64_t kp = p.Kp();
  // K along the columns: a row of kp a block row, parts kp apart; along
  // the rows: kp rows of `cols` (zeros past K), parts kp rows apart.
  const int64_t outer = p.k_along_rows ? kp : p.rows, inner = p.k_along_rows ? p.cols : kp;
  const int64_t so = p.k_along_rows ? p.cols : 3 * kp, sp = p.k_along_rows ? kp * p.cols : kp;
  const int64_t k = p.k_along_rows ? p.rows : p.cols;
  if (outer <= 0 || inner <= 0 || p.batch <= 0) return;
  // A warp along a row, 8 rows a block: rows of hundreds to thousands.
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>((outer + block.y - 1) / block.y), static_cast<unsigned>(p.batch));
  SplitTf32Kernel<<<grid, block, 0, stream>>>(p.x, p.batch_stride, outer, inner, p.ld, k, p.k_along_rows, p.w_order,
                                              so, sp, 3 * kp * (p.k_along_rows ? p.cols : p.rows), out);
}

}  // namespace hfuse::cuda
