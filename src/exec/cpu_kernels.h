// CPU kernels on float buffers, shared by the plain ops and the group ops
// (so that a group computes exactly what its members computed).
#pragma once

#include <cstdint>

#include "hfuse/ir/graph.h"

namespace hfuse::cpu {

// y[rows, n] = alpha * a[rows, k] . b[n, k]^T (+ bias[n]), then the activation
// (a unary EwFunc: the GEMM kind's, op_kinds.def).
void Gemm(const float* a, const float* b, const float* bias, float* y, int64_t rows, int64_t n,
          int64_t k, float alpha, std::optional<EwFunc> activation);

// Normalises each of `rows` rows of n values; gamma/beta may be null (1, 0).
// With sigmoid_mul, y = x * sigmoid(layernorm(x)).
void LayerNorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
               int64_t n, float eps, bool sigmoid_mul);

float Apply(EwFunc func, float a);              // unary
float Apply(EwFunc func, float a, float b);     // binary

}  // namespace hfuse::cpu
