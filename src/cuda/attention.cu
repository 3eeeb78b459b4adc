// The attention kernel (attention.h).
#include "attention.h"

#include <algorithm>

namespace hfuse::cuda {
namespace {

constexpr int kAttentionThreads = 128;
// The most threads (fewer for wide heads: a thread's registers), and
// shared-memory bytes, of a block of the shared kernel.
template <int kMaxHead>
constexpr int kSharedMaxThreads = kMaxHead <= 16 ? 512 : 256;
// The most batch matrices a block of the shared kernel takes.
constexpr int kSharedMaxMatrices = 64;
// Its dynamic shared memory: the 48 KiB a launch may have without opting
// in, less the kernel's static arrays (two offsets a matrix).
constexpr int64_t kSharedMaxBytes = 48 * 1024 - 2 * kSharedMaxMatrices * static_cast<int64_t>(sizeof(int64_t));

// K and V read where they lie, a thread a query row; Q, K, V and O of type T.
template <int kMaxHead, typename T>
__global__ void __launch_bounds__(kAttentionThreads) AttentionKernel(AttentionArgs a) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= a.batch * a.sq) return;
  AttentionRowOf<kMaxHead, T>(a, t / a.sq, t % a.sq);
}

// Batch matrices `per_block` a block: their K^T and V copied into shared
// memory, rows of kMaxHead padded with zeros (K key-major, [sk][kMaxHead];
// V [sk][kMaxHead]), then a thread a query row (or several, where the
// block has fewer threads than rows). K and V are float32 there, whatever T.
template <int kMaxHead, typename T>
__global__ void __launch_bounds__(kSharedMaxThreads<kMaxHead>) AttentionSharedKernel(AttentionArgs a, int per_block) {
  extern __shared__ float kv[];
  const T* const kt = static_cast<const T*>(a.kt);
  const T* const v = static_cast<const T*>(a.v);
  __shared__ int64_t kt_at[kSharedMaxMatrices], v_at[kSharedMaxMatrices];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * per_block;
  const int mats = static_cast<int>(a.batch - first < per_block ? a.batch - first : per_block);
  const int d = a.d, dv = a.dv, sk = a.sk, sq = a.sq;
  const int k_size = sk * kMaxHead, per_matrix = 2 * k_size;
  for (int m = threadIdx.x; m < mats; m += blockDim.x) {
    kt_at[m] = AttentionBatchOffset(a, a.kt_batch, first + m);
    v_at[m] = AttentionBatchOffset(a, a.v_batch, first + m);
  }
  __syncthreads();
  // Four loads in flight a thread before their stores.
  constexpr int kUnroll = 4;
  const int total = mats * per_matrix;
  for (int base = threadIdx.x; base < total; base += kUnroll * blockDim.x) {
    float value[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int e = base + u * static_cast<int>(blockDim.x);
      const int m = e / per_matrix, r = e - m * per_matrix;
      const int j = (r % k_size) / kMaxHead, i = r % kMaxHead;
      value[u] = 0.0f;
      if (e < total) {
        if (r < k_size) {
          if (i < d) value[u] = AttentionLoad(kt[kt_at[m] + i * a.kt_d + j * a.kt_key]);
        } else if (i < dv) {
          value[u] = AttentionLoad(v[v_at[m] + j * a.v_key + i * a.v_col]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int e = base + u * static_cast<int>(blockDim.x);
      if (e < total) kv[e] = value[u];
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < mats * sq; t += blockDim.x) {
    const int m = t / sq, row = t - m * sq;
    const int64_t b = first + m;
    const float* k = kv + m * per_matrix;
    AttentionRowFrom<kMaxHead, int, true>(
        a, static_cast<const T*>(a.q) + AttentionBatchOffset(a, a.q_batch, b) + row * a.q_row, k, 1, kMaxHead,
        k + k_size, kMaxHead, 1, static_cast<T*>(a.o) + AttentionBatchOffset(a, a.o_batch, b) + row * a.o_row);
  }
}

template <int kMaxHead, typename T>
void Launch(const AttentionArgs& a, cudaStream_t stream) {
  // Matrices a block: the count (up to the thread and shared-memory
  // limits) whose rows fill the most of the warps they take.
  constexpr int kMaxThreads = kSharedMaxThreads<kMaxHead>;
  const int64_t per_matrix_bytes = static_cast<int64_t>(a.sk) * 2 * kMaxHead * 4;
  int best = 0;
  double best_fill = 0.0;
  for (int p = 1; p <= kSharedMaxMatrices && p <= a.batch; ++p) {
    const int64_t rows = static_cast<int64_t>(p) * a.sq;
    if (p * per_matrix_bytes > kSharedMaxBytes || (rows > kMaxThreads && p > 1)) break;
    const int64_t threads = (std::min<int64_t>(rows, kMaxThreads) + 31) / 32 * 32;
    const double fill = static_cast<double>(std::min<int64_t>(rows, kMaxThreads)) / static_cast<double>(threads);
    if (fill > best_fill + 1e-9) {
      best = p;
      best_fill = fill;
    }
  }
  if (best > 0) {
    const int64_t rows = static_cast<int64_t>(best) * a.sq;
    const auto threads = static_cast<unsigned>((std::min<int64_t>(rows, kMaxThreads) + 31) / 32 * 32);
    const auto blocks = static_cast<unsigned>((a.batch + best - 1) / best);
    AttentionSharedKernel<kMaxHead, T><<<blocks, threads, static_cast<size_t>(best * per_matrix_bytes), stream>>>(a, best);
    return;
  }
  const int64_t threads = a.batch * a.sq;
  const auto blocks = static_cast<unsigned>((threads + kAttentionThreads - 1) / kAttentionThreads);
  AttentionKernel<kMaxHead, T><<<blocks, kAttentionThreads, 0, stream>>>(a);
}

template <typename T>
void LaunchOf(const AttentionArgs& args, cudaStream_t stream) {
  const int head = args.d > args.dv ? args.d : args.dv;
  if (head <= 8) {
    Launch<8, T>(args, stream);
  } else if (head <= 16) {
    Launch<16, T>(args, stream);
  } else if (head <= 32) {
    Launch<32, T>(args, stream);
  } else {
    Launch<kMaxAttentionHead, T>(args, stream);
  }
}

}  // namespace

void LaunchAttention(const AttentionArgs& args, cudaStream_t stream) {
  if (args.batch * args.sq == 0) return;
  switch (args.dtype) {
    case DType::kFloat16: LaunchOf<AttentionHalf>(args, stream); break;
    case DType::kBFloat16: LaunchOf<AttentionBFloat16>(args, stream); break;
    default: LaunchOf<float>(args, stream); break;
  }
}

}  // namespace hfuse::cuda
