// Tests of einsum-to-matmul (passes/canonical_gemms.h) on graphs built here
// with opaque Einsum ops, as the ONNX importer makes them: one test per
// form of the corpora (attention scores and values, the column attention
// of widedeep's SAINT written with a constant, DeepCTR's AutoInt, xDeepFM's
// outer product), each checked in the printer's notation (which ops, which
// inputs, which perm) and numerically (the CPU executor before and after,
// on random data, a named batch bound to two sizes); and the forms the pass
// must leave alone. The ONNX export of the ops it makes is tested in
// tests/onnx/onnx_import_test.cc.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hfuse/exec/cpu_executor.h"
#include "hfuse/ir/printer.h"
#include "hfuse/ir/verifier.h"
#include "hfuse/passes/canonical_gemms.h"
#include "hfuse/runtime/bound_dims.h"

namespace hfuse {
namespace {

using ::testing::ElementsAre;

// A graph of opaque Einsums, float32, built tensor by tensor.
class EinsumGraph {
 public:
  EinsumGraph() { batch_ = g_.AddDim({"batch", 1, INT32_MAX, {}, 4}); }

  // A dim spec: a size, or -1 for the named batch.
  Shape ShapeOf(const std::vector<int64_t>& dims) const {
    Shape s;
    for (int64_t d : dims) s.push_back(d < 0 ? Dim::Dynamic(batch_) : Dim::Static(d));
    return s;
  }
  std::string Input(const std::string& name, const std::vector<int64_t>& dims) {
    Tensor t;
    t.name = name;
    t.role = Role::kInput;
    t.shape = ShapeOf(dims);
    g_.AddTensor(std::move(t));
    return name;
  }
  // A constant with values 0.01·i - 0.3 (cycling), all dims static.
  std::string Param(const std::string& name, const std::vector<int64_t>& dims) {
    Tensor t;
    t.name = name;
    t.role = Role::kParam;
    t.shape = ShapeOf(dims);
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float v = 0.01f * static_cast<float>(i % 61) - 0.3f;
      std::memcpy(bytes.data() + i * 4, &v, 4);
    }
    t.data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
    g_.AddTensor(std::move(t));
    return name;
  }
  // y = Einsum(a, b) {equation}, y of `dims`, a graph output.
  std::string Einsum(const std::string& name, const std::string& a, const std::string& b,
                     const std::string& equation, const std::vector<int64_t>& dims) {
    Tensor y;
    y.name = name + "_y";
    y.shape = ShapeOf(dims);
    const TensorId out = g_.AddTensor(std::move(y));
    auto node = std::make_shared<OnnxNode>();
    node->op_type = "Einsum";
    node->opset = 17;
    node->strings["equation"] = equation;
    node->input_slots = {0, 1};
    node->output_slots = {0};
    Op op;
    op.type = OpType::kOpaque;
    op.name = name;
    op.inputs = {*g_.FindTensor(a), *g_.FindTensor(b)};
    op.outputs = {out};
    op.attrs.onnx = std::move(node);
    g_.AddOp(std::move(op));
    outputs_.push_back(out);
    return name + "_y";
  }
  Graph Build() {
    g_.set_outputs(outputs_);
    VerifyGraph(g_);
    return g_;
  }

 private:
  Graph g_;
  int32_t batch_;
  std::vector<TensorId> outputs_;
};

// Each live op as the printer writes it, by id.
std::vector<std::string> Printed(const Graph& g) {
  std::vector<std::string> ops;
  for (OpId id : g.LiveOps()) ops.push_back(PrintOp(g, id));
  return ops;
}

// The perm of the Transpose op named `name`.
std::vector<int64_t> PermOf(const Graph& g, const std::string& name) {
  const auto id = g.FindOp(name);
  EXPECT_TRUE(id.has_value()) << name;
  if (!id) return {};
  return g.op(*id).attrs.onnx->ints.at("perm");
}

// The shape constant of the Reshape op named `name`.
std::vector<int64_t> ShapeConstantOf(const Graph& g, const std::string& name) {
  const auto id = g.FindOp(name);
  EXPECT_TRUE(id.has_value()) << name;
  if (!id) return {};
  const OnnxNode::Value& v = g.op(*id).attrs.onnx->constant_values.at(0);
  std::vector<int64_t> shape(v.data.size() / 8);
  std::memcpy(shape.data(), v.data.data(), v.data.size());
  return shape;
}

// Runs `before` and `after` on the same random feeds, the batch at each
// of `batches`, and expects every output to agree to fp32 rounding.
void ExpectSameOutputs(const Graph& before, const Graph& after,
                       std::vector<int64_t> batches = {3, 5}) {
  for (int64_t batch : batches) {
    const DimValues dims = BindDims(before, {{"batch", batch}});
    const TensorMap feeds = RandomFeeds(before, dims, 7);
    const TensorMap want = RunOnCpu(before, feeds, dims);
    const TensorMap got = RunOnCpu(after, feeds, BindDims(after, {{"batch", batch}}));
    for (TensorId t : before.outputs()) {
      const std::string& name = before.tensor(t).name;
      const HostTensor& a = want.at(name);
      const HostTensor& b = got.at(name);
      ASSERT_EQ(a.shape, b.shape) << name;
      const std::vector<float> x = a.ToFloat(), y = b.ToFloat();
      float scale = 1e-30f, diff = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        scale = std::max(scale, std::abs(x[i]));
        diff = std::max(diff, std::abs(x[i] - y[i]));
      }
      EXPECT_LE(diff / scale, 1e-5f) << name << " at batch " << batch;
    }
  }
}

// Attention scores q kᵀ: k is transposed, the MatMul batches over b and h;
// no Reshape.
TEST(EinsumToMatMulTest, ScoresTransposeTheKeys) {
  EinsumGraph e;
  e.Input("q", {-1, 4, 26, 8});
  e.Input("k", {-1, 4, 26, 8});
  e.Einsum("scores", "q", "k", "b h s d, b h l d -> b h s l", {-1, 4, 26, 26});
  Graph g = e.Build();
  const Graph before = g;
  EXPECT_EQ(EinsumToMatMul(g), 1);
  VerifyGraph(g);
  EXPECT_THAT(Printed(g),
              ElementsAre("scores_y = opaque(q, k_t) {onnx = MatMul}  # scores",
                          "k_t = opaque(k) {onnx = Transpose}  # scores/Transpose_b"));
  EXPECT_THAT(PermOf(g, "scores/Transpose_b"), ElementsAre(0, 1, 3, 2));
  ExpectSameOutputs(before, g);
}

// Attention values p v: already MatMul's layout, the Einsum becomes it alone.
TEST(EinsumToMatMulTest, ValuesAreAMatMulAsTheyStand) {
  EinsumGraph e;
  e.Input("p", {-1, 4, 26, 26});
  e.Input("v", {-1, 4, 26, 8});
  e.Einsum("values", "p", "v", "bhsl,bhld->bhsd", {-1, 4, 26, 8});
  Graph g = e.Build();
  const Graph before = g;
  EXPECT_EQ(EinsumToMatMul(g), 1);
  EXPECT_THAT(Printed(g), ElementsAre("values_y = opaque(p, v) {onnx = MatMul}  # values"));
  ExpectSameOutputs(before, g);
}

// widedeep's `b s i, s k -> b k i` (a constant without batch labels): the
// constant, transposed once into a new param, is MatMul's broadcast first
// operand, and x is read as it is. No Reshape, no Transpose op.
TEST(EinsumToMatMulTest, ConstantWithoutBatchLabelsIsTheBroadcastOperand) {
  EinsumGraph e;
  e.Input("x", {-1, 39, 32});
  e.Param("E", {39, 19});
  e.Einsum("proj", "x", "E", "b s i, s k -> b k i", {-1, 19, 32});
  Graph g = e.Build();
  const Graph before = g;
  EXPECT_EQ(EinsumToMatMul(g), 1);
  VerifyGraph(g);
  EXPECT_THAT(Printed(g), ElementsAre("proj_y = opaque(E_t, x) {onnx = MatMul}  # proj"));
  const Tensor& et = g.tensor(*g.FindTensor("E_t"));
  EXPECT_EQ(ShapeString(g, et.shape), "[19, 39]");
  EXPECT_FALSE(g.FindTensor("E").has_value() && g.tensor(*g.FindTensor("E")).alive)
      << "the old constant, read by no one, is dropped";
  ExpectSameOutputs(before, g);
}

// DeepCTR's AutoInt written with torch.einsum: scores and values.
TEST(EinsumToMatMulTest, AutoIntAttentionForms) {
  EinsumGraph e;
  e.Input("q", {-1, 2, 26, 16});
  e.Input("k", {-1, 2, 26, 16});
  const std::string s = e.Einsum("scores", "q", "k", "bnik,bnjk->bnij", {-1, 2, 26, 26});
  e.Input("p", {-1, 2, 26, 26});
  e.Einsum("values", "p", "k", "bnij,bnjk->bnik", {-1, 2, 26, 16});
  Graph g = e.Build();
  const Graph before = g;
  EXPECT_EQ(EinsumToMatMul(g), 2);
  VerifyGraph(g);
  EXPECT_THAT(Printed(g),
              ElementsAre("scores_y = opaque(q, k_t) {onnx = MatMul}  # scores",
                          "values_y = opaque(p, k) {onnx = MatMul}  # values",
                          "k_t = opaque(k) {onnx = Transpose}  # scores/Transpose_b"));
  ExpectSameOutputs(before, g);
}

// xDeepFM's CIN: the outer product `bhd,bmd->bhmd` is a MatMul with K = 1
// batched over b and d: each operand moved to [b, d, ·] and given its unit
// dim by a Reshape (0 copies the named batch), the product moved back.
TEST(EinsumToMatMulTest, OuterProductIsAMatMulWithKOne) {
  EinsumGraph e;
  e.Input("x0", {-1, 26, 16});
  e.Input("xk", {-1, 12, 16});
  e.Einsum("outer", "x0", "xk", "bhd,bmd->bhmd", {-1, 26, 12, 16});
  Graph g = e.Build();
  const Graph before = g;
  EXPECT_EQ(EinsumToMatMul(g), 1);
  VerifyGraph(g);
  EXPECT_THAT(Printed(g),
              ElementsAre("outer_y_mm = opaque(x0_t_r, xk_t_r) {onnx = MatMul}  # outer",
                          "x0_t = opaque(x0) {onnx = Transpose}  # outer/Transpose_a",
                          "x0_t_r = opaque(x0_t) {onnx = Reshape}  # outer/Reshape_a",
                          "xk_t = opaque(xk) {onnx = Transpose}  # outer/Transpose_b",
                          "xk_t_r = opaque(xk_t) {onnx = Reshape}  # outer/Reshape_b",
                          "outer_y = opaque(outer_y_mm) {onnx = Transpose}  "
                          "# outer/Transpose_out"));
  EXPECT_THAT(PermOf(g, "outer/Transpose_a"), ElementsAre(0, 2, 1));
  EXPECT_THAT(ShapeConstantOf(g, "outer/Reshape_a"), ElementsAre(0, 16, 26, 1));
  EXPECT_THAT(ShapeConstantOf(g, "outer/Reshape_b"), ElementsAre(0, 16, 1, 12));
  EXPECT_THAT(PermOf(g, "outer/Transpose_out"), ElementsAre(0, 2, 3, 1));
  ExpectSameOutputs(before, g);
}

// w's two free labels merge into one matrix dim through a Reshape, and the
// product is taken apart again; a's extra free label i is a batch dim w
// broadcasts over, so a is read as it is (no transpose anywhere).
TEST(EinsumToMatMulTest, SeveralFreeLabelsMergeThroughReshapes) {
  EinsumGraph e;
  e.Input("a", {-1, 3, 5, 8});
  e.Input("w", {8, 2, 7});  // an activation: its Reshape is an op
  e.Einsum("merge", "a", "w", "bijk,kmn->bijmn", {-1, 3, 5, 2, 7});
  Graph g = e.Build();
  const Graph before = g;
  EXPECT_EQ(EinsumToMatMul(g), 1);
  VerifyGraph(g);
  EXPECT_THAT(Printed(g),
              ElementsAre("merge_y_mm = opaque(a, w_r) {onnx = MatMul}  # merge",
                          "w_r = opaque(w) {onnx = Reshape}  # merge/Reshape_b",
                          "merge_y = opaque(merge_y_mm) {onnx = Reshape}  # merge/Reshape_out"));
  EXPECT_THAT(ShapeConstantOf(g, "merge/Reshape_b"), ElementsAre(8, 14));
  // The named batch stays in place: 0 copies it.
  EXPECT_THAT(ShapeConstantOf(g, "merge/Reshape_out"), ElementsAre(0, 3, 5, 2, 7));
  ExpectSameOutputs(before, g);
}

// A label summed within one operand, or "...", is no MatMul of this pass:
// the Einsum stays (the CPU executor runs it).
TEST(EinsumToMatMulTest, FormsThatAreNoMatMulStay) {
  EinsumGraph e;
  e.Input("a", {-1, 4, 8});
  e.Input("b", {-1, 8});
  e.Einsum("summed_in_a", "a", "b", "bij,bj->b", {-1});
  e.Einsum("ellipsis", "a", "b", "...ij,...j->...i", {-1, 4});
  Graph g = e.Build();
  EXPECT_EQ(EinsumToMatMul(g), 0);
  EXPECT_THAT(Printed(g),
              ElementsAre("summed_in_a_y = opaque(a, b) {onnx = Einsum}  # summed_in_a",
                          "ellipsis_y = opaque(a, b) {onnx = Einsum}  # ellipsis"));
}

}  // namespace
}  // namespace hfuse
