// Which CUTLASS instantiation a group GEMM gets, and whether it can take the
// group at all. See cutlass_grouped_gemm.h.
#include "cutlass_grouped_gemm.h"

#include <fmt/format.h>

#include <stdexcept>

#include "hfuse/ir/graph.h"

namespace hfuse::cuda {


const char* GemmKernelName(GemmKernel kernel) {
  return kernel == GemmKernel::kTile128x64 ? "128x64" : "128x128";
}

std::string CutlassCannotTake(int dtype, const std::vector<GroupedGemmMember>& members, int act) {
  if (dtype != 0 && dtype != 1) return "float32";
  if (act != kNoActivation && act != static_cast<int>(EwFunc::kRelu) &&
      act != static_cast<int>(EwFunc::kSigmoid)) {
    return "activation other than relu and sigmoid";
  }
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
// each tile on the H200 (bench/RESULTS.md, issue 12): 128x128 tiles, which
// read A and W fewer times over, unless the group has too few of them to
// give every multiprocessor one, where 128x64 tiles double the CTAs.
// bfloat16 has only the 128x128 instantiation.
GemmKernel ChooseGemmKernel(int dtype, const std::vector<GroupedGemmMember>& members, int num_sms) {
  if (dtype != 0) return GemmKernel::kTile128x128;
  int64_t tiles = 0;
  for (const GroupedGemmMember& m : members) tiles += (m.m + 127) / 128 * ((m.n + 127) / 128);
  return tiles < num_sms ? GemmKernel::kTile128x64 : GemmKernel::kTile128x128;
}

std::unique_ptr<CutlassGroupedGemm> MakeCutlassGroupedGemm(
    int dtype, GemmKernel kernel, const std::vector<GroupedGemmMember>& members, int act) {
  const std::string why = CutlassCannotTake(dtype, members, act);
  if (!why.empty()) throw std::runtime_error("CUTLASS grouped GEMM cannot take this group: " + why);
  if (dtype == 1) return MakeCutlassGemmBF16Tile128x128(members, act);
  return kernel == GemmKernel::kTile128x64 ? MakeCutlassGemmF16Tile128x64(members, act)
                                           : MakeCutlassGemmF16Tile128x128(members, act);
}

}  // namespace hfuse::cuda
