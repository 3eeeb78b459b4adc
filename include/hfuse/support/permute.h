// Permuting the dims of a row-major array of fixed-width elements, byte by
// byte (ONNX Transpose): the CPU executor's Transpose, the importer folding
// a Transpose of a constant, and the passes and exporter that turn a weight
// [K, N] into [N, K] all permute through this one function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hfuse {

// dst[i] = src[j] where output dim d is input dim perm[d]. `perm` must be a
// permutation of 0..dims.size()-1 (the caller checks; a wrong perm reads
// out of bounds), `src` hold numel(dims) elements of `element_bytes` and
// `dst` room for as many.
void PermuteBytes(const uint8_t* src, uint8_t* dst, const std::vector<int64_t>& dims,
                  const std::vector<int64_t>& perm, size_t element_bytes);

// Whether `perm` is a permutation of 0..rank-1: each index once, none out of range.
bool IsPermutation(const std::vector<int64_t>& perm, size_t rank);

}  // namespace hfuse
