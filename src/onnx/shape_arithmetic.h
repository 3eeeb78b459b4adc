// Shape arithmetic: the values of the small integer tensors that exporters
// compute from shapes (Shape -> Gather -> Unsqueeze -> Concat -> Reshape,
// Expand's Where(Equal(s, -1), 1, s), the `chunk` bounds Div(Add(d, 1), 2),
// an `if x.dim() == 3` condition Equal(Size(Shape(x)), 3)), element by
// element as dims: static numbers, or named dims (Dim::Dynamic) where a
// shape holds one.
//
// One evaluator, two users: the importer (import_folds.cc) folds a node
// whose value comes out all static into a constant, and keeps the value of
// one that holds a named dim to give the shapes of the Reshape, Expand,
// ConstantOfShape and Slice that read it (onnx_shapes.h); the model reader
// (onnx_read.h) works out an If's condition from the shapes ONNX inferred.
// Each says, through SymInputs, what it knows of a node's inputs.
//
// A named dim is taken to be at least 1 (Equal(d, 0) and Less(d, 1) are
// false), as everywhere in hfuse; a named dim equals itself, and nothing
// else is assumed of it (Equal(d, 8), or of two different named dims, has
// no value here).
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse::onnx_import {

// A 0-D (scalar) or 1-D integer or bool tensor, element by element.
struct SymValue {
  std::vector<Dim> v;
  bool scalar = false;
};

struct SymInputs {
  // The value of a small integer tensor the node reads, when known.
  std::function<std::optional<SymValue>(const std::string&)> value;
  // The shape of a tensor that Shape or Size reads, when known (static or
  // named dims). Without one, Shape of a known value is that value's shape.
  std::function<std::optional<Shape>(const std::string&)> shape;
};

// The value of a constant: a scalar or 1-D int64/int32/bool tensor of at
// most 64 elements, or nothing.
std::optional<SymValue> ConstantSym(const onnx::TensorProto& constant);

// The value of `node` (default domain, one output) from what `in` knows of
// its inputs, or nothing: Shape, Size, Reshape (of a value to 1-D),
// Identity, Cast (to an integer type or bool), Gather (axis 0), Unsqueeze,
// Squeeze, Concat, Slice, ConstantOfShape, Where, Add, Sub, Mul, Div, the
// comparisons Equal, Less, Greater, LessOrEqual, GreaterOrEqual and the
// logic ops Not, And, Or, Xor.
std::optional<SymValue> EvalShapeArithmetic(const onnx::NodeProto& node, const SymInputs& in);

// Whether the value of `op_type` is a bool tensor (a comparison or logic op).
bool IsLogicOp(const std::string& op_type);

}  // namespace hfuse::onnx_import
