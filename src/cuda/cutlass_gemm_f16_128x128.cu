// One CUTLASS grouped GEMM instantiation: F16, CTA tile 128x128 x 64 (see
// cutlass_grouped_gemm.h; one per file, each takes about 90 s to compile).
#include "cutlass_grouped_gemm.cuh"

namespace hfuse::cuda {

std::unique_ptr<CutlassGroupedGemm> MakeCutlassGemmF16Tile128x128(
    const std::vector<GroupedGemmMember>& members, Activation act) {
  return std::make_unique<cutlass_impl::Grouped<cutlass::half_t, 128>>(members, act);
}

}  // namespace hfuse::cuda
