// The ONNX importer's walk over a checked, shape-inferred model (what
// onnx_read.h gives), which builds the IR graph. Private to src/onnx; its
// members live in two files along the importer's seams:
//
//   onnx_import.cc   the walk: values and tensors, each node to IR ops
//                    (Gemm, MatMul, LayerNormalization, Split, Concat,
//                    Reshape, elementwise, ai.hfuse groups) or to an opaque
//                    op, whose output shapes come from ONNX's inference or
//                    the importer's own rules (onnx_shapes.h);
//   import_folds.cc  what is folded before and during the walk: Constant and
//                    Identity nodes, a Transpose or Gather of a constant, and
//                    shape arithmetic (shape_arithmetic.h) into constants.
#pragma once

#include <onnx/onnx_pb.h>

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/onnx/onnx_import.h"
#include "onnx_util.h"
#include "shape_arithmetic.h"

namespace hfuse::onnx_import {

class Importer {
 public:
  Importer(onnx::ModelProto& model, std::string source, const OnnxImportOptions& options)
      : model_(model), source_(std::move(source)), options_(options) {}

  OnnxModel Run();
  // A named dim of one value: an If was folded for it (OnnxImportOptions::dims).
  void PinDim(const std::string& name, int64_t value) { pinned_[name] = value; }

 private:
  template <typename... Args>
  [[noreturn]] void Error(fmt::format_string<Args...> format, Args&&... args) {
    onnx_util::Fail(source_, format, std::forward<Args>(args)...);
  }

  // ---- values (onnx_import.cc) --------------------------------------------
  void Record(const onnx::ValueInfoProto& vi) { types_[vi.name()] = &vi.type(); }
  // The name a folded Identity's output stands for.
  const std::string& Resolve(const std::string& name) const;
  // The constant of that name (initializer, Constant, folded), or null.
  const onnx::TensorProto* Constant(const std::string& name) const;
  DType ValueType(const std::string& name, std::string_view what);
  Dim NamedDim(const std::string& name);
  std::optional<Shape> TryShapeOf(const std::string& name);
  Shape ShapeOf(const std::string& name, std::string_view what);
  TensorId Value(const std::string& onnx_name, std::string_view what);
  TensorId NewValue(const std::string& name, Shape shape, DType dtype);
  TensorId NewInternal(const std::string& base, Shape shape, DType dtype);
  TensorId NewParam(const std::string& base, Shape shape, DType dtype, std::vector<uint8_t> data);
  TensorId ScalarParam(const std::string& base, DType dtype, double value);
  OpId AddOp(Op op);
  std::string NodeName(const onnx::NodeProto& node);
  std::shared_ptr<OnnxNode> Keep(const onnx::NodeProto& node, OpType imported_as);
  static std::optional<double> ScalarOf(const onnx::TensorProto& t);
  int32_t KeepConstant(OnnxNode& kept, const onnx::NodeProto& node, int slot);
  const Tensor& T(TensorId id) const { return g_.tensor(id); }
  bool HasElemType(const std::string& name) const;
  // A dim of the value's type that ONNX's shape inference made up, or nothing.
  std::optional<std::string> MadeUpDim(const std::string& name) const;
  bool OutputUsed(const onnx::NodeProto& node, int slot) const;
  void MarkLiveNodes();

  // ---- folds (import_folds.cc) ---------------------------------------------
  void FoldConstantsAndIdentities();
  std::optional<onnx::TensorProto> GatheredConstant(const onnx::NodeProto& node) const;
  std::optional<onnx::TensorProto> TransposedConstant(const onnx::NodeProto& node) const;
  onnx::TensorProto ConstantValue(const onnx::NodeProto& node);
  // The value of a small integer tensor: shape arithmetic's or a constant's.
  std::optional<SymValue> Sym(const std::string& name) const;
  // Folds `node` when it computes shape arithmetic whose value is all
  // static (true: the node is gone, its output a constant); records the
  // value when it holds a named dim.
  bool FoldShapeArithmetic(const onnx::NodeProto& node);

  // ---- nodes (onnx_import.cc) ----------------------------------------------
  void ImportNode(const onnx::NodeProto& node);
  bool FloatInputs(const onnx::NodeProto& node, size_t from, size_t to);
  TensorId Transposed(const std::string& onnx_name);
  bool IsConstantMatrix(const std::string& name) const;
  bool ImportGemm(const onnx::NodeProto& node);
  bool ImportMatMul(const onnx::NodeProto& node);
  bool ImportLayerNorm(const onnx::NodeProto& node);
  bool ImportSplit(const onnx::NodeProto& node);
  bool ImportConcat(const onnx::NodeProto& node);
  bool ImportReshape(const onnx::NodeProto& node);
  bool ImportElementwise(const onnx::NodeProto& node, EwFunc func);
  bool ImportGroup(const onnx::NodeProto& node);
  void ImportOpaque(const onnx::NodeProto& node);

  onnx::ModelProto& model_;
  std::string source_;
  OnnxImportOptions options_;
  std::map<std::string, int64_t> pinned_;  // PinDim
  Graph g_;
  std::map<std::string, int64_t> opsets_;
  std::unordered_map<std::string, const onnx::TypeProto*> types_;
  std::unordered_map<std::string, const onnx::TensorProto*> constants_;
  std::deque<onnx::TensorProto> owned_;                 // folded nodes' values
  std::unordered_map<std::string, std::string> alias_;  // folded Identity outputs
  std::unordered_map<std::string, TensorId> values_;    // ONNX value -> IR tensor
  std::map<std::string, TensorId> transposed_;          // constant -> its transpose
  std::set<std::string> used_;                          // read by a live node or an output
  std::vector<bool> live_, folded_;
  std::unordered_map<std::string, SymValue> sym_;  // shape arithmetic's values
  std::set<std::string> graph_outputs_;
  std::set<std::string> input_dims_;  // the dim names the graph's inputs declare
  onnx_util::NameSet names_, op_names_;
  int64_t unnamed_ = 0;
};

}  // namespace hfuse::onnx_import
