// What the self-checking CUDA micro-benchmarks share (grouped_sgemm_bench.cu,
// fused_ffn_bench.cu): checks that exit 2 on a CUDA or cuBLAS error, the
// random data (a fixed LCG: the same inputs on every run, never all zeros)
// and its upload.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(x)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)
#define CHECK_CUBLAS(x)                                                                        \
  do {                                                                                         \
    cublasStatus_t s_ = (x);                                                                   \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      std::fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, int(s_));  \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

namespace hfuse::bench {

// The next value of the benchmark's one random stream, in [-1, 1].
inline float Uniform() {
  static uint64_t state = 0x9E3779B97F4A7C15ull;
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>((state >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

// n values of Uniform() * scale.
inline std::vector<float> Random(size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = Uniform() * scale;
  return v;
}

// A device copy of v (at least 4 floats allocated, so an empty v has one).
inline float* Upload(const std::vector<float>& v) {
  float* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, std::max<size_t>(v.size(), 4) * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

}  // namespace hfuse::bench
