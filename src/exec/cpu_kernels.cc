// CPU kernels. See cpu_kernels.h.
#include "cpu_kernels.h"

#if HFUSE_HAVE_CBLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <cmath>

namespace hfuse::cpu {

float Sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

void Gemm(const float* a, const float* b, const float* bias, float* y, int64_t rows, int64_t n,
          int64_t k, float alpha, std::optional<EwFunc> activation) {
  std::fill(y, y + rows * n, 0.0f);
#if HFUSE_HAVE_CBLAS
  if (rows > 0 && n > 0 && k > 0) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows),
                static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                static_cast<blasint>(k), b, static_cast<blasint>(k), 0.0f, y,
                static_cast<blasint>(n));
  }
#else
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;  // a plain loop: accumulate in double to stay a good reference
      for (int64_t p = 0; p < k; ++p) acc += static_cast<double>(a[r * k + p]) * b[j * k + p];
      y[r * n + j] = alpha * static_cast<float>(acc);
    }
  }
#endif
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * n;
    for (int64_t j = 0; j < n; ++j) {
      float v = row[j] + (bias ? bias[j] : 0.0f);
      if (activation) v = Apply(*activation, v);
      row[j] = v;
    }
  }
}

void LayerNorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
               int64_t n, float eps, bool sigmoid_mul) {
  // One thread: rows are cheap, and a parallel loop on a busy 2-core machine
  // spent more time in OpenMP's barriers than in the rows.
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * n;
    float* out = y + r * n;
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) sum += in[j];
    const float mean = n > 0 ? sum / static_cast<float>(n) : 0.0f;
    float sq = 0.0f;
    for (int64_t j = 0; j < n; ++j) sq += (in[j] - mean) * (in[j] - mean);
    const float var = n > 0 ? sq / static_cast<float>(n) : 0.0f;
    const float rstd = 1.0f / std::sqrt(var + eps);
    for (int64_t j = 0; j < n; ++j) {
      float v = (in[j] - mean) * rstd * (gamma ? gamma[j] : 1.0f) + (beta ? beta[j] : 0.0f);
      if (sigmoid_mul) v = in[j] * Sigmoid(v);
      out[j] = v;
    }
  }
}

float Apply(EwFunc func, float a) {
  switch (func) {
    case EwFunc::kRelu: return std::max(a, 0.0f);
    case EwFunc::kSigmoid: return Sigmoid(a);
    case EwFunc::kTanh: return std::tanh(a);
    case EwFunc::kGelu: return 0.5f * a * (1.0f + std::erf(a * 0.70710678118654752f));
    case EwFunc::kSilu: return a * Sigmoid(a);
    default: return a;
  }
}

float Apply(EwFunc func, float a, float b) {
  switch (func) {
    case EwFunc::kAdd: return a + b;
    case EwFunc::kSub: return a - b;
    case EwFunc::kMul: return a * b;
    case EwFunc::kDiv: return a / b;
    default: return a;
  }
}

}  // namespace hfuse::cpu
