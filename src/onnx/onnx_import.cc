// The ONNX importer. See onnx_import.h.
#include "hfuse/onnx/onnx_import.h"

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <unordered_map>

#include "hfuse/ir/verifier.h"
#include "hfuse/support/checked.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"
#include "hfuse/support/half.h"
#include "hfuse/support/permute.h"
#include "import_patterns.h"
#include "onnx_util.h"
#include "opset_compat.h"

namespace hfuse {
namespace {

using onnx::AttributeProto;
using onnx::ModelProto;
using onnx::NodeProto;
using onnx::TensorProto;
using onnx::TypeProto;
using onnx_util::ElemTypeName;

template <typename... Args>
[[noreturn]] void Fail(const std::string& source, fmt::format_string<Args...> format,
                       Args&&... args) {
  ThrowInputError("{}: {}", source, fmt::format(format, std::forward<Args>(args)...));
}

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
// type say before shape inference sees it.
void CheckTensorData(const TensorProto& t, const std::string& source, std::string_view where) {
  if (t.data_location() == TensorProto::EXTERNAL) return;  // read and sized by LoadExternalData
  const std::span<const int64_t> dims(t.dims().data(), t.dims().size());
  const std::optional<int64_t> numel = ElementCount(dims);
  if (!numel) {
    Fail(source, "{} '{}' has dims [{}], which do not count in 64 bits", where, t.name(),
         fmt::join(dims, ", "));
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

const AttributeProto* FindAttr(const NodeProto& node, std::string_view name) {
  for (const AttributeProto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}
int64_t IntAttr(const NodeProto& node, std::string_view name, int64_t fallback) {
  const AttributeProto* a = FindAttr(node, name);
  return a && a->type() == AttributeProto::INT ? a->i() : fallback;
}
double FloatAttr(const NodeProto& node, std::string_view name, double fallback) {
  const AttributeProto* a = FindAttr(node, name);
  return a && a->type() == AttributeProto::FLOAT ? a->f() : fallback;
}
std::vector<int64_t> IntsAttr(const NodeProto& node, std::string_view name) {
  const AttributeProto* a = FindAttr(node, name);
  if (!a || a->type() != AttributeProto::INTS) return {};
  return {a->ints().begin(), a->ints().end()};
}

// An If whose condition is a constant (an initializer or a Constant node's
// value, as exporters write for a Python `if` on a flag) is replaced by the
// nodes of the branch it takes, its outputs renamed to the If's through
// Identity nodes (which the importer folds). Names local to the branch that
// the graph already uses are renamed. An If on a computed condition stays,
// and the importer refuses it (control flow), naming the node.
void FoldConstantIfs(ModelProto& model, const std::string& source) {
  onnx::GraphProto& g = *model.mutable_graph();
  for (int round = 0; round < 1024; ++round) {
    std::map<std::string, const TensorProto*> constants;
    for (const TensorProto& t : g.initializer()) constants[t.name()] = &t;
    onnx_util::NameSet names;
    for (const auto& vi : g.input()) names.Take(vi.name());
    for (const TensorProto& t : g.initializer()) names.Take(t.name());
    for (const NodeProto& n : g.node()) {
      for (const std::string& o : n.output()) names.Take(o);
      if (n.op_type() == "Constant" && n.output_size() == 1 && n.attribute_size() == 1 &&
          n.attribute(0).name() == "value" && n.attribute(0).has_t()) {
        constants[n.output(0)] = &n.attribute(0).t();
      }
    }
    int at = -1;
    bool take_then = false;
    for (int i = 0; i < g.node_size() && at < 0; ++i) {
      const NodeProto& n = g.node(i);
      if (n.op_type() != "If" || !(n.domain().empty() || n.domain() == "ai.onnx") ||
          n.input_size() != 1) {
        continue;
      }
      auto c = constants.find(n.input(0));
      if (c == constants.end() || onnx_util::TensorNumel(*c->second) != 1) continue;
      const auto data = onnx_util::TensorData(*c->second);
      if (!data || data->empty()) continue;
      take_then = std::any_of(data->begin(), data->end(), [](uint8_t b) { return b != 0; });
      at = i;
    }
    if (at < 0) return;
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
}

// Dims that an earlier shape inference made up ('unk__N': onnx's
// version_converter, a current exporter) are forgotten before ONNX 1.12
// infers shapes, so that it works them out again, from the values of shape
// arithmetic where it can, and hfuse's own inference sees which dims are
// made up (HasMadeUpDim) instead of taking them for named dims.
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

class Importer {
 public:
  Importer(ModelProto& model, std::string source, const OnnxImportOptions& options)
      : model_(model), source_(std::move(source)), options_(options) {}

  OnnxModel Run() {
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

 private:
  template <typename... Args>
  [[noreturn]] void Error(fmt::format_string<Args...> format, Args&&... args) {
    Fail(source_, format, std::forward<Args>(args)...);
  }

  void Record(const onnx::ValueInfoProto& vi) { types_[vi.name()] = &vi.type(); }

  const std::string& Resolve(const std::string& name) const {
    const std::string* at = &name;
    for (auto it = alias_.find(*at); it != alias_.end(); it = alias_.find(*at)) at = &it->second;
    return *at;
  }
  const TensorProto* Constant(const std::string& name) const {
    auto it = constants_.find(Resolve(name));
    return it == constants_.end() ? nullptr : it->second;
  }

  // The element type ONNX gives a value, which must be one of hfuse's.
  DType ValueType(const std::string& name, std::string_view what) {
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
  bool KnownFloat(const std::string& name) const {
    auto it = types_.find(name);
    return it != types_.end() && it->second->has_tensor_type() &&
           onnx_util::DTypeOf(it->second->tensor_type().elem_type());
  }

  Dim NamedDim(const std::string& name) {
    if (auto d = g_.FindDim(name)) return Dim::Dynamic(*d);
    if (auto d = ProductNamed(name)) return *d;
    return Dim::Dynamic(
        g_.AddDim({name, options_.dim_min, options_.dim_max, {}, options_.dim_run}));
  }

  std::optional<Shape> TryShapeOf(const std::string& name) {
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
  Shape ShapeOf(const std::string& name, std::string_view what) {
    if (auto s = TryShapeOf(name)) return *s;
    Error(
        "{} '{}' has a shape ONNX's shape inference cannot tell (a dim of unknown size): hfuse "
        "needs every dim static or named",
        what, name);
  }

  // The IR tensor of an ONNX value; a float constant becomes a param that
  // keeps its values.
  TensorId Value(const std::string& onnx_name, std::string_view what) {
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

  TensorId NewValue(const std::string& name, Shape shape, DType dtype) {
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
  TensorId NewInternal(const std::string& base, Shape shape, DType dtype) {
    return NewValue(names_.Fresh(base), std::move(shape), dtype);
  }
  TensorId NewParam(const std::string& base, Shape shape, DType dtype, std::vector<uint8_t> data) {
    const TensorId id = NewInternal(base, std::move(shape), dtype);
    Tensor& t = g_.mutable_tensor(id);
    t.role = Role::kParam;
    t.data = std::make_shared<const std::vector<uint8_t>>(std::move(data));
    return id;
  }
  TensorId ScalarParam(const std::string& base, DType dtype, double value) {
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

  OpId AddOp(Op op) {
    const std::string base = op.name;
    for (int n = 1;; ++n) {
      const OpId id = g_.AddOp(op);
      if (id != kNone) return id;
      op.name = fmt::format("{}_{}", base, n);
    }
  }
  std::string NodeName(const NodeProto& node) {
    if (!node.name().empty()) return node.name();
    return op_names_.Fresh(fmt::format("{}_{}", node.op_type(), unnamed_++));
  }

  // The node as it was read, so the exporter can write it back.
  std::shared_ptr<OnnxNode> Keep(const NodeProto& node, OpType imported_as) {
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
  static std::optional<double> ScalarOf(const TensorProto& t) {
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
  int32_t KeepConstant(OnnxNode& kept, const NodeProto& node, int slot) {
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

  // ---- before the main walk -------------------------------------------

  void FoldConstantsAndIdentities() {
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
  std::optional<TensorProto> GatheredConstant(const NodeProto& node) const {
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
  std::optional<TensorProto> TransposedConstant(const NodeProto& node) const {
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

  TensorProto ConstantValue(const NodeProto& node) {
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

  // Nodes none of whose outputs reach a graph output are dropped here (rule 1
  // of the canonical order would drop them anyway), so that a dead branch of
  // unsupported types cannot fail the import.
  void MarkLiveNodes() {
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

  // ---- nodes --------------------------------------------------------------

  static bool IsDefaultDomain(const NodeProto& node) {
    return node.domain().empty() || node.domain() == "ai.onnx";
  }

  // ---- shape arithmetic ------------------------------------------------
  //
  // The values of small integer tensors computed from shapes (Shape ->
  // Gather -> Unsqueeze -> Concat -> Reshape, and Expand's Where(Equal(s,
  // -1), 1, s)), element by element as dims: static numbers, or named dims.
  // A node whose value comes out all static is folded into a constant (its
  // readers keep it, as any constant); one that holds a named dim stays (the
  // CPU executor computes it), and its value gives the shapes of the
  // Reshape, Expand and ConstantOfShape that read it, which ONNX's shape
  // inference leaves unknown or names with a fresh 'unk__' dim.
  struct SymValue {
    std::vector<Dim> v;
    bool scalar = false;
  };

  std::optional<SymValue> Sym(const std::string& name) const {
    const std::string& n = Resolve(name);
    if (auto it = sym_.find(n); it != sym_.end()) return it->second;
    const TensorProto* c = Constant(n);
    if (!c || c->dims_size() > 1 || TensorNumel(*c) > 64) return std::nullopt;
    std::vector<int64_t> ints;
    if (c->data_type() == TensorProto::BOOL) {
      auto data = onnx_util::TensorData(*c);
      if (!data) return std::nullopt;
      for (uint8_t b : *data) ints.push_back(b != 0);
    } else if (auto v = onnx_util::TensorInts(*c)) {
      ints = *v;
    } else {
      return std::nullopt;
    }
    SymValue s;
    s.scalar = c->dims_size() == 0;
    for (int64_t i : ints) s.v.push_back(Dim::Static(i));
    return s;
  }
  static int64_t TensorNumel(const TensorProto& t) { return onnx_util::TensorNumel(t); }

  // The value of an integer-valued node from its inputs' values, or nothing.
  std::optional<SymValue> EvalSym(const NodeProto& node) {
    const std::string& t = node.op_type();
    auto in = [&](int i) { return i < node.input_size() ? Sym(node.input(i)) : std::nullopt; };
    if (t == "Shape" && !values_.count(Resolve(node.input(0)))) {
      auto x = in(0);  // the shape of a shape value
      if (!x) return std::nullopt;
      return SymValue{x->scalar ? std::vector<Dim>{} : std::vector<Dim>{Dim::Static(
                                                           static_cast<int64_t>(x->v.size()))},
                      false};
    }
    if (t == "Reshape") {  // a shape value to 1-D
      auto x = in(0), target = in(1);
      if (!x || !target || target->v.size() != 1) return std::nullopt;
      return SymValue{x->v, false};
    }
    if (t == "Shape") {
      auto it = values_.find(Resolve(node.input(0)));
      if (it == values_.end()) return std::nullopt;
      const Shape& shape = T(it->second).shape;
      const auto rank = static_cast<int64_t>(shape.size());
      int64_t start = IntAttr(node, "start", 0), end = IntAttr(node, "end", rank);
      if (start < 0) start += rank;
      if (end < 0) end += rank;
      start = std::clamp<int64_t>(start, 0, rank);
      end = std::clamp<int64_t>(end, start, rank);
      return SymValue{{shape.begin() + start, shape.begin() + end}, false};
    }
    if (t == "Identity" || t == "Cast") {
      if (t == "Cast") {
        const int64_t to = IntAttr(node, "to", 0);
        if (to != TensorProto::INT64 && to != TensorProto::INT32) return std::nullopt;
      }
      return in(0);
    }
    if (t == "Gather") {
      auto data = in(0);
      auto index = in(1);
      if (!data || !index || data->scalar || IntAttr(node, "axis", 0) != 0) return std::nullopt;
      SymValue out{{}, index->scalar};
      const auto n = static_cast<int64_t>(data->v.size());
      for (const Dim& i : index->v) {
        if (!i.is_static()) return std::nullopt;
        const int64_t at = i.value < 0 ? i.value + n : i.value;
        if (at < 0 || at >= n) return std::nullopt;
        out.v.push_back(data->v[static_cast<size_t>(at)]);
      }
      return out;
    }
    if (t == "Unsqueeze" || t == "Squeeze") {
      auto x = in(0);
      if (!x) return std::nullopt;
      if (t == "Unsqueeze" && x->scalar) return SymValue{x->v, false};
      if (t == "Squeeze" && !x->scalar && x->v.size() == 1) return SymValue{x->v, true};
      return std::nullopt;
    }
    if (t == "Concat") {
      SymValue out;
      for (int i = 0; i < node.input_size(); ++i) {
        auto x = in(i);
        if (!x || x->scalar) return std::nullopt;
        out.v.insert(out.v.end(), x->v.begin(), x->v.end());
      }
      return out;
    }
    if (t == "Slice") {
      auto x = in(0), starts = in(1), ends = in(2);
      if (!x || !starts || !ends || starts->v.size() != 1 || ends->v.size() != 1 ||
          !starts->v[0].is_static() || !ends->v[0].is_static()) {
        return std::nullopt;
      }
      if (node.input_size() > 4 && !node.input(4).empty()) {
        auto steps = in(4);
        if (!steps || steps->v.size() != 1 || !(steps->v[0] == Dim::Static(1))) return std::nullopt;
      }
      const auto n = static_cast<int64_t>(x->v.size());
      int64_t b = starts->v[0].value, e = ends->v[0].value;
      if (b < 0) b += n;
      if (e < 0) e += n;
      b = std::clamp<int64_t>(b, 0, n);
      e = std::clamp<int64_t>(e, b, n);
      return SymValue{{x->v.begin() + b, x->v.begin() + e}, false};
    }
    if (t == "ConstantOfShape") {
      auto shape = in(0);
      if (!shape || shape->v.size() != 1 || !shape->v[0].is_static() || shape->v[0].value > 64) {
        return std::nullopt;
      }
      const AttributeProto* a = FindAttr(node, "value");
      int64_t value = 0;
      if (a) {
        auto ints = onnx_util::TensorInts(a->t());
        if (!ints || ints->empty()) return std::nullopt;
        value = (*ints)[0];
      }
      return SymValue{std::vector<Dim>(static_cast<size_t>(shape->v[0].value), Dim::Static(value)),
                      false};
    }
    if (t == "Where") {
      auto c = in(0), a = in(1), b = in(2);
      if (!c || !a || !b) return std::nullopt;
      const size_t n = std::max({c->v.size(), a->v.size(), b->v.size()});
      SymValue out{{}, c->scalar && a->scalar && b->scalar};
      for (size_t i = 0; i < n; ++i) {
        const Dim& ci = c->v[c->v.size() == 1 ? 0 : i];
        if (!ci.is_static()) return std::nullopt;
        const SymValue& pick = ci.value != 0 ? *a : *b;
        if (pick.v.size() != 1 && pick.v.size() != n) return std::nullopt;
        out.v.push_back(pick.v[pick.v.size() == 1 ? 0 : i]);
      }
      return out;
    }
    static const std::set<std::string> kArith = {"Add", "Sub", "Mul", "Div", "Equal"};
    if (kArith.count(t)) {
      auto a = in(0), b = in(1);
      if (!a || !b) return std::nullopt;
      const size_t n = std::max(a->v.size(), b->v.size());
      if ((a->v.size() != 1 && a->v.size() != n) || (b->v.size() != 1 && b->v.size() != n)) {
        return std::nullopt;
      }
      SymValue out{{}, a->scalar && b->scalar};
      for (size_t i = 0; i < n; ++i) {
        const Dim& x = a->v[a->v.size() == 1 ? 0 : i];
        const Dim& y = b->v[b->v.size() == 1 ? 0 : i];
        if (x.is_static() && y.is_static()) {
          const int64_t p = x.value, q = y.value;
          if ((t == "Div") && q == 0) return std::nullopt;
          out.v.push_back(Dim::Static(t == "Add" ? p + q : t == "Sub" ? p - q : t == "Mul" ? p * q
                                      : t == "Div" ? p / q : p == q));
        } else if (t == "Equal" && (x.is_static() ? x.value : y.value) < 1) {
          out.v.push_back(Dim::Static(0));  // a named dim is at least 1
        } else if (t == "Equal" && x == y) {
          out.v.push_back(Dim::Static(1));
        } else if (!y.is_static() || t == "Equal") {
          if ((t == "Mul" || t == "Add") && x.is_static() &&
              x.value == (t == "Mul" ? 1 : 0)) {
            out.v.push_back(y);
          } else {
            return std::nullopt;
          }
        } else if ((t == "Mul" || t == "Div") ? y.value == 1 : y.value == 0) {
          out.v.push_back(x);
        } else {
          return std::nullopt;
        }
      }
      return out;
    }
    return std::nullopt;
  }

  // Folds `node` when it computes shape arithmetic whose value is all
  // static (true: the node is gone, its output a constant); records the
  // value when it holds a named dim.
  bool FoldShapeArithmetic(const NodeProto& node) {
    if (!IsDefaultDomain(node) || node.output_size() != 1) return false;
    std::optional<SymValue> value = EvalSym(node);
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
    if (node.op_type() == "Equal") elem = TensorProto::BOOL;
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

  // The shape a Reshape to `target` gives `in`: 0 copies the input's dim
  // (unless allowzero), -1 stands for what is left over (static, or the
  // named dims the target does not place, times a static factor).
  // Named dims are taken apart into their factors (a derived dim is a
  // product, see DynamicDim), so that [batch · seq, 1] -> [-1, seq] gives
  // [batch, seq]; a -1 that is left with several factors, or with a static
  // factor ([batch, 39, 16] -> [-1, 16]), becomes their derived dim.
  // Factors multiplies `factor` by the static factors met on the way.
  void Factors(int32_t dim, std::vector<int32_t>& out, int64_t& factor) const {
    const DynamicDim& d = g_.dims()[static_cast<size_t>(dim)];
    if (d.product_of.empty()) {
      out.push_back(dim);
      return;
    }
    factor = std::min<int64_t>(factor * d.factor, INT32_MAX);
    for (int32_t f : d.product_of) Factors(f, out, factor);
  }
  Dim ProductDim(std::vector<int32_t> factors, int64_t factor = 1) {
    if (factors.size() == 1 && factor == 1) return Dim::Dynamic(factors[0]);
    std::sort(factors.begin(), factors.end());
    std::string name;
    int64_t lo = factor, hi = factor;
    for (int32_t f : factors) {
      const DynamicDim& d = g_.dims()[static_cast<size_t>(f)];
      name += (name.empty() ? "" : "*") + d.name;
      lo = std::min<int64_t>(lo * d.min, INT32_MAX);
      hi = std::min<int64_t>(hi * d.max, INT32_MAX);
    }
    if (factor != 1) name += fmt::format("*{}", factor);  // as flatten-gemm-inputs names it
    if (auto d = g_.FindDim(name)) return Dim::Dynamic(*d);
    DynamicDim dim{name, lo, hi, factors, 0, factor};  // bound through its factors
    return Dim::Dynamic(g_.AddDim(std::move(dim)));
  }

  // A dim name that spells a product of dims the model has declared and
  // static sizes, as hfuse writes a derived dim (flatten-gemm-inputs:
  // "batch_size*2"): that derived dim, so that a fused model reads back with
  // the dims it was written with. Nothing for any other name.
  std::optional<Dim> ProductNamed(const std::string& name) {
    if (name.find('*') == std::string::npos) return std::nullopt;
    std::vector<int32_t> factors;
    int64_t factor = 1;
    for (size_t begin = 0; begin <= name.size();) {
      size_t end = name.find('*', begin);
      if (end == std::string::npos) end = name.size();
      const std::string part = name.substr(begin, end - begin);
      begin = end + 1;
      if (part.empty()) return std::nullopt;
      if (std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        if (part.size() > 9) return std::nullopt;
        factor *= std::stoll(part);
        continue;
      }
      const auto d = g_.FindDim(part);
      if (!d || !g_.dims()[static_cast<size_t>(*d)].product_of.empty()) return std::nullopt;
      factors.push_back(*d);
    }
    if (factors.empty() || factor < 1 || factor > INT32_MAX) return std::nullopt;
    return ProductDim(std::move(factors), factor);
  }

  std::optional<Shape> ReshapeTo(const Shape& in, const std::vector<Dim>& target,
                                 bool allow_zero) {
    Shape out;
    std::vector<int32_t> left;
    int64_t static_in = 1, static_out = 1;
    for (const Dim& d : in) {
      if (d.is_static()) {
        static_in *= d.value;
      } else {
        Factors(d.dynamic, left, static_in);
      }
    }
    size_t infer = SIZE_MAX;
    for (size_t i = 0; i < target.size(); ++i) {
      Dim d = target[i];
      if (d.is_static() && d.value == 0 && !allow_zero) {
        if (i >= in.size()) return std::nullopt;
        d = in[i];
      } else if (d.is_static() && d.value == -1) {
        if (infer != SIZE_MAX) return std::nullopt;
        infer = i;
        out.push_back(d);
        continue;
      } else if (d.is_static() && d.value < 0) {
        return std::nullopt;
      }
      if (d.is_static()) {
        static_out *= d.value;
      } else {
        std::vector<int32_t> factors;
        Factors(d.dynamic, factors, static_out);
        for (int32_t f : factors) {
          auto it = std::find(left.begin(), left.end(), f);
          if (it == left.end()) return std::nullopt;
          left.erase(it);
        }
      }
      out.push_back(d);
    }
    if (infer != SIZE_MAX) {
      if (left.empty() && static_out != 0 && static_in % static_out == 0) {
        out[infer] = Dim::Static(static_in / static_out);
      } else if (left.size() == 1 && static_in == static_out) {
        out[infer] = Dim::Dynamic(left[0]);
      } else if (left.size() > 1 && static_in == static_out) {
        out[infer] = ProductDim(left);
      } else if (!left.empty() && static_out != 0 && static_in % static_out == 0) {
        out[infer] = ProductDim(left, static_in / static_out);
      } else {
        return std::nullopt;
      }
    } else if (!left.empty() || static_in != static_out) {
      return std::nullopt;
    }
    return out;
  }

  // The output shape of a Reshape, Expand or ConstantOfShape whose shape
  // operand has a known value; nothing otherwise.
  std::optional<Shape> ShapeFromValue(const NodeProto& node, const Op& op, const OnnxNode& kept) {
    const std::string& t = node.op_type();
    auto x = [&]() -> const Tensor* {
      if (kept.input_slots.empty() || kept.input_slots[0] < 0) return nullptr;
      return &T(op.inputs[static_cast<size_t>(kept.input_slots[0])]);
    };
    if (t == "ConstantOfShape") {
      auto s = Sym(node.input(0));
      if (!s || s->scalar) return std::nullopt;
      return Shape(s->v.begin(), s->v.end());
    }
    if ((t != "Reshape" && t != "Expand") || node.input_size() < 2 || !x()) return std::nullopt;
    auto s = Sym(node.input(1));
    if (!s || s->scalar) return std::nullopt;
    if (t == "Reshape") return ReshapeTo(x()->shape, s->v, IntAttr(node, "allowzero", 0) != 0);
    // Expand: numpy broadcasting of the input against the shape.
    Shape a = x()->shape, b(s->v.begin(), s->v.end());
    if (a.size() < b.size()) a.insert(a.begin(), b.size() - a.size(), Dim::Static(1));
    if (b.size() < a.size()) b.insert(b.begin(), a.size() - b.size(), Dim::Static(1));
    for (size_t d = 0; d < a.size(); ++d) {
      if (a[d].is_static() && a[d].value == 1) {
        a[d] = b[d];
      } else if (!(b[d].is_static() && b[d].value == 1) && !(a[d] == b[d])) {
        return std::nullopt;
      }
    }
    return a;
  }

  // A shape with a dim ONNX's shape inference made up ('unk__N').
  bool HasMadeUpDim(const std::string& name) const {
    auto it = types_.find(name);
    if (it == types_.end() || !it->second->has_tensor_type() ||
        !it->second->tensor_type().has_shape()) {
      return false;
    }
    for (const auto& d : it->second->tensor_type().shape().dim()) {
      if (d.has_dim_param() && d.dim_param().starts_with("unk__")) return true;
    }
    return false;
  }

  void ImportNode(const NodeProto& node) {
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
  bool FloatInputs(const NodeProto& node, size_t from, size_t to) {
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
  const Tensor& T(TensorId id) const { return g_.tensor(id); }

  TensorId Transposed(const std::string& onnx_name) {
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
  bool IsConstantMatrix(const std::string& name) const {
    const TensorProto* c = Constant(name);
    return c && c->dims_size() == 2 && onnx_util::DTypeOf(c->data_type()) &&
           onnx_util::TensorData(*c);
  }

  // Gemm: Y = alpha · A · op(B) + beta · C.
  bool ImportGemm(const NodeProto& node) {
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
  bool ImportMatMul(const NodeProto& node) {
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

  bool OutputUsed(const NodeProto& node, int slot) const {
    return slot < node.output_size() && !node.output(slot).empty() &&
           used_.count(node.output(slot));
  }

  bool ImportLayerNorm(const NodeProto& node) {
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

  bool ImportSplit(const NodeProto& node) {
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

  bool ImportConcat(const NodeProto& node) {
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
  bool ImportReshape(const NodeProto& node) {
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

  bool ImportElementwise(const NodeProto& node, EwFunc func) {
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
  bool ImportGroup(const NodeProto& node) {
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
    if (IsGroupGemm(*type)) {
      const int64_t group_size = IntAttr(node, "group_size", 0);
      if (group_size != static_cast<int64_t>(group.outputs.size())) {
        Error("{} node '{}': group_size {} does not match its {} outputs", node.op_type(),
              group.name, group_size, group.outputs.size());
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

  bool HasElemType(const std::string& name) const {
    auto it = types_.find(name);
    return it != types_.end() && it->second->has_tensor_type() &&
           it->second->tensor_type().elem_type() != TensorProto::UNDEFINED;
  }

  // The dtype and shape of a single-output node whose output ONNX's shape
  // inference left unknown, from the IR shapes of its inputs, for the ops
  // that keep, broadcast, reduce or squeeze their input's shape. A named
  // dim is taken to be more than 1 (a Squeeze without axes keeps it).
  std::optional<std::pair<DType, Shape>> InferOutput(const NodeProto& node, const Op& op,
                                                     const OnnxNode& kept) {
    if (node.output_size() != 1 && node.op_type() != "Dropout") return std::nullopt;
    auto input = [&](size_t slot) -> const Tensor* {
      if (slot >= kept.input_slots.size() || kept.input_slots[slot] < 0) return nullptr;
      return &T(op.inputs[static_cast<size_t>(kept.input_slots[slot])]);
    };
    auto constant_ints = [&](size_t slot) -> std::optional<std::vector<int64_t>> {
      if (slot >= kept.input_slots.size() || kept.input_slots[slot] > -2) return std::nullopt;
      TensorProto t;
      t.ParseFromString(kept.constants[static_cast<size_t>(-2 - kept.input_slots[slot])].second);
      return onnx_util::TensorInts(t);
    };
    const Tensor* x = input(0);
    if (!x) return std::nullopt;
    const std::string& type = node.op_type();
    const auto rank = static_cast<int64_t>(x->shape.size());
    static const std::set<std::string> kSame = {
        "Relu", "Sigmoid", "Tanh", "Sqrt", "Exp", "Log", "Neg", "Abs", "Erf", "Reciprocal",
        "Softplus", "LeakyRelu", "Clip", "Softmax", "LogSoftmax", "BatchNormalization",
        "Dropout", "Identity", "Not", "Floor", "Ceil", "Gelu", "Elu", "Sign", "Swish", "Mish"};
    if (kSame.count(type)) return std::pair(x->dtype, x->shape);
    if (type == "MatMul") {  // numpy's matmul, both operands at least 2-D
      const Tensor* y = input(1);
      if (!y || x->shape.size() < 2 || y->shape.size() < 2) return std::nullopt;
      Shape a(x->shape.begin(), x->shape.end() - 2), b(y->shape.begin(), y->shape.end() - 2);
      if (a.size() < b.size()) a.insert(a.begin(), b.size() - a.size(), Dim::Static(1));
      if (b.size() < a.size()) b.insert(b.begin(), a.size() - b.size(), Dim::Static(1));
      Shape out;
      for (size_t d = 0; d < a.size(); ++d) {
        const bool a1 = a[d].is_static() && a[d].value == 1;
        const bool b1 = b[d].is_static() && b[d].value == 1;
        if (!(a[d] == b[d]) && !a1 && !b1) return std::nullopt;
        out.push_back(a1 ? b[d] : a[d]);
      }
      out.push_back(x->shape[x->shape.size() - 2]);
      out.push_back(y->shape.back());
      return std::pair(x->dtype, out);
    }
    if (type == "Einsum") {
      // An explicit output ("ij,jk->ik"): each output letter's dim from an
      // input that has it (libonnx 1.12 infers no Einsum; "..." is not read).
      auto eq = kept.strings.find("equation");
      if (eq == kept.strings.end()) return std::nullopt;
      std::string e;
      for (char c : eq->second) {
        if (c != ' ') e += c;
      }
      const size_t arrow = e.find("->");
      if (arrow == std::string::npos || e.find('.') != std::string::npos) return std::nullopt;
      std::map<char, Dim> dims;
      size_t slot = 0, begin = 0;
      for (size_t end = 0; end <= arrow; ++end) {
        if (end < arrow && e[end] != ',') continue;
        const Tensor* in = input(slot++);
        if (!in || in->shape.size() != end - begin) return std::nullopt;
        for (size_t i = begin; i < end; ++i) dims.emplace(e[i], in->shape[i - begin]);
        begin = end + 1;
      }
      Shape out;
      for (char c : e.substr(arrow + 2)) {
        auto it = dims.find(c);
        if (it == dims.end()) return std::nullopt;
        out.push_back(it->second);
      }
      return std::pair(x->dtype, out);
    }
    if (type == "Cast") {
      auto dtype = onnx_util::AnyDTypeOf(static_cast<int32_t>(IntAttr(node, "to", 0)));
      if (!dtype) return std::nullopt;
      return std::pair(*dtype, x->shape);
    }
    if (type == "Squeeze") {
      std::vector<int64_t> axes = IntsAttr(node, "axes");
      if (auto c = constant_ints(1)) axes = *c;
      Shape out;
      for (int64_t d = 0; d < rank; ++d) {
        const Dim& dim = x->shape[static_cast<size_t>(d)];
        const bool listed = std::any_of(axes.begin(), axes.end(), [&](int64_t a) {
          return a == d || a + rank == d;
        });
        const bool one = dim.is_static() && dim.value == 1;
        if (axes.empty() ? one : listed) continue;
        out.push_back(dim);
      }
      return std::pair(x->dtype, out);
    }
    if (type == "Unsqueeze") {
      std::vector<int64_t> axes = IntsAttr(node, "axes");
      if (auto c = constant_ints(1)) axes = *c;
      const auto out_rank = rank + static_cast<int64_t>(axes.size());
      for (int64_t& a : axes) a = a < 0 ? a + out_rank : a;
      Shape out;
      size_t next = 0;
      for (int64_t d = 0; d < out_rank; ++d) {
        if (std::count(axes.begin(), axes.end(), d)) {
          out.push_back(Dim::Static(1));
        } else if (next < x->shape.size()) {
          out.push_back(x->shape[next++]);
        } else {
          return std::nullopt;
        }
      }
      return std::pair(x->dtype, out);
    }
    if (type == "Flatten") {  // [prod(dims before axis), prod(the rest)]
      int64_t axis = IntAttr(node, "axis", 1);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis > rank) return std::nullopt;
      Shape out;
      for (auto [b, e] : {std::pair<int64_t, int64_t>{0, axis}, {axis, rank}}) {
        int64_t product = 1;
        std::vector<int32_t> named;
        for (int64_t d = b; d < e; ++d) {
          const Dim& dim = x->shape[static_cast<size_t>(d)];
          if (dim.is_static()) {
            product *= dim.value;
          } else {
            Factors(dim.dynamic, named, product);
          }
        }
        out.push_back(named.empty() ? Dim::Static(product) : ProductDim(named, product));
      }
      return std::pair(x->dtype, out);
    }
    if (type == "Transpose") {
      std::vector<int64_t> perm = IntsAttr(node, "perm");
      if (perm.empty()) {
        for (int64_t d = rank; d-- > 0;) perm.push_back(d);
      }
      if (static_cast<int64_t>(perm.size()) != rank) return std::nullopt;
      Shape out;
      for (int64_t p : perm) {
        if (p < 0 || p >= rank) return std::nullopt;
        out.push_back(x->shape[static_cast<size_t>(p)]);
      }
      return std::pair(x->dtype, out);
    }
    if (type == "Concat") {
      int64_t axis = IntAttr(node, "axis", 0);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) return std::nullopt;
      Shape out = x->shape;
      int64_t total = 0;
      for (size_t slot = 0; slot < kept.input_slots.size(); ++slot) {
        const Tensor* y = input(slot);
        if (!y || y->shape.size() != x->shape.size()) return std::nullopt;
        const Dim& d = y->shape[static_cast<size_t>(axis)];
        if (!d.is_static()) return std::nullopt;
        total += d.value;
      }
      out[static_cast<size_t>(axis)] = Dim::Static(total);
      return std::pair(x->dtype, out);
    }
    static const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Pow", "Max",
                                                  "Min", "PRelu"};
    static const std::set<std::string> kCompare = {"Equal", "Less", "Greater", "LessOrEqual",
                                                   "GreaterOrEqual", "And", "Or"};
    if ((kBinary.count(type) || kCompare.count(type)) && node.input_size() == 2) {
      const Tensor* y = input(1);
      Shape a = x->shape, b = y ? y->shape : Shape{};
      if (!y && !constant_ints(1)) return std::nullopt;
      if (b.size() > a.size()) std::swap(a, b);
      b.insert(b.begin(), a.size() - b.size(), Dim::Static(1));
      for (size_t d = 0; d < a.size(); ++d) {
        if (a[d].is_static() && a[d].value == 1) a[d] = b[d];
      }
      return std::pair(kCompare.count(type) ? DType::kBool : x->dtype, a);
    }
    if (type == "ReduceSum" || type == "ReduceMean" || type == "ReduceMax" || type == "ReduceMin") {
      std::vector<int64_t> axes = IntsAttr(node, "axes");
      if (auto c = constant_ints(1)) axes = *c;
      const bool keep = IntAttr(node, "keepdims", 1) != 0;
      if (axes.empty() && IntAttr(node, "noop_with_empty_axes", 0) != 0) {
        return std::pair(x->dtype, x->shape);  // opset 18's identity
      }
      Shape out;
      for (int64_t d = 0; d < rank; ++d) {
        const bool reduced = axes.empty() || std::any_of(axes.begin(), axes.end(), [&](int64_t a) {
                               return a == d || a + rank == d;
                             });
        if (!reduced) {
          out.push_back(x->shape[static_cast<size_t>(d)]);
        } else if (keep) {
          out.push_back(Dim::Static(1));
        }
      }
      return std::pair(x->dtype, out);
    }
    return std::nullopt;
  }

  void ImportOpaque(const NodeProto& node) {
    if (std::any_of(node.attribute().begin(), node.attribute().end(), [](const AttributeProto& a) {
          return a.type() == AttributeProto::GRAPH || a.type() == AttributeProto::GRAPHS;
        })) {
      // Its subgraphs may read values of this graph that its inputs do not
      // name, so the pass could not see what it depends on.
      if (node.op_type() == "If") {
        Error(
            "If node '{}': its condition '{}' is computed at run time; hfuse folds an If only "
            "when its condition is a constant (control flow is not supported)",
            node.name(), node.input_size() > 0 ? node.input(0) : "");
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
      std::optional<Shape> from_value = ShapeFromValue(node, op, *kept);
      std::optional<std::pair<DType, Shape>> inferred;
      if (from_value && HasElemType(out)) {
        op.outputs.push_back(NewValue(out, std::move(*from_value), ValueType(out, what)));
      } else if (HasMadeUpDim(out) && (inferred = InferOutput(node, op, *kept))) {
        op.outputs.push_back(NewValue(out, std::move(inferred->second), inferred->first));
      } else if (std::optional<Shape> shape = TryShapeOf(out); shape && HasElemType(out)) {
        op.outputs.push_back(NewValue(out, std::move(*shape), ValueType(out, what)));
      } else if (auto inferred = InferOutput(node, op, *kept)) {
        // ONNX's inference stopped here (a Squeeze without axes of a named
        // dim, say); hfuse's own takes over.
        op.outputs.push_back(NewValue(out, std::move(inferred->second), inferred->first));
      } else {
        op.outputs.push_back(NewValue(out, ShapeOf(out, what), ValueType(out, what)));
      }
    }
    op.attrs.onnx = std::move(kept);
    AddOp(std::move(op));
  }

  ModelProto& model_;
  std::string source_;
  OnnxImportOptions options_;
  Graph g_;
  std::map<std::string, int64_t> opsets_;
  std::unordered_map<std::string, const TypeProto*> types_;
  std::unordered_map<std::string, const TensorProto*> constants_;
  std::deque<TensorProto> owned_;                       // Constant nodes' values
  std::unordered_map<std::string, std::string> alias_;  // folded Identity outputs
  std::unordered_map<std::string, TensorId> values_;    // ONNX value -> IR tensor
  std::map<std::string, TensorId> transposed_;          // constant -> its transpose
  std::set<std::string> used_;                          // read by a live node or an output
  std::vector<bool> live_, folded_;
  std::unordered_map<std::string, SymValue> sym_;  // shape arithmetic's values
  std::set<std::string> graph_outputs_;
  onnx_util::NameSet names_, op_names_;
  int64_t unnamed_ = 0;
};

}  // namespace

OnnxModel ImportOnnx(std::string_view bytes, const std::string& source,
                     const std::string& model_dir, const OnnxImportOptions& options) {
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
  FoldConstantIfs(model, source);
  ForgetMadeUpDims(*model.mutable_graph());
  // ONNX 1.12 checks and infers shapes on the model itself, or on its
  // opset-17 copy (opset_compat.h) whose inferred types are read back.
  ModelProto linked;
  const bool copy = onnx_compat::NeedsLinkedCopy(model, *opset);
  if (copy) linked = onnx_compat::ForLinkedOnnx(model, *opset, source);
  ModelProto& checked = copy ? linked : model;
  try {
    onnx::checker::check_model(checked);
  } catch (const std::exception& e) {
    Fail(source, "ONNX checker{}: {}",
         copy ? fmt::format(" (on the model read as opset {})", onnx_compat::kLinkedOpset) : "",
         onnx_util::OneLine(e.what()));
  }
  CheckConstantData(checked.graph(), source);
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
  return Importer(model, source, options).Run();
}

OnnxModel ReadOnnxFile(const std::string& path, const OnnxImportOptions& options) {
  const std::string bytes = ReadFile(path);
  return ImportOnnx(bytes, path, std::filesystem::path(path).parent_path().string(), options);
}

}  // namespace hfuse
