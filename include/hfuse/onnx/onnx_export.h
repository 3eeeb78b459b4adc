// Writing a graph (fused or not) as an ONNX model.
//
// An op that is still what it was imported as is written back as its ONNX
// node, attributes and constant inputs as they were read, its inputs renamed
// where a pass rewired them; so a model with nothing to fuse comes out with
// the same nodes and initializers. Other ops are written as standard ONNX:
// gemm_rcr* as Gemm (transB=1, 2-D A) or MatMul against a transposed weight
// (A of higher rank), with Add and Relu/Sigmoid after it; layernorm as
// LayerNormalization (opset 17); layernorm_sigmoid_mul as LayerNormalization,
// Sigmoid, Mul; gelu in its erf form; and so on. Params with values become
// initializers, params without (a graph from graph JSON) graph inputs. Every
// tensor's shape goes into value_info, named dims as dim_param.
//
// Group ops, in the default mode, become nodes of the custom domain
// "ai.hfuse", version 1 (the model imports it), which hfuse reads back:
//
//   GroupGemmRcr, GroupGemmRcrBias, GroupGemmRcrBiasRelu, GroupGemmRcrBiasSigmoid
//     inputs      each member's A, B (and bias), member after member
//     outputs     one per member
//     group_size  int: the number of members
//     member i:   Y_i = act(A_i · B_iᵀ + bias_i), B_i of shape [N_i, K_i],
//                 act the identity, relu or sigmoid (Gemm with transB=1)
//   GroupGemmRcrMixed
//     as above, and
//     member_ops  strings: each member's GEMM op type (gemm_rcr,
//                 gemm_rcr_bias, gemm_rcr_bias_relu, gemm_rcr_bias_sigmoid),
//                 which fixes its inputs (bias or not) and its act
//   GroupLayerNorm, GroupLayerNormSigmoidMul
//     inputs      the members' X, then (optional as a block) their gammas,
//                 then (optional as a block) their betas
//     outputs     one per member
//     normalized_ranks   ints: per member, how many trailing dims it normalises
//     normalized_shapes  ints: those dims, member after member
//     epsilon     float
//     member i:   Y_i = LayerNormalization(X_i, gamma_i, beta_i,
//                 axis = -normalized_ranks[i]); the SigmoidMul form gives
//                 X_i · sigmoid(Y_i)
//   GroupGather
//     inputs      each member's table and ids, member after member
//     outputs     one per member
//     member_names  strings: each member's op name (the Gather it was)
//     member i:   Y_i = Gather(table_i, ids_i, axis = 0)
//
// With mode kStandard, no custom domain is used (a gather group is written
// as its Gathers, each under its member name); a GEMM group whose members
// all have the same shapes and dtype (A [M, K], B [N, K], bias [N]) becomes
// Unsqueeze + Concat of the A's -> one batched MatMul against the stacked,
// transposed weights [G, K, N] -> Add of the stacked biases [G, 1, N] ->
// activation -> Split -> Squeeze, which computes exactly what the members
// did; every other group (a mixed one too) is written member by member,
// unfused.
#pragma once

#include <cstdint>
#include <string>

#include "hfuse/ir/graph.h"

namespace hfuse {

enum class OnnxExportMode { kHfuse, kStandard };

struct OnnxExportOptions {
  OnnxExportMode mode = OnnxExportMode::kHfuse;
};

struct OnnxExportResult {
  std::string bytes;           // the serialized ModelProto
  int64_t groups_custom = 0;   // written as ai.hfuse nodes
  int64_t groups_batched = 0;  // written as batched standard ONNX
  int64_t groups_unfused = 0;  // written member by member
};

// `shell` is OnnxModel::shell of the model the graph came from, or empty
// (then: IR version 8, opset 17). Ops go out in a stable topological order
// (by id), so unchanged parts keep the model's order. Throws InputError when
// an op cannot be written at the shell's opset (LayerNormalization needs 17).
OnnxExportResult ExportOnnx(const Graph& graph, const std::string& shell,
                            const OnnxExportOptions& options = {});

}  // namespace hfuse
