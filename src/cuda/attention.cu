// The attention kernel (attention.h).
#include "attention.h"


namespace hfuse::cuda {
namespace {

constexpr int kAttentionThreads = 128;

template <int kMaxHead>
__global__ void __launch_bounds__(kAttentionThreads) AttentionKernel(AttentionArgs a) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= a.batch * a.sq) return;
  AttentionRow<kMaxHead>(a, t / a.sq, t % a.sq);
}

}  // namespace

void LaunchAttention(const AttentionArgs& args, cudaStream_t stream) {
  const int64_t threads = args.batch * args.sq;
  if (threads == 0) return;
  const auto blocks = static_cast<unsigned>((threads + kAttentionThreads - 1) / kAttentionThreads);
  const int head = args.d > args.dv ? args.d : args.dv;
  if (head <= 8) {
    AttentionKernel<8><<<blocks, kAttentionThreads, 0, stream>>>(args);
  } else if (head <= 16) {
    AttentionKernel<16><<<blocks, kAttentionThreads, 0, stream>>>(args);
  } else if (head <= 32) {
    AttentionKernel<32><<<blocks, kAttentionThreads, 0, stream>>>(args);
  } else {
    AttentionKernel<kMaxAttentionHead><<<blocks, kAttentionThreads, 0, stream>>>(args);
  }
}

}  // namespace hfuse::cuda
