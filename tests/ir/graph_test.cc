// Tests of the graph IR (ir/graph.h, ir/analysis.h, ir/verifier.h): that
// every mutation keeps producers and user lists in sync in both directions,
// that an op reading a tensor twice is its user once, that erasing a still
// used op is caught at once, that the stable topological order and the
// ancestor queries answer as documented, and that VerifyGraph rejects the
// malformed graphs it is meant to catch with a message naming the culprit.
// Graphs are built by hand here, a few ops each, so that every expectation
// can be read off the test.
#include "hfuse/ir/graph.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "hfuse/ir/analysis.h"
#include "hfuse/ir/verifier.h"
#include "hfuse/support/error.h"
#include "testing/tool_runner.h"

namespace hfuse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using test::ErrorOf;

// Builds small graphs of float16 tensors; every Add checks that it worked.
class Builder {
 public:
  TensorId Tensor(const std::string& name, std::vector<int64_t> dims,
                  Role role = Role::kIntermediate, DType dtype = DType::kFloat16) {
    hfuse::Tensor t;
    t.name = name;
    for (int64_t d : dims) t.shape.push_back(Dim::Static(d));
    t.dtype = dtype;
    t.role = role;
    const TensorId id = g.AddTensor(std::move(t));
    EXPECT_NE(id, kNone) << name;
    return id;
  }
  TensorId Input(const std::string& name, std::vector<int64_t> dims) {
    return Tensor(name, std::move(dims), Role::kInput);
  }
  TensorId Param(const std::string& name, std::vector<int64_t> dims) {
    return Tensor(name, std::move(dims), Role::kParam);
  }
  OpId Op(const std::string& name, OpType type, std::vector<TensorId> inputs,
          std::vector<TensorId> outputs, Attrs attrs = {}) {
    hfuse::Op op;
    op.name = name;
    op.type = type;
    op.inputs = std::move(inputs);
    op.outputs = std::move(outputs);
    op.attrs = attrs;
    const OpId id = g.AddOp(std::move(op));
    EXPECT_NE(id, kNone) << name;
    return id;
  }
  // An elementwise op: relu for one input, add for more.
  OpId Ew(const std::string& name, std::vector<TensorId> inputs, TensorId output) {
    Attrs a;
    a.func = inputs.size() == 1 ? EwFunc::kRelu : EwFunc::kAdd;
    return Op(name, OpType::kElementwise, std::move(inputs), {output}, a);
  }

  Graph g;
};

TEST(GraphTest, AddOpSetsProducerAndAppendsUsersInOrder) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId y = b.Tensor("y", {4});
  const TensorId z = b.Tensor("z", {4});
  const OpId relu = b.Ew("relu", {x}, y);
  const OpId add = b.Ew("add", {x, y}, z);
  EXPECT_EQ(b.g.tensor(x).producer, kNone);
  EXPECT_EQ(b.g.tensor(y).producer, relu);
  EXPECT_EQ(b.g.tensor(z).producer, add);
  EXPECT_THAT(b.g.tensor(x).users, ElementsAre(relu, add));
  EXPECT_THAT(b.g.tensor(y).users, ElementsAre(add));
  EXPECT_THAT(b.g.tensor(z).users, IsEmpty());
  EXPECT_EQ(b.g.FindOp("add"), add);
  EXPECT_EQ(b.g.FindTensor("z"), z);
  EXPECT_EQ(b.g.NumLiveOps(), 2);
  EXPECT_THAT(b.g.LiveOps(), ElementsAre(relu, add));
}

TEST(GraphTest, OpReadingATensorTwiceIsItsUserOnce) {
  Builder b;
  const TensorId x = b.Input("x", {4, 8});
  const TensorId w = b.Param("w", {8, 8});
  const TensorId y = b.Tensor("y", {4, 8});
  const TensorId z = b.Tensor("z", {8, 8});
  const OpId gemm = b.Op("gemm", OpType::kGemmRcr, {x, x}, {y});
  EXPECT_THAT(b.g.tensor(x).users, ElementsAre(gemm));
  // Repeats that are not adjacent in the input list count once as well.
  const OpId add = b.Ew("add", {w, z, w}, b.Tensor("u", {8, 8}));
  EXPECT_THAT(b.g.tensor(w).users, ElementsAre(add));
  EXPECT_THAT(b.g.tensor(z).users, ElementsAre(add));
}

TEST(GraphTest, DuplicateNamesAreRefused) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId y = b.Tensor("y", {4});
  b.Ew("relu", {x}, y);
  hfuse::Tensor again;
  again.name = "x";
  EXPECT_EQ(b.g.AddTensor(again), kNone);
  hfuse::Op op;
  op.name = "relu";
  op.inputs = {x};
  EXPECT_EQ(b.g.AddOp(op), kNone);
  EXPECT_THAT(b.g.tensor(x).users, ElementsAre(0)) << "a refused op must leave no trace";
}

TEST(GraphTest, ReplaceAllUsesWithMovesEveryUser) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId x2 = b.Input("x2", {4});
  const TensorId a = b.Tensor("a", {4});
  const TensorId c = b.Tensor("c", {4});
  const TensorId d = b.Tensor("d", {4});
  const OpId relu = b.Ew("relu", {x}, a);
  const OpId add = b.Ew("add", {x2, x, x}, c);  // already reads x2; reads x twice
  const OpId other = b.Ew("other", {x2}, d);
  b.g.set_outputs({a, c, d});
  b.g.ReplaceAllUsesWith(x, x2);
  EXPECT_THAT(b.g.tensor(x).users, IsEmpty());
  EXPECT_THAT(b.g.tensor(x2).users, ElementsAre(add, other, relu));
  EXPECT_THAT(b.g.op(relu).inputs, ElementsAre(x2));
  EXPECT_THAT(b.g.op(add).inputs, ElementsAre(x2, x2, x2));
  EXPECT_NO_THROW(VerifyGraph(b.g));
}

TEST(GraphTest, ReplaceAllUsesWithLeavesGraphOutputsAlone) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId y = b.Tensor("y", {4});
  const TensorId z = b.Tensor("z", {4});
  b.Ew("r1", {x}, y);
  const OpId r2 = b.Ew("r2", {y}, z);
  b.g.set_outputs({y, z});
  b.g.ReplaceAllUsesWith(y, x);
  EXPECT_THAT(b.g.outputs(), ElementsAre(y, z));
  EXPECT_TRUE(b.g.IsGraphOutput(y));
  EXPECT_THAT(b.g.tensor(x).users, ElementsAre(0, r2));
}

TEST(GraphTest, DetachOpUnlinksBothDirections) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId y = b.Tensor("y", {4});
  const TensorId z = b.Tensor("z", {4});
  const OpId first = b.Ew("first", {x}, y);
  const OpId add = b.Ew("add", {x, x}, z);
  b.g.DetachOp(add);
  EXPECT_FALSE(b.g.op(add).alive);
  EXPECT_THAT(b.g.tensor(x).users, ElementsAre(first));
  EXPECT_EQ(b.g.tensor(z).producer, kNone);
  EXPECT_TRUE(b.g.tensor(z).alive) << "the outputs stay, to be produced by another op";
  EXPECT_EQ(b.g.FindOp("add"), std::nullopt);
  EXPECT_EQ(b.g.NumLiveOps(), 1);
  // The name stays taken, so a report never sees it reused.
  hfuse::Op op;
  op.name = "add";
  EXPECT_EQ(b.g.AddOp(op), kNone);
  EXPECT_NE(b.g.UniqueOpName("add"), "add");
  // Another op can now produce the detached op's output.
  const OpId again = b.Ew("again", {y}, z);
  EXPECT_EQ(b.g.tensor(z).producer, again);
}

TEST(GraphTest, EraseOpErasesItsOutputs) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId y = b.Tensor("y", {4});
  const TensorId z = b.Tensor("z", {4});
  const OpId keep = b.Ew("keep", {x}, y);
  const OpId dead = b.Ew("dead", {x, y}, z);
  b.g.set_outputs({y});
  b.g.EraseOp(dead);
  EXPECT_FALSE(b.g.op(dead).alive);
  EXPECT_FALSE(b.g.tensor(z).alive);
  EXPECT_EQ(b.g.FindTensor("z"), std::nullopt);
  EXPECT_THAT(b.g.tensor(x).users, ElementsAre(keep));
  EXPECT_THAT(b.g.tensor(y).users, IsEmpty());
  EXPECT_NO_THROW(VerifyGraph(b.g));
}

TEST(GraphDeathTest, EraseOpWhoseOutputHasUsersAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId y = b.Tensor("y", {4});
  const TensorId z = b.Tensor("z", {4});
  const OpId first = b.Ew("first", {x}, y);
  b.Ew("second", {y}, z);
  b.g.set_outputs({z});
  EXPECT_DEATH(b.g.EraseOp(first), "internal error.*check failed");
}

TEST(GraphDeathTest, EraseOpProducingAGraphOutputAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId y = b.Tensor("y", {4});
  const OpId op = b.Ew("op", {x}, y);
  b.g.set_outputs({y});
  EXPECT_DEATH(b.g.EraseOp(op), "check failed");
}

TEST(GraphDeathTest, EraseTensorStillUsedAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId y = b.Tensor("y", {4});
  b.Ew("op", {x}, y);
  EXPECT_DEATH(b.g.EraseTensor(x), "check failed");
  EXPECT_DEATH(b.g.EraseTensor(y), "check failed");
}

TEST(GraphDeathTest, AddOpProducingAProducedTensorAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId y = b.Tensor("y", {4});
  b.Ew("first", {x}, y);
  hfuse::Op op;
  op.name = "second";
  op.inputs = {x};
  op.outputs = {y};
  EXPECT_DEATH(b.g.AddOp(op), "check failed");
}

TEST(GraphTest, ReorderUsersFollowsTheGivenOrder) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId a = b.Tensor("a", {4});
  const TensorId c = b.Tensor("c", {4});
  const TensorId d = b.Tensor("d", {4});
  const OpId o0 = b.Ew("o0", {x}, a);
  const OpId o1 = b.Ew("o1", {x, a, x}, c);
  const OpId o2 = b.Ew("o2", {a, x}, d);
  b.g.ReorderUsers({o2, o1, o0});
  EXPECT_THAT(b.g.tensor(x).users, ElementsAre(o2, o1, o0));
  EXPECT_THAT(b.g.tensor(a).users, ElementsAre(o2, o1));
  b.g.ReorderUsers({o0, o1, o2});
  EXPECT_THAT(b.g.tensor(x).users, ElementsAre(o0, o1, o2));
  EXPECT_THAT(b.g.tensor(a).users, ElementsAre(o1, o2));
}

TEST(GraphTest, ReorderUsersSkipsDetachedOps) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId a = b.Tensor("a", {4});
  const TensorId c = b.Tensor("c", {4});
  const OpId o0 = b.Ew("o0", {x}, a);
  const OpId o1 = b.Ew("o1", {x}, c);
  b.g.DetachOp(o0);
  b.g.ReorderUsers(b.g.LiveOps());
  EXPECT_THAT(b.g.tensor(x).users, ElementsAre(o1));
}

TEST(GraphTest, UniqueOpNameAvoidsTakenNames) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  b.Ew("group_0", {x}, b.Tensor("y", {4}));
  const std::string first = b.g.UniqueOpName("group");
  const std::string second = b.g.UniqueOpName("group");
  EXPECT_NE(first, "group_0");
  EXPECT_NE(first, second);
  EXPECT_THAT(first, ::testing::StartsWith("group_"));
}

TEST(GraphTest, NamesRoundTrip) {
  for (int i = 0; i < kNumOpTypes; ++i) {
    const auto type = static_cast<OpType>(i);
    EXPECT_EQ(ParseOpType(OpTypeName(type)), type);
  }
  for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    EXPECT_EQ(ParseDType(DTypeName(d)), d);
  }
  for (int i = 0; i <= static_cast<int>(EwFunc::kDiv); ++i) {
    const auto f = static_cast<EwFunc>(i);
    EXPECT_EQ(ParseEwFunc(EwFuncName(f)), f);
  }
  EXPECT_EQ(ParseOpType("gemm"), std::nullopt);
  EXPECT_EQ(ParseDType("float64"), std::nullopt);
  EXPECT_EQ(ParseEwFunc("exp"), std::nullopt);
  EXPECT_EQ(GroupOf(OpType::kLayerNormSigmoidMul), OpType::kGroupLayerNormSigmoidMul);
  EXPECT_EQ(MemberOf(OpType::kGroupGemmRcrBiasRelu), OpType::kGemmRcrBiasRelu);
  EXPECT_TRUE(GemmHasBias(OpType::kGroupGemmRcrBias));
  EXPECT_FALSE(GemmHasBias(OpType::kGemmRcr));
}

TEST(GraphTest, SizesSaturateAndDynamicDimsCountAtTheirMax) {
  Graph g;
  const int32_t batch = g.AddDim({"batch", 1, 2048, {}, 0});
  hfuse::Tensor t;
  t.name = "t";
  t.shape = {Dim::Dynamic(batch), Dim::Static(64)};
  t.dtype = DType::kFloat32;
  const TensorId id = g.AddTensor(t);
  EXPECT_EQ(NumElements(g, t.shape), 2048 * 64);
  EXPECT_EQ(TensorBytes(g, id), 2048 * 64 * 4);
  EXPECT_EQ(ShapeString(g, t.shape), "[batch, 64]");
  const Shape huge = {Dim::Static(int64_t{1} << 40), Dim::Static(int64_t{1} << 40)};
  EXPECT_EQ(NumElements(g, huge), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(NumElements(g, {Dim::Static(0), Dim::Static(int64_t{1} << 62)}), 0);
  EXPECT_EQ(Dim::Dynamic(batch), Dim::Dynamic(batch));
  EXPECT_FALSE(Dim::Dynamic(batch) == Dim::Static(0));
}

// --dim on fuse: fixed dims become static everywhere, derived dims with
// their factors, the rest renumbered; bad names and values are input errors.
TEST(GraphTest, SpecializeDimsFixesDimsAndTheirProducts) {
  Graph g;
  const int32_t batch = g.AddDim({"batch", 1, int64_t{1} << 31, {}, 0});
  const int32_t seq = g.AddDim({"seq", 1, 64, {}, 0});
  const int32_t heads = g.AddDim({"heads", 1, 16, {}, 0});
  const int32_t product = g.AddDim({"batch*seq", 1, int64_t{1} << 31, {batch, seq}, 0});
  hfuse::Tensor t;
  t.name = "t";
  t.shape = {Dim::Dynamic(product), Dim::Dynamic(heads), Dim::Dynamic(batch), Dim::Static(8)};
  const TensorId id = g.AddTensor(t);
  SpecializeDims(g, {{"batch", 4096}, {"seq", 20}});
  ASSERT_EQ(g.dims().size(), 1u);
  EXPECT_EQ(g.dims()[0].name, "heads");
  EXPECT_EQ(g.tensor(id).shape, (Shape{Dim::Static(4096 * 20), Dim::Dynamic(0), Dim::Static(4096),
                                       Dim::Static(8)}));
  EXPECT_THROW(SpecializeDims(g, {{"batch", 2}}), InputError);   // gone now
  EXPECT_THROW(SpecializeDims(g, {{"heads", 17}}), InputError);  // outside [1, 16]
  Graph h;
  const int32_t b = h.AddDim({"b", 1, 8, {}, 0});
  const int32_t s2 = h.AddDim({"s", 1, 8, {}, 0});
  h.AddDim({"b*s", 1, 64, {b, s2}, 0});
  EXPECT_THROW(SpecializeDims(h, {{"b*s", 4}}), InputError);  // a product: fix its factors
  EXPECT_THROW(SpecializeDims(h, {{"b", 4}}), InputError);    // half a product
}

// A diamond plus an unrelated op:  x -> a -> (b, c) -> d;  x -> u.
struct Diamond {
  Diamond() {
    const TensorId x = bld.Input("x", {4});
    const TensorId ta = bld.Tensor("ta", {4});
    const TensorId tb = bld.Tensor("tb", {4});
    const TensorId tc = bld.Tensor("tc", {4});
    const TensorId td = bld.Tensor("td", {4});
    const TensorId tu = bld.Tensor("tu", {4});
    // Declared out of dependency order: d first, so ids do not follow the data.
    d = bld.Ew("d", {tb, tc}, td);
    c = bld.Ew("c", {ta}, tc);
    u = bld.Ew("u", {x}, tu);
    a = bld.Ew("a", {x}, ta);
    b = bld.Ew("b", {ta}, tb);
    bld.g.set_outputs({td, tu});
  }
  Builder bld;
  OpId a, b, c, d, u;
};

TEST(AnalysisTest, StableTopologicalOrderTakesTheLowestReadyId) {
  Diamond m;
  // Ready at the start: u (2), a (3). Then a frees c (1) and b (4); then d (0).
  EXPECT_THAT(StableTopologicalOrder(m.bld.g), ElementsAre(m.u, m.a, m.c, m.b, m.d));
}

TEST(AnalysisTest, StableTopologicalOrderCountsRepeatedInputs) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId y = b.Tensor("y", {4});
  const TensorId z = b.Tensor("z", {4});
  const OpId twice = b.Ew("twice", {y, y}, z);  // reads y twice; must wait once for it
  const OpId first = b.Ew("first", {x}, y);
  EXPECT_THAT(StableTopologicalOrder(b.g), ElementsAre(first, twice));
}

TEST(AnalysisTest, StableTopologicalOrderSkipsDeadOpsAndStopsAtCycles) {
  Diamond m;
  m.bld.g.set_outputs({*m.bld.g.FindTensor("td")});
  m.bld.g.EraseOp(m.u);
  EXPECT_THAT(StableTopologicalOrder(m.bld.g), ElementsAre(m.a, m.c, m.b, m.d));

  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId p = b.Tensor("p", {4});
  const TensorId q = b.Tensor("q", {4});
  const TensorId r = b.Tensor("r", {4});
  b.Ew("p_op", {x, q}, p);
  b.Ew("q_op", {p}, q);
  const OpId free = b.Ew("free", {x}, r);
  EXPECT_THAT(StableTopologicalOrder(b.g), ElementsAre(free));
}

TEST(AnalysisTest, IsAncestorIsStrictAndTransitive) {
  Diamond m;
  const Graph& g = m.bld.g;
  EXPECT_TRUE(IsAncestor(g, m.a, m.d));
  EXPECT_TRUE(IsAncestor(g, m.b, m.d));
  EXPECT_TRUE(IsAncestor(g, m.a, m.b));
  EXPECT_FALSE(IsAncestor(g, m.d, m.a));
  EXPECT_FALSE(IsAncestor(g, m.b, m.c));
  EXPECT_FALSE(IsAncestor(g, m.c, m.b));
  EXPECT_FALSE(IsAncestor(g, m.u, m.d));
  EXPECT_FALSE(IsAncestor(g, m.d, m.d)) << "an op is not its own ancestor";
  EXPECT_FALSE(IsAncestor(g, m.a, m.a));
}

TEST(AnalysisTest, AncestorsListsEveryAncestorOnce) {
  Diamond m;
  const std::vector<bool> of_d = Ancestors(m.bld.g, m.d);
  ASSERT_EQ(of_d.size(), 5u);
  EXPECT_TRUE(of_d[static_cast<size_t>(m.a)]);
  EXPECT_TRUE(of_d[static_cast<size_t>(m.b)]);
  EXPECT_TRUE(of_d[static_cast<size_t>(m.c)]);
  EXPECT_FALSE(of_d[static_cast<size_t>(m.d)]);
  EXPECT_FALSE(of_d[static_cast<size_t>(m.u)]);
  const std::vector<bool> of_a = Ancestors(m.bld.g, m.a);
  EXPECT_EQ(std::count(of_a.begin(), of_a.end(), true), 0);
}

TEST(AnalysisTest, DeepChainsNeedNoRecursion) {
  Builder b;
  TensorId cur = b.Input("x", {4});
  const int kDepth = 200000;
  for (int i = 0; i < kDepth; ++i) {
    const TensorId next = b.Tensor(fmt::format("t{}", i), {4});
    b.Ew(fmt::format("op{}", i), {cur}, next);
    cur = next;
  }
  b.g.set_outputs({cur});
  EXPECT_TRUE(IsAncestor(b.g, 0, kDepth - 1));
  EXPECT_EQ(StableTopologicalOrder(b.g).size(), static_cast<size_t>(kDepth));
  EXPECT_NO_THROW(VerifyGraph(b.g));
}

TEST(VerifierTest, AcceptsAWellFormedGraph) {
  Diamond m;
  EXPECT_NO_THROW(VerifyGraph(m.bld.g));
}

TEST(VerifierTest, TensorWithoutRoleOrProducer) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId orphan = b.Tensor("orphan", {4});
  const TensorId y = b.Tensor("y", {4});
  b.Ew("add", {x, orphan}, y);
  b.g.set_outputs({y});
  EXPECT_THAT(ErrorOf([&] { VerifyGraph(b.g); }),
              HasSubstr("tensor 'orphan' has no role and no op produces it"));
}

TEST(VerifierTest, InputOrParamProducedByAnOp) {
  for (Role role : {Role::kInput, Role::kParam}) {
    Builder b;
    const TensorId x = b.Input("x", {4});
    const TensorId fed = b.Tensor("fed", {4}, role);
    b.Ew("writer", {x}, fed);
    b.g.set_outputs({fed});
    const std::string error = ErrorOf([&] { VerifyGraph(b.g); });
    EXPECT_THAT(error, HasSubstr("tensor 'fed'"));
    EXPECT_THAT(error, HasSubstr("op 'writer' produces it"));
    EXPECT_THAT(error, HasSubstr(role == Role::kInput ? "input" : "param"));
  }
}

TEST(VerifierTest, CycleMessageNamesAnOpOnTheCycle) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId p = b.Tensor("p", {4});
  const TensorId q = b.Tensor("q", {4});
  const TensorId r = b.Tensor("r", {4});
  // "below" has the lowest id and is unplaced, but is not on the cycle.
  b.Ew("below", {q}, r);
  b.Ew("p_op", {x, q}, p);
  b.Ew("q_op", {p}, q);
  b.g.set_outputs({r});
  const std::string error = ErrorOf([&] { VerifyGraph(b.g); });
  EXPECT_THAT(error, HasSubstr("cycle"));
  EXPECT_TRUE(error.find("'p_op'") != std::string::npos ||
              error.find("'q_op'") != std::string::npos)
      << error;
  EXPECT_THAT(error, ::testing::Not(HasSubstr("below")));
}

TEST(VerifierTest, SelfLoop) {
  Builder b;
  const TensorId x = b.Input("x", {4});
  const TensorId y = b.Tensor("y", {4});
  b.Ew("loop", {x, y}, y);
  b.g.set_outputs({y});
  EXPECT_THAT(ErrorOf([&] { VerifyGraph(b.g); }),
              HasSubstr("the graph has a cycle through op 'loop'"));
}

TEST(VerifierTest, GemmShapeErrors) {
  {
    Builder b;
    const TensorId y = b.Tensor("y", {4, 16});
    b.Op("fc", OpType::kGemmRcr, {b.Input("a", {4, 8}), b.Param("w", {16, 9})}, {y});
    b.g.set_outputs({y});
    const std::string error = ErrorOf([&] { VerifyGraph(b.g); });
    EXPECT_THAT(error, HasSubstr("op 'fc' (gemm_rcr): K mismatch"));
    EXPECT_THAT(error, HasSubstr("'a' has K = 8"));
    EXPECT_THAT(error, HasSubstr("'w' has K = 9"));
  }
  {
    Builder b;
    const TensorId y = b.Tensor("y", {4, 16});
    b.Op("fc", OpType::kGemmRcrBias,
         {b.Input("a", {4, 8}), b.Param("w", {16, 8}), b.Param("bias", {8})}, {y});
    EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }),
                HasSubstr("bias 'bias' must have shape [16], has [8]"));
  }
  {
    Builder b;
    const TensorId y = b.Tensor("y", {4, 8});
    b.Op("fc", OpType::kGemmRcr, {b.Input("a", {4, 8}), b.Param("w", {16, 8})}, {y});
    EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }),
                HasSubstr("output 'y' has shape [4, 8], expected [4, 16]"));
  }
  {
    Builder b;
    const TensorId y = b.Tensor("y", {4, 16});
    b.Op("fc", OpType::kGemmRcrBias, {b.Input("a", {4, 8}), b.Param("w", {16, 8})}, {y});
    EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }), HasSubstr("takes 3 inputs, got 2"));
  }
}

TEST(VerifierTest, LayerNormShapeErrors) {
  Builder b;
  const TensorId x = b.Input("x", {4, 16});
  const TensorId y = b.Tensor("y", {4, 16});
  Attrs a;
  a.normalized_shape = {8};
  b.Op("ln", OpType::kLayerNorm, {x, b.Param("gamma", {16}), b.Param("beta", {16})}, {y}, a);
  EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }),
              HasSubstr("op 'ln' (layernorm): normalized_shape does not match"));
  b.g.mutable_op(0).attrs.normalized_shape = {4, 16};
  EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }), HasSubstr("normalized_shape must have 1 to 1"));
  b.g.mutable_op(0).attrs.normalized_shape = {16};
  EXPECT_NO_THROW(VerifyOp(b.g, 0));
  const TensorId gamma = *b.g.FindTensor("gamma");
  const TensorId beta = *b.g.FindTensor("beta");
  b.g.mutable_tensor(gamma).dtype = DType::kFloat32;
  EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }), HasSubstr("'gamma' is float32 but X 'x'"));
  b.g.mutable_tensor(gamma).dtype = DType::kFloat16;
  b.g.mutable_tensor(beta).shape = {Dim::Static(4), Dim::Static(16)};
  EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }),
              HasSubstr("'beta' has shape [4, 16], expected [16]"));
}

TEST(VerifierTest, SplitConcatElementwiseReshapeShapeErrors) {
  Builder b;
  const TensorId x = b.Input("x", {4, 16});
  const TensorId s0 = b.Tensor("s0", {4, 6});
  const TensorId s1 = b.Tensor("s1", {4, 9});
  Attrs split;
  split.split_sizes = {6, 9};
  split.dim = -1;
  b.Op("split", OpType::kSplit, {x}, {s0, s1}, split);
  EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }),
              HasSubstr("op 'split' (split): split_sizes sum to 15 but 'x' has 16 on dim -1"));
  b.g.mutable_op(0).attrs.split_sizes = {6, 10};
  EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }), HasSubstr("output 's1'"));
  b.g.mutable_tensor(s1).shape[1] = Dim::Static(10);
  EXPECT_NO_THROW(VerifyOp(b.g, 0));

  const TensorId c = b.Tensor("c", {4, 16});
  Attrs concat;
  concat.dim = 0;
  const OpId cat = b.Op("cat", OpType::kConcatenate, {s0, s1}, {c}, concat);
  EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, cat); }),
              HasSubstr("input 's1' [4, 10] does not match 's0' [4, 6] off dim 0"));

  const TensorId e = b.Tensor("e", {4, 6});
  const OpId add = b.Ew("add", {s0, s1}, e);
  EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, add); }),
              HasSubstr("input 's1' [4, 10] does not broadcast"));

  const TensorId r = b.Tensor("r", {5, 4});
  Attrs reshape;
  reshape.shape = {5, 4};
  const OpId rs = b.Op("rs", OpType::kReshape, {s0}, {r}, reshape);
  EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, rs); }),
              HasSubstr("reshape from [4, 6] to [5, 4] changes the number of elements"));
}

// Products and sums of huge dims must not wrap around into a match.
TEST(VerifierTest, HugeDimsDoNotWrapIntoAMatch) {
  {
    Builder b;
    const int64_t big = int64_t{1} << 32;
    const TensorId x = b.Input("x", {big, big});  // 2^64 elements: wraps to 0
    const TensorId y = b.Tensor("y", {0});
    Attrs a;
    a.shape = {0};
    b.Op("rs", OpType::kReshape, {x}, {y}, a);
    EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }), HasSubstr("op 'rs' (reshape)"));
  }
  {
    Builder b;
    const int64_t max = std::numeric_limits<int64_t>::max();
    const TensorId x = b.Input("x", {2});
    Attrs a;
    a.split_sizes = {max, max, 4};  // wraps to 2
    b.Op("split", OpType::kSplit, {x},
         {b.Tensor("a", {max}), b.Tensor("b", {max}), b.Tensor("c", {4})}, a);
    EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }), HasSubstr("op 'split' (split)"));
  }
  {
    Builder b;
    const int64_t max = std::numeric_limits<int64_t>::max();
    const TensorId y = b.Tensor("y", {2});
    b.Op("cat", OpType::kConcatenate, {b.Input("a", {max}), b.Input("b", {max}), b.Input("c", {4})},
         {y});
    EXPECT_THAT(ErrorOf([&] { VerifyOp(b.g, 0); }), HasSubstr("op 'cat' (concatenate)"));
  }
  {
    // A zero dim makes the product 0 even when the other dims would overflow.
    Builder b;
    const int64_t big = int64_t{1} << 40;
    const TensorId x = b.Input("x", {big, big, 0});
    const TensorId y = b.Tensor("y", {0, 7});
    Attrs a;
    a.shape = {0, 7};
    b.Op("rs", OpType::kReshape, {x}, {y}, a);
    EXPECT_NO_THROW(VerifyOp(b.g, 0));
  }
}

}  // namespace
}  // namespace hfuse
