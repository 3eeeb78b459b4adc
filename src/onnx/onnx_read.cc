// Reading an ONNX model for the importer. See onnx_read.h.
#include "onnx_read.h"

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "hfuse/onnx/onnx_import.h"
#include "hfuse/support/checked.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"
#include "onnx_util.h"
#include "opset_compat.h"
#include "shape_arithmetic.h"

namespace hfuse::onnx_import {
namespace {

using onnx::AttributeProto;
using onnx::ModelProto;
using onnx::NodeProto;
using onnx::TensorProto;
using onnx_util::ElemTypeName;
using onnx_util::Fail;
using onnx_util::FindAttr;

// External data (large initializers kept in files beside the model) is read
// into the model before the checker sees it, so that a missing file gets a
// message of its own.
void LoadExternalData(ModelProto& model, const std::string& source, const std::string& dir) {
  for (TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != TensorProto::EXTERNAL) continue;
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& entry : t.external_data()) {
      try {
        if (entry.key() == "location") location = entry.value();
        if (entry.key() == "offset") offset = std::stoll(entry.value());
        if (entry.key() == "length") length = std::stoll(entry.value());
      } catch (const std::exception&) {
        Fail(source, "initializer '{}': external data {} '{}' is not a number", t.name(),
             entry.key(), entry.value());
      }
    }
    if (location.empty()) {
      Fail(source, "initializer '{}' is stored as external data but names no file", t.name());
    }
    const std::filesystem::path rel(location);
    if (rel.is_absolute() ||
        std::any_of(rel.begin(), rel.end(), [](const auto& part) { return part == ".."; })) {
      Fail(source,
           "initializer '{}': external data location '{}' must be a path inside the "
           "model's directory",
           t.name(), location);
    }
    const std::string path = (std::filesystem::path(dir.empty() ? "." : dir) / rel).string();
    // Inside the folder once symlinks are followed too.
    std::error_code ec, ec_dir;
    const std::filesystem::path real = std::filesystem::weakly_canonical(path, ec);
    const std::filesystem::path real_dir = std::filesystem::weakly_canonical(dir.empty() ? "." : dir, ec_dir);
    const auto [end, _] = std::mismatch(real_dir.begin(), real_dir.end(), real.begin(), real.end());
    if (ec || ec_dir || end != real_dir.end() || real == real_dir) {
      Fail(source,
           "initializer '{}': external data location '{}' must be a path inside the "
           "model's directory",
           t.name(), location);
    }
    // Exactly the bytes its dims and type need: a length or a file that says
    // otherwise is refused before anything is read (a sparse 4 TB file, a
    // device that never ends).
    const int width = onnx_util::ElemTypeBytes(t.data_type());
    const std::optional<int64_t> need =
        ByteCount(std::span<const int64_t>(t.dims().data(), t.dims().size()), width);
    if (width == 0 || !need) {
      Fail(source, "initializer '{}': external data of type {} and dims [{}] is not supported",
           t.name(), ElemTypeName(t.data_type()), fmt::join(t.dims(), ", "));
    }
    if (length >= 0 && length != *need) {
      Fail(source, "initializer '{}': external data length {} but its dims and type need {} bytes",
           t.name(), length, *need);
    }
    std::string data;
    try {
      data = ReadFileRange(path, offset, *need, fmt::format("initializer '{}'", t.name()));
    } catch (const InputError& e) {
      Fail(source, "initializer '{}' keeps its data in external file '{}', which cannot be read: {}",
           t.name(), location, e.what());
    }
    t.set_raw_data(std::move(data));
    t.clear_external_data();
    t.set_data_location(TensorProto::DEFAULT);
  }
}

// ONNX 1.12's shape inference reads constant tensors (initializers, the
// value of a Constant node) with ParseData, which trusts their dims and
// writes past its buffer when the data is shorter. So every constant tensor
// in the model, subgraphs included, must hold exactly what its dims and
// type say before anything reads it (checked once, before the checker: a
// tensor saved without its values gets this error, not the checker's "one
// and only one value field").
void CheckTensorData(const TensorProto& t, const std::string& source, std::string_view where) {
  if (t.data_location() == TensorProto::EXTERNAL) return;  // read and sized by LoadExternalData
  const std::span<const int64_t> dims(t.dims().data(), t.dims().size());
  const std::optional<int64_t> numel = ElementCount(dims);
  if (!numel) {
    Fail(source, "{} '{}' has dims [{}], which do not count in 64 bits", where, t.name(),
         fmt::join(dims, ", "));
  }
  const bool holds_values = t.has_raw_data() || t.float_data_size() || t.double_data_size() ||
                            t.int32_data_size() || t.int64_data_size() || t.uint64_data_size() ||
                            t.string_data_size();
  if (*numel > 0 && !holds_values) {  // a weights-stripped export
    Fail(source, "{} '{}' (dims [{}], {}) holds no values: the model was saved with its weights left out{}", where,
         t.name(), fmt::join(dims, ", "), ElemTypeName(t.data_type()),
         t.doc_string().starts_with("hfuse-skeleton")
             ? " (an hfuse skeleton: give it weights with scripts/onnx_skeleton.py refill)"
             : "");
  }
  bool fits = true;
  if (onnx_util::ElemTypeBytes(t.data_type()) > 0) {
    fits = onnx_util::TensorData(t).has_value();
  } else if (t.data_type() == TensorProto::STRING) {
    fits = t.string_data_size() == *numel;
  }
  if (!fits) {
    Fail(source, "{} '{}' has data of the wrong size for its dims [{}] and type {}", where,
         t.name(), fmt::join(dims, ", "), ElemTypeName(t.data_type()));
  }
}

void CheckConstantData(const onnx::GraphProto& graph, const std::string& source, int depth = 0) {
  if (depth > 64) Fail(source, "subgraphs nest more than 64 deep");
  for (const TensorProto& t : graph.initializer()) CheckTensorData(t, source, "initializer");
  for (const NodeProto& node : graph.node()) {
    for (const AttributeProto& a : node.attribute()) {
      const std::string where = fmt::format("attribute '{}' of node '{}'", a.name(), node.name());
      if (a.has_t()) CheckTensorData(a.t(), source, where);
      for (const TensorProto& t : a.tensors()) CheckTensorData(t, source, where);
      if (a.has_sparse_tensor()) CheckTensorData(a.sparse_tensor().values(), source, where);
      if (a.has_g()) CheckConstantData(a.g(), source, depth + 1);
      for (const onnx::GraphProto& g : a.graphs()) CheckConstantData(g, source, depth + 1);
    }
  }
}

// Replaces If node `at` by the nodes of the branch it takes, its outputs
// renamed to the If's through Identity nodes (which the importer folds).
// Names local to the branch that the graph already uses are renamed.
void InlineIf(ModelProto& model, int at, bool take_then, const std::string& source) {
  onnx::GraphProto& g = *model.mutable_graph();
  onnx_util::NameSet names;
  for (const auto& vi : g.input()) names.Take(vi.name());
  for (const TensorProto& t : g.initializer()) names.Take(t.name());
  for (const NodeProto& n : g.node()) {
    for (const std::string& o : n.output()) names.Take(o);
  }
  const NodeProto node = g.node(at);
  const AttributeProto* branch = FindAttr(node, take_then ? "then_branch" : "else_branch");
  if (!branch || !branch->has_g() || branch->g().output_size() != node.output_size()) {
    Fail(source, "If node '{}': its {} does not give its {} outputs", node.name(),
         take_then ? "then_branch" : "else_branch", node.output_size());
  }
  onnx::GraphProto body = branch->g();
  // Branch-local names the graph uses already get fresh ones.
  std::map<std::string, std::string> rename;
  auto local = [&](const std::string& name) {
    if (name.empty() || !names.Taken(name)) {
      names.Take(name);
      return;
    }
    rename[name] = names.Fresh(name);
  };
  for (const TensorProto& t : body.initializer()) local(t.name());
  for (const NodeProto& n : body.node()) {
    for (const std::string& o : n.output()) local(o);
  }
  auto renamed = [&](const std::string& name) {
    auto it = rename.find(name);
    return it == rename.end() ? name : it->second;
  };
  google::protobuf::RepeatedPtrField<NodeProto> nodes;
  for (int i = 0; i < at; ++i) *nodes.Add() = g.node(i);
  for (TensorProto t : body.initializer()) {
    t.set_name(renamed(t.name()));
    *g.add_initializer() = std::move(t);
  }
  for (NodeProto n : body.node()) {
    for (std::string& in : *n.mutable_input()) in = renamed(in);
    for (std::string& out : *n.mutable_output()) out = renamed(out);
    *nodes.Add() = std::move(n);
  }
  for (int o = 0; o < node.output_size(); ++o) {
    NodeProto* id = nodes.Add();
    id->set_op_type("Identity");
    id->set_name(names.Fresh(fmt::format("{}/output{}", node.name(), o)));
    id->add_input(renamed(body.output(o).name()));
    id->add_output(node.output(o));
  }
  for (int i = at + 1; i < g.node_size(); ++i) *nodes.Add() = g.node(i);
  g.mutable_node()->Swap(&nodes);
}

bool IsIf(const NodeProto& n) {
  return n.op_type() == "If" && onnx_util::IsDefaultDomain(n) && n.input_size() == 1;
}

// An If whose condition is a constant (an initializer or a Constant node's
// value, as exporters write for a Python `if` on a flag) is replaced by the
// nodes of the branch it takes. An If on a computed condition stays for
// FoldShapeIfs, and then the importer refuses it (control flow), naming
// the node.
void FoldConstantIfs(ModelProto& model, const std::string& source) {
  const onnx::GraphProto& g = model.graph();
  for (int round = 0; round < 1024; ++round) {
    std::map<std::string, const TensorProto*> constants;
    for (const TensorProto& t : g.initializer()) constants[t.name()] = &t;
    for (const NodeProto& n : g.node()) {
      if (n.op_type() == "Constant" && n.output_size() == 1 && n.attribute_size() == 1 &&
          n.attribute(0).name() == "value" && n.attribute(0).has_t()) {
        constants[n.output(0)] = &n.attribute(0).t();
      }
    }
    int at = -1;
    bool take_then = false;
    for (int i = 0; i < g.node_size() && at < 0; ++i) {
      const NodeProto& n = g.node(i);
      if (!IsIf(n)) continue;
      auto c = constants.find(n.input(0));
      if (c == constants.end() || onnx_util::TensorNumel(*c->second) != 1) continue;
      const auto data = onnx_util::TensorData(*c->second);
      if (!data || data->empty()) continue;
      take_then = std::any_of(data->begin(), data->end(), [](uint8_t b) { return b != 0; });
      at = i;
    }
    if (at < 0) return;
    InlineIf(model, at, take_then, source);
  }
}

// An If whose condition follows from the shapes ONNX inferred (what an
// exporter writes for `if x.dim() == 3:`: Equal(Size(Shape(x)), 3), or
// Equal(Gather(Shape(x), 1), 16) on a static dim) is replaced by the branch
// it takes, as a constant one is. The condition is worked out by the shape
// arithmetic the importer folds (shape_arithmetic.h), over the inferred
// types: a named dim is at least 1 and equals itself; a dim inference left
// unknown is taken as such a dim of its own. Returns whether an If went
// (the caller infers shapes again: what the branch computes may decide the
// next one).
bool FoldShapeIfs(ModelProto& model, const std::string& source,
                  const std::map<std::string, int64_t>* bound = nullptr, std::set<std::string>* read = nullptr) {
  const onnx::GraphProto& g = model.graph();
  if (std::none_of(g.node().begin(), g.node().end(), IsIf)) return false;
  std::map<std::string, const onnx::TypeProto*> types;
  for (const auto& vi : g.input()) types[vi.name()] = &vi.type();
  for (const auto& vi : g.value_info()) types[vi.name()] = &vi.type();
  for (const auto& vi : g.output()) types[vi.name()] = &vi.type();
  std::map<std::string, const TensorProto*> constants;
  for (const TensorProto& t : g.initializer()) constants[t.name()] = &t;
  std::map<std::string, int32_t> named;           // dim_param -> a dim id of its own
  std::map<std::string, Shape> shapes;            // the shapes read so far, each once
  std::map<std::string, SymValue> values;         // what the walk has worked out
  int32_t next_dim = 0;
  SymInputs in;
  in.value = [&](const std::string& name) -> std::optional<SymValue> {
    if (auto it = values.find(name); it != values.end()) return it->second;
    if (auto it = constants.find(name); it != constants.end()) return ConstantSym(*it->second);
    return std::nullopt;
  };
  in.shape = [&](const std::string& name) -> std::optional<Shape> {
    if (auto it = shapes.find(name); it != shapes.end()) return it->second;
    auto it = types.find(name);
    if (it == types.end() || !it->second->has_tensor_type() ||
        !it->second->tensor_type().has_shape()) {
      return std::nullopt;
    }
    Shape shape;
    for (const auto& d : it->second->tensor_type().shape().dim()) {
      if (d.has_dim_value()) {
        shape.push_back(Dim::Static(d.dim_value()));
      } else if (d.has_dim_param() && !d.dim_param().empty() && bound && bound->count(d.dim_param())) {
        // A dim the caller bound: its value, remembered as read.
        shape.push_back(Dim::Static(bound->at(d.dim_param())));
        read->insert(d.dim_param());
      } else if (d.has_dim_param() && !d.dim_param().empty()) {
        auto [at, fresh] = named.emplace(d.dim_param(), next_dim);
        next_dim += fresh;
        shape.push_back(Dim::Dynamic(at->second));
      } else {
        shape.push_back(Dim::Dynamic(next_dim++));
      }
    }
    return shapes[name] = shape;
  };
  std::vector<std::pair<int, bool>> decided;
  for (int i = 0; i < g.node_size(); ++i) {
    const NodeProto& n = g.node(i);
    if (IsIf(n)) {
      const std::optional<SymValue> c = in.value(n.input(0));
      if (c && c->v.size() == 1 && c->v[0].is_static()) decided.emplace_back(i, c->v[0].value != 0);
      continue;
    }
    if (!onnx_util::IsDefaultDomain(n) || n.output_size() != 1) continue;
    if (n.op_type() == "Constant") {
      if (n.attribute_size() == 1 && n.attribute(0).name() == "value" && n.attribute(0).has_t()) {
        constants[n.output(0)] = &n.attribute(0).t();
      }
      continue;
    }
    if (std::optional<SymValue> v = EvalShapeArithmetic(n, in)) values[n.output(0)] = *v;
  }
  // Last first: inlining node `at` leaves the nodes before it where they are.
  for (auto it = decided.rbegin(); it != decided.rend(); ++it) {
    InlineIf(model, it->first, it->second, source);
  }
  return !decided.empty();
}

// Dims that an earlier shape inference made up ('unk__N': onnx's
// version_converter, a current exporter) are forgotten before ONNX 1.12
// infers shapes, so that it works them out again, from the values of shape
// arithmetic where it can, and hfuse's own inference sees which dims are
// made up (Importer::MadeUpDim) instead of taking them for named dims.
void ForgetMadeUpDims(onnx::GraphProto& graph) {
  auto forget = [](onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    for (auto& d : *vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
      if (d.has_dim_param() && d.dim_param().starts_with("unk__")) d.clear_dim_param();
    }
  };
  for (auto& vi : *graph.mutable_value_info()) forget(vi);
  for (auto& vi : *graph.mutable_output()) forget(vi);
}

// ONNX 1.12 checks and infers shapes on the model itself, or on its
// opset-17 copy (opset_compat.h) whose inferred types are read back.
void CheckAndInfer(ModelProto& model, int64_t opset, const std::string& source) {
  ModelProto linked;
  const bool copy = onnx_compat::NeedsLinkedCopy(model, opset);
  if (copy) linked = onnx_compat::ForLinkedOnnx(model, opset, source);
  ModelProto& checked = copy ? linked : model;
  try {
    onnx::checker::check_model(checked);
  } catch (const std::exception& e) {
    Fail(source, "ONNX checker{}: {}",
         copy ? fmt::format(" (on the model read as opset {})", onnx_compat::kLinkedOpset) : "",
         onnx_util::OneLine(e.what()));
  }
  try {
    onnx::shape_inference::InferShapes(checked, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, true));
  } catch (const std::exception& e) {
    Fail(source, "ONNX shape inference{}: {}",
         copy ? fmt::format(" (on the model read as opset {})", onnx_compat::kLinkedOpset) : "",
         onnx_util::OneLine(e.what()));
  }
  if (copy) {
    onnx::GraphProto& g = *model.mutable_graph();
    *g.mutable_value_info() = linked.graph().value_info();
    for (int i = 0; i < g.output_size() && i < linked.graph().output_size(); ++i) {
      *g.mutable_output(i)->mutable_type() = linked.graph().output(i).type();
    }
  }
}

}  // namespace

ModelProto ReadModel(std::string_view bytes, const std::string& source,
                     const std::string& model_dir, const std::map<std::string, int64_t>& bound_dims,
                     std::set<std::string>* specialised) {
  ModelProto model;
  if (bytes.empty()) Fail(source, "the file is empty");
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    Fail(source, "not an ONNX model: the protobuf does not parse (a truncated or corrupt file?)");
  }
  if (!model.has_graph()) Fail(source, "not an ONNX model: it has no graph");
  std::optional<int64_t> opset;
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  if (!opset) Fail(source, "the model imports no opset of the default ONNX domain");
  if (*opset < kMinOnnxOpset || *opset > kMaxOnnxOpset) {
    Fail(source,
         "the model uses opset {} of the default ONNX domain; hfuse reads opsets {} to {} "
         "(ONNX 1.23's newest)",
         *opset, kMinOnnxOpset, kMaxOnnxOpset);
  }
  if (model.ir_version() > kMaxOnnxIrVersion) {
    Fail(source, "the model has IR version {}; hfuse reads IR versions up to {} (ONNX 1.23's)",
         model.ir_version(), kMaxOnnxIrVersion);
  }
  LoadExternalData(model, source, model_dir);
  CheckConstantData(model.graph(), source);
  FoldConstantIfs(model, source);
  ForgetMadeUpDims(*model.mutable_graph());
  // What the model itself says of its values' types: inference after an If
  // is folded starts from it again, not from what the If's outputs were.
  const auto declared_info = model.graph().value_info();
  std::vector<onnx::TypeProto> declared_outputs;
  for (const auto& vi : model.graph().output()) declared_outputs.push_back(vi.type());
  CheckAndInfer(model, *opset, source);
  auto again = [&]() {
    FoldConstantIfs(model, source);  // a branch may hold constant ones
    onnx::GraphProto& g = *model.mutable_graph();
    *g.mutable_value_info() = declared_info;
    for (int i = 0; i < g.output_size(); ++i) {
      *g.mutable_output(i)->mutable_type() = declared_outputs[static_cast<size_t>(i)];
    }
    CheckAndInfer(model, *opset, source);
  };
  while (FoldShapeIfs(model, source)) again();
  // Ifs left that the bound dims' values decide: the model is specialised
  // to those values (the caller pins the dims it read to them).
  std::set<std::string> read;
  if (!bound_dims.empty()) {
    while (FoldShapeIfs(model, source, &bound_dims, &read)) {
      again();
      if (specialised) specialised->insert(read.begin(), read.end());
      read.clear();
      while (FoldShapeIfs(model, source)) again();
    }
  }
  return model;
}

}  // namespace hfuse::onnx_import
