// Reading opsets 18 to 28 with ONNX 1.12. See opset_compat.h.
#include "opset_compat.h"

#include <fmt/format.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "hfuse/support/error.h"
#include "onnx_util.h"

namespace hfuse::onnx_compat {
namespace {

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::ModelProto;
using onnx::NodeProto;
using onnx::TensorProto;

enum class Reading {
  kSame,     // only gained element types hfuse does not carry: read as at opset 17
  kRewrite,  // rewritten into its opset-17 form (Rewrite below), or refused there
  kRefuse,   // semantics hfuse does not implement
};

struct OpChange {
  std::string_view op;
  std::string_view versions;  // its versions after opset 17
  Reading reading;
  std::string_view why;       // for kRefuse: what hfuse does not implement
};

// Every default-domain operator with a version after opset 17 in ONNX 1.23
// (onnx.defs.get_all_schemas_with_history()), and how hfuse reads it. An
// operator not listed here did not change after opset 17.
constexpr OpChange kOpsetChanges[] = {
    // Element types only (bfloat16, float8, int4, int2, float4, float6, strings).
    {"Acos", "22", Reading::kSame, ""}, {"Acosh", "22", Reading::kSame, ""},
    {"Asin", "22", Reading::kSame, ""}, {"Asinh", "22", Reading::kSame, ""},
    {"Atan", "22", Reading::kSame, ""}, {"Atanh", "22", Reading::kSame, ""},
    {"Bernoulli", "22", Reading::kSame, ""}, {"BitShift", "28", Reading::kSame, ""},
    {"Celu", "28", Reading::kSame, ""}, {"Compress", "28", Reading::kSame, ""},
    {"Constant", "19 21 23 24 25", Reading::kSame, ""},
    {"ConstantOfShape", "20 21 23 24 25", Reading::kSame, ""},
    {"Conv", "22", Reading::kSame, ""}, {"ConvTranspose", "22", Reading::kSame, ""},
    {"Cos", "22", Reading::kSame, ""}, {"Cosh", "22", Reading::kSame, ""},
    {"DepthToSpace", "28", Reading::kSame, ""}, {"Det", "22", Reading::kSame, ""},
    {"Dropout", "22", Reading::kSame, ""}, {"Einsum", "28", Reading::kSame, ""},
    {"Elu", "22", Reading::kSame, ""}, {"Equal", "19", Reading::kSame, ""},
    {"EyeLike", "22", Reading::kSame, ""}, {"Flatten", "21 23 24 25", Reading::kSame, ""},
    {"GRU", "22", Reading::kSame, ""}, {"GlobalAveragePool", "22", Reading::kSame, ""},
    {"GlobalLpPool", "22", Reading::kSame, ""}, {"GlobalMaxPool", "22", Reading::kSame, ""},
    {"HardSigmoid", "22", Reading::kSame, ""}, {"HardSwish", "22", Reading::kSame, ""},
    {"Identity", "19 21 23 24 25", Reading::kSame, ""},
    {"If", "19 21 23 24 25", Reading::kSame, ""},
    {"InstanceNormalization", "22", Reading::kSame, ""}, {"IsInf", "20", Reading::kSame, ""},
    {"IsNaN", "20", Reading::kSame, ""}, {"LSTM", "22", Reading::kSame, ""},
    {"Loop", "19 21 23 24 25", Reading::kSame, ""},
    {"LpNormalization", "22", Reading::kSame, ""}, {"MaxPool", "22", Reading::kSame, ""},
    {"MaxRoiPool", "22", Reading::kSame, ""}, {"MaxUnpool", "22", Reading::kSame, ""},
    {"Mod", "28", Reading::kSame, ""},  // fmod=0 now defined for floats too: floor(a/b)
    {"Multinomial", "22", Reading::kSame, ""},
    {"NegativeLogLikelihoodLoss", "22", Reading::kSame, ""},
    {"OneHot", "28", Reading::kSame, ""}, {"Optional", "28", Reading::kSame, ""},
    {"OptionalGetElement", "18 28", Reading::kSame, ""},
    {"RNN", "22", Reading::kSame, ""}, {"RandomNormal", "22", Reading::kSame, ""},
    {"RandomNormalLike", "22", Reading::kSame, ""}, {"RandomUniform", "22", Reading::kSame, ""},
    {"RandomUniformLike", "22", Reading::kSame, ""},
    {"Reshape", "19 21 23 24 25", Reading::kSame, ""},
    {"ReverseSequence", "28", Reading::kSame, ""}, {"RoiAlign", "22", Reading::kSame, ""},
    {"Round", "22", Reading::kSame, ""}, {"Scan", "19 21 23 24 25", Reading::kSame, ""},
    {"Selu", "22", Reading::kSame, ""}, {"Shape", "19 21 23 24 25", Reading::kSame, ""},
    {"Sin", "22", Reading::kSame, ""}, {"Sinh", "22", Reading::kSame, ""},
    {"Size", "19 21 23 24 25", Reading::kSame, ""}, {"Softplus", "22", Reading::kSame, ""},
    {"Softsign", "22", Reading::kSame, ""}, {"SplitToSequence", "24", Reading::kSame, ""},
    {"Squeeze", "21 23 24 25", Reading::kSame, ""}, {"Tan", "22", Reading::kSame, ""},
    {"ThresholdedRelu", "22", Reading::kSame, ""}, {"TopK", "24", Reading::kSame, ""},
    {"Transpose", "21 23 24 25", Reading::kSame, ""}, {"Unique", "28", Reading::kSame, ""},
    {"Unsqueeze", "21 23 24 25", Reading::kSame, ""},
    // New forms, rewritten (see Rewrite).
    {"AveragePool", "19 22", Reading::kRewrite, ""},
    {"Cast", "19 21 23 24 25 28", Reading::kRewrite, ""},
    {"CastLike", "19 21 23 24 25", Reading::kRewrite, ""},
    {"Gelu", "20", Reading::kRewrite, ""}, {"Mish", "18 22", Reading::kRewrite, ""},
    {"Swish", "24", Reading::kRewrite, ""},
    {"LpPool", "18 22", Reading::kRewrite, ""},
    {"OptionalHasElement", "18 28", Reading::kRewrite, ""},
    {"Pad", "18 19 21 23 24 25", Reading::kRewrite, ""},
    {"Range", "27", Reading::kRewrite, ""},
    {"ReduceL1", "18", Reading::kRewrite, ""}, {"ReduceL2", "18", Reading::kRewrite, ""},
    {"ReduceLogSum", "18 28", Reading::kRewrite, ""},
    {"ReduceLogSumExp", "18 28", Reading::kRewrite, ""},
    {"ReduceMax", "18 20", Reading::kRewrite, ""}, {"ReduceMean", "18", Reading::kRewrite, ""},
    {"ReduceMin", "18 20", Reading::kRewrite, ""}, {"ReduceProd", "18", Reading::kRewrite, ""},
    {"ReduceSumSquare", "18", Reading::kRewrite, ""},
    {"Resize", "18 19", Reading::kRewrite, ""},
    {"ScatterElements", "18", Reading::kRewrite, ""}, {"ScatterND", "18", Reading::kRewrite, ""},
    {"SpaceToDepth", "28", Reading::kRewrite, ""}, {"Split", "18", Reading::kRewrite, ""},
    // Not implemented.
    {"AffineGrid", "20", Reading::kRefuse, "a new operator"},
    {"Attention", "23 24 25", Reading::kRefuse, "a new operator"},
    {"BitCast", "26", Reading::kRefuse, "a new operator"},
    {"BitwiseAnd", "18", Reading::kRefuse, "a new operator"},
    {"BitwiseNot", "18", Reading::kRefuse, "a new operator"},
    {"BitwiseOr", "18", Reading::kRefuse, "a new operator"},
    {"BitwiseXor", "18", Reading::kRefuse, "a new operator"},
    {"CausalConvWithState", "27", Reading::kRefuse, "a new operator"},
    {"CenterCropPad", "18", Reading::kRefuse, "a new operator"},
    {"Col2Im", "18", Reading::kRefuse, "a new operator"},
    {"CumProd", "26", Reading::kRefuse, "a new operator"},
    {"DFT", "20", Reading::kRefuse, "its axis became an input"},
    {"DeformConv", "19 22", Reading::kRefuse, "a new operator"},
    {"DequantizeLinear", "19 21 23 24 25 28", Reading::kRefuse, "new quantisation forms"},
    {"GridSample", "20 22", Reading::kRefuse, "new sampling modes"},
    {"GroupNormalization", "18 21", Reading::kRefuse, "a new operator"},
    {"ImageDecoder", "20", Reading::kRefuse, "a new operator"},
    {"LinearAttention", "27", Reading::kRefuse, "a new operator"},
    {"QLinearMatMul", "21", Reading::kRefuse, "new quantisation forms"},
    {"QuantizeLinear", "19 21 23 24 25 28", Reading::kRefuse, "new quantisation forms"},
    {"RMSNormalization", "23", Reading::kRefuse, "a new operator"},
    {"RegexFullMatch", "20", Reading::kRefuse, "a new operator"},
    {"RotaryEmbedding", "23", Reading::kRefuse, "a new operator"},
    {"StringConcat", "20", Reading::kRefuse, "a new operator"},
    {"StringSplit", "20", Reading::kRefuse, "a new operator"},
    {"SwiGLU", "28", Reading::kRefuse, "a new operator"},
    {"TensorScatter", "24", Reading::kRefuse, "a new operator"},
};

const OpChange* FindChange(std::string_view op) {
  for (const OpChange& c : kOpsetChanges) {
    if (c.op == op) return &c;
  }
  return nullptr;
}

// The operator's newest version at `opset` after 17, or 0 when it has none.
// (std::from_chars, not an istream: a stream reads through the global
// locale's facets, which crash when a Python process has loaded a second
// libstdc++ before the extension, as PyTorch and onnx wheels do.)
int NewestVersion(const OpChange& change, int64_t opset) {
  const std::string_view text = change.versions;
  int newest = 0;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  while (p < end) {
    if (*p == ' ') {
      ++p;
      continue;
    }
    int v = 0;
    const std::from_chars_result r = std::from_chars(p, end, v);
    HFUSE_CHECK(r.ec == std::errc() && "opset versions of the table");
    if (v <= opset) newest = v;
    p = r.ptr;
  }
  return newest;
}

bool IsDefaultDomain(const NodeProto& node) {
  return node.domain().empty() || node.domain() == "ai.onnx";
}

AttributeProto* MutableAttr(NodeProto& node, std::string_view name) {
  for (AttributeProto& a : *node.mutable_attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}
const AttributeProto* Attr(const NodeProto& node, std::string_view name) {
  return MutableAttr(const_cast<NodeProto&>(node), name);
}
void DropAttr(NodeProto& node, std::string_view name) {
  auto* attrs = node.mutable_attribute();
  for (int i = 0; i < attrs->size(); ++i) {
    if (attrs->Get(i).name() == name) {
      attrs->DeleteSubrange(i, 1);
      return;
    }
  }
}
int64_t IntAttr(const NodeProto& node, std::string_view name, int64_t fallback) {
  const AttributeProto* a = Attr(node, name);
  return a && a->type() == AttributeProto::INT ? a->i() : fallback;
}
std::string StringAttr(const NodeProto& node, std::string_view name, std::string fallback) {
  const AttributeProto* a = Attr(node, name);
  return a && a->type() == AttributeProto::STRING ? a->s() : fallback;
}
bool HasInput(const NodeProto& node, int slot) {
  return slot < node.input_size() && !node.input(slot).empty();
}
// Drops the inputs from `slot` on (trailing optional inputs).
void TruncateInputs(NodeProto& node, int slot) {
  while (node.input_size() > slot) node.mutable_input()->RemoveLast();
}

class Converter {
 public:
  Converter(ModelProto& copy, int64_t opset, std::string source)
      : copy_(copy), opset_(opset), source_(std::move(source)) {}

  // Rewrites every node of `graph` (and its subgraphs); `types` are the
  // value types a first, lenient inference gave (Split's num_outputs needs
  // its input's dim).
  void Convert(GraphProto& graph, const std::map<std::string, const onnx::TypeProto*>& types) {
    for (const TensorProto& t : graph.initializer()) constants_[t.name()] = t;
    for (const NodeProto& node : graph.node()) {
      const AttributeProto* value = Attr(node, "value");
      if (node.op_type() == "Constant" && node.output_size() == 1 && value &&
          value->type() == AttributeProto::TENSOR) {
        constants_[node.output(0)] = value->t();
      }
      if (node.op_type() == "Constant" && node.output_size() == 1) {
        if (const AttributeProto* ints = Attr(node, "value_ints")) {
          constants_[node.output(0)] = onnx_util::MakeInt64Tensor(
              node.output(0), {ints->ints().begin(), ints->ints().end()});
        }
      }
    }
    for (NodeProto& node : *graph.mutable_node()) {
      for (AttributeProto& a : *node.mutable_attribute()) {
        if (a.has_g()) Convert(*a.mutable_g(), types);
        for (GraphProto& g : *a.mutable_graphs()) Convert(g, types);
      }
      if (IsDefaultDomain(node)) ConvertNode(node, types);
    }
  }

  const std::vector<std::string>& refused() const { return refused_; }

 private:
  void Refuse(const NodeProto& node, int version, std::string_view why) {
    refused_.push_back(fmt::format("node '{}' ({}-{} at opset {}): {}", node.name(),
                                   node.op_type(), version, opset_, why));
  }

  std::optional<std::vector<int64_t>> ConstantInts(const std::string& name) const {
    auto it = constants_.find(name);
    if (it == constants_.end()) return std::nullopt;
    return onnx_util::TensorInts(it->second);
  }

  void ConvertNode(NodeProto& node, const std::map<std::string, const onnx::TypeProto*>& types) {
    const OpChange* change = FindChange(node.op_type());
    if (!change) {
      if (!onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(kLinkedOpset), "")) {
        Refuse(node, static_cast<int>(opset_), "not an ONNX operator hfuse knows");
      }
      return;
    }
    const int version = NewestVersion(*change, opset_);
    if (version == 0 || change->reading == Reading::kSame) return;
    if (change->reading == Reading::kRefuse) {
      Refuse(node, version, fmt::format("{}, which hfuse does not implement", change->why));
      return;
    }
    const std::string why = Rewrite(node, version, types);
    if (!why.empty()) Refuse(node, version, why + ", which hfuse does not implement");
  }

  // Rewrites `node` (operator version `version`, after 17) into its
  // opset-17 form; what hfuse does not implement otherwise.
  std::string Rewrite(NodeProto& node, int version,
                      const std::map<std::string, const onnx::TypeProto*>& types) {
    const std::string& t = node.op_type();
    if (t.starts_with("Reduce")) {
      // 18: the axes move from an attribute to an input; an empty list
      // with noop_with_empty_axes=1 is the identity.
      std::vector<int64_t> axes;
      if (HasInput(node, 1)) {
        auto c = ConstantInts(node.input(1));
        if (!c) return "axes computed at run time";
        axes = *c;
      }
      const bool noop = IntAttr(node, "noop_with_empty_axes", 0) != 0;
      TruncateInputs(node, 1);
      DropAttr(node, "noop_with_empty_axes");
      if (axes.empty() && noop) {
        node.set_op_type("Identity");
        node.clear_attribute();
      } else if (!axes.empty()) {
        AttributeProto* a = node.add_attribute();
        a->set_name("axes");
        a->set_type(AttributeProto::INTS);
        for (int64_t v : axes) a->add_ints(v);
      }
      return "";
    }
    if (t == "Split") {
      // 18: num_outputs equal parts, the last one smaller when the dim
      // does not divide; opset 17 needs the sizes for that.
      const AttributeProto* n_attr = Attr(node, "num_outputs");
      if (!n_attr) return "";
      const int64_t n = n_attr->i();
      if (n != node.output_size()) {
        return fmt::format("num_outputs {} with {} outputs", n, node.output_size());
      }
      DropAttr(node, "num_outputs");
      if (HasInput(node, 1)) return "";
      auto it = types.find(node.input(0));
      if (it == types.end() || !it->second->has_tensor_type() ||
          !it->second->tensor_type().has_shape()) {
        return "";  // equal parts or an unknown dim: opset 17's even split says the same
      }
      const auto& dims = it->second->tensor_type().shape().dim();
      int64_t axis = IntAttr(node, "axis", 0);
      if (axis < 0) axis += dims.size();
      if (axis < 0 || axis >= dims.size() || !dims[static_cast<int>(axis)].has_dim_value()) {
        return "";
      }
      const int64_t d = dims[static_cast<int>(axis)].dim_value();
      if (n <= 0 || d % n == 0) return "";
      const int64_t part = (d + n - 1) / n;
      std::vector<int64_t> sizes;
      for (int64_t i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(part, d - i * part)));
      const std::string name = fmt::format("{}__hfuse_split_sizes", node.output(0));
      *copy_.mutable_graph()->add_initializer() = onnx_util::MakeInt64Tensor(name, sizes);
      TruncateInputs(node, 1);
      node.add_input(name);
      return "";
    }
    if (t == "Gelu" || t == "Swish" || t == "Mish") {
      // New element-wise ops (Gelu 20, Mish 18, Swish 24): the copy only
      // needs their output's type and shape, which are the input's.
      if (t == "Gelu") {
        const std::string approximate = StringAttr(node, "approximate", "none");
        if (approximate != "none" && approximate != "tanh") {
          return fmt::format("approximate '{}'", approximate);
        }
      }
      node.set_op_type("Identity");
      node.clear_attribute();
      return "";
    }
    if (t == "Cast" || t == "CastLike") {
      // 19 saturate, 24 round_mode: they only matter for float8 targets,
      // which hfuse does not carry.
      DropAttr(node, "saturate");
      DropAttr(node, "round_mode");
      return "";
    }
    if (t == "Range") {  // 27: stash_type, for float16 and bfloat16 only
      DropAttr(node, "stash_type");
      return "";
    }
    if (t == "Pad") {
      if (StringAttr(node, "mode", "constant") == "wrap") return "mode 'wrap' (Pad-19)";
      if (!HasInput(node, 3)) return "";
      // 18: pads for the listed axes only; opset 17 needs them for all.
      auto axes = ConstantInts(node.input(3));
      auto pads = HasInput(node, 1) ? ConstantInts(node.input(1)) : std::nullopt;
      auto it = types.find(node.input(0));
      if (!axes || !pads || pads->size() != 2 * axes->size() || it == types.end() ||
          !it->second->has_tensor_type() || !it->second->tensor_type().has_shape()) {
        return "an axes input (Pad-18) with pads, axes or a rank not known on import";
      }
      const int64_t rank = it->second->tensor_type().shape().dim_size();
      std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
      for (size_t i = 0; i < axes->size(); ++i) {
        int64_t ax = (*axes)[i];
        if (ax < 0) ax += rank;
        if (ax < 0 || ax >= rank) return fmt::format("axis {} of a rank-{} input", (*axes)[i], rank);
        full[static_cast<size_t>(ax)] = (*pads)[i];
        full[static_cast<size_t>(ax + rank)] = (*pads)[i + axes->size()];
      }
      const std::string name = fmt::format("{}__hfuse_pads", node.output(0));
      *copy_.mutable_graph()->add_initializer() = onnx_util::MakeInt64Tensor(name, full);
      TruncateInputs(node, 3);
      *node.mutable_input(1) = name;
      return "";
    }
    if (t == "Resize") {
      if (IntAttr(node, "antialias", 0) != 0) return "antialias (Resize-18)";
      if (Attr(node, "axes")) return "axes (Resize-18)";
      if (StringAttr(node, "keep_aspect_ratio_policy", "stretch") != "stretch") {
        return "keep_aspect_ratio_policy (Resize-18)";
      }
      if (StringAttr(node, "coordinate_transformation_mode", "") == "half_pixel_symmetric") {
        return "coordinate_transformation_mode 'half_pixel_symmetric' (Resize-19)";
      }
      DropAttr(node, "antialias");
      DropAttr(node, "keep_aspect_ratio_policy");
      return "";
    }
    if (t == "AveragePool" || t == "LpPool") {
      if (const AttributeProto* d = Attr(node, "dilations")) {
        if (std::any_of(d->ints().begin(), d->ints().end(), [](int64_t v) { return v != 1; })) {
          return "dilations";
        }
      }
      DropAttr(node, "dilations");
      if (t == "LpPool") {
        if (IntAttr(node, "ceil_mode", 0) != 0) return "ceil_mode";
        DropAttr(node, "ceil_mode");
      }
      return "";
    }
    if (t == "ScatterElements" || t == "ScatterND") {
      const std::string r = StringAttr(node, "reduction", "none");
      if (r == "max" || r == "min") return fmt::format("reduction '{}'", r);
      return "";
    }
    if (t == "SpaceToDepth") {  // 28: mode, DCR as before by default
      if (StringAttr(node, "mode", "DCR") != "DCR") return "mode 'CRD'";
      DropAttr(node, "mode");
      return "";
    }
    if (t == "OptionalHasElement") {
      if (!HasInput(node, 0)) return "an absent input (OptionalHasElement-18)";
      return "";
    }
    (void)version;
    return "a form hfuse does not rewrite";
  }

  ModelProto& copy_;
  int64_t opset_;
  std::string source_;
  std::map<std::string, TensorProto> constants_;
  std::vector<std::string> refused_;
};

std::map<std::string, const onnx::TypeProto*> TypesOf(const GraphProto& graph) {
  std::map<std::string, const onnx::TypeProto*> types;
  for (const auto* list : {&graph.input(), &graph.output(), &graph.value_info()}) {
    for (const auto& vi : *list) types[vi.name()] = &vi.type();
  }
  return types;
}

}  // namespace

bool NeedsLinkedCopy(const ModelProto& model, int64_t opset) {
  return opset > kLinkedOpset || model.ir_version() > kLinkedIrVersion;
}

ModelProto ForLinkedOnnx(const ModelProto& model, int64_t opset, const std::string& source) {
  ModelProto copy = model;
  copy.set_ir_version(std::min<int64_t>(model.ir_version(), kLinkedIrVersion));
  for (auto& o : *copy.mutable_opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") o.set_version(std::min(opset, kLinkedOpset));
  }
  if (opset <= kLinkedOpset) return copy;

  // Split's num_outputs and Pad's axes need their input's dims: a first
  // pass with them left out (opset 17's equal parts; the Pad refused),
  // lenient, gives them.
  const bool split_sizes = std::any_of(
      model.graph().node().begin(), model.graph().node().end(), [](const NodeProto& n) {
        return (n.op_type() == "Split" && Attr(n, "num_outputs") && !HasInput(n, 1)) ||
               (n.op_type() == "Pad" && HasInput(n, 3));
      });
  std::map<std::string, const onnx::TypeProto*> types;
  ModelProto first;
  if (split_sizes) {
    first = copy;
    Converter probe(first, opset, source);
    probe.Convert(*first.mutable_graph(), types);  // what it refuses, the pass below says
    try {
      onnx::shape_inference::InferShapes(first, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions(false, 0, true));
    } catch (const std::exception&) {
      // The strict pass below says what is wrong.
    }
    types = TypesOf(first.graph());
  }
  Converter converter(copy, opset, source);
  converter.Convert(*copy.mutable_graph(), types);
  const auto& refused = converter.refused();
  if (!refused.empty()) {
    ThrowInputError("{}: {} node{} use{} operator versions hfuse does not read: {}", source,
                    refused.size(), refused.size() == 1 ? "" : "s",
                    refused.size() == 1 ? "s" : "", fmt::join(refused, "; "));
  }
  return copy;
}

}  // namespace hfuse::onnx_compat
