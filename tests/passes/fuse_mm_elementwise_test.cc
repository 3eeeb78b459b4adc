// Tests of fuse-mm-elementwise and flatten-gemm-inputs, the passes that run
// before fuse-group-ops on graphs read from ONNX: one test per rule, and one
// per precondition that must stop it.
#include "hfuse/passes/fuse_mm_elementwise.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hfuse/exec/cpu_executor.h"
#include "hfuse/ir/verifier.h"
#include "hfuse/passes/flatten_gemm.h"
#include "testing/graph_builder.h"

namespace hfuse {
namespace {

using test::GraphBuilder;
using test::OpNamed;
using test::ShapeSpec;
using ::testing::ElementsAre;

// "name:type" of each live op, by id.
std::vector<std::string> Ops(const Graph& g) {
  std::vector<std::string> ops;
  for (OpId id : g.LiveOps()) {
    std::string text = g.op(id).name;
    text += ':';
    text += OpTypeName(g.op(id).type);
    ops.push_back(std::move(text));
  }
  return ops;
}

// y = gemm_rcr(x, w); z = add(y, b) or add(b, y); then `act` (unless empty).
GraphBuilder GemmAddAct(bool bias_first, const std::string& act, ShapeSpec bias_shape = {32}) {
  GraphBuilder b;
  const std::string x = b.Input("x", {16, 64}, DType::kFloat32);
  const std::string w = b.Param("w", {32, 64}, DType::kFloat32);
  const std::string bias = b.Param("b", bias_shape, DType::kFloat32);
  const std::string y = b.Gemm("fc", OpType::kGemmRcr, x, w);
  const std::string z = b.Declare("z", {16, 32}, DType::kFloat32);
  if (bias_first) {
    b.RawOp("add", "elementwise", {bias, y}, {z}, "\"func\": \"add\"");
  } else {
    b.RawOp("add", "elementwise", {y, bias}, {z}, "\"func\": \"add\"");
  }
  b.Outputs({act.empty() ? z : b.Elementwise("act", act, {z})});
  return b;
}

TEST(FuseMmElementwiseTest, BiasAddAndReluBecomeOneGemm) {
  Graph g = GemmAddAct(false, "relu").Build();
  const Graph original = g;
  EXPECT_EQ(FuseMmElementwise(g), 2);
  VerifyGraph(g);
  EXPECT_THAT(Ops(g), ElementsAre("fc:gemm_rcr_bias_relu"));
  const Op& fc = g.op(OpNamed(g, "fc"));
  EXPECT_EQ(g.tensor(fc.inputs[2]).name, "b");
  EXPECT_EQ(g.tensor(fc.outputs[0]).name, "act_y");
  // It computes what the three ops computed.
  const TensorMap feeds = RandomFeeds(original, BindDims(original), 7);
  EXPECT_EQ(RunOnCpu(g, feeds, {}).at("act_y").bytes,
            RunOnCpu(original, feeds, {}).at("act_y").bytes);
}

TEST(FuseMmElementwiseTest, BiasMayBeTheFirstOperand) {
  Graph g = GemmAddAct(true, "sigmoid").Build();
  EXPECT_EQ(FuseMmElementwise(g), 2);
  EXPECT_THAT(Ops(g), ElementsAre("fc:gemm_rcr_bias_sigmoid"));
}

TEST(FuseMmElementwiseTest, BiasAddAloneGivesGemmRcrBias) {
  Graph g = GemmAddAct(false, "").Build();
  EXPECT_EQ(FuseMmElementwise(g), 1);
  EXPECT_THAT(Ops(g), ElementsAre("fc:gemm_rcr_bias"));
}

TEST(FuseMmElementwiseTest, OtherActivationsStayApart) {
  Graph g = GemmAddAct(false, "tanh").Build();
  EXPECT_EQ(FuseMmElementwise(g), 1);
  EXPECT_THAT(Ops(g), ElementsAre("fc:gemm_rcr_bias", "act:elementwise"));
}

TEST(FuseMmElementwiseTest, ActivationsOffLeavesRelu) {
  Graph g = GemmAddAct(false, "relu").Build();
  EXPECT_EQ(FuseMmElementwise(g, {.activations = false}), 1);
  EXPECT_THAT(Ops(g), ElementsAre("fc:gemm_rcr_bias", "act:elementwise"));
}

TEST(FuseMmElementwiseTest, NonBroadcastCIsNotABias) {
  Graph g = GemmAddAct(false, "relu", {16, 32}).Build();
  EXPECT_EQ(FuseMmElementwise(g), 0);
  Graph row = GemmAddAct(false, "relu", {1, 32}).Build();
  EXPECT_EQ(FuseMmElementwise(row), 0);
}

TEST(FuseMmElementwiseTest, ComputedBiasIsNotFused) {
  GraphBuilder b;
  const std::string x = b.Input("x", {16, 64}, DType::kFloat32);
  const std::string w = b.Param("w", {32, 64}, DType::kFloat32);
  const std::string c = b.Input("c", {32}, DType::kFloat32);  // fed at run time
  b.Outputs({b.Elementwise("add", "add", {b.Gemm("fc", OpType::kGemmRcr, x, w), c})});
  Graph g = b.Build();
  EXPECT_EQ(FuseMmElementwise(g), 0);
}

TEST(FuseMmElementwiseTest, GemmOutputWithAnotherReaderIsNotFused) {
  GraphBuilder b;
  const std::string x = b.Input("x", {16, 64}, DType::kFloat32);
  const std::string w = b.Param("w", {32, 64}, DType::kFloat32);
  const std::string bias = b.Param("b", {32}, DType::kFloat32);
  const std::string y = b.Gemm("fc", OpType::kGemmRcr, x, w);
  b.Outputs({b.Elementwise("add", "add", {y, bias}), b.Elementwise("act", "relu", {y})});
  Graph g = b.Build();
  EXPECT_EQ(FuseMmElementwise(g), 0);
}

TEST(FuseMmElementwiseTest, GemmOutputThatIsAGraphOutputIsNotFused) {
  GraphBuilder b;
  const std::string x = b.Input("x", {16, 64}, DType::kFloat32);
  const std::string w = b.Param("w", {32, 64}, DType::kFloat32);
  const std::string bias = b.Param("b", {32}, DType::kFloat32);
  const std::string y = b.Gemm("fc", OpType::kGemmRcr, x, w);
  b.Outputs({b.Elementwise("add", "add", {y, bias}), y});
  Graph g = b.Build();
  EXPECT_EQ(FuseMmElementwise(g), 0);
}

// ---- flatten-gemm-inputs -------------------------------------------------------

TEST(FlattenGemmInputsTest, ParallelGemmsOn3dInputShareOneReshape) {
  GraphBuilder b;
  const std::string x = b.Input("x", {2, 8, 64}, DType::kFloat32);
  b.Outputs({b.Fc("q", x, 64, {.type = OpType::kGemmRcrBias}),
             b.Fc("k", x, 64, {.type = OpType::kGemmRcrBias})});
  Graph g = b.Build();
  const Graph original = g;
  EXPECT_EQ(FlattenGemmInputs(g), 2);
  VerifyGraph(g);
  EXPECT_THAT(Ops(g), ElementsAre("q:gemm_rcr_bias", "k:gemm_rcr_bias", "x/flatten:reshape",
                                  "q/unflatten:reshape", "k/unflatten:reshape"));
  const Op& q = g.op(OpNamed(g, "q"));
  EXPECT_EQ(ShapeString(g, g.tensor(q.inputs[0]).shape), "[16, 64]");
  EXPECT_EQ(g.op(OpNamed(g, "k")).inputs[0], q.inputs[0]);
  const TensorMap feeds = RandomFeeds(original, BindDims(original), 3);
  EXPECT_EQ(RunOnCpu(g, feeds, {}).at("q_y").bytes, RunOnCpu(original, feeds, {}).at("q_y").bytes);
}

TEST(FlattenGemmInputsTest, LoneGemmKeepsItsShape) {
  GraphBuilder b;
  const std::string x = b.Input("x", {2, 8, 64}, DType::kFloat32);
  b.Outputs({b.Fc("q", x, 64), b.Fc("k", x, 64, {.type = OpType::kGemmRcr})});  // other type
  Graph g = b.Build();
  EXPECT_EQ(FlattenGemmInputs(g), 0);
}

TEST(FlattenGemmInputsTest, DynamicLeadingDimIsNotFlattened) {
  GraphBuilder b;
  b.Dim("batch", 1, 16);
  const std::string x = b.Input("x", {"batch", 8, 64}, DType::kFloat32);
  b.Outputs({b.Fc("q", x, 64), b.Fc("k", x, 64)});
  Graph g = b.Build();
  EXPECT_EQ(FlattenGemmInputs(g), 0);
}

// With dynamic_m (the hfuse rules) M is the derived dim batch*8, shared by
// both GEMMs and bound through batch; a 2-D GEMM of M = batch (a lone
// [batch, 1, 64] GEMM flattens to M = batch itself) joins them.
TEST(FlattenGemmInputsTest, DynamicLeadingDimBecomesADerivedM) {
  GraphBuilder b;
  b.Dim("batch", 1, 16);
  const std::string x = b.Input("x", {"batch", 8, 64}, DType::kFloat32);
  const std::string u = b.Input("u", {"batch", 1, 64}, DType::kFloat32);
  const std::string v = b.Input("v", {"batch", 64}, DType::kFloat32);
  b.Outputs({b.Fc("q", x, 64), b.Fc("k", x, 32), b.Fc("p", u, 64), b.Fc("r", v, 64)});
  Graph g = b.Build();
  const Graph original = g;
  EXPECT_EQ(FlattenGemmInputs(g, {.dynamic_m = true}), 3);
  VerifyGraph(g);
  const Op& q = g.op(OpNamed(g, "q"));
  EXPECT_EQ(ShapeString(g, g.tensor(q.inputs[0]).shape), "[batch*8, 64]");
  EXPECT_EQ(g.tensor(g.op(OpNamed(g, "k")).inputs[0]).shape, g.tensor(q.inputs[0]).shape);
  EXPECT_EQ(ShapeString(g, g.tensor(g.op(OpNamed(g, "p")).inputs[0]).shape), "[batch, 64]");
  const DynamicDim& m = g.dims()[static_cast<size_t>(g.tensor(q.inputs[0]).shape[0].dynamic)];
  EXPECT_EQ(m.factor, 8);
  EXPECT_EQ(m.max, 128);
  for (int64_t batch : {3, 16}) {
    const DimValues dims = BindDims(g, {{"batch", batch}});
    EXPECT_EQ(ConcreteShape(g.tensor(q.inputs[0]).shape, dims)[0], 8 * batch);
    const TensorMap feeds = RandomFeeds(original, BindDims(original, {{"batch", batch}}), 5);
    for (const char* y : {"q_y", "k_y", "p_y"}) {
      EXPECT_EQ(RunOnCpu(g, feeds, dims).at(y).bytes,
                RunOnCpu(original, feeds, BindDims(original, {{"batch", batch}})).at(y).bytes);
    }
  }
  // --dim batch=4 makes every M static again.
  SpecializeDims(g, {{"batch", 4}});
  EXPECT_EQ(ShapeString(g, g.tensor(q.inputs[0]).shape), "[32, 64]");
  VerifyGraph(g);
}

}  // namespace
}  // namespace hfuse
