// Which CUTLASS instantiation a group GEMM gets, and whether it can take the
// group at all. See cutlass_grouped_gemm.h.
#include "cutlass_grouped_gemm.h"

#include <fmt/format.h>

#include <stdexcept>

namespace hfuse::cuda {

// Pingpong up to this work-weighted mean K (set from the measurements).
constexpr double kPingpongMaxMeanK = 512;

const char* GemmKernelName(GemmKernel kernel) {
  return kernel == GemmKernel::kPingpong ? "pingpong 128x128" : "cooperative 128x128";
}

std::string CutlassCannotTake(int dtype, const std::vector<GroupedGemmMember>& members) {
  if (dtype != 0 && dtype != 1) return "float32";
  constexpr int64_t kAlign = 8;  // 16 bytes of a 16-bit type: TMA's minimum
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  for (const GroupedGemmMember& m : members) {
    if (m.k % kAlign || m.lda % kAlign || m.ldy % kAlign) {
      return fmt::format("alignment below 8 (k {}, lda {}, ldy {})", m.k, m.lda, m.ldy);
    }
    if (!aligned(m.a) || !aligned(m.w) || !aligned(m.y)) return "operand not 16-byte aligned";
    if (m.m > INT32_MAX || m.n > INT32_MAX || m.k > INT32_MAX) return "dimension above 2^31";
    if ((m.bias == nullptr) != (members[0].bias == nullptr)) return "bias on some members only";
  }
  return "";
}

// The rule, from the micro-benchmarks and the towers graphs measured with
// each kernel on the H200 (bench/RESULTS.md, issue 12): pingpong where the
// main loop is short (small K: the epilogue, which pingpong hides under the
// other warpgroup's main loop, is a large part of each tile), cooperative
// otherwise. K is weighted by each member's work. bfloat16 has only the
// cooperative instantiation.
GemmKernel ChooseGemmKernel(int dtype, const std::vector<GroupedGemmMember>& members) {
  if (dtype != 0) return GemmKernel::kCooperative;
  double work = 0, k_work = 0;
  for (const GroupedGemmMember& m : members) {
    const double w = static_cast<double>(m.m) * static_cast<double>(m.n) * static_cast<double>(m.k);
    work += w;
    k_work += w * static_cast<double>(m.k);
  }
  const double mean_k = work > 0 ? k_work / work : 0;
  return mean_k <= kPingpongMaxMeanK ? GemmKernel::kPingpong : GemmKernel::kCooperative;
}

std::unique_ptr<CutlassGroupedGemm> MakeCutlassGroupedGemm(
    int dtype, GemmKernel kernel, const std::vector<GroupedGemmMember>& members, int act) {
  const std::string why = CutlassCannotTake(dtype, members);
  if (!why.empty()) throw std::runtime_error("CUTLASS grouped GEMM cannot take this group: " + why);
  if (dtype == 1) return MakeCutlassGemmBF16Cooperative(members, act);
  return kernel == GemmKernel::kPingpong ? MakeCutlassGemmF16Pingpong(members, act)
                                         : MakeCutlassGemmF16Cooperative(members, act);
}

}  // namespace hfuse::cuda
