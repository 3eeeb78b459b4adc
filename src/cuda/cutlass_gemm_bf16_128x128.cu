// One CUTLASS grouped GEMM instantiation: bfloat16, cooperative schedule, 128x128x64 CTA
// tiles (see cutlass_grouped_gemm.h; one per file, each takes about 90 s to
// compile).
#include "cutlass_grouped_gemm.cuh"

namespace hfuse::cuda {

std::unique_ptr<CutlassGroupedGemm> MakeCutlassGemmBF16Tile128x128(const std::vector<GroupedGemmMember>& members,
                                                      int act) {
  return std::make_unique<cutlass_impl::Grouped<cutlass::bfloat16_t, 128>>(members, act);
}

}  // namespace hfuse::cuda
