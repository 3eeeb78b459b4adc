// The ONNX exporter. See onnx_export.h.
#include "hfuse/onnx/onnx_export.h"

#include <fmt/format.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numbers>
#include <set>

#include "hfuse/ir/analysis.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/support/error.h"
#include "hfuse/support/permute.h"
#include "hfuse/support/half.h"
#include "onnx_util.h"
#include "opset_compat.h"

namespace hfuse {
namespace {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;
using Names = std::vector<std::string>;

constexpr int64_t kDefaultIrVersion = 8;
constexpr int64_t kDefaultOpset = 17;

class Exporter {
 public:
  Exporter(const Graph& graph, const OnnxExportOptions& options) : g_(graph), options_(options) {}

  OnnxExportResult Run(const std::string& shell) {
    if (shell.empty() || !model_.ParseFromString(shell)) {
      model_.Clear();
      model_.set_ir_version(kDefaultIrVersion);
      model_.add_opset_import()->set_version(kDefaultOpset);
    }
    model_.set_producer_name("hfuse");
    model_.set_producer_version("0.1.0");
    for (const auto& o : model_.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
    }
    out_ = model_.mutable_graph();
    if (out_->name().empty()) out_->set_name(g_.name().empty() ? "hfuse" : g_.name());
    for (TensorId t = 0; t < g_.num_tensor_ids(); ++t) names_.Take(g_.tensor(t).name);
    for (OpId id : g_.LiveOps()) {
      // An op's own node takes its name; helper nodes get fresh ones.
      node_names_.Take(g_.op(id).name);
      op_names_.insert(g_.op(id).name);
      if (const auto& kept = g_.op(id).attrs.onnx; kept && !kept->node.empty()) {
        for (const auto& [name, bytes] : kept->constants) names_.Take(name);
        NodeProto node;
        if (node.ParseFromString(kept->node)) {
          for (const std::string& out : node.output()) names_.Take(out);
        }
      }
    }
    used_.assign(static_cast<size_t>(g_.num_tensor_ids()), false);
    emitted_.assign(static_cast<size_t>(g_.num_tensor_ids()), false);

    for (TensorId t = 0; t < g_.num_tensor_ids(); ++t) {
      if (g_.tensor(t).alive && g_.tensor(t).role == Role::kInput) {
        *out_->add_input() = ValueInfo(t);
      }
    }
    for (OpId id : StableTopologicalOrder(g_)) Emit(g_.op(id));
    for (TensorId t : g_.outputs()) Use(t);  // a param may be an output
    for (TensorId t = 0; t < g_.num_tensor_ids(); ++t) {
      const Tensor& tensor = g_.tensor(t);
      if (!used_[static_cast<size_t>(t)] || tensor.role != Role::kParam) continue;
      if (tensor.data) {
        std::vector<int64_t> dims;
        for (const Dim& d : tensor.shape) dims.push_back(d.value);
        *out_->add_initializer() =
            onnx_util::MakeTensor(tensor.name, onnx_util::ElemTypeOf(tensor.dtype), dims,
                                  tensor.data->data(), tensor.data->size());
      } else {
        *out_->add_input() = ValueInfo(t);  // a weight fed at run time
      }
    }
    for (TensorProto& t : extra_) *out_->add_initializer() = std::move(t);
    for (TensorId t : g_.outputs()) *out_->add_output() = ValueInfo(t);
    for (TensorId t = 0; t < g_.num_tensor_ids(); ++t) {
      if (emitted_[static_cast<size_t>(t)] && !g_.IsGraphOutput(t)) {
        *out_->add_value_info() = ValueInfo(t);
      }
    }
    if (result_.groups_custom > 0) {
      bool have = false;
      for (const auto& o : model_.opset_import()) {
        have = have || o.domain() == onnx_util::kHfuseDomain;
      }
      if (!have) {
        auto* o = model_.add_opset_import();
        o->set_domain(onnx_util::kHfuseDomain);
        o->set_version(onnx_util::kHfuseDomainVersion);
      }
    }
    result_.bytes = model_.SerializeAsString();
    return std::move(result_);
  }

 private:
  // ---- names, value infos, initializers ------------------------------------

  const std::string& Use(TensorId t) {
    used_[static_cast<size_t>(t)] = true;
    return g_.tensor(t).name;
  }
  // A tensor produced by an emitted node, for value_info.
  const std::string& Produce(TensorId t) {
    emitted_[static_cast<size_t>(t)] = true;
    return g_.tensor(t).name;
  }

  onnx::ValueInfoProto ValueInfo(TensorId t) const {
    const Tensor& tensor = g_.tensor(t);
    onnx::ValueInfoProto vi;
    vi.set_name(tensor.name);
    auto* tt = vi.mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx_util::ElemTypeOf(tensor.dtype));
    auto* shape = tt->mutable_shape();
    for (const Dim& d : tensor.shape) {
      auto* dim = shape->add_dim();
      if (d.is_static()) {
        dim->set_dim_value(d.value);
      } else {
        dim->set_dim_param(g_.dims()[static_cast<size_t>(d.dynamic)].name);
      }
    }
    return vi;
  }

  std::string AddInitializer(const std::string& base, TensorProto proto) {
    const std::string name = names_.Fresh(base);
    proto.set_name(name);
    extra_.push_back(std::move(proto));
    return name;
  }
  void AddKeptConstant(const std::string& name, const std::string& bytes) {
    if (!kept_constants_.insert(name).second) return;
    TensorProto t;
    HFUSE_CHECK(t.ParseFromString(bytes));
    extra_.push_back(std::move(t));
  }
  std::string Ints(const std::string& base, const std::vector<int64_t>& values) {
    auto key = std::make_pair(base, values);
    if (auto it = ints_.find(key); it != ints_.end()) return it->second;
    return ints_[key] = AddInitializer(base, onnx_util::MakeInt64Tensor("", values));
  }
  std::vector<uint8_t> Bytes(DType dtype, double value) {
    const auto f = static_cast<float>(value);
    std::vector<uint8_t> bytes(static_cast<size_t>(DTypeBytes(dtype)));
    if (dtype == DType::kFloat32) {
      std::memcpy(bytes.data(), &f, 4);
    } else {
      const uint16_t h = dtype == DType::kFloat16 ? FloatToHalf(f) : FloatToBFloat16(f);
      std::memcpy(bytes.data(), &h, 2);
    }
    return bytes;
  }
  std::string Scalar(DType dtype, double value) {
    auto key = std::make_pair(dtype, value);
    if (auto it = scalars_.find(key); it != scalars_.end()) return it->second;
    const std::vector<uint8_t> b = Bytes(dtype, value);
    return scalars_[key] = AddInitializer(
               fmt::format("hfuse_{}_{}", DTypeName(dtype), value),
               onnx_util::MakeTensor("", onnx_util::ElemTypeOf(dtype), {}, b.data(), b.size()));
  }
  // A tensor of `value`s of `shape` (static), e.g. LayerNormalization's scale.
  std::string Filled(DType dtype, const std::vector<int64_t>& shape, double value) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const std::vector<uint8_t> one = Bytes(dtype, value);
    std::vector<uint8_t> b;
    for (int64_t i = 0; i < n; ++i) b.insert(b.end(), one.begin(), one.end());
    return AddInitializer(
        fmt::format("hfuse_{}_{}", value, fmt::join(shape, "x")),
        onnx_util::MakeTensor("", onnx_util::ElemTypeOf(dtype), shape, b.data(), b.size()));
  }
  std::string Temp(const std::string& base) { return names_.Fresh(base); }

  NodeProto* Node(const std::string& op_type, const std::string& name, const Names& inputs,
                  const Names& outputs, const std::string& domain = "") {
    NodeProto* n = out_->add_node();
    n->set_op_type(op_type);
    n->set_name(NodeName(name));
    if (!domain.empty()) n->set_domain(domain);
    for (const std::string& in : inputs) n->add_input(in);
    for (const std::string& out : outputs) n->add_output(out);
    return n;
  }
  std::string NodeName(const std::string& name) {
    return op_names_.erase(name) ? name : node_names_.Fresh(name);
  }
  static void SetInt(NodeProto* n, const std::string& name, int64_t v) {
    AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::INT);
    a->set_i(v);
  }
  static void SetInts(NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void SetFloat(NodeProto* n, const std::string& name, double v) {
    AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::FLOAT);
    a->set_f(static_cast<float>(v));
  }

  // Unsqueeze/Squeeze take their axes as an input from opset 13 on.
  std::string Unsqueeze(const std::string& in, const std::vector<int64_t>& axes,
                        const std::string& name) {
    const std::string out = Temp(in + "_unsqueezed");
    if (opset_ >= 13) {
      Node("Unsqueeze", name, {in, Ints("hfuse_axes", axes)}, {out});
    } else {
      SetInts(Node("Unsqueeze", name, {in}, {out}), "axes", axes);
    }
    return out;
  }
  void Squeeze(const std::string& in, const std::vector<int64_t>& axes, const std::string& out,
               const std::string& name) {
    if (opset_ >= 13) {
      Node("Squeeze", name, {in, Ints("hfuse_axes", axes)}, {out});
    } else {
      SetInts(Node("Squeeze", name, {in}, {out}), "axes", axes);
    }
  }

  // ---- ops ----------------------------------------------------------------

  void Emit(const Op& op) {
    for (TensorId t : op.outputs) Produce(t);
    if (op.attrs.onnx && op.attrs.onnx->imported_as == op.type && EmitKept(op)) return;
    switch (FamilyOf(op.type)) {
      case OpFamily::kGemm:
        EmitGemm(op.name, op.type, GemmMemberOf(op, 0), op.attrs.Alpha());
        break;
      case OpFamily::kLayerNorm:
        EmitLayerNorm(op.name, ActivationOf(op.type) == EwFunc::kSigmoid, LayerNormMemberOf(op, 0),
                      op.attrs.Eps());
        break;
      case OpFamily::kSplit: EmitSplit(op); break;
      case OpFamily::kConcatenate: {
        Names ins;
        for (TensorId t : op.inputs) ins.push_back(Use(t));
        SetInt(Node("Concat", op.name, ins, {Produce(op.outputs[0])}), "axis", op.attrs.dim);
        break;
      }
      case OpFamily::kElementwise: EmitElementwise(op); break;
      case OpFamily::kReshape: EmitReshape(op); break;
      case OpFamily::kGroupGemm:
      case OpFamily::kGroupLayerNorm:
        if (options_.mode == OnnxExportMode::kHfuse) {
          EmitCustomGroup(op);
        } else if (!IsGroupGemm(op.type) || !EmitBatchedGemms(op)) {
          EmitMembers(op);
        }
        break;
      case OpFamily::kGroupGather:
        if (options_.mode == OnnxExportMode::kHfuse) {
          EmitCustomGroup(op);
        } else {
          EmitMembers(op);
        }
        break;
      case OpFamily::kOpaque:
        // An opaque op is always what it was imported as; failing to write it
        // back means its inputs no longer match its node.
        HFUSE_CHECK(false && "opaque op does not match its ONNX node");
    }
  }

  // Writes the op's node as it was read: constant inputs as they were, the
  // other inputs in order from the op's (possibly rewired) inputs.
  bool EmitKept(const Op& op) {
    const OnnxNode& kept = *op.attrs.onnx;
    if (kept.node.empty()) return EmitMade(op);
    NodeProto node;
    HFUSE_CHECK(node.ParseFromString(kept.node));
    std::set<std::string> constants;
    for (const auto& [name, bytes] : kept.constants) constants.insert(name);
    size_t next = 0;
    for (int i = 0; i < node.input_size(); ++i) {
      const std::string& in = node.input(i);
      if (in.empty() || constants.count(in)) continue;
      if (next == op.inputs.size()) return false;
      node.set_input(i, g_.tensor(op.inputs[next++]).name);
    }
    if (next != op.inputs.size()) return false;
    // Its outputs in order too: a pass may have given a shape op the output
    // of an activation it moved before it (fuse-mm-elementwise).
    size_t made = 0;
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      if (made == op.outputs.size()) return false;
      node.set_output(i, g_.tensor(op.outputs[made++]).name);
    }
    if (made != op.outputs.size()) return false;
    for (TensorId in : op.inputs) Use(in);
    for (const auto& [name, bytes] : kept.constants) AddKeptConstant(name, bytes);
    node.set_name(NodeName(op.name));
    *out_->add_node() = std::move(node);
    return true;
  }

  // An opaque node a pass made (einsum-to-matmul's Transpose, MatMul and
  // Reshape: graph.h, OnnxNode), which has no NodeProto to write back: one
  // from its op type, its slots (the op's inputs and outputs, its constants
  // as initializers of fresh names) and its decoded attributes, each of the
  // type the operator's schema gives it.
  bool EmitMade(const Op& op) {
    const OnnxNode& made = *op.attrs.onnx;
    Names ins, outs;
    for (int32_t s : made.input_slots) {
      if (s == kNone) {
        ins.emplace_back();
      } else if (s >= 0) {
        HFUSE_CHECK(static_cast<size_t>(s) < op.inputs.size());
        ins.push_back(Use(op.inputs[static_cast<size_t>(s)]));
      } else {
        const auto c = static_cast<size_t>(-2 - s);
        HFUSE_CHECK(c < made.constant_values.size() && c < made.constants.size());
        const OnnxNode::Value& v = made.constant_values[c];
        ins.push_back(AddInitializer(made.constants[c].first,
                                     onnx_util::MakeTensor("", onnx_util::ElemTypeOf(v.dtype),
                                                           v.dims, v.data.data(), v.data.size())));
      }
    }
    HFUSE_CHECK(made.output_slots.size() == op.outputs.size());
    for (TensorId t : op.outputs) outs.push_back(g_.tensor(t).name);
    NodeProto* n = Node(made.op_type, op.name, ins, outs, made.domain);
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(
        made.op_type, std::min<int64_t>(made.opset, onnx_compat::kLinkedOpset), made.domain);
    HFUSE_CHECK(schema != nullptr);
    for (const auto& [name, values] : made.ints) {
      auto a = schema->attributes().find(name);
      HFUSE_CHECK(a != schema->attributes().end());
      if (a->second.type == AttributeProto::INT) {
        HFUSE_CHECK(values.size() == 1);
        SetInt(n, name, values[0]);
      } else {
        HFUSE_CHECK(a->second.type == AttributeProto::INTS);
        SetInts(n, name, values);
      }
    }
    // The passes make no node with float or string attributes yet.
    HFUSE_CHECK(made.floats.empty() && made.strings.empty());
    for (TensorId in : op.inputs) Use(in);
    return true;
  }

  // Y = act(alpha · A · Bᵀ + bias): Gemm for a 2-D A, else MatMul against
  // the transposed weight, then Mul (alpha), Add (bias); then the activation.
  void EmitGemm(const std::string& name, OpType type, const GemmMember& operands, double alpha) {
    const TensorId in[3] = {operands.a, operands.w, operands.bias};
    const TensorId y = operands.y;
    const bool bias = GemmHasBias(type);
    const std::optional<EwFunc> activation = ActivationOf(type);
    const std::string act = activation ? std::string(onnx_util::OnnxActivationOp(*activation)) : "";
    const Tensor& a = g_.tensor(in[0]);
    const bool matmul = a.shape.size() != 2;
    int steps = 1 + (matmul && alpha != 1.0) + (matmul && bias) + !act.empty();
    const std::string out = Produce(y);
    // The output of the next step: Y for the last one.
    auto next = [&](const std::string& what) { return --steps == 0 ? out : Temp(out + what); };
    std::string cur;
    if (!matmul) {
      Names ins = {Use(in[0]), Use(in[1])};
      if (bias) ins.push_back(Use(in[2]));
      cur = next("_gemm");
      NodeProto* n = Node("Gemm", name, ins, {cur});
      if (alpha != 1.0) SetFloat(n, "alpha", alpha);
      SetInt(n, "transB", 1);
    } else {
      const std::string w = KnWeight(in[1], name);
      cur = next("_mm");
      Node("MatMul", name, {Use(in[0]), w}, {cur});
      if (alpha != 1.0) {
        const std::string scaled = next("_scaled");
        Node("Mul", name + "/alpha", {cur, Scalar(a.dtype, alpha)}, {scaled});
        cur = scaled;
      }
      if (bias) {
        const std::string biased = next("_biased");
        Node("Add", name + "/bias", {cur, Use(in[2])}, {biased});
        cur = biased;
      }
    }
    if (!act.empty()) Node(act, name + "/" + act, {cur}, {next("")});
  }

  // B [N, K] as [K, N] for MatMul: a transposed initializer when B has
  // values, else a Transpose node.
  std::string KnWeight(TensorId b, const std::string& name) {
    if (auto it = kn_.find(b); it != kn_.end()) return it->second;
    const Tensor& w = g_.tensor(b);
    std::string out;
    if (w.data) {
      const int64_t n = w.shape[0].value, k = w.shape[1].value;
      const auto bytes = static_cast<size_t>(DTypeBytes(w.dtype));
      std::vector<uint8_t> t(w.data->size());
      PermuteBytes(w.data->data(), t.data(), {n, k}, {1, 0}, bytes);
      out = AddInitializer(w.name + "_kn", onnx_util::MakeTensor("", onnx_util::ElemTypeOf(w.dtype),
                                                                 {k, n}, t.data(), t.size()));
    } else {
      out = Temp(w.name + "_kn");
      SetInts(Node("Transpose", name + "/Transpose", {Use(b)}, {out}), "perm", {1, 0});
    }
    return kn_[b] = out;
  }

  void EmitLayerNorm(const std::string& name, bool sigmoid_mul, const LayerNormMember& member,
                     double eps) {
    const auto [x, gamma, beta, y, normalized_shape] = member;
    const std::vector<int64_t>& normalized = *normalized_shape;
    if (opset_ < 17) {
      ThrowInputError(
          "op '{}' (layernorm) needs LayerNormalization, which needs opset 17; the "
          "model uses opset {}",
          name, opset_);
    }
    const DType dtype = g_.tensor(x).dtype;
    Names ins = {Use(x), gamma != kNone ? Use(gamma) : Filled(dtype, normalized, 1.0)};
    if (beta != kNone) ins.push_back(Use(beta));
    const std::string out = Produce(y);
    const std::string ln = sigmoid_mul ? Temp(out + "_ln") : out;
    NodeProto* n = Node("LayerNormalization", name, ins, {ln});
    SetInt(n, "axis", -static_cast<int64_t>(normalized.size()));
    SetFloat(n, "epsilon", eps);
    if (sigmoid_mul) {
      const std::string s = Temp(out + "_sigmoid");
      Node("Sigmoid", name + "/Sigmoid", {ln}, {s});
      Node("Mul", name + "/Mul", {g_.tensor(x).name, s}, {out});
    }
  }

  void EmitSplit(const Op& op) {
    Names outs;
    for (TensorId t : op.outputs) outs.push_back(Produce(t));
    NodeProto* n;
    if (opset_ >= 13) {
      n = Node("Split", op.name, {Use(op.inputs[0]), Ints("hfuse_split", op.attrs.split_sizes)},
               outs);
    } else {
      n = Node("Split", op.name, {Use(op.inputs[0])}, outs);
      SetInts(n, "split", op.attrs.split_sizes);
    }
    SetInt(n, "axis", op.attrs.dim);
  }

  void EmitElementwise(const Op& op) {
    const std::string x = Use(op.inputs[0]);
    const std::string out = Produce(op.outputs[0]);
    const DType dtype = g_.tensor(op.outputs[0]).dtype;
    const std::string& name = op.name;
    switch (op.attrs.func) {
      case EwFunc::kRelu: Node("Relu", name, {x}, {out}); return;
      case EwFunc::kSigmoid: Node("Sigmoid", name, {x}, {out}); return;
      case EwFunc::kTanh: Node("Tanh", name, {x}, {out}); return;
      case EwFunc::kGelu: {  // x · 0.5 · (1 + erf(x / √2)); Gelu is an op from opset 20
        const std::string d = Temp(out + "_div"), e = Temp(out + "_erf"), a = Temp(out + "_add"),
                          m = Temp(out + "_mul");
        Node("Div", name + "/Div", {x, Scalar(dtype, std::numbers::sqrt2)}, {d});
        Node("Erf", name + "/Erf", {d}, {e});
        Node("Add", name + "/Add", {e, Scalar(dtype, 1.0)}, {a});
        Node("Mul", name + "/Mul", {x, a}, {m});
        Node("Mul", name, {m, Scalar(dtype, 0.5)}, {out});
        return;
      }
      case EwFunc::kSilu: {
        const std::string s = Temp(out + "_sigmoid");
        Node("Sigmoid", name + "/Sigmoid", {x}, {s});
        Node("Mul", name, {x, s}, {out});
        return;
      }
      case EwFunc::kAdd:
      case EwFunc::kSub:
      case EwFunc::kMul:
      case EwFunc::kDiv: break;
    }
    const char* type = op.attrs.func == EwFunc::kAdd   ? "Add"
                       : op.attrs.func == EwFunc::kSub ? "Sub"
                       : op.attrs.func == EwFunc::kMul ? "Mul"
                                                       : "Div";
    // Left to right, as the IR folds its inputs.
    std::string cur = x;
    for (size_t i = 1; i < op.inputs.size(); ++i) {
      const std::string next = i + 1 == op.inputs.size() ? out : Temp(out + "_partial");
      Node(type, i + 1 == op.inputs.size() ? name : name + "/" + type, {cur, Use(op.inputs[i])},
           {next});
      cur = next;
    }
  }

  void EmitReshape(const Op& op) {
    std::vector<int64_t> shape;
    bool zero = false;
    for (const Dim& d : g_.tensor(op.outputs[0]).shape) {
      shape.push_back(d.is_static() ? d.value : -1);
      zero = zero || (d.is_static() && d.value == 0);
    }
    if (zero && opset_ < 14) {
      ThrowInputError(
          "op '{}' reshapes to a zero-size dim, which needs opset 14 (allowzero); "
          "the model uses opset {}",
          op.name, opset_);
    }
    NodeProto* n = Node("Reshape", op.name, {Use(op.inputs[0]), Ints("hfuse_shape", shape)},
                        {Produce(op.outputs[0])});
    if (zero) SetInt(n, "allowzero", 1);
  }

  // ---- group ops --------------------------------------------------------------

  void EmitCustomGroup(const Op& op) {
    Names ins, outs;
    for (TensorId t : op.inputs) ins.push_back(Use(t));
    for (TensorId t : op.outputs) outs.push_back(Produce(t));
    NodeProto* n = Node(std::string(onnx_util::HfuseOpType(op.type)), op.name, ins, outs,
                        onnx_util::kHfuseDomain);
    if (IsGroupGemm(op.type)) {
      SetInt(n, "group_size", static_cast<int64_t>(NumMembers(op)));
      if (IsMixedGemmGroup(op)) {
        AttributeProto* a = n->add_attribute();
        a->set_name("member_ops");
        a->set_type(AttributeProto::STRINGS);
        for (OpType kind : op.attrs.member_ops) a->add_strings(std::string(OpTypeName(kind)));
      }
    } else if (IsGroupGather(op.type)) {
      AttributeProto* a = n->add_attribute();
      a->set_name("member_names");
      a->set_type(AttributeProto::STRINGS);
      for (const std::string& m : op.attrs.onnx->member_names) a->add_strings(m);
    } else {
      std::vector<int64_t> ranks, flat;
      for (const auto& s : op.attrs.normalized_shapes) {
        ranks.push_back(static_cast<int64_t>(s.size()));
        flat.insert(flat.end(), s.begin(), s.end());
      }
      SetInts(n, "normalized_ranks", ranks);
      SetInts(n, "normalized_shapes", flat);
      SetFloat(n, "epsilon", op.attrs.Eps());
    }
    ++result_.groups_custom;
  }

  void EmitMembers(const Op& op) {
    const size_t members = op.outputs.size();
    if (IsGroupGather(op.type)) {  // the Gathers the model had, under their names
      for (size_t m = 0; m < members; ++m) {
        const GatherMember mem = GatherMemberOf(op, m);
        Node("Gather", op.attrs.onnx->member_names[m], {Use(mem.table), Use(mem.ids)}, {Produce(mem.y)});
      }
      ++result_.groups_unfused;
      return;
    }
    for (size_t m = 0; m < members; ++m) {
      const std::string name = fmt::format("{}/{}", op.name, m);
      if (IsGroupGemm(op.type)) {
        EmitGemm(name, GemmKindOf(op, m), GemmMemberOf(op, m), 1.0);
      } else {
        EmitLayerNorm(name, ActivationOf(op.type) == EwFunc::kSigmoid, LayerNormMemberOf(op, m),
                      op.attrs.Eps());
      }
    }
    ++result_.groups_unfused;
  }

  // Stacks the members' tensors along a new leading axis (plus `extra` unit
  // dims after it): one initializer when all have values, else
  // Unsqueeze + Concat nodes. `transpose` turns each [N, K] into [K, N].
  std::string Stack(const std::vector<TensorId>& ts, size_t extra, bool transpose,
                    const std::string& name) {
    const Tensor& first = g_.tensor(ts[0]);
    std::vector<int64_t> dims;
    for (const Dim& d : first.shape) dims.push_back(d.value);
    if (transpose) std::swap(dims[0], dims[1]);
    if (std::all_of(ts.begin(), ts.end(),
                    [&](TensorId t) { return g_.tensor(t).data != nullptr; })) {
      std::vector<uint8_t> all;
      for (TensorId t : ts) {
        const Tensor& w = g_.tensor(t);
        if (!transpose) {
          all.insert(all.end(), w.data->begin(), w.data->end());
          continue;
        }
        const auto bytes = static_cast<size_t>(DTypeBytes(w.dtype));
        const int64_t n = w.shape[0].value, k = w.shape[1].value;
        const size_t at = all.size();
        all.resize(at + w.data->size());
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < k; ++j) {
            std::memcpy(all.data() + at + static_cast<size_t>(j * n + i) * bytes,
                        w.data->data() + static_cast<size_t>(i * k + j) * bytes, bytes);
          }
        }
      }
      dims.insert(dims.begin(), extra, 1);
      dims.insert(dims.begin(), static_cast<int64_t>(ts.size()));
      return AddInitializer(name, onnx_util::MakeTensor("", onnx_util::ElemTypeOf(first.dtype),
                                                        dims, all.data(), all.size()));
    }
    std::vector<int64_t> axes;
    for (size_t i = 0; i <= extra; ++i) axes.push_back(static_cast<int64_t>(i));
    Names parts;
    for (TensorId t : ts) {
      std::string cur = Use(t);
      if (transpose) {
        const std::string tr = Temp(cur + "_kn");
        SetInts(Node("Transpose", name + "/Transpose", {cur}, {tr}), "perm", {1, 0});
        cur = tr;
      }
      parts.push_back(Unsqueeze(cur, axes, name + "/Unsqueeze"));
    }
    const std::string out = Temp(name);
    SetInt(Node("Concat", name + "/Concat", parts, {out}), "axis", 0);
    return out;
  }

  // A GEMM group of one shape as one batched MatMul (see the header).
  bool EmitBatchedGemms(const Op& op) {
    if (IsMixedGemmGroup(op)) return false;  // one epilogue for all: member by member
    const bool bias = GemmHasBias(op.type);
    const size_t members = op.outputs.size();
    const GemmMember first = GemmMemberOf(op, 0);
    std::vector<TensorId> as, bs, biases;
    for (size_t m = 0; m < members; ++m) {
      const GemmMember mm = GemmMemberOf(op, m);
      for (auto [id, ref_id] : {std::pair{mm.a, first.a}, {mm.w, first.w}, {mm.bias, first.bias}}) {
        if (id == kNone) continue;
        const Tensor& t = g_.tensor(id);
        const Tensor& ref = g_.tensor(ref_id);
        if (!(t.shape == ref.shape) || t.dtype != ref.dtype) return false;
        for (const Dim& d : t.shape) {
          if (!d.is_static()) return false;
        }
      }
      as.push_back(mm.a);
      bs.push_back(mm.w);
      if (bias) biases.push_back(mm.bias);
    }
    if (g_.tensor(as[0]).shape.size() != 2) return false;
    const std::string& name = op.name;
    const std::string a = Stack(as, 0, false, name + "/A");
    const std::string w = Stack(bs, 0, true, name + "/W");
    std::string cur = Temp(name + "_mm");
    Node("MatMul", name + "/MatMul", {a, w}, {cur});
    if (bias) {
      const std::string next = Temp(name + "_biased");
      Node("Add", name + "/Add", {cur, Stack(biases, 1, false, name + "/bias")}, {next});
      cur = next;
    }
    const OpType member = MemberOf(op.type);
    if (const std::optional<EwFunc> activation = ActivationOf(member)) {
      const std::string act(onnx_util::OnnxActivationOp(*activation));
      const std::string next = Temp(name + "_act");
      Node(act, name + "/" + act, {cur}, {next});
      cur = next;
    }
    Names parts;
    for (size_t m = 0; m < members; ++m) parts.push_back(Temp(fmt::format("{}_part{}", name, m)));
    NodeProto* split;
    const std::vector<int64_t> ones(members, 1);
    if (opset_ >= 13) {
      split = Node("Split", name + "/Split", {cur, Ints("hfuse_split", ones)}, parts);
    } else {
      split = Node("Split", name + "/Split", {cur}, parts);
      SetInts(split, "split", ones);
    }
    SetInt(split, "axis", 0);
    for (size_t m = 0; m < members; ++m) {
      Squeeze(parts[m], {0}, Produce(op.outputs[m]), name + "/Squeeze");
    }
    ++result_.groups_batched;
    return true;
  }

  const Graph& g_;
  OnnxExportOptions options_;
  onnx::ModelProto model_;
  onnx::GraphProto* out_ = nullptr;
  int64_t opset_ = kDefaultOpset;
  onnx_util::NameSet names_, node_names_;
  std::set<std::string> op_names_;  // ops whose node has not been written yet
  std::vector<bool> used_, emitted_;
  std::vector<TensorProto> extra_;  // initializers beyond the params, in creation order
  std::set<std::string> kept_constants_;
  std::map<std::pair<std::string, std::vector<int64_t>>, std::string> ints_;
  std::map<std::pair<DType, double>, std::string> scalars_;
  std::map<TensorId, std::string> kn_;
  OnnxExportResult result_;
};

}  // namespace

OnnxExportResult ExportOnnx(const Graph& graph, const std::string& shell,
                            const OnnxExportOptions& options) {
  return Exporter(graph, options).Run(shell);
}

}  // namespace hfuse
