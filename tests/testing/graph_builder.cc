// The test graph builder: writes graph JSON by hand (fmt only, so the helper
// needs no JSON library) and reads it back with the real reader.
#include "testing/graph_builder.h"

#include <fmt/format.h>

#include <stdexcept>

#include "hfuse/io/graph_json.h"

namespace hfuse::test {
namespace {

// A JSON string literal. Test names are plain, but quotes and backslashes
// must not break the document.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string QuoteAll(const std::vector<std::string>& names) {
  std::vector<std::string> quoted;
  for (const std::string& n : names) quoted.push_back(n == kNoParam ? "null" : Quote(n));
  return fmt::format("[{}]", fmt::join(quoted, ", "));
}

std::string Number(double v) { return fmt::format("{}", v); }

size_t Axis(int64_t dim, size_t rank) {
  return static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(rank) : dim);
}

}  // namespace

void GraphBuilder::Dim(const std::string& name, int64_t min, int64_t max) {
  dims_.push_back(fmt::format("{{\"name\": {}, \"min\": {}, \"max\": {}}}", Quote(name), min, max));
}

std::string GraphBuilder::Input(const std::string& name, ShapeSpec shape, DType dtype) {
  return AddTensor(name, std::move(shape), dtype, "input");
}

std::string GraphBuilder::Param(const std::string& name, ShapeSpec shape, DType dtype) {
  return AddTensor(name, std::move(shape), dtype, "param");
}

std::string GraphBuilder::Declare(const std::string& name, ShapeSpec shape, DType dtype) {
  return AddTensor(name, std::move(shape), dtype, "");
}

std::string GraphBuilder::AddTensor(const std::string& name, ShapeSpec shape, DType dtype,
                                    std::string role) {
  tensors_.push_back({name, std::move(shape), dtype, std::move(role)});
  return name;
}

const GraphBuilder::TensorSpec& GraphBuilder::Find(const std::string& name) const {
  for (const TensorSpec& t : tensors_) {
    if (t.name == name) return t;
  }
  throw std::invalid_argument("GraphBuilder: no tensor named " + name);
}

ShapeSpec GraphBuilder::ShapeOf(const std::string& tensor) const { return Find(tensor).shape; }

DType GraphBuilder::DTypeOf(const std::string& tensor) const { return Find(tensor).dtype; }

std::string GraphBuilder::Output(const std::string& name, ShapeSpec shape, DType dtype) {
  for (const TensorSpec& t : tensors_) {
    if (t.name == name) return name;  // declared ahead: the declaration wins
  }
  return AddTensor(name, std::move(shape), dtype, "");
}

void GraphBuilder::RawOp(const std::string& name, const std::string& type,
                         std::vector<std::string> inputs, std::vector<std::string> outputs,
                         const std::string& attrs) {
  ops_.push_back(fmt::format("{{\"name\": {}, \"op\": {}, \"inputs\": {}, \"outputs\": {}{}{}}}",
                             Quote(name), Quote(type), QuoteAll(inputs), QuoteAll(outputs),
                             attrs.empty() ? "" : ", ", attrs));
}

std::string GraphBuilder::Gemm(const std::string& name, OpType type, const std::string& a,
                               const std::string& w, const std::string& bias,
                               const std::string& out, std::optional<double> alpha) {
  ShapeSpec shape = ShapeOf(a);
  shape.back() = ShapeOf(w).front();  // [..., M, K] x [N, K] -> [..., M, N]
  const std::string y = Output(out.empty() ? name + "_y" : out, shape, DTypeOf(a));
  std::vector<std::string> inputs = {a, w};
  if (GemmHasBias(type)) inputs.push_back(bias);
  RawOp(name, std::string(OpTypeName(type)), inputs, {y},
        alpha ? "\"alpha\": " + Number(*alpha) : "");
  return y;
}

std::string GraphBuilder::Fc(const std::string& name, const std::string& a, int64_t n,
                             FcOptions options) {
  const DType dtype = DTypeOf(a);
  const std::string w = Param("w_" + name, {n, ShapeOf(a).back()}, dtype);
  const std::string bias = GemmHasBias(options.type) ? Param("b_" + name, {n}, dtype) : "";
  return Gemm(name, options.type, a, w, bias, "", options.alpha);
}

std::string GraphBuilder::LayerNorm(const std::string& name, const std::string& x,
                                    LnOptions options) {
  const ShapeSpec xs = ShapeOf(x);
  const DType dtype = DTypeOf(x);
  const ShapeSpec tail(xs.end() - options.normalized_rank, xs.end());
  std::vector<int64_t> normalized;
  for (const DimSpec& d : tail) normalized.push_back(d.value);
  auto param = [&](std::string pname, const std::string& fallback) {
    if (pname.empty()) pname = fallback;
    if (pname == kNoParam) return pname;
    for (const TensorSpec& t : tensors_) {
      if (t.name == pname) return pname;  // shared: gamma = beta, or reused
    }
    return Param(pname, tail, dtype);
  };
  const std::string gamma = param(options.gamma, "g_" + name);
  const std::string beta = param(options.beta, "be_" + name);
  const std::string y = Output(name + "_y", xs, dtype);
  std::string attrs = fmt::format("\"normalized_shape\": [{}]", fmt::join(normalized, ", "));
  if (options.eps) attrs += ", \"eps\": " + Number(*options.eps);
  RawOp(name, std::string(OpTypeName(options.type)), {x, gamma, beta}, {y}, attrs);
  return y;
}

std::vector<std::string> GraphBuilder::Split(const std::string& name, const std::string& x,
                                             std::vector<int64_t> sizes, int64_t dim) {
  const ShapeSpec xs = ShapeOf(x);
  const size_t axis = Axis(dim, xs.size());
  std::vector<std::string> outs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ShapeSpec shape = xs;
    shape[axis] = DimSpec(sizes[i]);
    outs.push_back(Output(fmt::format("{}_y{}", name, i), shape, DTypeOf(x)));
  }
  RawOp(name, "split", {x}, outs,
        fmt::format("\"split_sizes\": [{}], \"dim\": {}", fmt::join(sizes, ", "), dim));
  return outs;
}

std::string GraphBuilder::Concat(const std::string& name, std::vector<std::string> inputs,
                                 int64_t dim) {
  ShapeSpec shape = ShapeOf(inputs.front());
  const size_t axis = Axis(dim, shape.size());
  if (inputs.size() > 1) {
    int64_t total = 0;
    for (const std::string& in : inputs) total += ShapeOf(in)[axis].value;
    shape[axis] = DimSpec(total);
  }
  const std::string y = Output(name + "_y", shape, DTypeOf(inputs.front()));
  RawOp(name, "concatenate", inputs, {y}, fmt::format("\"dim\": {}", dim));
  return y;
}

std::string GraphBuilder::Elementwise(const std::string& name, const std::string& func,
                                      std::vector<std::string> inputs) {
  const std::string y = Output(name + "_y", ShapeOf(inputs.front()), DTypeOf(inputs.front()));
  RawOp(name, "elementwise", inputs, {y}, "\"func\": " + Quote(func));
  return y;
}

std::string GraphBuilder::Json() const {
  std::vector<std::string> tensors;
  for (const TensorSpec& t : tensors_) {
    std::vector<std::string> dims;
    for (const DimSpec& d : t.shape) {
      dims.push_back(d.name.empty() ? std::to_string(d.value) : Quote(d.name));
    }
    tensors.push_back(fmt::format("{{\"name\": {}, \"shape\": [{}], \"dtype\": \"{}\"{}}}",
                                  Quote(t.name), fmt::join(dims, ", "), DTypeName(t.dtype),
                                  t.role.empty() ? "" : ", \"role\": " + Quote(t.role)));
  }
  return fmt::format(
      "{{\"graph_format\": 1, \"dims\": [{}],\n\"tensors\": [\n{}],\n\"ops\": [\n{}],\n"
      "\"outputs\": {}}}\n",
      fmt::join(dims_, ", "), fmt::join(tensors, ",\n"), fmt::join(ops_, ",\n"),
      QuoteAll(outputs_));
}

Graph GraphBuilder::Build() const { return ParseGraphJson(Json(), "GraphBuilder"); }

Groups FuseAndGetGroups(Graph& graph, const FuseGroupOpsOptions& options) {
  Groups groups;
  for (const FusedGroup& g : FuseGroupOps(graph, options).groups) {
    groups.emplace_back(std::string(OpTypeName(g.type)), g.members);
  }
  return groups;
}

std::vector<std::string> OpNames(const Graph& graph, const std::vector<OpId>& ops) {
  std::vector<std::string> names;
  for (OpId id : ops) names.push_back(graph.op(id).name);
  return names;
}

std::vector<std::string> TensorNames(const Graph& graph, const std::vector<TensorId>& tensors) {
  std::vector<std::string> names;
  for (TensorId id : tensors) names.push_back(graph.tensor(id).name);
  return names;
}

OpId OpNamed(const Graph& graph, const std::string& name) {
  const std::optional<OpId> id = graph.FindOp(name);
  if (!id) throw std::invalid_argument("no live op named " + name);
  return *id;
}

TensorId TensorNamed(const Graph& graph, const std::string& name) {
  const std::optional<TensorId> id = graph.FindTensor(name);
  if (!id) throw std::invalid_argument("no live tensor named " + name);
  return *id;
}

}  // namespace hfuse::test
