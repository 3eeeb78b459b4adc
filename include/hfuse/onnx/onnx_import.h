// Reading ONNX models into the hfuse IR.
//
// The model is first checked by ONNX itself (ONNX 1.12's checker, then its
// shape inference, strict), so an invalid model is rejected with ONNX's own
// message; a model of opset 18 to 28 or IR version 9 to 14 is checked on its
// opset-17 copy (src/onnx/opset_compat.h), and an If with a constant
// condition is replaced by its branch first, as is one whose condition the
// inferred shapes decide (`if x.dim() == 3:`), after which the model is
// inferred again (src/onnx/onnx_read.h). Then each node becomes IR ops:
//
//   Gemm(A, B, C)     transB=1, or transB=0 with a constant B (transposed
//                     here) -> gemm_rcr_bias(A, B', C) [alpha] when C is a
//                     constant [N] and beta = 1; else gemm_rcr(A, B'), then
//                     add(Y, C) (beta != 1: add(Y, mul(C, beta))), unfused
//   MatMul(A, W)      W a constant 2-D weight -> gemm_rcr(A, Wᵀ); the Add
//                     of a bias and the activation after it are left to
//                     fuse-mm-elementwise
//   LayerNormalization  -> layernorm (axis -> normalized_shape)
//   Split, Concat, Reshape (constant shape), Relu, Sigmoid, Tanh,
//   Add, Sub, Mul, Div  -> split, concatenate, reshape, elementwise
//   Constant, Identity  folded away (an Identity that is a graph output stays)
//   ai.hfuse group ops  the group ops (written by onnx_export.h, read back)
//   anything else     an opaque op that keeps the node (OnnxNode)
//
// and two patterns are recognised on the result: GELU's erf form
// x·0.5·(1 + erf(x/√2)) -> elementwise gelu, and x·sigmoid(layernorm(x)) ->
// layernorm_sigmoid_mul. Float initializers become params that keep their
// values (Tensor::data); int64 constants (shapes, axes, split sizes) become
// attributes, or stay with the opaque node that reads them. Symbolic dims
// (dim_param) become named dynamic dims. Op names are the node names (a
// name is made up for an unnamed node).
//
// Integer and bool tensors (int64, int32, bool: ids, shapes, masks) are IR
// tensors that only opaque ops read and write. Shape arithmetic (Shape ->
// Gather -> Unsqueeze -> Concat -> Reshape and the like) is evaluated dim by
// dim and folded into constants where all static; where ONNX's shape
// inference stops or makes up a dim, hfuse infers the shape itself, by the
// rule onnx_ops.def's Shape column names for the operator
// (src/onnx/onnx_shapes.h); a made-up dim no rule works out is an error.
//
// Problems with the input throw InputError: a file that does not parse,
// an opset outside 11..28 or an IR version above 14, an operator version
// hfuse does not read (all such nodes named), the checker's or shape
// inference's complaints, an If on a computed condition,
// a tensor of a type hfuse lacks (double, string, ...), external data that
// cannot be read, a dim of unknown size.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "hfuse/ir/graph.h"

namespace hfuse {

inline constexpr int64_t kMinOnnxOpset = 11;
// Opsets above 17 (ONNX 1.12's newest, which hfuse links) are read through
// an opset-17 copy (src/onnx/opset_compat.h); 28 and IR 14 are ONNX 1.23's.
inline constexpr int64_t kMaxOnnxOpset = 28;
inline constexpr int64_t kMaxOnnxIrVersion = 14;

struct OnnxImportOptions {
  // ONNX gives symbolic dims no bounds; each becomes a dim of this range
  // (the max is what the canonical order sizes tensors by), which `hfuse
  // run` and `verify` bind to dim_run unless --dim says otherwise: a small
  // batch, so that a run without --dim is quick and small. 2^31 - 1 covers
  // any batch; the sizes at the bound values are what is counted and held
  // to the memory budget before a run allocates.
  int64_t dim_min = 1;
  int64_t dim_max = INT32_MAX;
  int64_t dim_run = 64;
  // Dims the caller binds (name -> value: `--dim`, SessionOptions::dims).
  // An If whose condition the shapes decide only at these values (`if
  // x.shape[0] == 1:`, where ONNX's inference leaves the batch a name) is
  // replaced by the branch they take, as TensorRT evaluates shape tensors
  // once a profile's dims are known; each dim that was read for it becomes
  // a dim of that one value ([v, v]), so the specialised graph is never
  // run at another. Without them such an If is an error naming its node.
  std::map<std::string, int64_t> dims;
};

struct OnnxModel {
  Graph graph;
  // The model around the graph (ir_version, opset imports, metadata, local
  // functions, the graph's name and doc string), a serialized ModelProto with
  // no nodes, initializers, inputs, outputs or value_info: what the exporter
  // wraps the written graph in.
  std::string shell;
};

// `source` names the model in error messages; `model_dir` is where its
// external data files are looked for.
OnnxModel ImportOnnx(std::string_view bytes, const std::string& source,
                     const std::string& model_dir, const OnnxImportOptions& options = {});
OnnxModel ReadOnnxFile(const std::string& path, const OnnxImportOptions& options = {});

}  // namespace hfuse
