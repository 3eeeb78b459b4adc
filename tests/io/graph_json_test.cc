// Tests of the graph JSON v1 reader and writer (io/graph_json.h) against the
// spec (shared/spec/graph-json.md): that every field of the format is read
// into the IR as the spec defines it (dims, shapes, dtypes, roles, every op
// type and attribute, defaults, null gamma and beta, group ops), and that the
// writer is canonical: writing, reading back and writing again gives the same
// bytes, for hand-made graphs, for every conformance graph in shared/, and
// for the fused graphs (with group ops) the pass makes from them.
// Bad input is tested through the tool in bad_input_test.cc.
#include "hfuse/ir/op_members.h"
#include "hfuse/io/graph_json.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"

namespace hfuse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

// Every conformance graph (not the .expected.json files), sorted by path.
std::vector<std::string> ConformanceGraphs() {
  std::vector<std::string> paths;
  for (const char* folder : {"ait_tests", "edge", "random", "scale"}) {
    const fs::path dir = fs::path(HFUSE_SHARED_DIR) / "conformance" / folder;
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(".json") && !name.ends_with(".expected.json")) {
        paths.push_back(entry.path().string());
      }
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// Writes, reads back and writes again; both texts must be identical.
void ExpectRoundTrip(const Graph& graph, const std::vector<OpId>& order, const std::string& what) {
  const std::string first = WriteGraphJson(graph, order);
  Graph again;
  try {
    again = ParseGraphJson(first, what + " (written)");
  } catch (const InputError& e) {
    FAIL() << what << ": the writer's output does not read back: " << e.what();
  }
  const std::string second = WriteGraphJson(again);
  EXPECT_EQ(first, second) << what;
}

OpId OpOf(const Graph& g, const std::string& name) {
  auto id = g.FindOp(name);
  EXPECT_TRUE(id.has_value()) << name;
  return id.value_or(0);
}
TensorId TensorOf(const Graph& g, const std::string& name) {
  auto id = g.FindTensor(name);
  EXPECT_TRUE(id.has_value()) << name;
  return id.value_or(0);
}
std::vector<std::string> Names(const Graph& g, const std::vector<TensorId>& ids) {
  std::vector<std::string> names;
  for (TensorId id : ids) names.push_back(g.tensor(id).name);
  return names;
}

// One graph that uses every op type but the group ops, every dtype and role,
// dynamic dims (one with min == max), negative dims and reshape's -1.
constexpr const char* kEveryField = R"({
  "graph_format": 1,
  "name": "every_field",
  "dims": [{"name": "batch", "min": 1, "max": 2048}, {"name": "seq", "min": 8, "max": 8}],
  "tensors": [
    {"name": "x", "shape": ["batch", 64], "dtype": "float16", "role": "input"},
    {"name": "w", "shape": [32, 64], "dtype": "float16", "role": "param"},
    {"name": "bias", "shape": [32], "dtype": "float16", "role": "param"},
    {"name": "h0", "shape": ["batch", 32], "dtype": "float16"},
    {"name": "h1", "shape": ["batch", 32], "dtype": "float16"},
    {"name": "h2", "shape": ["batch", 32], "dtype": "float16"},
    {"name": "h3", "shape": ["batch", 32], "dtype": "float16"},
    {"name": "gamma", "shape": [32], "dtype": "float16", "role": "param"},
    {"name": "beta", "shape": [32], "dtype": "float16", "role": "param"},
    {"name": "n0", "shape": ["batch", 32], "dtype": "float16"},
    {"name": "n1", "shape": ["batch", 32], "dtype": "float16"},
    {"name": "n2", "shape": ["batch", 32], "dtype": "float16"},
    {"name": "s0", "shape": ["batch", 12], "dtype": "float16"},
    {"name": "s1", "shape": ["batch", 20], "dtype": "float16"},
    {"name": "c", "shape": ["batch", 32], "dtype": "float16"},
    {"name": "e", "shape": ["batch", 32], "dtype": "float16"},
    {"name": "r", "shape": ["batch", 4, 8], "dtype": "float16"},
    {"name": "z", "shape": ["seq", 3], "dtype": "bfloat16", "role": "input"},
    {"name": "zr", "shape": ["seq", 3], "dtype": "bfloat16"},
    {"name": "f", "shape": [2, 3, 5], "dtype": "float32", "role": "input"},
    {"name": "fo", "shape": [2, 3, 5], "dtype": "float32"},
    {"name": "unused", "shape": [7], "dtype": "float32", "role": "input"}
  ],
  "ops": [
    {"name": "fc0", "op": "gemm_rcr", "inputs": ["x", "w"], "outputs": ["h0"], "alpha": 0.5},
    {"name": "fc1", "op": "gemm_rcr_bias", "inputs": ["x", "w", "bias"], "outputs": ["h1"]},
    {"name": "fc2", "op": "gemm_rcr_bias_relu", "inputs": ["x", "w", "bias"], "outputs": ["h2"],
     "alpha": 2},
    {"name": "fc3", "op": "gemm_rcr_bias_sigmoid", "inputs": ["x", "w", "bias"], "outputs": ["h3"]},
    {"name": "ln0", "op": "layernorm", "inputs": ["h0", "gamma", "beta"], "outputs": ["n0"],
     "normalized_shape": [32], "eps": 1e-6},
    {"name": "ln1", "op": "layernorm", "inputs": ["h1", null, "beta"], "outputs": ["n1"],
     "normalized_shape": [32]},
    {"name": "ln2", "op": "layernorm_sigmoid_mul", "inputs": ["h2"], "outputs": ["n2"],
     "normalized_shape": [32], "eps": 0.001},
    {"name": "sp", "op": "split", "inputs": ["h3"], "outputs": ["s0", "s1"],
     "split_sizes": [12, 20], "dim": -1},
    {"name": "cat", "op": "concatenate", "inputs": ["s1", "s0"], "outputs": ["c"], "dim": 1},
    {"name": "ew", "op": "elementwise", "inputs": ["n0", "n1", "n2", "c"], "outputs": ["e"],
     "func": "add"},
    {"name": "rs", "op": "reshape", "inputs": ["e"], "outputs": ["r"], "shape": [-1, 4, 8]},
    {"name": "zrelu", "op": "elementwise", "inputs": ["z"], "outputs": ["zr"], "func": "relu"},
    {"name": "fmul", "op": "elementwise", "inputs": ["f", "f"], "outputs": ["fo"], "func": "mul"}
  ],
  "outputs": ["r", "zr", "fo"]
})";

TEST(GraphJsonReadTest, TopLevelAndDims) {
  const Graph g = ParseGraphJson(kEveryField, "every_field.json");
  EXPECT_EQ(g.name(), "every_field");
  ASSERT_EQ(g.dims().size(), 2u);
  EXPECT_EQ(g.dims()[0].name, "batch");
  EXPECT_EQ(g.dims()[0].min, 1);
  EXPECT_EQ(g.dims()[0].max, 2048);
  EXPECT_EQ(g.dims()[1].name, "seq");
  EXPECT_EQ(g.dims()[1].min, 8);
  EXPECT_EQ(g.dims()[1].max, 8);
  EXPECT_THAT(Names(g, g.outputs()), ElementsAre("r", "zr", "fo"));
  EXPECT_EQ(g.NumLiveOps(), 13);
}

TEST(GraphJsonReadTest, TensorsShapesDtypesRoles) {
  const Graph g = ParseGraphJson(kEveryField, "every_field.json");
  const Tensor& x = g.tensor(TensorOf(g, "x"));
  ASSERT_EQ(x.shape.size(), 2u);
  EXPECT_FALSE(x.shape[0].is_static());
  EXPECT_EQ(x.shape[0].dynamic, *g.FindDim("batch"));
  EXPECT_TRUE(x.shape[1].is_static());
  EXPECT_EQ(x.shape[1].value, 64);
  EXPECT_EQ(x.dtype, DType::kFloat16);
  EXPECT_EQ(x.role, Role::kInput);
  EXPECT_EQ(g.tensor(TensorOf(g, "w")).role, Role::kParam);
  EXPECT_EQ(g.tensor(TensorOf(g, "h0")).role, Role::kIntermediate);
  EXPECT_EQ(g.tensor(TensorOf(g, "h0")).producer, OpOf(g, "fc0"));
  // A named dim is dynamic even when its min equals its max.
  const Tensor& z = g.tensor(TensorOf(g, "z"));
  EXPECT_FALSE(z.shape[0].is_static());
  EXPECT_EQ(z.dtype, DType::kBFloat16);
  EXPECT_EQ(g.tensor(TensorOf(g, "f")).dtype, DType::kFloat32);
  EXPECT_EQ(ShapeString(g, g.tensor(TensorOf(g, "r")).shape), "[batch, 4, 8]");
  // An input no op reads is still a tensor of the graph.
  EXPECT_TRUE(g.FindTensor("unused").has_value());
}

TEST(GraphJsonReadTest, GemmFamilyAndAlpha) {
  const Graph g = ParseGraphJson(kEveryField, "every_field.json");
  const Op& fc0 = g.op(OpOf(g, "fc0"));
  EXPECT_EQ(fc0.type, OpType::kGemmRcr);
  EXPECT_THAT(Names(g, fc0.inputs), ElementsAre("x", "w"));
  EXPECT_THAT(Names(g, fc0.outputs), ElementsAre("h0"));
  EXPECT_EQ(fc0.attrs.alpha, 0.5);
  const Op& fc1 = g.op(OpOf(g, "fc1"));
  EXPECT_EQ(fc1.type, OpType::kGemmRcrBias);
  EXPECT_FALSE(fc1.attrs.alpha.has_value()) << "absent alpha must stay absent";
  EXPECT_EQ(fc1.attrs.Alpha(), 1.0);
  EXPECT_THAT(Names(g, fc1.inputs), ElementsAre("x", "w", "bias"));
  const Op& fc2 = g.op(OpOf(g, "fc2"));
  EXPECT_EQ(fc2.type, OpType::kGemmRcrBiasRelu);
  EXPECT_EQ(fc2.attrs.alpha, 2.0) << "an integer alpha is a number too";
  EXPECT_EQ(g.op(OpOf(g, "fc3")).type, OpType::kGemmRcrBiasSigmoid);
  // x is read by four ops, listed in the order of the ops array.
  EXPECT_THAT(g.tensor(TensorOf(g, "x")).users,
              ElementsAre(OpOf(g, "fc0"), OpOf(g, "fc1"), OpOf(g, "fc2"), OpOf(g, "fc3")));
}

TEST(GraphJsonReadTest, LayerNormNullGammaAndDefaults) {
  const Graph g = ParseGraphJson(kEveryField, "every_field.json");
  const Op& ln0 = g.op(OpOf(g, "ln0"));
  EXPECT_EQ(ln0.type, OpType::kLayerNorm);
  EXPECT_THAT(ln0.attrs.normalized_shape, ElementsAre(32));
  EXPECT_EQ(ln0.attrs.eps, 1e-6);
  EXPECT_TRUE(ln0.attrs.has_gamma);
  EXPECT_TRUE(ln0.attrs.has_beta);
  EXPECT_THAT(Names(g, ln0.inputs), ElementsAre("h0", "gamma", "beta"));
  // gamma null, beta given: the null is not an input.
  const Op& ln1 = g.op(OpOf(g, "ln1"));
  EXPECT_FALSE(ln1.attrs.has_gamma);
  EXPECT_TRUE(ln1.attrs.has_beta);
  EXPECT_THAT(Names(g, ln1.inputs), ElementsAre("h1", "beta"));
  EXPECT_FALSE(ln1.attrs.eps.has_value());
  EXPECT_EQ(ln1.attrs.Eps(), 1e-5);
  // Both left off the end.
  const Op& ln2 = g.op(OpOf(g, "ln2"));
  EXPECT_EQ(ln2.type, OpType::kLayerNormSigmoidMul);
  EXPECT_FALSE(ln2.attrs.has_gamma);
  EXPECT_FALSE(ln2.attrs.has_beta);
  EXPECT_THAT(Names(g, ln2.inputs), ElementsAre("h2"));
  EXPECT_EQ(ln2.attrs.eps, 0.001);
}

TEST(GraphJsonReadTest, SplitConcatElementwiseReshape) {
  const Graph g = ParseGraphJson(kEveryField, "every_field.json");
  const Op& sp = g.op(OpOf(g, "sp"));
  EXPECT_EQ(sp.type, OpType::kSplit);
  EXPECT_THAT(sp.attrs.split_sizes, ElementsAre(12, 20));
  EXPECT_EQ(sp.attrs.dim, -1) << "dim is kept as written";
  EXPECT_THAT(Names(g, sp.outputs), ElementsAre("s0", "s1"));
  const Op& cat = g.op(OpOf(g, "cat"));
  EXPECT_EQ(cat.type, OpType::kConcatenate);
  EXPECT_EQ(cat.attrs.dim, 1);
  EXPECT_THAT(Names(g, cat.inputs), ElementsAre("s1", "s0"));
  const Op& ew = g.op(OpOf(g, "ew"));
  EXPECT_EQ(ew.type, OpType::kElementwise);
  EXPECT_EQ(ew.attrs.func, EwFunc::kAdd);
  EXPECT_EQ(g.op(OpOf(g, "zrelu")).attrs.func, EwFunc::kRelu);
  // A repeated input is kept in the op and listed once among the users.
  const Op& fmul = g.op(OpOf(g, "fmul"));
  EXPECT_THAT(Names(g, fmul.inputs), ElementsAre("f", "f"));
  EXPECT_THAT(g.tensor(TensorOf(g, "f")).users, ElementsAre(OpOf(g, "fmul")));
  const Op& rs = g.op(OpOf(g, "rs"));
  EXPECT_EQ(rs.type, OpType::kReshape);
  EXPECT_THAT(rs.attrs.shape, ElementsAre(-1, 4, 8));
}

TEST(GraphJsonReadTest, EveryElementwiseFunc) {
  for (const char* func : {"relu", "sigmoid", "tanh", "gelu", "silu", "add", "sub", "mul", "div"}) {
    const bool unary = ParseEwFunc(func).has_value() && IsUnary(*ParseEwFunc(func));
    const std::string text = fmt::format(
        R"({{"graph_format": 1,
          "tensors": [{{"name": "a", "shape": [2, 3], "dtype": "float32", "role": "input"}},
                      {{"name": "b", "shape": [3], "dtype": "float32", "role": "param"}},
                      {{"name": "y", "shape": [2, 3], "dtype": "float32"}}],
          "ops": [{{"name": "op", "op": "elementwise", "inputs": {}, "outputs": ["y"],
                    "func": "{}"}}],
          "outputs": ["y"]}})",
        unary ? R"(["a"])" : R"(["a", "b"])", func);
    const Graph g = ParseGraphJson(text, func);
    EXPECT_EQ(EwFuncName(g.op(0).attrs.func), func);
    ExpectRoundTrip(g, {}, func);
  }
}

constexpr const char* kGroupOps = R"({
  "graph_format": 1,
  "tensors": [
    {"name": "a0", "shape": [8, 16], "dtype": "float16", "role": "input"},
    {"name": "w0", "shape": [4, 16], "dtype": "float16", "role": "param"},
    {"name": "b0", "shape": [4], "dtype": "float16", "role": "param"},
    {"name": "a1", "shape": [8, 32], "dtype": "float16", "role": "input"},
    {"name": "w1", "shape": [6, 32], "dtype": "float16", "role": "param"},
    {"name": "b1", "shape": [6], "dtype": "float16", "role": "param"},
    {"name": "y0", "shape": [8, 4], "dtype": "float16"},
    {"name": "y1", "shape": [8, 6], "dtype": "float16"},
    {"name": "g0", "shape": [4], "dtype": "float16", "role": "param"},
    {"name": "g1", "shape": [6], "dtype": "float16", "role": "param"},
    {"name": "be0", "shape": [4], "dtype": "float16", "role": "param"},
    {"name": "be1", "shape": [6], "dtype": "float16", "role": "param"},
    {"name": "n0", "shape": [8, 4], "dtype": "float16"},
    {"name": "n1", "shape": [8, 6], "dtype": "float16"},
    {"name": "m0", "shape": [8, 4], "dtype": "float16"},
    {"name": "m1", "shape": [8, 6], "dtype": "float16"},
    {"name": "p0", "shape": [8, 4], "dtype": "float16"},
    {"name": "p1", "shape": [8, 6], "dtype": "float16"}
  ],
  "ops": [
    {"name": "gg", "op": "group_gemm_rcr_bias_relu", "inputs": ["a0", "w0", "b0", "a1", "w1", "b1"],
     "outputs": ["y0", "y1"], "group_size": 2},
    {"name": "gl", "op": "group_layernorm", "inputs": ["y0", "y1", "g0", "g1", "be0", "be1"],
     "outputs": ["n0", "n1"], "normalized_shapes": [[4], [6]], "eps": 1e-6},
    {"name": "gm", "op": "group_layernorm_sigmoid_mul", "inputs": ["n0", "n1"],
     "outputs": ["m0", "m1"], "normalized_shapes": [[4], [6]]},
    {"name": "gp", "op": "group_gemm_rcr", "inputs": ["a0", "w0", "a1", "w1"],
     "outputs": ["p0", "p1"], "group_size": 2}
  ],
  "outputs": ["m0", "m1", "p0", "p1"]
})";

TEST(GraphJsonReadTest, GroupOps) {
  const Graph g = ParseGraphJson(kGroupOps, "group_ops.json");
  const Op& gg = g.op(OpOf(g, "gg"));
  EXPECT_EQ(gg.type, OpType::kGroupGemmRcrBiasRelu);
  EXPECT_EQ(NumMembers(gg), 2u);
  EXPECT_THAT(Names(g, gg.inputs), ElementsAre("a0", "w0", "b0", "a1", "w1", "b1"));
  EXPECT_THAT(Names(g, gg.outputs), ElementsAre("y0", "y1"));
  const Op& gl = g.op(OpOf(g, "gl"));
  EXPECT_EQ(gl.type, OpType::kGroupLayerNorm);
  EXPECT_THAT(gl.attrs.normalized_shapes, ElementsAre(ElementsAre(4), ElementsAre(6)));
  EXPECT_EQ(gl.attrs.eps, 1e-6);
  const Op& gm = g.op(OpOf(g, "gm"));
  EXPECT_EQ(gm.type, OpType::kGroupLayerNormSigmoidMul);
  EXPECT_FALSE(gm.attrs.eps.has_value());
  EXPECT_THAT(Names(g, gm.inputs), ElementsAre("n0", "n1"));
  EXPECT_EQ(g.op(OpOf(g, "gp")).type, OpType::kGroupGemmRcr);
  ExpectRoundTrip(g, {}, "group_ops");
}

// A mixed GEMM group: each member's kind in member_ops, its inputs as that
// kind takes them (bias or not); read, checked, written back the same.
constexpr const char* kMixedGroup = R"({
  "graph_format": 1,
  "tensors": [
    {"name": "a", "shape": [8, 16], "dtype": "float32", "role": "input"},
    {"name": "w0", "shape": [4, 16], "dtype": "float32", "role": "param"},
    {"name": "w1", "shape": [6, 16], "dtype": "float32", "role": "param"},
    {"name": "b1", "shape": [6], "dtype": "float32", "role": "param"},
    {"name": "y0", "shape": [8, 4], "dtype": "float32"},
    {"name": "y1", "shape": [8, 6], "dtype": "float32"}
  ],
  "ops": [
    {"name": "gx", "op": "group_gemm_rcr_mixed", "inputs": ["a", "w0", "a", "w1", "b1"],
     "outputs": ["y0", "y1"], "group_size": 2, "member_ops": ["gemm_rcr", "gemm_rcr_bias_relu"]}
  ],
  "outputs": ["y0", "y1"]
})";

TEST(GraphJsonReadTest, MixedGemmGroup) {
  const Graph g = ParseGraphJson(kMixedGroup, "mixed.json");
  const Op& gx = g.op(OpOf(g, "gx"));
  EXPECT_EQ(gx.type, OpType::kGroupGemmRcrMixed);
  EXPECT_THAT(gx.attrs.member_ops, ElementsAre(OpType::kGemmRcr, OpType::kGemmRcrBiasRelu));
  EXPECT_EQ(GemmMemberOf(gx, 0).bias, kNone);
  EXPECT_EQ(GemmMemberOf(gx, 1).kind, OpType::kGemmRcrBiasRelu);
  EXPECT_THAT(Names(g, {GemmMemberOf(gx, 1).a, GemmMemberOf(gx, 1).w, GemmMemberOf(gx, 1).bias}),
              ElementsAre("a", "w1", "b1"));
  EXPECT_EQ(MemberOfInput(gx, 1), 0u);
  EXPECT_EQ(MemberOfInput(gx, 2), 1u);
  EXPECT_EQ(MemberOfInput(gx, 4), 1u);
  EXPECT_TRUE(IsMemberActivation(gx, 2));
  EXPECT_FALSE(IsMemberActivation(gx, 3));
  ExpectRoundTrip(g, {}, "mixed");
  // Inputs that do not match the member kinds, or member_ops on another
  // group kind, are input errors.
  std::string bad = kMixedGroup;
  bad.replace(bad.find("\"gemm_rcr\", "), 12, "\"gemm_rcr_bias\", ");
  EXPECT_THROW(ParseGraphJson(bad, "bad.json"), InputError);
  std::string other = kMixedGroup;
  other.replace(other.find("group_gemm_rcr_mixed"), 20, "group_gemm_rcr");
  EXPECT_THROW(ParseGraphJson(other, "other.json"), InputError);
}

TEST(GraphJsonReadTest, OpsMayBeListedBeforeTheirProducers) {
  constexpr const char* kText = R"({"graph_format": 1,
      "tensors": [{"name": "x", "shape": [4], "dtype": "float32", "role": "input"},
                  {"name": "y", "shape": [4], "dtype": "float32"},
                  {"name": "z", "shape": [4], "dtype": "float32"}],
      "ops": [{"name": "second", "op": "elementwise", "inputs": ["y"], "outputs": ["z"],
               "func": "tanh"},
              {"name": "first", "op": "elementwise", "inputs": ["x"], "outputs": ["y"],
               "func": "gelu"}],
      "outputs": ["z"]})";
  const Graph g = ParseGraphJson(kText, "order.json");
  EXPECT_EQ(g.tensor(TensorOf(g, "y")).producer, OpOf(g, "first"));
  EXPECT_THAT(g.tensor(TensorOf(g, "y")).users, ElementsAre(OpOf(g, "second")));
}

TEST(GraphJsonReadTest, ErrorsNameTheSource) {
  try {
    ParseGraphJson("{", "some/where.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith("some/where.json: malformed JSON"));
  }
}

TEST(GraphJsonReadTest, ReadGraphJsonFile) {
  const std::string path = fs::path(HFUSE_SHARED_DIR) / "conformance" / "ait_tests" /
                           "group_fusions__gemm_0_float16.json";
  const Graph g = ReadGraphJsonFile(path);
  EXPECT_EQ(g.name(), "gemm_0");
  EXPECT_EQ(g.NumLiveOps(), 2);
  const std::string missing = (fs::path(::testing::TempDir()) / "no_such_graph.json").string();
  try {
    ReadGraphJsonFile(missing);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing));
  }
}

TEST(GraphJsonWriteTest, RoundTripHandMadeGraphs) {
  ExpectRoundTrip(ParseGraphJson(kEveryField, "every_field.json"), {}, "every_field");
  ExpectRoundTrip(ParseGraphJson(kGroupOps, "group_ops.json"), {}, "group_ops");
  ExpectRoundTrip(ParseGraphJson(kMixedGroup, "mixed.json"), {}, "mixed");
}

TEST(GraphJsonWriteTest, NullGammaIsWrittenAsNull) {
  const std::string text = WriteGraphJson(ParseGraphJson(kEveryField, "every_field.json"));
  EXPECT_THAT(text, HasSubstr(R"("inputs": ["h1", null, "beta"])"));
  EXPECT_THAT(text, HasSubstr(R"("inputs": ["h2"])"));
  const Graph back = ParseGraphJson(text, "written");
  const Op& ln1 = back.op(OpOf(back, "ln1"));
  EXPECT_FALSE(ln1.attrs.has_gamma);
  EXPECT_TRUE(ln1.attrs.has_beta);
  EXPECT_THAT(Names(back, ln1.inputs), ElementsAre("h1", "beta"));
}

TEST(GraphJsonWriteTest, LayerNormWithNullBetaOrBoth) {
  for (const char* inputs :
       {R"(["x", "g", null])", R"(["x", null, null])", R"(["x", "g"])", R"(["x", null])"}) {
    const std::string text = fmt::format(
        R"({{"graph_format": 1,
          "tensors": [{{"name": "x", "shape": [2, 8], "dtype": "float16", "role": "input"}},
                      {{"name": "g", "shape": [8], "dtype": "float16", "role": "param"}},
                      {{"name": "y", "shape": [2, 8], "dtype": "float16"}}],
          "ops": [{{"name": "ln", "op": "layernorm", "inputs": {}, "outputs": ["y"],
                    "normalized_shape": [8]}}],
          "outputs": ["y"]}})",
        inputs);
    const Graph g = ParseGraphJson(text, inputs);
    const Op& ln = g.op(0);
    const bool gamma = std::string(inputs).find("\"g\"") != std::string::npos;
    EXPECT_EQ(ln.attrs.has_gamma, gamma) << inputs;
    EXPECT_FALSE(ln.attrs.has_beta) << inputs;
    EXPECT_EQ(ln.inputs.size(), gamma ? 2u : 1u) << inputs;
    ExpectRoundTrip(g, {}, inputs);
  }
}

TEST(GraphJsonWriteTest, AlphaAndEpsArePreservedExactly) {
  for (double value : {0.1, 1.0 / 3.0, 1e-5, 1e-12, 2.5e-300, 12345.678901234567, 1.0, 0.0, -0.75,
                       3.0000000000000004}) {
    const std::string text = fmt::format(
        R"({{"graph_format": 1,
          "tensors": [{{"name": "x", "shape": [2, 8], "dtype": "float32", "role": "input"}},
                      {{"name": "w", "shape": [8, 8], "dtype": "float32", "role": "param"}},
                      {{"name": "h", "shape": [2, 8], "dtype": "float32"}},
                      {{"name": "y", "shape": [2, 8], "dtype": "float32"}}],
          "ops": [{{"name": "fc", "op": "gemm_rcr", "inputs": ["x", "w"], "outputs": ["h"],
                    "alpha": {:.17g}}},
                  {{"name": "ln", "op": "layernorm", "inputs": ["h"], "outputs": ["y"],
                    "normalized_shape": [8], "eps": {:.17g}}}],
          "outputs": ["y"]}})",
        value, value);
    const Graph g = ParseGraphJson(text, "alpha.json");
    EXPECT_EQ(g.op(0).attrs.alpha, value);
    EXPECT_EQ(g.op(1).attrs.eps, value);
    const Graph back = ParseGraphJson(WriteGraphJson(g), "written");
    EXPECT_EQ(back.op(0).attrs.alpha, value);
    EXPECT_EQ(back.op(1).attrs.eps, value);
    ExpectRoundTrip(g, {}, fmt::format("alpha {}", value));
  }
}

TEST(GraphJsonWriteTest, DynamicDimsArePreserved) {
  const Graph g = ParseGraphJson(kEveryField, "every_field.json");
  const std::string text = WriteGraphJson(g);
  EXPECT_THAT(text, HasSubstr(R"({"name": "batch", "min": 1, "max": 2048})"));
  EXPECT_THAT(text, HasSubstr(R"({"name": "seq", "min": 8, "max": 8})"));
  EXPECT_THAT(text, HasSubstr(R"("shape": ["batch", 64])"));
  const Graph back = ParseGraphJson(text, "written");
  const Tensor& z = back.tensor(TensorOf(back, "z"));
  EXPECT_FALSE(z.shape[0].is_static()) << "min == max must stay dynamic";
  EXPECT_EQ(back.dims()[static_cast<size_t>(z.shape[0].dynamic)].name, "seq");
}

TEST(GraphJsonWriteTest, NamesWithQuotesAndUnicodeRoundTrip) {
  const char* text = R"({"graph_format": 1, "name": "q\"uote\\d \u00e9\u4e2d",
      "tensors": [{"name": "x \"1\"", "shape": [4], "dtype": "float32", "role": "input"},
                  {"name": "y\ttab/\u00fc", "shape": [4], "dtype": "float32"}],
      "ops": [{"name": "op \\ \u2603", "op": "elementwise", "inputs": ["x \"1\""],
               "outputs": ["y\ttab/\u00fc"], "func": "silu"}],
      "outputs": ["y\ttab/\u00fc"]})";
  const Graph g = ParseGraphJson(text, "names.json");
  EXPECT_EQ(g.name(), "q\"uote\\d \u00e9\u4e2d");
  EXPECT_TRUE(g.FindTensor("x \"1\"").has_value());
  EXPECT_TRUE(g.FindTensor("y\ttab/\u00fc").has_value());
  EXPECT_TRUE(g.FindOp("op \\ \u2603").has_value());
  ExpectRoundTrip(g, {}, "names");
}

TEST(GraphJsonWriteTest, WritesOpsInTheGivenOrder) {
  const Graph g = ParseGraphJson(kEveryField, "every_field.json");
  std::vector<OpId> order = g.LiveOps();
  std::reverse(order.begin(), order.end());
  const std::string text = WriteGraphJson(g, order);
  EXPECT_LT(text.find("\"name\": \"fmul\""), text.find("\"name\": \"fc0\""));
  const Graph back = ParseGraphJson(text, "reversed");
  EXPECT_EQ(back.op(0).name, "fmul");
  ExpectRoundTrip(g, order, "reversed");
}

TEST(GraphJsonWriteTest, LeavesOutErasedOpsAndTheirTensors) {
  Graph g = ParseGraphJson(kEveryField, "every_field.json");
  // Make "zrelu" dead: drop zr from the outputs, then erase it.
  g.set_outputs({TensorOf(g, "r"), TensorOf(g, "fo")});
  g.EraseOp(OpOf(g, "zrelu"));
  const std::string text = WriteGraphJson(g);
  EXPECT_THAT(text, ::testing::Not(HasSubstr("zrelu")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("\"zr\"")));
  EXPECT_THAT(text, HasSubstr("\"z\"")) << "graph inputs stay even when unused";
  ExpectRoundTrip(g, {}, "erased");
}

TEST(GraphJsonWriteTest, RoundTripEveryConformanceGraph) {
  const std::vector<std::string> paths = ConformanceGraphs();
  ASSERT_GE(paths.size(), 300u) << "conformance graphs not found under " << HFUSE_SHARED_DIR;
  int with_group_ops = 0;
  for (const std::string& path : paths) {
    const Graph g = ReadGraphJsonFile(path);
    for (OpId id : g.LiveOps())
      with_group_ops += IsGroupGemm(g.op(id).type) || IsGroupLayerNorm(g.op(id).type);
    ExpectRoundTrip(g, {}, path);
  }
  EXPECT_GT(with_group_ops, 0) << "some conformance graphs are expected to hold group ops";
}

TEST(GraphJsonWriteTest, RoundTripEveryFusedConformanceGraph) {
  int group_ops = 0;
  for (const std::string& path : ConformanceGraphs()) {
    Graph g = ReadGraphJsonFile(path);
    const FuseGroupOpsResult result = FuseGroupOps(g);
    group_ops += static_cast<int>(result.groups.size());
    ExpectRoundTrip(g, result.op_order, path + " (fused)");
  }
  EXPECT_GT(group_ops, 100);
}

}  // namespace
}  // namespace hfuse
