// Canonical GEMMs: passes that turn the forms in which exporters write a
// matrix product with a constant operand into the gemm_rcr that
// fuse-group-ops groups (AITemplate's pass sees only its own GEMM kinds; an
// opaque ONNX MatMul, Einsum or Conv is just a node to it). Each rewrite
// keeps the semantics: the same products and sums (in the order a GEMM
// kernel takes, as between any two kernels), the weight's values moved
// (transposed or reshaped), never recomputed. The ops they leave behind,
// reshapes, cost nothing: the same data under a new shape.
//
// einsum-to-gemm: an Einsum of an activation and a constant matrix that is
// a matrix product over the activation's last axis (what torch.tensordot
// exports: DeepCTR's AutoInt Q/K/V and DCN cross kernels).
//
//   Before:                                     After:
//     y = Einsum(x, w) {"ij,jk->ik"}              y = gemm_rcr(x, wᵀ)
//     # x: [512, 16], w: [16, 32]                 # wᵀ: [32, 16], a new param
//
//   Any subscripts "P j, j k -> P k" (or "P j, k j -> P k", which needs no
//   transpose; or the constant first) with distinct letters and no "...":
//   P is the activation's leading axes, kept as they are (a GEMM on a 3-D
//   activation, which flatten-gemm-inputs folds into 2-D later).
//
// left-matmul-to-gemm: a constant-left MatMul W @ x on a column per batch
// row (DCN-matrix and DCN-Mix cross layers: torch-rechub's DCNv2 experts).
//
//   Before:                                     After:
//     y = MatMul(w, x)                            x2 = reshape(x, [512, 429])
//     # w: [32, 429], x: [512, 429, 1]            y2 = gemm_rcr(x2, w)
//     # y: [512, 32, 1]                           y  = reshape(y2, [512, 32, 1])
//
//   y[b, n, 0] = Σ_k w[n, k] x[b, k, 0] is row b of x2 · wᵀ: w is already
//   the [N, K] weight of gemm_rcr. x's leading dim may be a named dim. When
//   x is itself a reshape (an Unsqueeze, Reshape, Squeeze or Flatten, or
//   the IR's reshape) of a tensor of x2's shape, the GEMM reads that tensor.
//
// conv1x1-to-gemm: a Conv with kernel 1, stride 1, no padding, one group,
// on an input whose spatial dims are all 1 (a Conv1d over a length-1
// sequence: a Linear layer in Conv clothing).
//
//   Before:                                     After:
//     y = Conv(x, w, b)                           x2 = reshape(x, [512, 64])
//     # x: [512, 64, 1], w: [128, 64, 1]          y2 = gemm_rcr_bias(x2, w2, b)
//     # y: [512, 128, 1]                          y  = reshape(y2, [512, 128, 1])
//                                                 # w2: w as [128, 64]
//
//   A Conv over a longer input (xDeepFM's CIN: a kernel-1 Conv1d over the
//   embedding dim) is a GEMM only with its input transposed, and the IR has
//   no transpose: it stays as it is.
//
// Preconditions, for all three: the node is an opaque op of the default
// domain with one output; the constant is a float param with values, of the
// activation's dtype, 2-D (Conv: [O, C, 1, ...]); K (and the spatial dims) is
// static. Otherwise the op stays as it is (correct, not canonical). The op
// keeps its id and name and becomes the GEMM; a weight no other op reads is
// dropped.
#pragma once

#include <cstdint>

#include "hfuse/ir/graph.h"

namespace hfuse {

// Each returns the number of ops rewritten (0: the graph is unchanged).
int64_t EinsumToGemm(Graph& graph);
int64_t LeftMatMulToGemm(Graph& graph);
int64_t Conv1x1ToGemm(Graph& graph);

}  // namespace hfuse
