// The graph printer. See printer.h.
#include "hfuse/ir/printer.h"

#include <fmt/format.h>

namespace hfuse {
namespace {

bool Plain(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return name != "null";
}

std::string Quoted(std::string_view name) {
  if (Plain(name)) return std::string(name);
  std::string q = "\"";
  for (char c : name) {
    if (c == '"' || c == '\\') {
      q += '\\';
      q += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      q += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      q += c;
    }
  }
  return q + "\"";
}

std::string Ints(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

std::string AttrText(const Op& op) {
  const Attrs& a = op.attrs;
  std::vector<std::string> parts;
  switch (FamilyOf(op.type)) {
    case OpFamily::kGemm:
      if (a.alpha) parts.push_back(fmt::format("alpha = {}", *a.alpha));
      break;
    case OpFamily::kLayerNorm:
      parts.push_back("normalized_shape = " + Ints(a.normalized_shape));
      if (a.eps) parts.push_back(fmt::format("eps = {}", *a.eps));
      break;
    case OpFamily::kSplit:
      parts.push_back("split_sizes = " + Ints(a.split_sizes));
      parts.push_back(fmt::format("dim = {}", a.dim));
      break;
    case OpFamily::kConcatenate: parts.push_back(fmt::format("dim = {}", a.dim)); break;
    case OpFamily::kElementwise:
      parts.push_back(fmt::format("func = {}", EwFuncName(a.func)));
      break;
    case OpFamily::kReshape: parts.push_back("shape = " + Ints(a.shape)); break;
    case OpFamily::kGroupGemm:
      if (!a.member_ops.empty()) {
        std::vector<std::string_view> kinds;
        for (OpType kind : a.member_ops) kinds.push_back(OpTypeName(kind));
        parts.push_back(fmt::format("member_ops = [{}]", fmt::join(kinds, ", ")));
      }
      break;
    case OpFamily::kGroupLayerNorm: {
      std::vector<std::string> shapes;
      for (const auto& s : a.normalized_shapes) shapes.push_back(Ints(s));
      parts.push_back(fmt::format("normalized_shapes = [{}]", fmt::join(shapes, ", ")));
      if (a.eps) parts.push_back(fmt::format("eps = {}", *a.eps));
      break;
    }
    case OpFamily::kGroupGather: {
      std::vector<std::string> names;
      if (a.onnx) {
        for (const std::string& n : a.onnx->member_names) names.push_back(Quoted(n));
      }
      parts.push_back(fmt::format("members = [{}]", fmt::join(names, ", ")));
      break;
    }
    case OpFamily::kOpaque:
      parts.push_back(fmt::format("onnx = {}", a.onnx ? Quoted(a.onnx->op_type) : "?"));
      break;
  }
  if (op.elided) parts.push_back("elided");
  return parts.empty() ? "" : fmt::format(" {{{}}}", fmt::join(parts, ", "));
}

}  // namespace

std::string PrintOp(const Graph& graph, OpId id) {
  const Op& op = graph.op(id);
  std::vector<std::string> outs, ins;
  for (TensorId t : op.outputs) outs.push_back(Quoted(graph.tensor(t).name));
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    // A LayerNorm with beta but no gamma: null where gamma would be.
    if (i == 1 && IsLayerNorm(op.type) && !op.attrs.has_gamma) ins.push_back("null");
    ins.push_back(Quoted(graph.tensor(op.inputs[i]).name));
  }
  const std::string lhs = outs.size() == 1 ? outs[0] : fmt::format("({})", fmt::join(outs, ", "));
  return fmt::format("{} = {}({}){}  # {}", lhs, OpTypeName(op.type), fmt::join(ins, ", "),
                     AttrText(op), Quoted(op.name));
}

std::string PrintGraph(const Graph& graph, const std::vector<OpId>& op_order) {
  std::string text;
  if (!graph.name().empty()) text += fmt::format("graph {}\n", Quoted(graph.name()));
  for (const DynamicDim& d : graph.dims()) {
    text += fmt::format("dim {} [{}, {}]\n", Quoted(d.name), d.min, d.max);
  }
  std::vector<bool> used(static_cast<size_t>(graph.num_tensor_ids()), false);
  for (OpId id = 0; id < graph.num_op_ids(); ++id) {
    if (!graph.op(id).alive) continue;
    for (TensorId t : graph.op(id).inputs) used[static_cast<size_t>(t)] = true;
    for (TensorId t : graph.op(id).outputs) used[static_cast<size_t>(t)] = true;
  }
  for (TensorId t : graph.outputs()) used[static_cast<size_t>(t)] = true;
  for (Role role : {Role::kInput, Role::kParam, Role::kIntermediate}) {
    for (TensorId id = 0; id < graph.num_tensor_ids(); ++id) {
      const Tensor& t = graph.tensor(id);
      if (!t.alive || t.role != role) continue;
      if (role == Role::kIntermediate && !used[static_cast<size_t>(id)]) continue;
      text += fmt::format("{} {}: {}{}", role == Role::kInput   ? "input"
                                         : role == Role::kParam ? "param"
                                                                : "tensor",
                          Quoted(t.name), DTypeName(t.dtype), ShapeString(graph, t.shape));
      if (t.storage != kNone) {
        text += fmt::format(" view({}, {})", Quoted(graph.tensor(t.storage).name), t.storage_offset);
      }
      text += '\n';
    }
  }
  const std::vector<OpId> order = op_order.empty() ? graph.LiveOps() : op_order;
  for (OpId id : order) text += PrintOp(graph, id) + '\n';
  std::vector<std::string> outs;
  for (TensorId t : graph.outputs()) outs.push_back(Quoted(graph.tensor(t).name));
  text += fmt::format("output {}\n", fmt::join(outs, ", "));
  return text;
}

}  // namespace hfuse
