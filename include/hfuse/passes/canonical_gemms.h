// Canonical GEMMs: passes that turn the forms in which exporters write a
// matrix product with a constant operand into the gemm_rcr that
// fuse-group-ops groups (AITemplate's pass sees only its own GEMM kinds; an
// opaque ONNX MatMul, Einsum or Conv is just a node to it). Each rewrite
// keeps the semantics: the same products and sums (in the order a GEMM
// kernel takes, as between any two kernels), the weight's values moved
// (transposed or reshaped), never recomputed. The ops they leave behind,
// reshapes, cost nothing: the same data under a new shape. einsum-to-matmul
// canonicalises the Einsums left over into the standard ONNX matrix product
// (MatMul), so that no Einsum reaches the executors or the exported model.
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
// einsum-to-matmul: every two-operand Einsum that einsum-to-gemm leaves
// (attention's `b h s d, b h l d -> b h s l`, xDeepFM's outer product, ...)
// becomes ONNX Transpose / MatMul / Reshape: opaque ops of standard ONNX,
// which --export standard writes, onnxruntime and both executors run, and
// the other passes understand (a MatMul with a constant operand may go on
// to be a GEMM).
//
//   Before:                                     After:
//     s = Einsum(q, k) {"bhsd,bhld->bhsl"}        kt = Transpose(k) {perm = [0, 1, 3, 2]}
//                                                 s  = MatMul(q, kt)
//     y = Einsum(x, E) {"bsi,sk->bki"}            y  = MatMul(Eᵀ, x)
//     # x: [batch, 39, 32], E: [39, 19]           # Eᵀ: [19, 39], a new param
//     o = Einsum(a, b) {"bhd,bmd->bhmd"}          a2 = Reshape(Transpose(a) {[0, 2, 1]},
//     # a: [batch, 26, 16], b: [batch, 12, 16]                 [0, 16, 26, 1])
//                                                 b2 = Reshape(Transpose(b) {[0, 2, 1]},
//                                                              [0, 16, 1, 12])
//                                                 o  = Transpose(MatMul(a2, b2)) {[0, 2, 3, 1]}
//
//   The labels are batch (both operands and the output), contracted (both,
//   not the output) or free (one operand and the output). Each operand is
//   laid out as [G..., free, contracted] (MatMul's first) or [G...,
//   contracted, free] (its second): G is the batch labels, and the free
//   labels of one operand beyond its one matrix dim, over which the other
//   operand broadcasts (a 1 where it lacks a G label after its first; none
//   before). Several labels in one matrix dim, none (a 1: the outer
//   product's K), or an inserted 1 need a Reshape; the product is reshaped
//   and transposed to the output's order where it is not in it. Of all such
//   layouts (either operand first; an operand's free labels merged, or one
//   of them its matrix dim and the rest in G) the pass takes the one with
//   the fewest transposes of activations and of the output (they move
//   data), then the fewest reshapes, so `bsi,sk->bki` reads x as it is. A
//   constant operand's transpose and reshape are done once, into a new
//   param. A Reshape's shape is a constant it keeps: sizes, 0 for a named
//   dim at the same place (copied), -1 for one other; a layout that would
//   need two -1s is not taken.
//
//   Preconditions: the Einsum is an opaque op of the default domain with two
//   float inputs of one dtype and an explicit output; no "...", no label
//   twice in one operand, no label summed within one operand (in one
//   operand and not the output), a label of both operands of one size in
//   both. Otherwise the Einsum stays (the CPU executor runs it).
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
// pointwise-conv-to-gemm: a Conv with kernel 1, stride 1, no padding, one group,
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
// Preconditions, for the three GEMM passes: the node is an opaque op of the default
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
int64_t EinsumToMatMul(Graph& graph);
int64_t LeftMatMulToGemm(Graph& graph);
int64_t PointwiseConvToGemm(Graph& graph);

}  // namespace hfuse
