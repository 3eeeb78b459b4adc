// Which CUTLASS instantiation a group GEMM gets, and whether it can take the
// group at all. See cutlass_grouped_gemm.h.
#include "cutlass_grouped_gemm.h"

#include <fmt/format.h>

#include <stdexcept>

namespace hfuse::cuda {

const char* GemmTileName(GemmTile tile) { return tile == GemmTile::k128x64 ? "128x64" : "128x128"; }

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

// The rule, from the micro-benchmarks and the towers graphs measured both
// ways on the H200 (bench/RESULTS.md, issue 12): 128x128 tiles unless the
// group's outputs are narrow, where 128-wide tiles would be mostly padding
// or too few to fill the GPU. bfloat16 has only the 128x128 instantiation.
GemmTile ChooseGemmTile(int dtype, const std::vector<GroupedGemmMember>& members, int num_sms) {
  if (dtype != 0) return GemmTile::k128x128;
  double padded128 = 0, padded64 = 0;
  int64_t tiles128 = 0;
  for (const GroupedGemmMember& m : members) {
    const int64_t mt = (m.m + 127) / 128;
    tiles128 += mt * ((m.n + 127) / 128);
    padded128 += static_cast<double>(m.k) * static_cast<double>(m.m) * static_cast<double>((m.n + 127) / 128 * 128);
    padded64 += static_cast<double>(m.k) * static_cast<double>(m.m) * static_cast<double>((m.n + 63) / 64 * 64);
  }
  if (tiles128 < num_sms || padded128 > 1.15 * padded64) return GemmTile::k128x64;
  return GemmTile::k128x128;
}

std::unique_ptr<CutlassGroupedGemm> MakeCutlassGroupedGemm(
    int dtype, GemmTile tile, const std::vector<GroupedGemmMember>& members, Activation act) {
  const std::string why = CutlassCannotTake(dtype, members);
  if (!why.empty()) throw std::runtime_error("CUTLASS grouped GEMM cannot take this group: " + why);
  if (dtype == 1) return MakeCutlassGemmBF16Tile128x128(members, act);
  return tile == GemmTile::k128x64 ? MakeCutlassGemmF16Tile128x64(members, act)
                                   : MakeCutlassGemmF16Tile128x128(members, act);
}

}  // namespace hfuse::cuda
