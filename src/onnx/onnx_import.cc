// The ONNX importer's walk, which builds the IR (importer.h), and the
// entry points of onnx_import.h: the model is read and checked first
// (onnx_read.h), constants and shape arithmetic folded (import_folds.cc),
// every live node imported as IR ops or as an opaque op whose output
// shapes ONNX's inference or the importer's own rules give (onnx_shapes.h),
// then the import-time patterns run (import_patterns.h).
#include "hfuse/onnx/onnx_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "hfuse/ir/verifier.h"
#include "hfuse/support/checked.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"
#include "hfuse/support/half.h"
#include "hfuse/support/permute.h"
#include "import_patterns.h"
#include "importer.h"
#include "onnx_read.h"
#include "onnx_shapes.h"

namespace hfuse {
namespace onnx_import {

using onnx::AttributeProto;
using onnx::ModelProto;
using onnx::NodeProto;
using onnx::TensorProto;
using onnx_util::ElemTypeName;
using onnx_util::Fail;
using onnx_util::FloatAttr;
using onnx_util::IntAttr;
using onnx_util::IntsAttr;
using onnx_util::IsDefaultDomain;

OnnxModel Importer::Run() {
  const onnx::GraphProto& graph = model_.graph();
  g_.set_name(graph.name());
  for (const auto& o : model_.opset_import()) {
    opsets_[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  }
  if (graph.sparse_initializer_size() > 0) {
    Fail(source_, "sparse initializers ('{}') are not supported",
         graph.sparse_initializer(0).values().name());
  }
  for (const auto& vi : graph.input()) Record(vi);
  for (const auto& vi : graph.output()) Record(vi);
  for (const auto& vi : graph.value_info()) Record(vi);
  for (const TensorProto& t : graph.initializer()) {
    constants_[t.name()] = &t;
    names_.Take(t.name());
  }
  for (const NodeProto& node : graph.node()) {
    for (const std::string& out : node.output()) names_.Take(out);
    if (!node.name().empty()) op_names_.Take(node.name());
  }
  for (const auto& vi : graph.input()) {
    names_.Take(vi.name());
    if (vi.type().has_tensor_type()) {
      for (const auto& d : vi.type().tensor_type().shape().dim()) {
        if (d.has_dim_param()) input_dims_.insert(d.dim_param());
      }
    }
    if (constants_.count(vi.name())) continue;  // an initializer: a param with a default
    Tensor t;
    t.name = vi.name();
    t.role = Role::kInput;
    t.dtype = ValueType(vi.name(), "graph input");
    t.shape = ShapeOf(vi.name(), "graph input");
    const TensorId id = g_.AddTensor(std::move(t));
    values_[vi.name()] = id;
  }
  FoldConstantsAndIdentities();
  MarkLiveNodes();
  // A node that cannot be imported is named, and the walk goes on past it
  // (skipping what reads its outputs), so that every such node is listed
  // in one error.
  std::vector<std::string> failed;
  std::set<std::string> failed_values;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (!live_[static_cast<size_t>(i)] || folded_[static_cast<size_t>(i)]) continue;
    const NodeProto& node = graph.node(i);
    const bool reads_failed = std::any_of(node.input().begin(), node.input().end(),
                                          [&](const std::string& in) {
                                            return failed_values.count(Resolve(in)) != 0;
                                          });
    if (!reads_failed) {
      try {
        ImportNode(node);
        continue;
      } catch (const InputError& e) {
        std::string what = e.what();
        if (what.starts_with(source_ + ": ")) what.erase(0, source_.size() + 2);
        failed.push_back(std::move(what));
      }
    }
    for (const std::string& out : node.output()) failed_values.insert(out);
  }
  if (failed.size() == 1) Error("{}", failed[0]);
  if (failed.size() > 1) {
    Error("{} nodes cannot be imported: {}", failed.size(), fmt::join(failed, "; "));
  }
  std::vector<TensorId> outputs;
  for (const auto& vi : graph.output()) outputs.push_back(Value(vi.name(), "graph output"));
  g_.set_outputs(std::move(outputs));
  import_patterns::FoldErfGelu(g_);
  import_patterns::FuseLayerNormSigmoidMul(g_);
  try {
    VerifyGraph(g_);
  } catch (const InputError& e) {
    Fail(source_, "{}", e.what());
  }

  OnnxModel result;
  ModelProto shell = model_;
  onnx::GraphProto* sg = shell.mutable_graph();
  sg->clear_node();
  sg->clear_initializer();
  sg->clear_input();
  sg->clear_output();
  sg->clear_value_info();
  result.shell = shell.SerializeAsString();
  result.graph = std::move(g_);
  return result;
}

const std::string& Importer::Resolve(const std::string& name) const {
  const std::string* at = &name;
  for (auto it = alias_.find(*at); it != alias_.end(); it = alias_.find(*at)) at = &it->second;
  return *at;
}

const TensorProto* Importer::Constant(const std::string& name) const {
  auto it = constants_.find(Resolve(name));
  return it == constants_.end() ? nullptr : it->second;
}

// The element type ONNX gives a value, which must be one of hfuse's.
DType Importer::ValueType(const std::string& name, std::string_view what) {
  auto it = types_.find(name);
  if (it == types_.end() || !it->second->has_tensor_type()) {
    Error("{} '{}' is not a tensor of known type", what, name);
  }
  const int32_t elem = it->second->tensor_type().elem_type();
  auto dtype = onnx_util::AnyDTypeOf(elem);
  if (!dtype) {
    Error(
        "{} '{}' is {}: hfuse supports float32, float16, bfloat16, int64, int32 and bool "
        "tensors",
        what, name, ElemTypeName(elem));
  }
  return *dtype;
}

Dim Importer::NamedDim(const std::string& name) {
  if (auto d = g_.FindDim(name)) return Dim::Dynamic(*d);
  if (auto d = ProductNamed(g_, name)) return *d;
  if (auto pin = pinned_.find(name); pin != pinned_.end()) {
    return Dim::Dynamic(g_.AddDim({name, pin->second, pin->second, {}, pin->second}));
  }
  return Dim::Dynamic(
      g_.AddDim({name, options_.dim_min, options_.dim_max, {}, options_.dim_run}));
}

std::optional<Shape> Importer::TryShapeOf(const std::string& name) {
  auto it = types_.find(name);
  if (it == types_.end() || !it->second->has_tensor_type() ||
      !it->second->tensor_type().has_shape()) {
    return std::nullopt;
  }
  Shape shape;
  for (const auto& d : it->second->tensor_type().shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) {
      shape.push_back(Dim::Static(d.dim_value()));
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      shape.push_back(NamedDim(d.dim_param()));
    } else {
      return std::nullopt;
    }
  }
  return shape;
}

Shape Importer::ShapeOf(const std::string& name, std::string_view what) {
  if (auto s = TryShapeOf(name)) return *s;
  Error(
      "{} '{}' has a shape ONNX's shape inference cannot tell (a dim of unknown size): hfuse "
      "needs every dim static or named",
      what, name);
}

// The IR tensor of an ONNX value; a float constant becomes a param that
// keeps its values.
TensorId Importer::Value(const std::string& onnx_name, std::string_view what) {
  const std::string& name = Resolve(onnx_name);
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  auto c = constants_.find(name);
  if (c == constants_.end()) Error("{} '{}' is not produced by any node", what, name);
  const TensorProto& t = *c->second;
  auto dtype = onnx_util::DTypeOf(t.data_type());
  if (!dtype) {
    Error(
        "constant '{}' is {}, used as a {} tensor: hfuse supports float32, float16 and "
        "bfloat16 tensors (other types only as constants, such as shapes and axes)",
        name, ElemTypeName(t.data_type()), what);
  }
  auto data = onnx_util::TensorData(t);
  if (!data) {
    Error("constant '{}' has data of the wrong size for its shape", name);
  }
  Tensor tensor;
  tensor.name = name;
  tensor.role = Role::kParam;
  tensor.dtype = *dtype;
  for (int64_t d : t.dims()) tensor.shape.push_back(Dim::Static(d));
  tensor.data = std::make_shared<const std::vector<uint8_t>>(std::move(*data));
  const TensorId id = g_.AddTensor(std::move(tensor));
  HFUSE_CHECK(id != kNone);
  values_[name] = id;
  return id;
}

TensorId Importer::NewValue(const std::string& name, Shape shape, DType dtype) {
  Tensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.dtype = dtype;
  const TensorId id = g_.AddTensor(std::move(t));
  if (id == kNone) Error("value '{}' is produced twice", name);
  values_[name] = id;
  return id;
}

// A tensor hfuse adds (not in the model), under a name the model does not use.
TensorId Importer::NewInternal(const std::string& base, Shape shape, DType dtype) {
  return NewValue(names_.Fresh(base), std::move(shape), dtype);
}

TensorId Importer::NewParam(const std::string& base, Shape shape, DType dtype,
                            std::vector<uint8_t> data) {
  const TensorId id = NewInternal(base, std::move(shape), dtype);
  Tensor& t = g_.mutable_tensor(id);
  t.role = Role::kParam;
  t.data = std::make_shared<const std::vector<uint8_t>>(std::move(data));
  return id;
}

TensorId Importer::ScalarParam(const std::string& base, DType dtype, double value) {
  const auto f = static_cast<float>(value);
  std::vector<uint8_t> bytes(static_cast<size_t>(DTypeBytes(dtype)));
  if (dtype == DType::kFloat32) {
    std::memcpy(bytes.data(), &f, 4);
  } else {
    const uint16_t h = dtype == DType::kFloat16 ? FloatToHalf(f) : FloatToBFloat16(f);
    std::memcpy(bytes.data(), &h, 2);
  }
  return NewParam(base, {}, dtype, std::move(bytes));
}

OpId Importer::AddOp(Op op) {
  const std::string base = op.name;
  for (int n = 1;; ++n) {
    const OpId id = g_.AddOp(op);
    if (id != kNone) return id;
    op.name = fmt::format("{}_{}", base, n);
  }
}

std::string Importer::NodeName(const NodeProto& node) {
  if (!node.name().empty()) return node.name();
  return op_names_.Fresh(fmt::format("{}_{}", node.op_type(), unnamed_++));
}

// The node as it was read, so the exporter can write it back.
std::shared_ptr<OnnxNode> Importer::Keep(const NodeProto& node, OpType imported_as) {
  auto kept = std::make_shared<OnnxNode>();
  kept->domain = node.domain() == "ai.onnx" ? "" : node.domain();
  kept->op_type = node.op_type();
  kept->opset = opsets_.count(kept->domain) ? opsets_[kept->domain] : 0;
  kept->imported_as = imported_as;
  kept->node = node.SerializeAsString();
  for (const AttributeProto& a : node.attribute()) {
    if (a.type() == AttributeProto::INT) kept->ints[a.name()] = {a.i()};
    if (a.type() == AttributeProto::INTS) {
      kept->ints[a.name()] = {a.ints().begin(), a.ints().end()};
    }
    if (a.type() == AttributeProto::FLOAT) kept->floats[a.name()] = {a.f()};
    if (a.type() == AttributeProto::FLOATS) {
      kept->floats[a.name()] = {a.floats().begin(), a.floats().end()};
    }
    if (a.type() == AttributeProto::STRING) kept->strings[a.name()] = a.s();
    if (a.type() == AttributeProto::TENSOR) {  // ConstantOfShape's value
      if (auto v = ScalarOf(a.t())) kept->floats[a.name()] = {*v};
    }
  }
  return kept;
}

// The first value of a numeric tensor, as a double.
std::optional<double> Importer::ScalarOf(const TensorProto& t) {
  const auto dtype = onnx_util::AnyDTypeOf(t.data_type());
  const auto data = onnx_util::TensorData(t);
  if (!dtype || !data || data->empty()) return std::nullopt;
  if (!IsFloat(*dtype)) {
    if (auto ints = onnx_util::TensorInts(t)) return static_cast<double>((*ints)[0]);
    return (*data)[0] != 0 ? 1.0 : 0.0;  // bool
  }
  if (*dtype == DType::kFloat32) {
    float f;
    std::memcpy(&f, data->data(), 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, data->data(), 2);
  return *dtype == DType::kFloat16 ? HalfToFloat(h) : BFloat16ToFloat(h);
}

// Keeps input `slot`'s constant (int64 shape, axes) with the node; its
// index in kept.constants.
int32_t Importer::KeepConstant(OnnxNode& kept, const NodeProto& node, int slot) {
  const std::string& name = node.input(slot);
  for (size_t i = 0; i < kept.constants.size(); ++i) {
    if (kept.constants[i].first == name) return static_cast<int32_t>(i);
  }
  TensorProto t = *Constant(name);
  t.set_name(name);
  kept.constants.emplace_back(name, t.SerializeAsString());
  OnnxNode::Value v;
  v.dtype = onnx_util::AnyDTypeOf(t.data_type()).value_or(DType::kFloat32);
  v.dims.assign(t.dims().begin(), t.dims().end());
  if (auto data = onnx_util::TensorData(t)) v.data = std::move(*data);
  kept.constant_values.push_back(std::move(v));
  return static_cast<int32_t>(kept.constants.size() - 1);
}

// Nodes none of whose outputs reach a graph output are dropped here (rule 1
// of the canonical order would drop them anyway), so that a dead branch of
// unsupported types cannot fail the import.
void Importer::MarkLiveNodes() {
  const auto& nodes = model_.graph().node();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < nodes.size(); ++i) {
    for (const std::string& out : nodes[i].output()) {
      if (!out.empty()) producer[out] = i;
    }
  }
  live_.assign(static_cast<size_t>(nodes.size()), false);
  std::vector<std::string> stack;
  for (const auto& vi : model_.graph().output()) stack.push_back(vi.name());
  while (!stack.empty()) {
    auto it = producer.find(stack.back());
    stack.pop_back();
    if (it == producer.end() || live_[static_cast<size_t>(it->second)]) continue;
    live_[static_cast<size_t>(it->second)] = true;
    for (const std::string& in : nodes[it->second].input()) {
      if (!in.empty()) stack.push_back(in);
    }
  }
  for (int i = 0; i < nodes.size(); ++i) {
    if (!live_[static_cast<size_t>(i)]) continue;
    for (const std::string& in : nodes[i].input()) used_.insert(in);
  }
  for (const auto& vi : model_.graph().output()) used_.insert(vi.name());
}

// A shape with a dim ONNX's shape inference made up ('unk__N').
std::optional<std::string> Importer::MadeUpDim(const std::string& name) const {
  auto it = types_.find(name);
  if (it == types_.end() || !it->second->has_tensor_type() ||
      !it->second->tensor_type().has_shape()) {
    return std::nullopt;
  }
  for (const auto& d : it->second->tensor_type().shape().dim()) {
    // ONNX names its fresh dims 'unk__N' (ones the graph's inputs do not declare).
    if (d.has_dim_param() && d.dim_param().starts_with("unk__") &&
        !input_dims_.count(d.dim_param())) {
      return d.dim_param();
    }
  }
  return std::nullopt;
}

bool Importer::HasElemType(const std::string& name) const {
  auto it = types_.find(name);
  return it != types_.end() && it->second->has_tensor_type() &&
         it->second->tensor_type().elem_type() != TensorProto::UNDEFINED;
}

bool Importer::OutputUsed(const NodeProto& node, int slot) const {
  return slot < node.output_size() && !node.output(slot).empty() &&
         used_.count(node.output(slot));
}

void Importer::ImportNode(const NodeProto& node) {
  if (FoldShapeArithmetic(node)) return;
  static const std::map<std::string, EwFunc> kElementwise = {
      {"Relu", EwFunc::kRelu}, {"Sigmoid", EwFunc::kSigmoid}, {"Tanh", EwFunc::kTanh},
      {"Add", EwFunc::kAdd},   {"Sub", EwFunc::kSub},         {"Mul", EwFunc::kMul},
      {"Div", EwFunc::kDiv}};
  bool done = false;
  const std::string& t = node.op_type();
  if (IsDefaultDomain(node)) {
    if (auto it = kElementwise.find(t); it != kElementwise.end()) {
      done = ImportElementwise(node, it->second);
    } else if (t == "Gemm") {
      done = ImportGemm(node);
    } else if (t == "MatMul") {
      done = ImportMatMul(node);
    } else if (t == "LayerNormalization") {
      done = ImportLayerNorm(node);
    } else if (t == "Split") {
      done = ImportSplit(node);
    } else if (t == "Concat") {
      done = ImportConcat(node);
    } else if (t == "Reshape") {
      done = ImportReshape(node);
    }
  } else if (node.domain() == onnx_util::kHfuseDomain) {
    done = ImportGroup(node);
  }
  if (!done) ImportOpaque(node);
}

// Every input slot that names a value, as a float tensor of the IR.
bool Importer::FloatInputs(const NodeProto& node, size_t from, size_t to) {
  for (size_t i = from; i < to && i < static_cast<size_t>(node.input_size()); ++i) {
    const std::string& name = node.input(static_cast<int>(i));
    if (name.empty()) continue;
    if (const TensorProto* c = Constant(name)) {
      if (!onnx_util::DTypeOf(c->data_type())) return false;
    } else if (!values_.count(Resolve(name))) {
      return false;
    }
  }
  return true;
}

TensorId Importer::Transposed(const std::string& onnx_name) {
  const std::string& name = Resolve(onnx_name);
  if (auto it = transposed_.find(name); it != transposed_.end()) return it->second;
  const TensorProto& c = *Constant(name);
  const DType dtype = *onnx_util::DTypeOf(c.data_type());
  const std::vector<uint8_t> data = *onnx_util::TensorData(c);
  const int64_t k = c.dims(0), n = c.dims(1);
  const auto w = static_cast<size_t>(DTypeBytes(dtype));
  std::vector<uint8_t> t(data.size());
  PermuteBytes(data.data(), t.data(), {k, n}, {1, 0}, w);
  const TensorId id =
      NewParam(name + "_t", {Dim::Static(n), Dim::Static(k)}, dtype, std::move(t));
  transposed_[name] = id;
  return id;
}

bool Importer::IsConstantMatrix(const std::string& name) const {
  const TensorProto* c = Constant(name);
  return c && c->dims_size() == 2 && onnx_util::DTypeOf(c->data_type()) &&
         onnx_util::TensorData(*c);
}

// Gemm: Y = alpha · A · op(B) + beta · C.
bool Importer::ImportGemm(const NodeProto& node) {
  if (node.input_size() < 2 || IntAttr(node, "transA", 0) != 0) return false;
  const bool trans_b = IntAttr(node, "transB", 0) != 0;
  if (!trans_b && !IsConstantMatrix(node.input(1))) return false;
  if (!FloatInputs(node, 0, 3)) return false;
  const TensorId a = Value(node.input(0), "Gemm input");
  const TensorId b = trans_b ? Value(node.input(1), "Gemm input") : Transposed(node.input(1));
  if (T(a).shape.size() != 2 || T(b).shape.size() != 2 || T(a).dtype != T(b).dtype ||
      !T(a).shape[1].is_static() || !(T(a).shape[1] == T(b).shape[1])) {
    return false;
  }
  const double alpha = FloatAttr(node, "alpha", 1.0), beta = FloatAttr(node, "beta", 1.0);
  const bool has_c = node.input_size() > 2 && !node.input(2).empty() && beta != 0.0;
  const std::string name = NodeName(node);
  const DType dtype = T(a).dtype;
  const Shape y_shape = {T(a).shape[0], T(b).shape[0]};
  Op gemm;
  gemm.name = name;
  gemm.type = OpType::kGemmRcr;
  gemm.inputs = {a, b};
  if (alpha != 1.0) gemm.attrs.alpha = alpha;
  if (!has_c) {
    gemm.outputs = {NewValue(node.output(0), y_shape, dtype)};
    if (trans_b && node.input_size() == 2) gemm.attrs.onnx = Keep(node, OpType::kGemmRcr);
    AddOp(std::move(gemm));
    return true;
  }
  TensorId c = Value(node.input(2), "Gemm input");
  if (T(c).dtype != dtype) return false;
  if (beta == 1.0 && T(c).role == Role::kParam && T(c).shape.size() == 1 &&
      T(c).shape[0].is_static() && T(c).shape[0] == T(b).shape[0]) {
    // C is a constant bias [N]: the node is a gemm_rcr_bias as it stands.
    gemm.type = OpType::kGemmRcrBias;
    gemm.inputs.push_back(c);
    gemm.outputs = {NewValue(node.output(0), y_shape, dtype)};
    if (trans_b) gemm.attrs.onnx = Keep(node, OpType::kGemmRcrBias);
    AddOp(std::move(gemm));
    return true;
  }
  const TensorId mm = NewInternal(node.output(0) + "_mm", y_shape, dtype);
  gemm.outputs = {mm};
  AddOp(std::move(gemm));
  if (beta != 1.0) {
    Op scale;
    scale.name = name + "/ScaleC";
    scale.type = OpType::kElementwise;
    scale.attrs.func = EwFunc::kMul;
    scale.inputs = {c, ScalarParam(name + "/beta", dtype, beta)};
    c = NewInternal(node.input(2) + "_scaled", T(c).shape, dtype);
    scale.outputs = {c};
    AddOp(std::move(scale));
  }
  Op add;
  add.name = name + "/AddC";
  add.type = OpType::kElementwise;
  add.attrs.func = EwFunc::kAdd;
  add.inputs = {mm, c};
  add.outputs = {NewValue(node.output(0), y_shape, dtype)};
  AddOp(std::move(add));
  return true;
}

// MatMul with a constant 2-D weight W [K, N]: gemm_rcr(A, Wᵀ).
bool Importer::ImportMatMul(const NodeProto& node) {
  if (node.input_size() != 2 || !IsConstantMatrix(node.input(1))) return false;
  if (!FloatInputs(node, 0, 1) || Constant(node.input(0))) return false;
  const TensorId a = Value(node.input(0), "MatMul input");
  if (T(a).shape.size() < 2) return false;
  const TensorProto& w = *Constant(node.input(1));
  const Dim& k = T(a).shape.back();
  if (!k.is_static() || k.value != w.dims(0) ||
      *onnx_util::DTypeOf(w.data_type()) != T(a).dtype) {
    return false;
  }
  const TensorId b = Transposed(node.input(1));
  Shape y_shape(T(a).shape.begin(), T(a).shape.end() - 1);
  y_shape.push_back(Dim::Static(w.dims(1)));
  Op gemm;
  gemm.name = NodeName(node);
  gemm.type = OpType::kGemmRcr;
  gemm.inputs = {a, b};
  gemm.outputs = {NewValue(node.output(0), y_shape, T(a).dtype)};
  AddOp(std::move(gemm));
  return true;
}

bool Importer::ImportLayerNorm(const NodeProto& node) {
  if (OutputUsed(node, 1) || OutputUsed(node, 2) || node.input_size() < 2 ||
      node.input(1).empty()) {
    return false;
  }
  if (IntAttr(node, "stash_type", 1) != 1 || !FloatInputs(node, 0, 3)) return false;
  const TensorId x = Value(node.input(0), "LayerNormalization input");
  const auto rank = static_cast<int64_t>(T(x).shape.size());
  int64_t axis = IntAttr(node, "axis", -1);
  if (axis < 0) axis += rank;
  if (axis < 1 || axis >= rank) return false;  // normalized_shape must leave a batch dim
  Op ln;
  ln.type = OpType::kLayerNorm;
  Shape tail;
  for (auto d = static_cast<size_t>(axis); d < T(x).shape.size(); ++d) {
    if (!T(x).shape[d].is_static()) return false;
    ln.attrs.normalized_shape.push_back(T(x).shape[d].value);
    tail.push_back(T(x).shape[d]);
  }
  ln.inputs = {x};
  for (int slot = 1; slot < 3 && slot < node.input_size(); ++slot) {
    if (node.input(slot).empty()) continue;
    const TensorId p = Value(node.input(slot), "LayerNormalization input");
    if (!(T(p).shape == tail) || T(p).dtype != T(x).dtype) return false;  // broadcast scale
    ln.inputs.push_back(p);
  }
  ln.attrs.has_gamma = true;
  ln.attrs.has_beta = ln.inputs.size() == 3;
  ln.attrs.eps = FloatAttr(node, "epsilon", 1e-5f);
  ln.name = NodeName(node);
  ln.outputs = {NewValue(node.output(0), T(x).shape, T(x).dtype)};
  ln.attrs.onnx = Keep(node, OpType::kLayerNorm);
  AddOp(std::move(ln));
  return true;
}

bool Importer::ImportSplit(const NodeProto& node) {
  if (!FloatInputs(node, 0, 1) || Constant(node.input(0))) return false;
  const TensorId x = Value(node.input(0), "Split input");
  const auto rank = static_cast<int64_t>(T(x).shape.size());
  int64_t axis = IntAttr(node, "axis", 0);
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  const Dim& d = T(x).shape[static_cast<size_t>(axis)];
  if (!d.is_static()) return false;
  std::vector<int64_t> sizes;
  bool from_input = false;
  if (node.input_size() > 1 && !node.input(1).empty()) {
    const TensorProto* c = Constant(node.input(1));
    if (!c) return false;
    auto ints = onnx_util::TensorInts(*c);
    if (!ints) return false;
    sizes = *ints;
    from_input = true;
  } else {
    sizes = IntsAttr(node, "split");
  }
  const auto n = static_cast<int64_t>(node.output_size());
  if (sizes.empty() && IntAttr(node, "num_outputs", 0) == n && n > 0) {
    // Split-18's num_outputs: equal parts, the last one smaller.
    const int64_t part = (d.value + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) {
      sizes.push_back(std::max<int64_t>(0, std::min(part, d.value - i * part)));
    }
    if (sizes.back() == 0) return false;  // an empty part: left opaque
  }
  if (sizes.empty()) {  // equal parts
    if (n == 0 || d.value % n != 0) return false;
    sizes.assign(static_cast<size_t>(n), d.value / n);
  }
  if (static_cast<int64_t>(sizes.size()) != n) return false;
  Op split;
  split.type = OpType::kSplit;
  split.attrs.split_sizes = sizes;
  split.attrs.dim = IntAttr(node, "axis", 0);
  split.inputs = {x};
  split.name = NodeName(node);
  auto kept = Keep(node, OpType::kSplit);
  if (from_input) KeepConstant(*kept, node, 1);
  split.attrs.onnx = std::move(kept);
  for (int i = 0; i < node.output_size(); ++i) {
    Shape shape = T(x).shape;
    shape[static_cast<size_t>(axis)] = Dim::Static(sizes[static_cast<size_t>(i)]);
    split.outputs.push_back(NewValue(node.output(i), std::move(shape), T(x).dtype));
  }
  AddOp(std::move(split));
  return true;
}

bool Importer::ImportConcat(const NodeProto& node) {
  if (node.input_size() == 0 || !FloatInputs(node, 0, static_cast<size_t>(node.input_size()))) {
    return false;
  }
  Op cat;
  cat.type = OpType::kConcatenate;
  cat.attrs.dim = IntAttr(node, "axis", 0);
  for (const std::string& in : node.input()) cat.inputs.push_back(Value(in, "Concat input"));
  const Tensor& first = T(cat.inputs[0]);
  const auto rank = static_cast<int64_t>(first.shape.size());
  if (cat.attrs.dim < -rank || cat.attrs.dim >= rank) return false;
  const auto axis = static_cast<size_t>(cat.attrs.dim < 0 ? cat.attrs.dim + rank : cat.attrs.dim);
  Shape shape = first.shape;
  if (cat.inputs.size() > 1) {
    int64_t total = 0;
    for (TensorId in : cat.inputs) {
      const Tensor& t = T(in);
      if (t.shape.size() != first.shape.size() || !t.shape[axis].is_static()) return false;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (d != axis && !(t.shape[d] == shape[d])) return false;
      }
      total += t.shape[axis].value;
    }
    shape[axis] = Dim::Static(total);
  }
  cat.name = NodeName(node);
  cat.outputs = {NewValue(node.output(0), std::move(shape), first.dtype)};
  cat.attrs.onnx = Keep(node, OpType::kConcatenate);
  AddOp(std::move(cat));
  return true;
}

// Reshape with a constant shape. The output's dims are worked out here
// (ONNX leaves a -1 unknown when the input has a named dim): a 0 copies the
// input's dim (unless allowzero), and a -1 stands for the one named dim
// left over, or for the static remainder.
bool Importer::ImportReshape(const NodeProto& node) {
  if (node.input_size() != 2 || !FloatInputs(node, 0, 1) || Constant(node.input(0))) return false;
  const TensorProto* c = Constant(node.input(1));
  if (!c) return false;
  const auto target = onnx_util::TensorInts(*c);
  if (!target) return false;
  const TensorId x = Value(node.input(0), "Reshape input");
  const Shape& in = T(x).shape;
  const bool allow_zero = IntAttr(node, "allowzero", 0) != 0;
  Shape out;
  std::vector<int32_t> dyn_in, dyn_out;
  int64_t static_in = 1, static_out = 1;
  for (const Dim& d : in) {
    if (d.is_static()) {
      // Checked: a product that wraps could match the target's and pass.
      const std::optional<int64_t> p = CheckedMul(static_in, d.value);
      if (!p) return false;
      static_in = *p;
    } else {
      dyn_in.push_back(d.dynamic);
    }
  }
  size_t infer = SIZE_MAX;
  for (size_t i = 0; i < target->size(); ++i) {
    const int64_t v = (*target)[i];
    Dim d = Dim::Static(v);
    if (v == 0 && !allow_zero) {
      if (i >= in.size()) return false;
      d = in[i];
    } else if (v == -1) {
      if (infer != SIZE_MAX) return false;
      infer = i;
    } else if (v < 0) {
      return false;
    }
    if (v != -1) {
      if (d.is_static()) {
        const std::optional<int64_t> p = CheckedMul(static_out, d.value);
        if (!p) return false;
        static_out = *p;
      } else {
        dyn_out.push_back(d.dynamic);
      }
    }
    out.push_back(d);
  }
  // The named dims the output has not placed yet.
  std::vector<int32_t> left = dyn_in;
  for (int32_t d : dyn_out) {
    auto it = std::find(left.begin(), left.end(), d);
    if (it == left.end()) return false;
    left.erase(it);
  }
  if (infer != SIZE_MAX) {
    if (left.empty()) {
      if (static_out == 0 || static_in % static_out != 0) return false;
      out[infer] = Dim::Static(static_in / static_out);
    } else if (left.size() == 1 && static_in == static_out) {
      out[infer] = Dim::Dynamic(left[0]);
    } else {
      return false;
    }
  } else if (!left.empty() || static_in != static_out) {
    return false;
  }
  Op reshape;
  reshape.type = OpType::kReshape;
  int dynamic = 0;
  for (const Dim& d : out) {
    reshape.attrs.shape.push_back(d.is_static() ? d.value : -1);
    dynamic += !d.is_static();
  }
  // The IR's shape attribute has one -1, so one named dim at most.
  if (dynamic > 1 || std::count(out.begin(), out.end(), Dim::Static(0)) > 0) return false;
  reshape.inputs = {x};
  reshape.name = NodeName(node);
  reshape.outputs = {NewValue(node.output(0), std::move(out), T(x).dtype)};
  auto kept = Keep(node, OpType::kReshape);
  KeepConstant(*kept, node, 1);
  reshape.attrs.onnx = std::move(kept);
  AddOp(std::move(reshape));
  return true;
}

bool Importer::ImportElementwise(const NodeProto& node, EwFunc func) {
  const size_t n = IsUnary(func) ? 1 : 2;
  if (static_cast<size_t>(node.input_size()) != n || !FloatInputs(node, 0, n)) return false;
  Op ew;
  ew.type = OpType::kElementwise;
  ew.attrs.func = func;
  for (const std::string& in : node.input()) ew.inputs.push_back(Value(in, "input"));
  // numpy broadcasting, right-aligned, as the verifier checks it.
  Shape out;
  for (TensorId in : ew.inputs) {
    Shape s = T(in).shape;
    if (T(in).dtype != T(ew.inputs[0]).dtype) return false;
    if (s.size() > out.size()) out.insert(out.begin(), s.size() - out.size(), Dim::Static(1));
    s.insert(s.begin(), out.size() - s.size(), Dim::Static(1));
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == out[d] || (s[d].is_static() && s[d].value == 1)) continue;
      if (!(out[d].is_static() && out[d].value == 1)) return false;
      out[d] = s[d];
    }
  }
  ew.name = NodeName(node);
  ew.outputs = {NewValue(node.output(0), std::move(out), T(ew.inputs[0]).dtype)};
  ew.attrs.onnx = Keep(node, OpType::kElementwise);
  AddOp(std::move(ew));
  return true;
}

// A group op written by the exporter (onnx_export.h), read back.
bool Importer::ImportGroup(const NodeProto& node) {
  auto type = onnx_util::ParseHfuseOpType(node.op_type());
  if (!type) return false;
  Op group;
  group.type = *type;
  group.name = NodeName(node);
  for (const std::string& in : node.input()) {
    if (in.empty()) Error("{} node '{}' has an empty input", node.op_type(), group.name);
    group.inputs.push_back(Value(in, "input"));
  }
  for (const std::string& out : node.output()) {
    group.outputs.push_back(
        NewValue(out, ShapeOf(out, "group output"), ValueType(out, "group output")));
  }
  if (IsGroupGather(*type)) {
    auto names = std::make_shared<OnnxNode>();
    names->domain = onnx_util::kHfuseDomain;
    names->op_type = node.op_type();
    names->opset = onnx_util::kHfuseDomainVersion;
    for (const AttributeProto& a : node.attribute()) {
      if (a.name() == "member_names") names->member_names.assign(a.strings().begin(), a.strings().end());
    }
    if (names->member_names.size() != group.outputs.size() ||
        group.inputs.size() != 2 * group.outputs.size()) {
      Error("{} node '{}': {} member_names and {} inputs for {} outputs (a table and ids each)",
            node.op_type(), group.name, names->member_names.size(), group.inputs.size(),
            group.outputs.size());
    }
    group.attrs.onnx = std::move(names);
  } else if (IsGroupGemm(*type)) {
    const int64_t group_size = IntAttr(node, "group_size", 0);
    if (group_size != static_cast<int64_t>(group.outputs.size())) {
      Error("{} node '{}': group_size {} does not match its {} outputs", node.op_type(),
            group.name, group_size, group.outputs.size());
    }
    if (*type == OpType::kGroupGemmRcrMixed) {  // each member's GEMM kind
      for (const AttributeProto& a : node.attribute()) {
        if (a.name() != "member_ops") continue;
        for (const std::string& s : a.strings()) {
          const std::optional<OpType> kind = ParseOpType(s);
          if (!kind || !IsGemm(*kind)) {
            Error("{} node '{}': member_ops lists '{}', not a GEMM op type", node.op_type(),
                  group.name, s);
          }
          group.attrs.member_ops.push_back(*kind);
        }
      }
      if (group.attrs.member_ops.size() != group.outputs.size()) {
        Error("{} node '{}': {} member_ops for {} outputs", node.op_type(), group.name,
              group.attrs.member_ops.size(), group.outputs.size());
      }
    }
  } else {
    const std::vector<int64_t> ranks = IntsAttr(node, "normalized_ranks");
    const std::vector<int64_t> flat = IntsAttr(node, "normalized_shapes");
    size_t at = 0;
    for (int64_t r : ranks) {
      if (r < 0 || at + static_cast<size_t>(r) > flat.size()) {
        Error("{} node '{}': normalized_ranks do not match normalized_shapes", node.op_type(),
              group.name);
      }
      group.attrs.normalized_shapes.emplace_back(flat.begin() + static_cast<ptrdiff_t>(at),
                                                 flat.begin() + static_cast<ptrdiff_t>(at + r));
      at += static_cast<size_t>(r);
    }
    group.attrs.eps = FloatAttr(node, "epsilon", 1e-5f);
  }
  AddOp(std::move(group));
  return true;
}

void Importer::ImportOpaque(const NodeProto& node) {
  if (std::any_of(node.attribute().begin(), node.attribute().end(), [](const AttributeProto& a) {
        return a.type() == AttributeProto::GRAPH || a.type() == AttributeProto::GRAPHS;
      })) {
    // Its subgraphs may read values of this graph that its inputs do not
    // name, so the pass could not see what it depends on.
    if (node.op_type() == "If") {
      Error(
          "If node '{}': its condition '{}' is computed at run time; hfuse folds an If only "
          "when its condition is a constant or follows from the shapes, static or at the dims "
          "bound before import (--dim NAME=V, SessionOptions::dims){} (control flow is not "
          "supported)",
          node.name(), node.input_size() > 0 ? node.input(0) : "",
          options_.dims.empty() ? "" : ", and these dims do not decide it");
    }
    Error("node '{}' ({}) has subgraphs; control flow is not supported", node.name(),
          node.op_type());
  }
  Op op;
  op.type = OpType::kOpaque;
  op.name = NodeName(node);
  auto kept = Keep(node, OpType::kOpaque);
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string& in = node.input(i);
    if (in.empty()) {
      kept->input_slots.push_back(kNone);
      continue;
    }
    const TensorProto* c = Constant(in);
    if (c && !onnx_util::DTypeOf(c->data_type())) {
      kept->input_slots.push_back(-2 - KeepConstant(*kept, node, i));
    } else {
      kept->input_slots.push_back(static_cast<int32_t>(op.inputs.size()));
      op.inputs.push_back(
          Value(in, fmt::format("input of {} node '{}'", node.op_type(), op.name)));
    }
  }
  for (const std::string& out : node.output()) {
    if (out.empty() || !used_.count(out)) {  // written back as it was
      kept->output_slots.push_back(kNone);
      continue;
    }
    const std::string what = fmt::format("output of {} node '{}'", node.op_type(), op.name);
    kept->output_slots.push_back(static_cast<int32_t>(op.outputs.size()));
    ShapeRuleInput rule{node, *kept, {},
                        [&](size_t slot) -> std::optional<SymValue> {
                          if (slot >= static_cast<size_t>(node.input_size())) return std::nullopt;
                          return Sym(node.input(static_cast<int>(slot)));
                        },
                        g_};
    for (int32_t s : kept->input_slots) {
      rule.inputs.push_back(s >= 0 ? &T(op.inputs[static_cast<size_t>(s)]) : nullptr);
    }
    const std::optional<InferredOutput> inferred = InferOutput(rule);
    if (inferred && inferred->from_values && HasElemType(out)) {
      // Exact where ONNX names a derived dim afresh or leaves it unknown.
      op.outputs.push_back(NewValue(out, inferred->shape, ValueType(out, what)));
      continue;
    }
    const std::optional<std::string> made_up = MadeUpDim(out);
    if (inferred && !inferred->from_values && made_up) {
      op.outputs.push_back(NewValue(out, inferred->shape, inferred->dtype));
    } else if (std::optional<Shape> shape = TryShapeOf(out);
               shape && HasElemType(out) && !made_up) {
      op.outputs.push_back(NewValue(out, std::move(*shape), ValueType(out, what)));
    } else if (inferred && !inferred->from_values) {
      // ONNX's inference stopped here (a Squeeze without axes of a named
      // dim, say); hfuse's own takes over.
      op.outputs.push_back(NewValue(out, inferred->shape, inferred->dtype));
    } else if (made_up) {
      // A dim of its own naming would be bound on its own at run time, and
      // the size the node computes would not be it.
      Error(
          "{} '{}' has a shape ONNX's shape inference cannot tell (it made up the dim '{}') and "
          "hfuse cannot infer it: hfuse needs every dim static or named",
          what, out, *made_up);
    } else {
      op.outputs.push_back(NewValue(out, ShapeOf(out, what), ValueType(out, what)));
    }
  }
  op.attrs.onnx = std::move(kept);
  AddOp(std::move(op));
}

}  // namespace onnx_import

OnnxModel ImportOnnx(std::string_view bytes, const std::string& source,
                     const std::string& model_dir, const OnnxImportOptions& options) {
  std::set<std::string> specialised;
  onnx::ModelProto model = onnx_import::ReadModel(bytes, source, model_dir, options.dims, &specialised);
  onnx_import::Importer importer(model, source, options);
  for (const std::string& name : specialised) importer.PinDim(name, options.dims.at(name));
  return importer.Run();
}

OnnxModel ReadOnnxFile(const std::string& path, const OnnxImportOptions& options) {
  const std::string bytes = ReadFile(path);
  return ImportOnnx(bytes, path, std::filesystem::path(path).parent_path().string(), options);
}

}  // namespace hfuse
