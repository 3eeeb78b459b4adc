// What the ONNX importer folds into constants before and during its walk
// (importer.h): Constant nodes, Identity nodes (their readers read the
// source), a Transpose or a Gather of a constant (what PyTorch's dynamo
// exporter leaves of `w.t()` and `param_list[i]`), and shape arithmetic
// whose value is all static (shape_arithmetic.h).
#include <fmt/format.h>

#include <algorithm>

#include "hfuse/support/permute.h"
#include "importer.h"

namespace hfuse::onnx_import {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;
using onnx_util::IntAttr;
using onnx_util::IntsAttr;
using onnx_util::IsDefaultDomain;

void Importer::FoldConstantsAndIdentities() {
  std::set<std::string>& graph_outputs = graph_outputs_;
  for (const auto& vi : model_.graph().output()) graph_outputs.insert(vi.name());
  const auto& nodes = model_.graph().node();
  folded_.assign(static_cast<size_t>(nodes.size()), false);
  for (int i = 0; i < nodes.size(); ++i) {
    const NodeProto& node = nodes[i];
    if (!IsDefaultDomain(node) || node.output_size() != 1) continue;
    const std::string& out = node.output(0);
    if (node.op_type() == "Constant") {
      owned_.push_back(ConstantValue(node));
      constants_[out] = &owned_.back();
      folded_[static_cast<size_t>(i)] = true;
    } else if (node.op_type() == "Identity" && node.input_size() == 1 &&
               !graph_outputs.count(out)) {
      // PyTorch writes one for every shared weight; its readers read the source.
      alias_[out] = node.input(0);
      folded_[static_cast<size_t>(i)] = true;
    } else if ((node.op_type() == "Transpose" || node.op_type() == "Gather") &&
               !graph_outputs.count(out)) {
      // PyTorch's dynamo exporter leaves a weight read as `w.t()` or
      // `param_list[i][j]` as a Transpose or a Gather of the initializer
      // (DCNv2's experts); the TorchScript exporter folds them.
      std::optional<TensorProto> t =
          node.op_type() == "Transpose" ? TransposedConstant(node) : GatheredConstant(node);
      if (t) {
        owned_.push_back(std::move(*t));
        constants_[out] = &owned_.back();
        folded_[static_cast<size_t>(i)] = true;
      }
    }
  }
}

// The value of a Gather of a constant at constant indices, when it is no
// larger than the constant (the indices no more than the axis's size), or
// nothing: the node is then imported as any Gather.
std::optional<TensorProto> Importer::GatheredConstant(const NodeProto& node) const {
  if (node.input_size() != 2) return std::nullopt;
  const TensorProto* c = Constant(node.input(0));
  const TensorProto* at = Constant(node.input(1));
  if (!c || !at || c->dims_size() == 0) return std::nullopt;
  const int bytes = onnx_util::ElemTypeBytes(c->data_type());
  std::optional<std::vector<uint8_t>> data = onnx_util::TensorData(*c);
  std::optional<std::vector<int64_t>> indices = onnx_util::TensorInts(*at);
  if (bytes == 0 || !data || !indices) return std::nullopt;
  const std::vector<int64_t> dims(c->dims().begin(), c->dims().end());
  const auto rank = static_cast<int64_t>(dims.size());
  int64_t axis = IntAttr(node, "axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  const int64_t size = dims[static_cast<size_t>(axis)];
  if (static_cast<int64_t>(indices->size()) > size) return std::nullopt;
  // The data fits its dims, so these products do too.
  int64_t outer = 1, inner = bytes;
  for (int64_t d = 0; d < axis; ++d) outer *= dims[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= dims[static_cast<size_t>(d)];
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(outer) * indices->size() * static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t index : *indices) {
      if (index < 0) index += size;
      if (index < 0 || index >= size) return std::nullopt;
      const uint8_t* from = data->data() + static_cast<size_t>((o * size + index) * inner);
      out.insert(out.end(), from, from + inner);
    }
  }
  std::vector<int64_t> out_dims(dims.begin(), dims.begin() + axis);
  out_dims.insert(out_dims.end(), at->dims().begin(), at->dims().end());
  out_dims.insert(out_dims.end(), dims.begin() + axis + 1, dims.end());
  return onnx_util::MakeTensor(node.output(0), c->data_type(), out_dims, out.data(), out.size());
}

// The value of a Transpose whose input is a constant, or nothing (an input
// computed at run time, a perm that is not one, data that does not fit its
// dims: the node is then imported as any Transpose, and any error named there).
std::optional<TensorProto> Importer::TransposedConstant(const NodeProto& node) const {
  const TensorProto* c = Constant(node.input(0));
  if (!c) return std::nullopt;
  const int bytes = onnx_util::ElemTypeBytes(c->data_type());
  std::optional<std::vector<uint8_t>> data = onnx_util::TensorData(*c);
  if (bytes == 0 || !data) return std::nullopt;
  const std::vector<int64_t> dims(c->dims().begin(), c->dims().end());
  std::vector<int64_t> perm = IntsAttr(node, "perm");
  if (perm.empty()) {
    for (size_t d = dims.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  if (!IsPermutation(perm, dims.size())) return std::nullopt;
  std::vector<int64_t> out_dims;
  for (int64_t p : perm) out_dims.push_back(dims[static_cast<size_t>(p)]);
  std::vector<uint8_t> out(data->size());
  PermuteBytes(data->data(), out.data(), dims, perm, static_cast<size_t>(bytes));
  return onnx_util::MakeTensor(node.output(0), c->data_type(), out_dims, out.data(), out.size());
}

TensorProto Importer::ConstantValue(const NodeProto& node) {
  if (node.attribute_size() != 1) Error("Constant node '{}' needs one attribute", node.name());
  const AttributeProto& a = node.attribute(0);
  TensorProto t;
  if (a.name() == "value" && a.type() == AttributeProto::TENSOR) {
    t = a.t();
  } else if (a.name() == "value_float") {
    const float f = a.f();
    t = onnx_util::MakeTensor("", TensorProto::FLOAT, {}, &f, 4);
  } else if (a.name() == "value_floats") {
    const std::vector<float> v(a.floats().begin(), a.floats().end());
    t = onnx_util::MakeTensor("", TensorProto::FLOAT, {static_cast<int64_t>(v.size())}, v.data(),
                              v.size() * 4);
  } else if (a.name() == "value_int") {
    const int64_t v = a.i();
    t = onnx_util::MakeTensor("", TensorProto::INT64, {}, &v, 8);
  } else if (a.name() == "value_ints") {
    t = onnx_util::MakeInt64Tensor("", {a.ints().begin(), a.ints().end()});
  } else {
    Error("Constant node '{}': a constant given as '{}' is not supported", node.name(), a.name());
  }
  t.set_name(node.output(0));
  return t;
}

std::optional<SymValue> Importer::Sym(const std::string& name) const {
  const std::string& n = Resolve(name);
  if (auto it = sym_.find(n); it != sym_.end()) return it->second;
  const TensorProto* c = Constant(n);
  if (!c) return std::nullopt;
  return ConstantSym(*c);
}

// A node whose value comes out all static is folded into a constant (its
// readers keep it, as any constant); one that holds a named dim stays (the
// CPU executor computes it), and its value gives the shapes of the
// Reshape, Expand and ConstantOfShape that read it, which ONNX's shape
// inference leaves unknown or names with a fresh 'unk__' dim.
bool Importer::FoldShapeArithmetic(const NodeProto& node) {
  if (!IsDefaultDomain(node) || node.output_size() != 1) return false;
  SymInputs in;
  in.value = [&](const std::string& name) { return Sym(name); };
  in.shape = [&](const std::string& name) -> std::optional<Shape> {
    auto it = values_.find(Resolve(name));
    if (it == values_.end()) return std::nullopt;
    return T(it->second).shape;
  };
  std::optional<SymValue> value = EvalShapeArithmetic(node, in);
  if (!value) return false;
  const std::string& out = node.output(0);
  const bool all_static = std::all_of(value->v.begin(), value->v.end(),
                                      [](const Dim& d) { return d.is_static(); });
  if (!all_static || graph_outputs_.count(out)) {
    sym_[out] = *value;
    return false;
  }
  int32_t elem = TensorProto::INT64;
  if (auto it = types_.find(out); it != types_.end() && it->second->has_tensor_type()) {
    elem = it->second->tensor_type().elem_type();
  }
  if (IsLogicOp(node.op_type())) elem = TensorProto::BOOL;
  std::vector<int64_t> dims;
  if (!value->scalar) dims.push_back(static_cast<int64_t>(value->v.size()));
  TensorProto t;
  if (elem == TensorProto::BOOL) {
    std::vector<uint8_t> b;
    for (const Dim& d : value->v) b.push_back(d.value != 0);
    t = onnx_util::MakeTensor(out, elem, dims, b.data(), b.size());
  } else if (elem == TensorProto::INT32) {
    std::vector<int32_t> v;
    for (const Dim& d : value->v) v.push_back(static_cast<int32_t>(d.value));
    t = onnx_util::MakeTensor(out, elem, dims, v.data(), v.size() * 4);
  } else {
    std::vector<int64_t> v;
    for (const Dim& d : value->v) v.push_back(d.value);
    t = onnx_util::MakeTensor(out, TensorProto::INT64, dims, v.data(), v.size() * 8);
  }
  owned_.push_back(std::move(t));
  constants_[out] = &owned_.back();
  return true;
}

}  // namespace hfuse::onnx_import
