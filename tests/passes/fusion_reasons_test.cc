// Why-not-fused reasons (fusion_reasons.h): one test per reason code and rule
// on a small graph, asserting the code, the rule and the evidence; then, on
// every conformance graph, that each GEMM and LayerNorm is in exactly one
// group or has exactly one reason, and that the explanations agree with the
// planner's own rules.
#include "hfuse/passes/fusion_reasons.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "hfuse/io/graph_json.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/passes/group_planner.h"
#include "testing/conformance.h"
#include "testing/graph_builder.h"
#include "testing/tool_runner.h"

namespace hfuse {
namespace {

using test::GraphBuilder;
using ::testing::ElementsAre;
using ::testing::AnyOf;
using ::testing::HasSubstr;

FuseGroupOpsResult FuseIt(const GraphBuilder& b, FuseGroupOpsOptions options = {}) {
  Graph g = b.Build();
  return FuseGroupOps(g, options);
}

// The one reason for `op`; fails the test when it has none or several.
Reason ReasonOf(const FuseGroupOpsResult& r, const std::string& op) {
  std::vector<Reason> found;
  for (const Reason& u : r.ungrouped) {
    if (u.op == op) found.push_back(u);
  }
  EXPECT_EQ(found.size(), 1u) << "reasons for " << op;
  return found.empty() ? Reason{} : found[0];
}

std::string Code(const Reason& r) { return std::string(ReasonCodeName(r.code)); }
std::string Rule(const Reason& r) { return std::string(ReasonRuleName(r.rule)); }

// ---------------------------------------------------------------------------
// not-a-candidate: one test per filter.

TEST(FusionReasonsTest, NotACandidateAlpha) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32, {.alpha = 0.5}), b.Fc("fc2", x, 32)});
  const Reason r = ReasonOf(FuseIt(b), "fc1");
  EXPECT_EQ(Code(r), "not-a-candidate");
  EXPECT_EQ(Rule(r), "alpha");
  EXPECT_EQ(r.details, "alpha = 0.5 (only alpha 1 groups)");
}

TEST(FusionReasonsTest, NotACandidateRank3) {
  GraphBuilder b;
  const std::string x = b.Input("x", {4, 256, 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
  const FuseGroupOpsResult r = FuseIt(b);
  EXPECT_EQ(Rule(ReasonOf(r, "fc0")), "a-rank");
  EXPECT_EQ(ReasonOf(r, "fc1").details, "A (x) has rank 3 (only 2-D GEMMs group)");
}

// The dynamic-batch model: a graph exported with a dynamic batch dim.
TEST(FusionReasonsTest, NotACandidateDynamicBatchNamesTheDimAndTheWayOut) {
  GraphBuilder b;
  b.Dim("batch", 1, 1024);
  const std::string x = b.Input("x", {"batch", 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
  const FuseGroupOpsResult r = FuseIt(b);
  ASSERT_EQ(r.ungrouped.size(), 2u);
  for (const Reason& u : r.ungrouped) {
    EXPECT_EQ(Code(u), "not-a-candidate");
    EXPECT_EQ(Rule(u), "a-dynamic");
    EXPECT_THAT(u.details, HasSubstr("dynamic dim 'batch' in A (x)"));
    EXPECT_THAT(u.details, HasSubstr("--dim NAME=VALUE"));
    EXPECT_THAT(u.details, HasSubstr("--rules hfuse"));
  }
}

// Fix (d). (A dynamic bias needs a dynamic weight too, so the weight's rule
// is the one met.)
TEST(FusionReasonsTest, NotACandidateDynamicWeight) {
  GraphBuilder b;
  b.Dim("n", 1, 64);
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Gemm("fw", OpType::kGemmRcrBias, x, b.Param("w", {"n", 64}), b.Param("bw", {"n"})),
             b.Fc("fc", x, 32)});
  const Reason r = ReasonOf(FuseIt(b), "fw");
  EXPECT_EQ(Rule(r), "weight-dynamic");
  EXPECT_EQ(r.details, "weight w has a dynamic dim 'n' (fix (d))");
}

TEST(FusionReasonsTest, NotACandidateAlignmentOneNamesK) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 429});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
  const Reason r = ReasonOf(FuseIt(b), "fc0");
  EXPECT_EQ(Rule(r), "alignment-1");
  EXPECT_THAT(r.details, HasSubstr("K = 429: A/B alignment 1"));
}

TEST(FusionReasonsTest, NotACandidateWhenGemmGroupingIsOff) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
  const FuseGroupOpsResult r = FuseIt(b, {.group_gemm = false});
  EXPECT_EQ(Code(ReasonOf(r, "fc0")), "not-a-candidate");
  EXPECT_EQ(Rule(ReasonOf(r, "fc1")), "group-gemm-off");
  EXPECT_EQ(ReasonOf(r, "fc1").details, "GEMM grouping is off (--no-group-gemm)");
}

// ---------------------------------------------------------------------------
// only-candidate-of-type and no-compatible-peer.

TEST(FusionReasonsTest, OnlyCandidateOfType) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32, {.alpha = 2.0}),
             b.Fc("r0", x, 32, {.type = OpType::kGemmRcr})});
  const FuseGroupOpsResult r = FuseIt(b);
  EXPECT_EQ(Code(ReasonOf(r, "fc0")), "only-candidate-of-type");
  EXPECT_EQ(ReasonOf(r, "fc0").details, "the other 1 gemm_rcr_bias op(s) are not candidates");
  EXPECT_EQ(ReasonOf(r, "r0").details, "the only gemm_rcr op in the graph");
}

TEST(FusionReasonsTest, NoCompatiblePeerDifferentM) {
  GraphBuilder b;
  b.Outputs({b.Fc("fc0", b.Input("x0", {128, 64}), 32), b.Fc("fc1", b.Input("x1", {256, 64}), 32)});
  const FuseGroupOpsResult r = FuseIt(b);
  const Reason r0 = ReasonOf(r, "fc0");
  EXPECT_EQ(Code(r0), "no-compatible-peer");
  EXPECT_EQ(Rule(r0), "m");
  EXPECT_EQ(r0.peer, "fc1");
  EXPECT_THAT(r0.details, HasSubstr("M = "));
}

TEST(FusionReasonsTest, NoCompatiblePeerGemmAlignment) {
  GraphBuilder b;
  b.Outputs({b.Fc("fc0", b.Input("x0", {128, 64}), 32), b.Fc("fc1", b.Input("x1", {128, 36}), 32)});
  const Reason r = ReasonOf(FuseIt(b), "fc0");
  EXPECT_EQ(Rule(r), "alignment");
  EXPECT_THAT(r.details, HasSubstr("K = "));
}

TEST(FusionReasonsTest, NoCompatiblePeerLayerNormEps) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64}), {.eps = 1e-5}),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}), {.eps = 1e-6})});
  const Reason r = ReasonOf(FuseIt(b), "ln1");
  EXPECT_EQ(Rule(r), "eps");
  EXPECT_EQ(r.peer, "ln0");
}

TEST(FusionReasonsTest, NoCompatiblePeerLayerNormSizeBucket128Vs1024) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 128})),
             b.LayerNorm("ln1", b.Input("x1", {8, 1024}))});
  const Reason r = ReasonOf(FuseIt(b), "ln0");
  EXPECT_EQ(Code(r), "no-compatible-peer");
  EXPECT_EQ(Rule(r), "size-bucket");
  EXPECT_THAT(r.details, HasSubstr("one is 4 times the other or more"));
  EXPECT_THAT(r.details, AnyOf(HasSubstr("N = 128 vs 1024"), HasSubstr("N = 1024 vs 128")));
}

TEST(FusionReasonsTest, NoCompatiblePeerLayerNormBatchDims) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64})), b.LayerNorm("ln1", b.Input("x1", {16, 64}))});
  const Reason r = ReasonOf(FuseIt(b), "ln0");
  EXPECT_EQ(Rule(r), "batch-dims");
  EXPECT_THAT(r.details, AnyOf(HasSubstr("[8] vs [16]"), HasSubstr("[16] vs [8]")));
}

TEST(FusionReasonsTest, NoCompatiblePeerLayerNormWithoutGamma) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64}), {.gamma = test::kNoParam}),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}))});
  const Reason r = ReasonOf(FuseIt(b), "ln0");
  EXPECT_EQ(Rule(r), "gamma-beta");
  EXPECT_THAT(r.details, HasSubstr("ln0 has no gamma or no beta"));
}

// The seed compares with a group's leader only: ln0 (130) would match ln1
// (128) but ln1 joined ln2 (64), and ln0 was compared with ln2.
TEST(FusionReasonsTest, NoCompatiblePeerNamesTheLeaderItWasComparedWith) {
  const std::string path =
      testing::ConformancePath("edge/layernorm_nontransitive") + ".json";
  Graph g = ReadGraphJsonFile(path);
  const FuseGroupOpsResult r = FuseGroupOps(g);
  const Reason u = ReasonOf(r, "ln0");
  EXPECT_EQ(Rule(u), "size-bucket");
  EXPECT_THAT(u.details, HasSubstr("in the group led by ln2, compared with it"));
}

TEST(FusionReasonsTest, NoCompatiblePeerAllOthersTakenBySplitRule) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 128}), {64, 64}, 1);
  b.Outputs({b.Fc("fc0", s[0], 32), b.Fc("fc1", s[1], 32), b.Fc("fc2", b.Input("x2", {256, 64}), 32)});
  const Reason r = ReasonOf(FuseIt(b), "fc2");
  EXPECT_EQ(Code(r), "no-compatible-peer");
  EXPECT_EQ(Rule(r), "split-taken");
}

// ---------------------------------------------------------------------------
// cycle-risk, dropped-by-cycle-check.

TEST(FusionReasonsTest, CycleRiskWhenTheOnlyCompatiblePeerIsADescendant) {
  GraphBuilder b;
  b.Outputs({b.Fc("fc1", b.Fc("fc0", b.Input("x", {256, 64}), 64), 64)});
  const FuseGroupOpsResult r = FuseIt(b);
  const Reason r0 = ReasonOf(r, "fc0");
  EXPECT_EQ(Code(r0), "cycle-risk");
  EXPECT_EQ(Rule(r0), "peer-below");
  EXPECT_EQ(r0.peer, "fc1");
  EXPECT_THAT(r0.path, ElementsAre("fc0", "fc1"));
  const Reason r1 = ReasonOf(r, "fc1");
  EXPECT_EQ(Code(r1), "cycle-risk");
  EXPECT_EQ(Rule(r1), "below-group");
  EXPECT_THAT(r1.path, ElementsAre("fc0", "fc1"));
}

// fc2 reads fcA's output; fcA and fcB group, and fc2 is below that group.
TEST(FusionReasonsTest, CycleRiskBelowAGroupNamesTheGroupOp) {
  GraphBuilder b;
  const std::string a = b.Fc("fcA", b.Input("xa", {256, 64}), 64);
  const std::string bb = b.Fc("fcB", b.Input("xb", {256, 64}), 64);
  b.Outputs({b.Fc("fc2", a, 64), bb});
  const FuseGroupOpsResult r = FuseIt(b);
  ASSERT_EQ(r.groups.size(), 1u);
  const Reason u = ReasonOf(r, "fc2");
  EXPECT_EQ(Rule(u), "below-group");
  EXPECT_THAT(u.path, ElementsAre("group_gemm_rcr_bias_0", "fc2"));
}

// The seed's picture: A -> C, B -> D, X -> M, Y -> N, with M feeding B and C
// feeding Y; A and B alike, X and Y alike. Whichever pair groups first, the
// other closes a cycle through it: here (X, Y) group first (the canonical
// order visits X first); then B joins A, but A -> C -> (X, Y) -> M -> B, so
// the cycle check drops B, and A is left alone.
TEST(FusionReasonsTest, SeedCyclePicture) {
  GraphBuilder b;
  auto fc = [&](const std::string& id, const std::string& a, int64_t n) {
    const int64_t k = b.ShapeOf(a).back().value;
    return b.Gemm(id, OpType::kGemmRcrBias, a, b.Param("w_" + id, {n, k}),
                  b.Param("b_" + id, {n}), "y_" + id);
  };
  const std::string ya = fc("A", b.Input("xa", {128, 64}), 36);   // alignment 8
  const std::string c = b.Elementwise("C", "relu", {ya});
  const std::string yx = fc("X", b.Input("xx", {128, 36}), 64);   // alignment 4
  const std::string m = b.Elementwise("M", "relu", {yx});
  const std::string yb = fc("B", b.Elementwise("mb", "add", {b.Input("xb", {128, 64}), m}), 64);
  const std::string d = b.Elementwise("D", "relu", {yb});
  const std::string yy = fc("Y", b.Elementwise("cy", "add", {b.Input("xy", {128, 36}), c}), 16);
  b.Outputs({d, b.Elementwise("N", "relu", {yy})});
  (void)yy;
  const FuseGroupOpsResult r = FuseIt(b);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_THAT(r.groups[0].members, ::testing::UnorderedElementsAre("X", "Y"));
  ASSERT_EQ(r.ungrouped.size(), 2u);
  const Reason ra = ReasonOf(r, "A");
  const Reason rb = ReasonOf(r, "B");
  EXPECT_EQ(Code(rb), "dropped-by-cycle-check");
  EXPECT_EQ(Rule(rb), "reached-by-member");
  EXPECT_EQ(rb.peer, "A");
  EXPECT_THAT(rb.path, ElementsAre("A", "C", "cy", "group_gemm_rcr_bias_0", "M", "mb", "B"));
  EXPECT_THAT(rb.details, HasSubstr("never offered again"));
  EXPECT_EQ(Code(ra), "cycle-risk");
  EXPECT_EQ(Rule(ra), "peers-dropped");
  EXPECT_EQ(ra.path, rb.path);
}

// shared/conformance/edge/cycle_pattern.json: P -> A and X -> Q.
TEST(FusionReasonsTest, DroppedByCycleCheckInTheConformanceCyclePattern) {
  Graph g = ReadGraphJsonFile(testing::ConformancePath("edge/cycle_pattern") + ".json");
  const FuseGroupOpsResult r = FuseGroupOps(g);
  const Reason q = ReasonOf(r, "Q");
  EXPECT_EQ(Code(q), "dropped-by-cycle-check");
  EXPECT_EQ(q.peer, "P");
  EXPECT_THAT(q.path, ElementsAre("P", "group_gemm_rcr_bias_0", "Q"));
  EXPECT_EQ(Code(ReasonOf(r, "P")), "cycle-risk");
}

// ---------------------------------------------------------------------------
// chunk-of-one, only-member-of-split.

TEST(FusionReasonsTest, ChunkOfOneAfterThe39Cap) {
  GraphBuilder b;
  std::vector<std::string> outs;
  for (int i = 0; i < 40; ++i) {
    const std::string n = std::to_string(i);
    outs.push_back(b.LayerNorm(std::string("ln").append(n), b.Input(std::string("x").append(n), {8, 64})));
  }
  b.Outputs(outs);
  const FuseGroupOpsResult r = FuseIt(b);
  ASSERT_EQ(r.groups.size(), 1u);
  ASSERT_EQ(r.ungrouped.size(), 1u);
  EXPECT_EQ(Code(r.ungrouped[0]), "chunk-of-one");
  EXPECT_THAT(r.ungrouped[0].details, HasSubstr("its group of 40 LayerNorms (led by ln0)"));
}

// A one-output split whose output is also a graph output stays (it is no
// no-op then) and feeds one GEMM: the split rule makes no group of one.
TEST(FusionReasonsTest, OnlyMemberOfSplit) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 64}), {64}, 1);
  b.Outputs({s[0], b.Fc("fc0", s[0], 32), b.Fc("fc1", b.Input("x1", {128, 64}), 32)});
  const Reason r = ReasonOf(FuseIt(b), "fc0");
  EXPECT_EQ(Code(r), "only-member-of-split");
  EXPECT_THAT(r.details, HasSubstr("split split has one output and feeds only this GEMM; then: "
                                   "nearest peer fc1"));
}

// Under --rules hfuse the size buckets and the 39 cap are gone, and so are
// their reasons.
TEST(FusionReasonsTest, HfuseRulesHaveNoSizeBucketOrChunkReasons) {
  GraphBuilder b;
  std::vector<std::string> outs = {b.LayerNorm("big", b.Input("xb", {8, 1024}))};
  for (int i = 0; i < 40; ++i) {
    const std::string n = std::to_string(i);
    outs.push_back(b.LayerNorm(std::string("ln").append(n), b.Input(std::string("x").append(n), {8, 128})));
  }
  b.Outputs(outs);
  EXPECT_EQ(FuseIt(b, {.rules = RuleSet::kHfuse}).ungrouped.size(), 0u);
  const FuseGroupOpsResult seed = FuseIt(b);
  EXPECT_EQ(Rule(ReasonOf(seed, "big")), "size-bucket");
}

// Under --rules hfuse the GEMM kinds are one round: GEMMs of different
// epilogues are each other's peers, and an op left out is reported as its
// own kind; the dependent pair stays apart (cycle risk), the dtype apart
// names the rule; a lone GEMM is "the only GEMM op".
TEST(FusionReasonsTest, HfuseRulesMixedEpilogueReasons) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  const std::string y0 = b.Fc("fc0", x, 64, {.type = OpType::kGemmRcrBias});
  const std::string y1 = b.Fc("fc1", y0, 32, {.type = OpType::kGemmRcrBiasRelu});
  b.Outputs({y1});
  const FuseGroupOpsResult r = FuseIt(b, {.rules = RuleSet::kHfuse});
  EXPECT_TRUE(r.groups.empty());
  const Reason r0 = ReasonOf(r, "fc0"), r1 = ReasonOf(r, "fc1");
  EXPECT_EQ(Code(r0), "cycle-risk");
  EXPECT_EQ(r0.type, OpType::kGemmRcrBias);
  EXPECT_EQ(r1.type, OpType::kGemmRcrBiasRelu);
  // The seed rules: each the only op of its kind.
  const FuseGroupOpsResult seed = FuseIt(b);
  EXPECT_EQ(Code(ReasonOf(seed, "fc1")), "only-candidate-of-type");

  GraphBuilder one;
  one.Outputs({one.Fc("fc", one.Input("x", {256, 64}), 32, {.type = OpType::kGemmRcrBiasSigmoid})});
  const Reason alone = ReasonOf(FuseIt(one, {.rules = RuleSet::kHfuse}), "fc");
  EXPECT_EQ(alone.type, OpType::kGemmRcrBiasSigmoid);
  EXPECT_EQ(alone.details, "the only GEMM op in the graph");

  GraphBuilder dt;
  const std::string a = dt.Input("a", {256, 64}, DType::kFloat32);
  dt.Outputs({dt.Fc("f32", a, 32, {.type = OpType::kGemmRcr}),
              dt.Fc("f16", dt.Input("h", {256, 64}), 32, {.type = OpType::kGemmRcrBiasRelu})});
  const Reason apart = ReasonOf(FuseIt(dt, {.rules = RuleSet::kHfuse}), "f16");
  EXPECT_EQ(Code(apart), "no-compatible-peer");
  EXPECT_EQ(Rule(apart), "dtype");
}

// ---------------------------------------------------------------------------
// The vocabulary is documented: README lists every code.

TEST(FusionReasonsTest, ReadmeDocumentsEveryReasonCode) {
  const std::string readme = test::Slurp(std::string(HFUSE_SOURCE_DIR) + "/README.md");
  for (ReasonCode code : AllReasonCodes()) {
    std::string quoted(1, '`');
    quoted.append(ReasonCodeName(code)).push_back('`');
    EXPECT_NE(readme.find(quoted), std::string::npos) << quoted;
  }
}

// ---------------------------------------------------------------------------
// Every conformance graph.

class ConformanceReasonsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConformanceReasonsTest, EachGemmAndLayerNormIsGroupedOrHasOneReason) {
  const std::string id = GetParam();
  Graph g = ReadGraphJsonFile(testing::ConformancePath(id) + ".json");
  const FuseGroupOpsResult r = FuseGroupOps(g, testing::ConformanceOptions(id));
  std::multiset<std::string> grouped, explained;
  for (const FusedGroup& group : r.groups) grouped.insert(group.members.begin(), group.members.end());
  for (const Reason& u : r.ungrouped) {
    explained.insert(u.op);
    EXPECT_FALSE(u.details.empty()) << u.op;
  }
  std::set<std::string> left;
  for (OpId op : r.op_order) {
    if (IsGemm(g.op(op).type) || IsLayerNorm(g.op(op).type)) left.insert(g.op(op).name);
  }
  for (const std::string& name : left) {
    EXPECT_EQ(explained.count(name), 1u) << name << " is left out and needs exactly one reason";
    EXPECT_EQ(grouped.count(name), 0u) << name;
  }
  for (const std::string& name : grouped) {
    EXPECT_EQ(grouped.count(name), 1u) << name;
    EXPECT_EQ(explained.count(name), 0u) << name << " is grouped but has a reason";
  }
  EXPECT_EQ(explained.size(), left.size());
}

// The explanations agree with the planner's rules on every pair of GEMMs or
// LayerNorms of one type (the first 40 of each type).
TEST_P(ConformanceReasonsTest, ExplanationsAgreeWithThePlannersRules) {
  Graph g = ReadGraphJsonFile(testing::ConformancePath(GetParam()) + ".json");
  std::map<OpType, std::vector<OpId>> by_type;
  for (OpId id : g.LiveOps()) {
    const OpType t = g.op(id).type;
    if (!IsGemm(t) && !IsLayerNorm(t)) continue;
    Reason why;
    if (IsGemm(t)) {
      EXPECT_EQ(ExplainNotACandidate(g, id, why, RuleSet::kSeed), !IsGemmCandidate(g, id)) << g.op(id).name;
      if (!IsGemmCandidate(g, id)) continue;
    }
    if (by_type[t].size() < 40) by_type[t].push_back(id);
  }
  for (const auto& [type, ops] : by_type) {
    for (OpId a : ops) {
      for (OpId b : ops) {
        const Op& x = g.op(a);
        const Op& y = g.op(b);
        const bool shape_ok = !x.inputs.empty() && x.inputs.size() == y.inputs.size() &&
                              x.outputs.size() == 1;
        for (RuleSet rules : {RuleSet::kSeed, RuleSet::kHfuse}) {
          const bool compatible =
              shape_ok &&
              (IsGemm(type) ? GemmsCompatible(g, a, b, rules) : LayerNormsCompatible(g, a, b, rules));
          ReasonRule rule;
          std::string text;
          EXPECT_EQ(ExplainIncompatible(g, a, b, rules, rule, text), !compatible)
              << x.name << " vs " << y.name << " (" << RuleSetName(rules) << "): " << text;
        }
      }
    }
  }
}

std::vector<std::string> SmallCases() {
  std::vector<std::string> cases;
  for (const std::string& id : testing::ConformanceCases()) cases.push_back(id);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Conformance, ConformanceReasonsTest, ::testing::ValuesIn(SmallCases()),
                         [](const auto& info) { return testing::CaseTestName(info.param); });

}  // namespace
}  // namespace hfuse
