// fold-batchnorm: an inference BatchNormalization after a GEMM becomes the
// GEMM's weight and bias, so that the activation after it can be the GEMM's
// epilogue and the GEMM can join a group with its siblings.
//
// Before:                                   After:
//   y = gemm_rcr_bias(x, w, b)   # [M, N]     z = gemm_rcr_bias(x, w', b')
//   z = BatchNormalization(y, scale, beta, mean, var)   (opaque, ONNX)
//
// with s = scale / sqrt(var + epsilon), w'[n, :] = w[n, :] · s[n] and
// b'[n] = (b[n] - mean[n]) · s[n] + beta[n] (b = 0 for a gemm_rcr). This is
// what every MLP layer of torch-rechub (Linear -> BatchNorm1d -> activation)
// exports to; fuse-mm-elementwise, which runs next, then absorbs the ReLU.
//
// Preconditions: the BatchNormalization is an opaque op of the default
// domain with only its first output in use (inference form), reading the
// GEMM's 2-D output, which has no other reader and is not a graph output;
// the GEMM's weight and bias and the four statistics are float32 params
// with values, of length N. Otherwise both ops stay as they are (correct,
// unfused). The GEMM keeps its id and name and produces the BatchNorm's
// output; w' and b' are new params (the old weight may be shared).
#pragma once

#include <cstdint>

#include "hfuse/ir/graph.h"

namespace hfuse {

// Returns the number of BatchNormalizations folded (0: the graph is unchanged).
int64_t FoldBatchNorm(Graph& graph);

}  // namespace hfuse
