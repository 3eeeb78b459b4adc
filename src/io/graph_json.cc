// Graph JSON v1 reader and writer (nlohmann-json for parsing and for
// escaping strings and printing numbers, so values round-trip exactly).
#include "hfuse/io/graph_json.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "hfuse/ir/verifier.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"

namespace hfuse {
namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Graph Read(std::string_view text) {
    // nlohmann's message for this one ("unexpected end of input") hides the cause.
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) Fail("the file is empty");
    json doc;
    try {
      doc = json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {
      // parse_error, and out_of_range for a number beyond double (1e400).
      Fail("malformed JSON: {}", e.what());
    }
    if (!doc.is_object()) Fail("the top level must be an object");
    CheckKeys(doc, "the top level", {"graph_format", "name", "dims", "tensors", "ops", "outputs"});
    const json& format = Required(doc, "graph_format", "the top level");
    if (!format.is_number_integer() || format.get<int64_t>() != 1) {
      Fail("graph_format must be 1, got {}", Describe(format));
    }
    if (doc.contains("name")) graph_.set_name(String(doc["name"], "name"));
    if (doc.contains("dims")) ReadDims(Array(doc["dims"], "dims"));
    ReadTensors(Array(Required(doc, "tensors", "the top level"), "tensors"));
    ReadOps(Array(Required(doc, "ops", "the top level"), "ops"));
    ReadOutputs(Array(Required(doc, "outputs", "the top level"), "outputs"));
    try {
      VerifyGraph(graph_);
    } catch (const InputError& e) {
      Fail("{}", e.what());
    }
    return std::move(graph_);
  }

 private:
  template <typename... Args>
  [[noreturn]] void Fail(fmt::format_string<Args...> format, Args&&... args) {
    ThrowInputError("{}: {}", source_, fmt::format(format, std::forward<Args>(args)...));
  }

  void CheckKeys(const json& obj, const std::string& where,
                 std::initializer_list<std::string_view> allowed) {
    for (const auto& [key, value] : obj.items()) {
      bool ok = false;
      for (std::string_view a : allowed) ok = ok || key == a;
      if (!ok) Fail("{}: unknown key '{}'", where, key);
    }
  }
  // A value for an error message: scalars as written, arrays and objects by
  // type only (dumping them recurses once per level and can overflow the stack
  // on deeply nested input), long strings cut short.
  static std::string Describe(const json& v) {
    if (v.is_structured()) return fmt::format("an {}", v.type_name());
    std::string text = v.dump();
    if (text.size() > 80) text = text.substr(0, 80) + "...";
    return text;
  }
  const json& Required(const json& obj, const char* key, const std::string& where) {
    auto it = obj.find(key);
    if (it == obj.end()) Fail("{}: missing key '{}'", where, key);
    return *it;
  }
  const json& Array(const json& v, const std::string& what) {
    if (!v.is_array()) Fail("{} must be an array, got {}", what, v.type_name());
    return v;
  }
  std::string String(const json& v, const std::string& what) {
    if (!v.is_string()) Fail("{} must be a string, got {}", what, v.type_name());
    return v.get<std::string>();
  }
  int64_t Int(const json& v, const std::string& what) {
    if (!v.is_number_integer()) Fail("{} must be an integer, got {}", what, Describe(v));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      Fail("{} is too large: {}", what, Describe(v));
    }
    return v.get<int64_t>();
  }
  double Number(const json& v, const std::string& what) {
    if (!v.is_number()) Fail("{} must be a number, got {}", what, Describe(v));
    return v.get<double>();
  }
  std::vector<int64_t> IntArray(const json& v, const std::string& what) {
    Array(v, what);
    std::vector<int64_t> out;
    for (const json& e : v) out.push_back(Int(e, what + " entry"));
    return out;
  }

  void ReadDims(const json& dims) {
    for (size_t i = 0; i < dims.size(); ++i) {
      const json& d = dims[i];
      // Until the name is known, the entry is named by its position.
      const std::string at = fmt::format("dims[{}]", i);
      if (!d.is_object()) Fail("{} must be an object, got {}", at, Describe(d));
      DynamicDim dim;
      dim.name = String(Required(d, "name", at), at + " name");
      if (dim.name.empty()) Fail("{}: the name is empty", at);
      const std::string where = fmt::format("dim '{}'", dim.name);
      CheckKeys(d, where, {"name", "min", "max"});
      dim.min = Int(Required(d, "min", where), where + " min");
      dim.max = Int(Required(d, "max", where), where + " max");
      if (dim.min < 0 || dim.max < dim.min) {
        Fail("{}: needs 0 <= min <= max, got min {} max {}", where, dim.min, dim.max);
      }
      if (graph_.FindDim(dim.name)) Fail("dims: dim '{}' is declared twice", dim.name);
      graph_.AddDim(std::move(dim));
    }
  }

  void ReadTensors(const json& tensors) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      const json& t = tensors[i];
      const std::string at = fmt::format("tensors[{}]", i);
      if (!t.is_object()) Fail("{} must be an object, got {}", at, Describe(t));
      Tensor tensor;
      tensor.name = String(Required(t, "name", at), at + " name");
      if (tensor.name.empty()) Fail("{}: the name is empty", at);
      const std::string where = fmt::format("tensor '{}'", tensor.name);
      CheckKeys(t, where, {"name", "shape", "dtype", "role"});
      for (const json& d : Array(Required(t, "shape", where), where + " shape")) {
        if (d.is_string()) {
          auto dim = graph_.FindDim(d.get<std::string>());
          if (!dim) Fail("{}: shape names dim '{}', which is not in dims", where, d.get<std::string>());
          tensor.shape.push_back(Dim::Dynamic(*dim));
        } else {
          const int64_t v = Int(d, where + " shape entry");
          if (v < 0) Fail("{}: shape entry {} is negative", where, v);
          tensor.shape.push_back(Dim::Static(v));
        }
      }
      const std::string dtype = String(Required(t, "dtype", where), where + " dtype");
      auto parsed = ParseDType(dtype);
      if (!parsed) Fail("{}: unknown dtype '{}' (float16, bfloat16 or float32)", where, dtype);
      tensor.dtype = *parsed;
      if (t.contains("role")) {
        const std::string role = String(t["role"], where + " role");
        if (role == "input") tensor.role = Role::kInput;
        else if (role == "param") tensor.role = Role::kParam;
        else Fail("{}: unknown role '{}' (input or param)", where, role);
      }
      if (graph_.AddTensor(std::move(tensor)) == kNone) Fail("{} is declared twice", where);
    }
  }

  TensorId TensorRef(const json& v, const std::string& where) {
    const std::string name = String(v, where);
    auto id = graph_.FindTensor(name);
    if (!id) Fail("{}: tensor '{}' is not declared", where, name);
    return *id;
  }

  void ReadOps(const json& ops) {
    for (size_t i = 0; i < ops.size(); ++i) {
      const json& o = ops[i];
      const std::string at = fmt::format("ops[{}]", i);
      if (!o.is_object()) Fail("{} must be an object, got {}", at, Describe(o));
      Op op;
      op.name = String(Required(o, "name", at), at + " name");
      if (op.name.empty()) Fail("{}: the name is empty", at);
      const std::string where = fmt::format("op '{}'", op.name);
      // Before its outputs, which a copied op would report as produced twice.
      if (graph_.FindOp(op.name)) Fail("{} is declared twice", where);
      const std::string type = String(Required(o, "op", where), where + " op");
      auto parsed = ParseOpType(type);
      if (!parsed) Fail("{}: unknown op type '{}'", where, type);
      op.type = *parsed;
      ReadAttrs(o, op, where);
      const json& inputs = Array(Required(o, "inputs", where), where + " inputs");
      const bool layernorm = IsLayerNorm(op.type);
      if (layernorm && (inputs.empty() || inputs.size() > 3)) {
        Fail("{}: layernorm takes X, gamma, beta (1 to 3 inputs), got {}", where, inputs.size());
      }
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (layernorm && i > 0 && inputs[i].is_null()) {
          (i == 1 ? op.attrs.has_gamma : op.attrs.has_beta) = false;
          continue;
        }
        op.inputs.push_back(TensorRef(inputs[i], where + " input"));
      }
      if (layernorm && inputs.size() < 3) op.attrs.has_beta = false;
      if (layernorm && inputs.size() < 2) op.attrs.has_gamma = false;
      for (const json& out : Array(Required(o, "outputs", where), where + " outputs")) {
        const TensorId id = TensorRef(out, where + " output");
        const Tensor& t = graph_.tensor(id);
        if (t.role != Role::kIntermediate) {
          Fail("{}: output '{}' is a graph {}, which no op may produce", where, t.name,
               t.role == Role::kInput ? "input" : "param");
        }
        if (t.producer != kNone) {
          Fail("{}: tensor '{}' is already produced by op '{}'", where, t.name,
               graph_.op(t.producer).name);
        }
        if (std::find(op.outputs.begin(), op.outputs.end(), id) != op.outputs.end()) {
          Fail("{}: output '{}' is listed twice", where, t.name);
        }
        op.outputs.push_back(id);
      }
      graph_.AddOp(std::move(op));
    }
    if (graph_.num_op_ids() == 0) Fail("the graph has no ops");
  }

  void ReadAttrs(const json& o, Op& op, const std::string& where) {
    Attrs& a = op.attrs;
    switch (op.type) {
      case OpType::kGemmRcr:
      case OpType::kGemmRcrBias:
      case OpType::kGemmRcrBiasRelu:
      case OpType::kGemmRcrBiasSigmoid:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "alpha"});
        if (o.contains("alpha")) a.alpha = Number(o["alpha"], where + " alpha");
        break;
      case OpType::kLayerNorm:
      case OpType::kLayerNormSigmoidMul:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "normalized_shape", "eps"});
        a.normalized_shape =
            IntArray(Required(o, "normalized_shape", where), where + " normalized_shape");
        if (o.contains("eps")) a.eps = Number(o["eps"], where + " eps");
        break;
      case OpType::kSplit:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "split_sizes", "dim"});
        a.split_sizes = IntArray(Required(o, "split_sizes", where), where + " split_sizes");
        a.dim = Int(Required(o, "dim", where), where + " dim");
        break;
      case OpType::kConcatenate:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "dim"});
        a.dim = Int(Required(o, "dim", where), where + " dim");
        break;
      case OpType::kElementwise: {
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "func"});
        const std::string func = String(Required(o, "func", where), where + " func");
        auto f = ParseEwFunc(func);
        if (!f) Fail("{}: unknown func '{}'", where, func);
        a.func = *f;
        break;
      }
      case OpType::kReshape:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "shape"});
        a.shape = IntArray(Required(o, "shape", where), where + " shape");
        break;
      case OpType::kGroupGemmRcr:
      case OpType::kGroupGemmRcrBias:
      case OpType::kGroupGemmRcrBiasRelu:
      case OpType::kGroupGemmRcrBiasSigmoid:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "group_size"});
        a.group_size = Int(Required(o, "group_size", where), where + " group_size");
        break;
      case OpType::kGroupLayerNorm:
      case OpType::kGroupLayerNormSigmoidMul:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "normalized_shapes", "eps"});
        for (const json& s : Array(Required(o, "normalized_shapes", where),
                                   where + " normalized_shapes")) {
          a.normalized_shapes.push_back(IntArray(s, where + " normalized_shapes entry"));
        }
        if (o.contains("eps")) a.eps = Number(o["eps"], where + " eps");
        break;
    }
  }

  void ReadOutputs(const json& outputs) {
    std::vector<TensorId> ids;
    for (const json& o : outputs) {
      const TensorId id = TensorRef(o, "outputs");
      if (std::find(ids.begin(), ids.end(), id) != ids.end()) {
        Fail("outputs: tensor '{}' is listed twice", graph_.tensor(id).name);
      }
      ids.push_back(id);
    }
    if (ids.empty()) Fail("outputs: the graph has no outputs");
    graph_.set_outputs(std::move(ids));
  }

  std::string source_;
  Graph graph_;
};

// Appends JSON text to a buffer; one tensor or op per line.
class Writer {
 public:
  explicit Writer(const Graph& g) : g_(g) {}

  std::string Write(const std::vector<OpId>& order) {
    std::vector<bool> used(static_cast<size_t>(g_.num_tensor_ids()), false);
    for (OpId id : order) {
      for (TensorId t : g_.op(id).inputs) used[static_cast<size_t>(t)] = true;
      for (TensorId t : g_.op(id).outputs) used[static_cast<size_t>(t)] = true;
    }
    for (TensorId t : g_.outputs()) used[static_cast<size_t>(t)] = true;

    Put("{\n \"graph_format\": 1,\n");
    if (!g_.name().empty()) Put(fmt::format(" \"name\": {},\n", Str(g_.name())));
    Put(" \"dims\": [");
    for (size_t i = 0; i < g_.dims().size(); ++i) {
      const DynamicDim& d = g_.dims()[i];
      Put(fmt::format("{}\n  {{\"name\": {}, \"min\": {}, \"max\": {}}}", i ? "," : "",
                      Str(d.name), d.min, d.max));
    }
    Put(g_.dims().empty() ? "],\n" : "\n ],\n");
    Put(" \"tensors\": [");
    bool first = true;
    for (TensorId id = 0; id < g_.num_tensor_ids(); ++id) {
      const Tensor& t = g_.tensor(id);
      if (!t.alive || !(used[static_cast<size_t>(id)] || t.role == Role::kInput)) continue;
      Put(first ? "\n  " : ",\n  ");
      first = false;
      Put(fmt::format("{{\"name\": {}, \"shape\": [", Str(t.name)));
      for (size_t i = 0; i < t.shape.size(); ++i) {
        if (i) Put(", ");
        const Dim& d = t.shape[i];
        Put(d.is_static() ? std::to_string(d.value) : Str(g_.dims()[static_cast<size_t>(d.dynamic)].name));
      }
      Put(fmt::format("], \"dtype\": \"{}\"", DTypeName(t.dtype)));
      if (t.role == Role::kInput) Put(", \"role\": \"input\"");
      if (t.role == Role::kParam) Put(", \"role\": \"param\"");
      Put("}");
    }
    Put("\n ],\n \"ops\": [");
    for (size_t i = 0; i < order.size(); ++i) {
      Put(i ? ",\n  " : "\n  ");
      WriteOp(g_.op(order[i]));
    }
    Put("\n ],\n \"outputs\": [");
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      Put(i ? ", " : "");
      Put(Str(g_.tensor(g_.outputs()[i]).name));
    }
    Put("]\n}\n");
    return std::move(out_);
  }

 private:
  void Put(std::string_view s) { out_.append(s); }
  static std::string Str(const std::string& s) { return json(s).dump(); }
  static std::string Num(double v) { return json(v).dump(); }
  static std::string Ints(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }
  std::string Names(const std::vector<std::string>& names) {
    return fmt::format("[{}]", fmt::join(names, ", "));
  }

  void WriteOp(const Op& op) {
    std::vector<std::string> ins;
    for (TensorId t : op.inputs) ins.push_back(Str(g_.tensor(t).name));
    if (IsLayerNorm(op.type) && !op.attrs.has_gamma && op.attrs.has_beta) {
      ins.insert(ins.begin() + 1, "null");
    }
    std::vector<std::string> outs;
    for (TensorId t : op.outputs) outs.push_back(Str(g_.tensor(t).name));
    Put(fmt::format("{{\"name\": {}, \"op\": \"{}\", \"inputs\": {}, \"outputs\": {}", Str(op.name),
                    OpTypeName(op.type), Names(ins), Names(outs)));
    const Attrs& a = op.attrs;
    switch (op.type) {
      case OpType::kGemmRcr:
      case OpType::kGemmRcrBias:
      case OpType::kGemmRcrBiasRelu:
      case OpType::kGemmRcrBiasSigmoid:
        if (a.alpha) Put(fmt::format(", \"alpha\": {}", Num(*a.alpha)));
        break;
      case OpType::kLayerNorm:
      case OpType::kLayerNormSigmoidMul:
        Put(fmt::format(", \"normalized_shape\": {}", Ints(a.normalized_shape)));
        if (a.eps) Put(fmt::format(", \"eps\": {}", Num(*a.eps)));
        break;
      case OpType::kSplit:
        Put(fmt::format(", \"split_sizes\": {}, \"dim\": {}", Ints(a.split_sizes), a.dim));
        break;
      case OpType::kConcatenate: Put(fmt::format(", \"dim\": {}", a.dim)); break;
      case OpType::kElementwise: Put(fmt::format(", \"func\": \"{}\"", EwFuncName(a.func))); break;
      case OpType::kReshape: Put(fmt::format(", \"shape\": {}", Ints(a.shape))); break;
      case OpType::kGroupGemmRcr:
      case OpType::kGroupGemmRcrBias:
      case OpType::kGroupGemmRcrBiasRelu:
      case OpType::kGroupGemmRcrBiasSigmoid:
        Put(fmt::format(", \"group_size\": {}", a.group_size));
        break;
      case OpType::kGroupLayerNorm:
      case OpType::kGroupLayerNormSigmoidMul: {
        std::vector<std::string> shapes;
        for (const auto& s : a.normalized_shapes) shapes.push_back(Ints(s));
        Put(fmt::format(", \"normalized_shapes\": {}", Names(shapes)));
        if (a.eps) Put(fmt::format(", \"eps\": {}", Num(*a.eps)));
        break;
      }
    }
    Put("}");
  }

  const Graph& g_;
  std::string out_;
};

}  // namespace

Graph ParseGraphJson(std::string_view text, const std::string& source) {
  return Reader(source).Read(text);
}

Graph ReadGraphJsonFile(const std::string& path) { return ParseGraphJson(ReadFile(path), path); }

std::string WriteGraphJson(const Graph& graph, const std::vector<OpId>& op_order) {
  return Writer(graph).Write(op_order.empty() ? graph.LiveOps() : op_order);
}

}  // namespace hfuse
