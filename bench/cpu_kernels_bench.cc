// The CPU executor's kernels against naive loops, to show that GEMMs really
// go through OpenBLAS (and what the LayerNorm kernel costs).
//
//   ./build/bench/cpu_kernels_bench
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu_kernels.h"

namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

void NaiveGemm(const float* a, const float* b, const float* bias, float* y, int64_t m, int64_t n,
               int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += a[i * k + p] * b[j * k + p];
      y[i * n + j] = std::max(acc + bias[j], 0.0f);
    }
  }
}

void NaiveLayerNorm(const float* x, const float* g, const float* b, float* y, int64_t rows,
                    int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * n;
    float mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += in[j];
    mean /= static_cast<float>(n);
    for (int64_t j = 0; j < n; ++j) var += (in[j] - mean) * (in[j] - mean);
    var /= static_cast<float>(n);
    for (int64_t j = 0; j < n; ++j) y[r * n + j] = (in[j] - mean) / std::sqrt(var + 1e-5f) * g[j] + b[j];
  }
}

template <bool kNaive>
void BM_Gemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto a = Random(static_cast<size_t>(m * k), 1), b = Random(static_cast<size_t>(n * k), 2),
             bias = Random(static_cast<size_t>(n), 3);
  std::vector<float> y(static_cast<size_t>(m * n));
  for (auto _ : state) {
    if (kNaive) {
      NaiveGemm(a.data(), b.data(), bias.data(), y.data(), m, n, k);
    } else {
      hfuse::cpu::Gemm(a.data(), b.data(), bias.data(), y.data(), m, n, k, 1.0f,
                       hfuse::EwFunc::kRelu);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      static_cast<double>(2 * m * n * k), benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
}

template <bool kNaive>
void BM_LayerNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), n = state.range(1);
  const auto x = Random(static_cast<size_t>(rows * n), 1), g = Random(static_cast<size_t>(n), 2),
             b = Random(static_cast<size_t>(n), 3);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    if (kNaive) {
      NaiveLayerNorm(x.data(), g.data(), b.data(), y.data(), rows, n);
    } else {
      hfuse::cpu::LayerNorm(x.data(), g.data(), b.data(), y.data(), rows, n, 1e-5f, false);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(2 * rows * n * 4), benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
}

BENCHMARK(BM_Gemm<false>)->Name("Gemm/openblas")->Args({256, 256, 256})->Args({512, 512, 512})
    ->Args({2048, 128, 64})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Gemm<true>)->Name("Gemm/naive")->Args({256, 256, 256})->Args({512, 512, 512})
    ->Args({2048, 128, 64})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LayerNorm<false>)->Name("LayerNorm/executor")->Args({2048, 256})->Args({256, 4096})
    ->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LayerNorm<true>)->Name("LayerNorm/naive")->Args({2048, 256})->Args({256, 4096})
    ->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
