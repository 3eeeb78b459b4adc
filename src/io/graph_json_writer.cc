// The graph JSON v1 writer: canonical text, one tensor or op per line, in
// the order the fast reader (graph_json_fast_reader.h) reads. nlohmann
// escapes strings and prints numbers, so values round-trip exactly; to a
// file, the text goes out a megabyte at a time, never held whole.
#include <charconv>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hfuse/io/graph_json.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"

namespace hfuse {
namespace {

using nlohmann::json;

// Appends JSON text to a buffer, one tensor or op per line; with a sink,
// hands the buffer over whenever it passes a megabyte, so that a fused graph
// of hundreds of MB is never held whole.
class Writer {
 public:
  using Sink = std::function<void(std::string_view)>;
  explicit Writer(const Graph& g, const Sink* sink = nullptr) : g_(g), sink_(sink) {}

  std::string Write(const std::vector<OpId>& order) {
    std::vector<bool> used(static_cast<size_t>(g_.num_tensor_ids()), false);
    for (OpId id : order) {
      for (TensorId t : g_.op(id).inputs) used[static_cast<size_t>(t)] = true;
      for (TensorId t : g_.op(id).outputs) used[static_cast<size_t>(t)] = true;
    }
    for (TensorId t : g_.outputs()) used[static_cast<size_t>(t)] = true;

    Put("{\n \"graph_format\": 1,\n");
    if (!g_.name().empty()) {
      Put(" \"name\": ");
      Str(g_.name());
      Put(",\n");
    }
    Put(" \"dims\": [");
    for (size_t i = 0; i < g_.dims().size(); ++i) {
      const DynamicDim& d = g_.dims()[i];
      Put(i ? ",\n  {\"name\": " : "\n  {\"name\": ");
      Str(d.name);
      Put(", \"min\": ");
      Int(d.min);
      Put(", \"max\": ");
      Int(d.max);
      Put("}");
    }
    Put(g_.dims().empty() ? "],\n" : "\n ],\n");
    Put(" \"tensors\": [");
    bool first = true;
    for (TensorId id = 0; id < g_.num_tensor_ids(); ++id) {
      const Tensor& t = g_.tensor(id);
      if (!t.alive || !(used[static_cast<size_t>(id)] || t.role == Role::kInput)) continue;
      Put(first ? "\n  {\"name\": " : ",\n  {\"name\": ");
      first = false;
      Str(t.name);
      Put(", \"shape\": [");
      for (size_t i = 0; i < t.shape.size(); ++i) {
        if (i) Put(", ");
        const Dim& d = t.shape[i];
        if (d.is_static()) {
          Int(d.value);
        } else {
          Str(g_.dims()[static_cast<size_t>(d.dynamic)].name);
        }
      }
      Put("], \"dtype\": \"");
      Put(DTypeName(t.dtype));
      Put("\"");
      if (t.role == Role::kInput) Put(", \"role\": \"input\"");
      if (t.role == Role::kParam) Put(", \"role\": \"param\"");
      Put("}");
      Flush(false);
    }
    Put("\n ],\n \"ops\": [");
    for (size_t i = 0; i < order.size(); ++i) {
      Put(i ? ",\n  " : "\n  ");
      WriteOp(g_.op(order[i]));
      Flush(false);
    }
    Put("\n ],\n \"outputs\": [");
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      Put(i ? ", " : "");
      Str(g_.tensor(g_.outputs()[i]).name);
    }
    Put("]\n}\n");
    Flush(true);
    return std::move(out_);
  }

 private:
  void Put(std::string_view s) { out_.append(s); }
  void Flush(bool last) {
    if (sink_ && (last || out_.size() >= (size_t{1} << 20))) {
      (*sink_)(out_);
      out_.clear();
    }
  }
  // A string as nlohmann writes it: printable ASCII other than quote and
  // backslash as it is, anything else through nlohmann's escaping.
  void Str(std::string_view s) {
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7F || c == '"' || c == '\\') {
        Put(json(std::string(s)).dump());
        return;
      }
    }
    out_ += '"';
    out_.append(s);
    out_ += '"';
  }
  void Int(int64_t v) {
    char buf[24];
    const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
    out_.append(buf, end);
  }
  void Num(double v) { Put(json(v).dump()); }
  void Ints(const std::vector<int64_t>& v) {
    Put("[");
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) Put(", ");
      Int(v[i]);
    }
    Put("]");
  }
  void Names(const std::vector<TensorId>& ids, bool null_second) {
    Put("[");
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) Put(", ");
      Str(g_.tensor(ids[i]).name);
      if (i == 0 && null_second) Put(", null");
    }
    Put("]");
  }

  void WriteOp(const Op& op) {
    Put("{\"name\": ");
    Str(op.name);
    Put(", \"op\": \"");
    Put(OpTypeName(op.type));
    Put("\", \"inputs\": ");
    // A LayerNorm with beta but no gamma: null where gamma would be.
    Names(op.inputs, IsLayerNorm(op.type) && !op.attrs.has_gamma && op.attrs.has_beta);
    Put(", \"outputs\": ");
    Names(op.outputs, false);
    const Attrs& a = op.attrs;
    switch (FamilyOf(op.type)) {
      case OpFamily::kGemm:
        if (a.alpha) {
          Put(", \"alpha\": ");
          Num(*a.alpha);
        }
        break;
      case OpFamily::kLayerNorm:
        Put(", \"normalized_shape\": ");
        Ints(a.normalized_shape);
        if (a.eps) {
          Put(", \"eps\": ");
          Num(*a.eps);
        }
        break;
      case OpFamily::kSplit:
        Put(", \"split_sizes\": ");
        Ints(a.split_sizes);
        Put(", \"dim\": ");
        Int(a.dim);
        break;
      case OpFamily::kConcatenate:
        Put(", \"dim\": ");
        Int(a.dim);
        break;
      case OpFamily::kElementwise:
        Put(", \"func\": \"");
        Put(EwFuncName(a.func));
        Put("\"");
        break;
      case OpFamily::kReshape:
        Put(", \"shape\": ");
        Ints(a.shape);
        break;
      case OpFamily::kGroupGemm:
        Put(", \"group_size\": ");
        Int(static_cast<int64_t>(op.outputs.size()));
        if (!a.member_ops.empty()) {
          Put(", \"member_ops\": [");
          for (size_t i = 0; i < a.member_ops.size(); ++i) {
            if (i) Put(", ");
            Str(OpTypeName(a.member_ops[i]));
          }
          Put("]");
        }
        break;
      case OpFamily::kGroupLayerNorm: {
        Put(", \"normalized_shapes\": [");
        for (size_t i = 0; i < a.normalized_shapes.size(); ++i) {
          if (i) Put(", ");
          Ints(a.normalized_shapes[i]);
        }
        Put("]");
        if (a.eps) {
          Put(", \"eps\": ");
          Num(*a.eps);
        }
        break;
      }
      case OpFamily::kOpaque:
        ThrowInputError(
            "op '{}' is the ONNX operator {}, which hfuse keeps opaque and graph "
            "JSON v1 cannot hold; write ONNX (.onnx) instead",
            op.name, a.onnx ? a.onnx->op_type : "?");
      case OpFamily::kGroupGather:
        ThrowInputError(
            "op '{}' is a group of ONNX Gathers, which graph JSON v1 cannot hold; write ONNX "
            "(.onnx) instead",
            op.name);
    }
    Put("}");
  }

  const Graph& g_;
  const Sink* sink_;
  std::string out_;
};

}  // namespace

std::string WriteGraphJson(const Graph& graph, const std::vector<OpId>& op_order) {
  return Writer(graph).Write(op_order.empty() ? graph.LiveOps() : op_order);
}

void WriteGraphJsonFile(const std::string& path, const Graph& graph,
                        const std::vector<OpId>& op_order) {
  try {
    WriteFileAtomic(path, [&](const std::function<void(std::string_view)>& put) {
      Writer(graph, &put).Write(op_order.empty() ? graph.LiveOps() : op_order);
    });
  } catch (const InputError& e) {
    // What the graph holds that JSON cannot: named with the file, like every
    // other message of bad input (the atomic write left nothing behind).
    const std::string what = e.what();
    if (what.starts_with(path + ":")) throw;
    ThrowInputError("{}: {}", path, what);
  }
}

}  // namespace hfuse
