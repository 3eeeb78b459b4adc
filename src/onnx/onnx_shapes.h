// The importer's own shape rules for opaque ONNX operators, one per value
// of the Shape column of ir/onnx_ops.def, and the algebra of named dims
// they share with the importer (derived dims: products of named dims and a
// static factor).
//
// ONNX 1.12's shape inference runs first; where it stops (a Squeeze without
// axes of a named dim, an Einsum, a Slice whose bounds come from shape
// arithmetic it does not propagate) or makes a dim up ('unk__N'), the
// importer asks InferOutput. A rule computes the output from the IR shapes
// of the node's inputs (and, for the rules marked from_values, the values
// of its shape operands: shape_arithmetic.h), or says nothing; an operator
// whose Shape column is Onnx has no rule of its own. The rule for an
// operator is found from its .def line (the X-macro, as the CPU executor's
// kernels are), so an operator added there names its rule or fails to
// compile.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hfuse/ir/graph.h"
#include "shape_arithmetic.h"

namespace hfuse::onnx_import {

// What a rule reads of the node being imported.
struct ShapeRuleInput {
  const onnx::NodeProto& node;
  const OnnxNode& kept;  // Keep()'s record: input slots, kept constants, decoded attributes
  // The IR tensor at each of the node's input slots, or null (an empty
  // slot, or a constant the node keeps to itself).
  std::vector<const Tensor*> inputs;
  // The value of the node's input `slot` when shape arithmetic knows it.
  std::function<std::optional<SymValue>(size_t slot)> value;
  Graph& graph;  // for the derived dims a rule makes
};

struct InferredOutput {
  DType dtype;
  Shape shape;
  // Worked out from the values of shape operands (Reshape, Expand,
  // ConstantOfShape): exact, and preferred over ONNX's inference, which
  // names a derived dim with a fresh 'unk__' dim or leaves it unknown. The
  // other rules are used only where ONNX's inference is silent or made a
  // dim up.
  bool from_values = false;
};

// The output of a single-output node (or Dropout's first) by its operator's
// rule, or nothing.
std::optional<InferredOutput> InferOutput(const ShapeRuleInput& in);

// ---- named dims -----------------------------------------------------------

// The named dims a dim is a product of (itself when it is no derived dim),
// appended to `out`; `factor` is multiplied by the static factors met.
void DimFactors(const Graph& g, int32_t dim, std::vector<int32_t>& out, int64_t& factor);
// The derived dim of `factors` times `factor` (named "batch*seq" or
// "batch*39", as flatten-gemm-inputs names them), made when the graph lacks it.
Dim ProductDim(Graph& g, std::vector<int32_t> factors, int64_t factor = 1);
// A dim name that spells a product of declared dims and static sizes, as
// hfuse writes a derived dim ("batch_size*2"): that derived dim. Nothing
// for any other name.
std::optional<Dim> ProductNamed(Graph& g, const std::string& name);
// The shape a Reshape to `target` gives `in` (0 copies the input's dim
// unless allow_zero; -1 is what is left over), or nothing.
std::optional<Shape> ReshapeTo(Graph& g, const Shape& in, const std::vector<Dim>& target,
                               bool allow_zero);

}  // namespace hfuse::onnx_import
