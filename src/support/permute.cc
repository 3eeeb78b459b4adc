#include "hfuse/support/permute.h"

#include <cstring>

namespace hfuse {

void PermuteBytes(const uint8_t* src, uint8_t* dst, const std::vector<int64_t>& dims,
                  const std::vector<int64_t>& perm, size_t element_bytes) {
  const size_t rank = dims.size();
  // Per output dim d: its size, its stride in the input, and the index of
  // the walk (one array: GCC 12 warns of a false free-nonheap-object on three).
  std::vector<int64_t> state(3 * rank, 0);
  int64_t* const size = state.data();
  int64_t* const in_stride = size + rank;
  int64_t* const index = in_stride + rank;
  int64_t numel = 1;
  for (size_t d = 0; d < rank; ++d) {
    const auto from_dim = static_cast<size_t>(perm[d]);
    int64_t stride = 1;
    for (size_t e = from_dim + 1; e < rank; ++e) stride *= dims[e];
    size[d] = dims[from_dim];
    in_stride[d] = stride;
    numel *= dims[d];
  }
  // Walks the output in order, last dim fastest, carrying the input offset.
  int64_t from = 0;
  for (int64_t i = 0; i < numel; ++i) {
    std::memcpy(dst + static_cast<size_t>(i) * element_bytes,
                src + static_cast<size_t>(from) * element_bytes, element_bytes);
    for (size_t d = rank; d-- > 0;) {
      from += in_stride[d];
      if (++index[d] < size[d]) break;
      from -= in_stride[d] * size[d];
      index[d] = 0;
    }
  }
}

bool IsPermutation(const std::vector<int64_t>& perm, size_t rank) {
  if (perm.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)]) return false;
    seen[static_cast<size_t>(p)] = true;
  }
  return true;
}

}  // namespace hfuse
