// Unit tests of the canonical order (graph JSON spec, "Canonical order",
// rules 1-7): which ops survive, the order of user lists, tensor depths, the
// topological sort, op numbering and no-op removal. Which ops the pass
// groups depends on every one of these, so each is pinned down on its own.
#include "hfuse/passes/canonical_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hfuse/passes/group_rewriter.h"
#include "testing/graph_builder.h"

namespace hfuse {
namespace {

using test::GraphBuilder;
using test::OpNamed;
using test::OpNames;
using test::TensorNamed;
using test::TensorNames;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

Graph Canonical(const GraphBuilder& b) {
  Graph g = b.Build();
  Canonicalize(g);
  return g;
}

std::vector<std::string> UserNames(const Graph& g, const std::string& tensor) {
  return OpNames(g, g.tensor(TensorNamed(g, tensor)).users);
}

int64_t DepthOf(const Graph& g, const std::string& tensor) {
  return g.tensor(TensorNamed(g, tensor)).depth;
}

std::vector<std::string> Sorted(const Graph& g) {
  return TensorNames(g, SortTensors(g, g.outputs()));
}

// Canonicalizes, sorts and removes no-ops, as the pass does; returns how
// many ops were removed.
int64_t RemoveNoOpsOf(Graph& g) {
  Canonicalize(g);
  std::vector<TensorId> sorted = SortTensors(g, g.outputs());
  return RemoveNoOps(g, sorted);
}

// ---------------------------------------------------------------------------
// Rule 1: dead ops.

TEST(CanonicalOrderTest, DropsOpsThatReachNoOutput) {
  GraphBuilder b;
  const std::string x = b.Input("x", {8, 8});
  b.Elementwise("dead2", "relu", {b.Elementwise("dead1", "relu", {x})});
  b.Outputs({b.Elementwise("live", "relu", {x})});
  const Graph g = Canonical(b);
  EXPECT_FALSE(g.FindOp("dead1"));
  EXPECT_FALSE(g.FindOp("dead2"));
  EXPECT_FALSE(g.FindTensor("dead1_y"));
  EXPECT_THAT(UserNames(g, "x"), ElementsAre("live"));
  EXPECT_EQ(g.NumLiveOps(), 1);
}

TEST(CanonicalOrderTest, KeepsOpWhenOneOfItsOutputsReachesAnOutput) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {8, 8}), {4, 4}, 1);
  b.Outputs({b.Elementwise("relu", "relu", {s[1]})});
  const Graph g = Canonical(b);
  EXPECT_TRUE(g.FindOp("split"));
  EXPECT_TRUE(g.FindTensor("split_y0"));
}

// ---------------------------------------------------------------------------
// Rule 2: construction order.

// The ops array holds q, r, p; q waits for p. The stable Kahn order takes the
// lowest-index ready op each time: r, then p, which frees q.
TEST(CanonicalOrderTest, OrdersUsersByConstructionNotByArrayOrder) {
  GraphBuilder b;
  const std::string x = b.Input("x", {8, 8});
  b.Declare("p_y", {8, 8});
  const std::string q = b.Elementwise("q", "add", {x, "p_y"});
  const std::string r = b.Elementwise("r", "relu", {x});
  b.Elementwise("p", "relu", {x});
  b.Outputs({q, r});
  Graph g = b.Build();
  EXPECT_THAT(UserNames(g, "x"), ElementsAre("q", "r", "p"));  // as read
  Canonicalize(g);
  EXPECT_THAT(UserNames(g, "x"), ElementsAre("r", "p", "q"));
}

TEST(CanonicalOrderTest, ListsAnOpOnceForARepeatedInput) {
  GraphBuilder b;
  const std::string x = b.Input("x", {8, 8});
  b.Outputs({b.Elementwise("sq", "mul", {x, x})});
  const Graph g = Canonical(b);
  EXPECT_THAT(UserNames(g, "x"), ElementsAre("sq"));
}

// ---------------------------------------------------------------------------
// Rule 3: depths.

TEST(CanonicalOrderTest, GivesOutputsOneMoreThanTheDeepestInput) {
  GraphBuilder b;
  const std::string x = b.Input("x", {8, 8});
  const std::string r2 = b.Elementwise("r2", "relu", {b.Elementwise("r1", "relu", {x})});
  const std::string w = b.Param("w", {8, 8});
  b.Outputs({b.Gemm("fc", OpType::kGemmRcr, b.Elementwise("add", "add", {x, r2}), w)});
  const Graph g = Canonical(b);
  EXPECT_EQ(DepthOf(g, "x"), 0);
  EXPECT_EQ(DepthOf(g, "w"), 0);
  EXPECT_EQ(DepthOf(g, "r1_y"), 1);
  EXPECT_EQ(DepthOf(g, "r2_y"), 2);
  EXPECT_EQ(DepthOf(g, "add_y"), 3);
  EXPECT_EQ(DepthOf(g, "fc_y"), 4);
}

TEST(CanonicalOrderTest, GivesEverySplitOutputTheSameDepth) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Elementwise("r", "relu", {b.Input("x", {8, 8})}), {2, 6}, 1);
  b.Outputs({s[0], s[1]});
  const Graph g = Canonical(b);
  EXPECT_EQ(DepthOf(g, "split_y0"), 2);
  EXPECT_EQ(DepthOf(g, "split_y1"), 2);
}

// Fix (i): AITemplate builds it from three ops and gives it depth + 3.
TEST(CanonicalOrderTest, GivesLayerNormSigmoidMulOutputOneMoreThanItsOp) {
  GraphBuilder b;
  const std::string r = b.Elementwise("r", "relu", {b.Input("x", {8, 64})});
  b.Outputs({b.LayerNorm("lsm", r, {.type = OpType::kLayerNormSigmoidMul})});
  const Graph g = Canonical(b);
  EXPECT_EQ(DepthOf(g, "lsm_y"), 2);
}

TEST(CanonicalOrderTest, KeepsDepthsOfRemovedNoOps) {
  GraphBuilder b;
  const std::string c = b.Concat("cat", {b.Input("x", {8, 8})}, 1);
  b.Outputs({b.Elementwise("r", "relu", {c})});
  Graph g = b.Build();
  EXPECT_EQ(RemoveNoOpsOf(g), 1);
  EXPECT_THAT(TensorNames(g, g.op(OpNamed(g, "r")).inputs), ElementsAre("x"));
  EXPECT_EQ(DepthOf(g, "r_y"), 2);  // not recomputed from x
}

// A graph with x0 at depth 0 and d at depth 3, for the group-op rules.
GraphBuilder ShallowAndDeep(GraphBuilder b = {}) {
  const std::string r1 = b.Elementwise("r1", "relu", {b.Input("x1", {16, 64})});
  b.Elementwise("r3", "relu", {b.Elementwise("r2", "relu", {r1})});
  b.Input("x0", {16, 64});
  b.Param("w0", {16, 64});
  b.Param("w1", {16, 64});
  return b;
}

TEST(CanonicalOrderTest, GivesGroupGemmOutputsTheirOwnMembersDepth) {
  GraphBuilder b = ShallowAndDeep();
  const std::string y0 = b.Gemm("fc0", OpType::kGemmRcr, "x0", "w0");
  const std::string y1 = b.Gemm("fc1", OpType::kGemmRcr, "r3_y", "w1");
  b.Outputs({y0, y1});
  Graph g = Canonical(b);
  std::vector<OpId> members = {OpNamed(g, "fc0"), OpNamed(g, "fc1")};
  RewriteAsGroup(g, members);
  EXPECT_EQ(DepthOf(g, "fc0_y"), 1);
  EXPECT_EQ(DepthOf(g, "fc1_y"), 4);
}

TEST(CanonicalOrderTest, GivesGroupGemmReadFromJsonPerMemberDepths) {
  GraphBuilder b = ShallowAndDeep();
  b.Declare("y0", {16, 16});
  b.Declare("y1", {16, 16});
  b.RawOp("group", "group_gemm_rcr", {"x0", "w0", "r3_y", "w1"}, {"y0", "y1"}, "\"group_size\": 2");
  b.Outputs({"y0", "y1"});
  const Graph g = Canonical(b);
  EXPECT_EQ(DepthOf(g, "y0"), 1);
  EXPECT_EQ(DepthOf(g, "y1"), 4);
}

TEST(CanonicalOrderTest, GivesGroupLayerNormOutputsOneMoreThanAllInputs) {
  GraphBuilder b = ShallowAndDeep();
  const std::string y0 = b.LayerNorm("ln0", "x0");
  const std::string y1 = b.LayerNorm("ln1", "r3_y");
  b.Outputs({y0, y1});
  Graph g = Canonical(b);
  std::vector<OpId> members = {OpNamed(g, "ln0"), OpNamed(g, "ln1")};
  RewriteAsGroup(g, members);
  EXPECT_EQ(DepthOf(g, "ln0_y"), 4);
  EXPECT_EQ(DepthOf(g, "ln1_y"), 4);
}

TEST(CanonicalOrderTest, GivesGroupLayerNormReadFromJsonOneDepthForAll) {
  GraphBuilder b = ShallowAndDeep();
  b.Param("g0", {64});
  b.Param("g1", {64});
  b.Declare("y0", {16, 64});
  b.Declare("y1", {16, 64});
  b.RawOp("group", "group_layernorm", {"x0", "r3_y", "g0", "g1"}, {"y0", "y1"},
          "\"normalized_shapes\": [[64], [64]]");
  b.Outputs({"y0", "y1"});
  const Graph g = Canonical(b);
  EXPECT_EQ(DepthOf(g, "y0"), 4);
  EXPECT_EQ(DepthOf(g, "y1"), 4);
}

// ---------------------------------------------------------------------------
// Rule 4: the topological sort.

TEST(CanonicalOrderTest, EmitsSourcesFirstThenLargestReadyTensor) {
  GraphBuilder b;
  const std::string s = b.Elementwise("s", "relu", {b.Input("x_small", {8, 8})});
  const std::string l = b.Elementwise("l", "relu", {b.Input("x_large", {64, 64})});
  b.Outputs({s, l});
  const Graph g = Canonical(b);
  EXPECT_THAT(Sorted(g), ElementsAre("x_small", "x_large", "l_y", "s_y"));
}

TEST(CanonicalOrderTest, WalksDeepestInputFirst) {
  GraphBuilder b;
  const std::string x0 = b.Input("x0", {8, 8});
  const std::string r2 =
      b.Elementwise("r2", "relu", {b.Elementwise("r1", "relu", {b.Input("x1", {8, 8})})});
  b.Outputs({b.Elementwise("add", "add", {x0, r2})});
  const Graph g = Canonical(b);
  EXPECT_THAT(Sorted(g), ElementsAre("x1", "x0", "r1_y", "r2_y", "add_y"));
}

TEST(CanonicalOrderTest, BreaksDepthTiesByInputPosition) {
  GraphBuilder b;
  const std::string x0 = b.Input("x0", {8, 8});
  const std::string x1 = b.Input("x1", {8, 8});
  b.Outputs({b.Elementwise("add", "add", {x1, x0})});
  const Graph g = Canonical(b);
  EXPECT_THAT(Sorted(g), ElementsAre("x1", "x0", "add_y"));
}

TEST(CanonicalOrderTest, WalksRootsInTheirOrder) {
  GraphBuilder b;
  const std::string a = b.Elementwise("a", "relu", {b.Input("xa", {8, 8})});
  const std::string c = b.Elementwise("c", "relu", {b.Input("xc", {8, 8})});
  b.Outputs({c, a});
  const Graph g = Canonical(b);
  EXPECT_THAT(Sorted(g), ElementsAre("xc", "xa", "c_y", "a_y"));
  const std::vector<TensorId> roots = {TensorNamed(g, "a_y"), TensorNamed(g, "c_y")};
  EXPECT_THAT(TensorNames(g, SortTensors(g, roots)), ElementsAre("xa", "xc", "a_y", "c_y"));
}

TEST(CanonicalOrderTest, SizesDynamicDimsAtMaxAndFloat32AtFourBytes) {
  GraphBuilder b;
  b.Dim("batch", 1, 100);
  std::vector<std::string> outs;
  outs.push_back(b.Elementwise("f16", "relu", {b.Input("x_f16", {8, 12})}));  // 192 bytes
  outs.push_back(b.Elementwise("f32", "relu", {b.Input("x_f32", {8, 8}, DType::kFloat32)}));  // 256
  outs.push_back(b.Elementwise("st", "relu", {b.Input("x_st", {64, 8})}));         // 1024
  outs.push_back(b.Elementwise("dyn", "relu", {b.Input("x_dyn", {"batch", 8})}));  // 1600
  b.Outputs(outs);
  const Graph g = Canonical(b);
  EXPECT_THAT(OpNames(g, SortedOps(g, SortTensors(g, g.outputs()))),
              ElementsAre("dyn", "st", "f32", "f16"));
}

TEST(CanonicalOrderTest, CountsARepeatedInputOnce) {
  GraphBuilder b;
  const std::string x = b.Input("x", {8, 8});
  b.Outputs({b.Elementwise("sq", "mul", {x, x})});
  const Graph g = Canonical(b);
  EXPECT_THAT(Sorted(g), ElementsAre("x", "sq_y"));
}

// ---------------------------------------------------------------------------
// Rule 5: numbering.

TEST(CanonicalOrderTest, NumbersAnOpAtItsFirstOutputMet) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {8, 8}), {2, 6}, 1);
  b.Outputs({b.Elementwise("r0", "relu", {s[0]}), b.Elementwise("r1", "relu", {s[1]})});
  const Graph g = Canonical(b);
  const std::vector<TensorId> sorted = SortTensors(g, g.outputs());
  EXPECT_THAT(TensorNames(g, sorted), ElementsAre("x", "split_y1", "r1_y", "split_y0", "r0_y"));
  EXPECT_THAT(OpNames(g, SortedOps(g, sorted)), ElementsAre("split", "r1", "r0"));
}

// ---------------------------------------------------------------------------
// Rule 6: no-op removal.

TEST(CanonicalOrderTest, RemovesSingleInputConcatenateAndAppendsItsUsers) {
  GraphBuilder b;
  const std::string x = b.Input("x", {8, 8});
  const std::string a = b.Elementwise("a", "relu", {b.Concat("cat", {x}, 1)});
  b.Outputs({a, b.Elementwise("z", "relu", {x})});
  Graph g = Canonical(b);
  EXPECT_THAT(UserNames(g, "x"), ElementsAre("cat", "z"));
  std::vector<TensorId> sorted = SortTensors(g, g.outputs());
  EXPECT_EQ(RemoveNoOps(g, sorted), 1);
  EXPECT_THAT(UserNames(g, "x"), ElementsAre("z", "a"));  // appended, not in cat's place
  EXPECT_FALSE(g.FindOp("cat"));
  EXPECT_FALSE(g.FindTensor("cat_y"));
  EXPECT_THAT(TensorNames(g, sorted), ElementsAre("x", "z_y", "a_y"));  // not re-sorted
}

TEST(CanonicalOrderTest, RemovesConcatenateOfOneNonEmptyInput) {
  GraphBuilder b;
  const std::string c = b.Concat("cat", {b.Input("e", {8, 0}), b.Input("x", {8, 8})}, 1);
  b.Outputs({b.Elementwise("r", "relu", {c})});
  Graph g = b.Build();
  EXPECT_EQ(RemoveNoOpsOf(g), 1);
  EXPECT_THAT(TensorNames(g, g.op(OpNamed(g, "r")).inputs), ElementsAre("x"));
}

TEST(CanonicalOrderTest, ReplacesConcatenateOfEmptyInputsByTheFirst) {
  GraphBuilder b;
  const std::string c = b.Concat("cat", {b.Input("e0", {8, 0}), b.Input("e1", {8, 0})}, 1);
  b.Outputs({b.Elementwise("r", "relu", {c})});
  Graph g = b.Build();
  EXPECT_EQ(RemoveNoOpsOf(g), 1);
  EXPECT_THAT(TensorNames(g, g.op(OpNamed(g, "r")).inputs), ElementsAre("e0"));
}

TEST(CanonicalOrderTest, DoesNotRemoveConcatenateOfTwoNonEmptyInputs) {
  GraphBuilder b;
  const std::string c = b.Concat("cat", {b.Input("x0", {8, 8}), b.Input("x1", {8, 8})}, 1);
  b.Outputs({b.Elementwise("r", "relu", {c})});
  Graph g = b.Build();
  EXPECT_EQ(RemoveNoOpsOf(g), 0);
  EXPECT_TRUE(g.FindOp("cat"));
}

// A dynamic dim counts as non-empty only when its min is above zero
// (AITemplate's lower_bound() > 0).
TEST(CanonicalOrderTest, DoesNotRemoveConcatenateOfInputsSurelyNonEmpty) {
  GraphBuilder b;
  b.Dim("batch", 1, 8);
  const std::string c =
      b.Concat("cat", {b.Input("x0", {"batch", 8}), b.Input("x1", {"batch", 4})}, 1);
  b.Outputs({b.Elementwise("r", "relu", {c})});
  Graph g = b.Build();
  EXPECT_EQ(RemoveNoOpsOf(g), 0);
}

// Inputs that may be empty at run time (a dynamic dim with min 0) are not
// empty: removing the concatenate would change its consumer's input shape.
TEST(CanonicalOrderTest, DoesNotRemoveConcatenateOfInputsThatMayBeEmpty) {
  GraphBuilder b;
  b.Dim("batch", 0, 8);
  const std::string c =
      b.Concat("cat", {b.Input("x0", {"batch", 8}), b.Input("x1", {"batch", 4})}, 1);
  b.Outputs({b.Elementwise("r", "relu", {c})});
  Graph g = b.Build();
  EXPECT_EQ(RemoveNoOpsOf(g), 0);
  EXPECT_TRUE(g.FindOp("cat"));
}

TEST(CanonicalOrderTest, DoesNotRemoveConcatenateThatIsAGraphOutput) {
  GraphBuilder b;
  b.Outputs({b.Concat("cat", {b.Input("x", {8, 8})}, 1)});
  Graph g = b.Build();
  EXPECT_EQ(RemoveNoOpsOf(g), 0);
  EXPECT_TRUE(g.FindOp("cat"));
}

TEST(CanonicalOrderTest, RemovesOneOutputSplit) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {8, 8}), {8}, 1);
  b.Outputs({b.Elementwise("r", "relu", {s[0]})});
  Graph g = b.Build();
  EXPECT_EQ(RemoveNoOpsOf(g), 1);
  EXPECT_FALSE(g.FindOp("split"));
  EXPECT_THAT(TensorNames(g, g.op(OpNamed(g, "r")).inputs), ElementsAre("x"));
}

TEST(CanonicalOrderTest, DoesNotRemoveOneOutputSplitThatIsAGraphOutput) {
  GraphBuilder b;
  b.Outputs(b.Split("split", b.Input("x", {8, 8}), {8}, 1));
  Graph g = b.Build();
  EXPECT_EQ(RemoveNoOpsOf(g), 0);
}

TEST(CanonicalOrderTest, DoesNotRemoveTwoOutputSplit) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {8, 8}), {8, 0}, 1);
  b.Outputs({b.Elementwise("r", "relu", {s[0]})});
  Graph g = b.Build();
  EXPECT_EQ(RemoveNoOpsOf(g), 0);
}

// x feeds a one-output split (then a) and a one-input concatenate (then b).
// Concatenates go first: b is appended to x's users before a.
TEST(CanonicalOrderTest, RemovesConcatenatesBeforeSplits) {
  GraphBuilder b;
  const std::string x = b.Input("x", {8, 8});
  const std::string a = b.Elementwise("a", "relu", b.Split("split", x, {8}, 1));
  const std::string c = b.Elementwise("c", "relu", {b.Concat("cat", {x}, 1)});
  b.Outputs({a, c});
  Graph g = b.Build();
  EXPECT_EQ(RemoveNoOpsOf(g), 2);
  EXPECT_THAT(UserNames(g, "x"), ElementsAre("c", "a"));
}

// ---------------------------------------------------------------------------
// Clean-up after a sort (rule 7).

TEST(CanonicalOrderTest, DropsTensorsLeftWithoutProducerOrUsersExceptInputs) {
  GraphBuilder b;
  const std::string c =
      b.Concat("cat", {b.Param("p", {8, 0}), b.Input("e", {8, 0}), b.Input("x", {8, 8})}, 1);
  b.Outputs({b.Elementwise("r", "relu", {c})});
  Graph g = b.Build();
  Canonicalize(g);
  std::vector<TensorId> sorted = SortTensors(g, g.outputs());
  RemoveNoOps(g, sorted);
  EXPECT_THAT(TensorNames(g, sorted), ElementsAre("e", "x", "r_y"));  // param p dropped
}

TEST(CanonicalOrderTest, DropDeadTensorsKeepsGraphOutputs) {
  GraphBuilder b;
  const std::string p = b.Param("p", {8, 8});  // no users, but an output
  b.Outputs({b.Elementwise("r", "relu", {b.Input("x", {8, 8})}), p});
  const Graph g = Canonical(b);
  std::vector<TensorId> sorted = SortTensors(g, g.outputs());
  DropDeadTensors(g, sorted);
  EXPECT_THAT(TensorNames(g, sorted), ElementsAre("x", "p", "r_y"));
}

}  // namespace
}  // namespace hfuse
