// Unit tests of fuse-group-ops: one grouping rule per test, small graph in,
// groups out. Negative tests are named for what must not happen. The rules
// are AITemplate's (shared/seed) with the fixes (a)-(j) of
// shared/conformance/README.md; each test says which rule it pins down.
#include "hfuse/ir/op_members.h"
#include "hfuse/passes/fuse_group_ops.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <iterator>
#include <map>

#include "hfuse/io/graph_json.h"
#include "hfuse/ir/verifier.h"
#include "hfuse/passes/group_planner.h"
#include "testing/graph_builder.h"

namespace hfuse {
namespace {

using test::FuseAndGetGroups;
using test::GraphBuilder;
using test::Groups;
using test::LnOptions;
using test::OpNamed;
using test::TensorNamed;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

Groups Fuse(const GraphBuilder& b, const FuseGroupOpsOptions& options = {}) {
  Graph graph = b.Build();
  return FuseAndGetGroups(graph, options);
}

// Two layernorms over [8, n1] and [8, n2] (fp16, own params).
Groups FuseTwoLayerNorms(int64_t n1, int64_t n2) {
  GraphBuilder b;
  b.Outputs(
      {b.LayerNorm("ln0", b.Input("x0", {8, n1})), b.LayerNorm("ln1", b.Input("x1", {8, n2}))});
  return Fuse(b);
}

// ---------------------------------------------------------------------------
// GEMM candidates and compatibility.

TEST(FuseGroupOpsTest, GroupsIndependentGemms) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc0", "fc1"}}}));
}

TEST(FuseGroupOpsTest, DoesNotGroupGemmWithAlphaOtherThanOne) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32, {.alpha = 0.5}), b.Fc("fc2", x, 32)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc0", "fc2"}}}));
}

TEST(FuseGroupOpsTest, GroupsGemmWithExplicitAlphaOne) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Fc("fc0", x, 32, {.alpha = 1.0}), b.Fc("fc1", x, 32)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc0", "fc1"}}}));
}

TEST(FuseGroupOpsTest, DoesNotGroupGemmsWith3DInput) {
  GraphBuilder b;
  const std::string x = b.Input("x", {2, 128, 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupGemmsWithDynamicM) {
  GraphBuilder b;
  b.Dim("batch", 1, 256);
  const std::string x = b.Input("x", {"batch", 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupGemmsWithDynamicMOfMinEqualMax) {
  GraphBuilder b;
  b.Dim("batch", 256, 256);  // still a named, so dynamic, dim
  const std::string x = b.Input("x", {"batch", 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupGemmsWithOddK) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 63});  // alignment 1
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, GemmAlignmentIsLargestOf842DividingK) {
  GraphBuilder b;
  std::vector<std::string> outs;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    for (int64_t k : {64, 36, 18, 63, 8}) {
      const std::string name = fmt::format("{}_k{}", DTypeName(dtype), k);
      outs.push_back(b.Fc(name, b.Input("x_" + name, {16, k}, dtype), 8));
    }
  }
  b.Outputs(outs);
  const Graph g = b.Build();
  auto align = [&](const char* name) { return GemmAlignment(g, OpNamed(g, name)); };
  EXPECT_EQ(align("float16_k64"), 8);
  EXPECT_EQ(align("float16_k36"), 4);
  EXPECT_EQ(align("float16_k18"), 2);
  EXPECT_EQ(align("float16_k63"), 1);
  EXPECT_EQ(align("bfloat16_k64"), 8);
  EXPECT_EQ(align("bfloat16_k18"), 2);
  EXPECT_EQ(align("float32_k64"), 4);  // fp32: 4 or 2, never 8
  EXPECT_EQ(align("float32_k8"), 4);
  EXPECT_EQ(align("float32_k18"), 2);
  EXPECT_EQ(align("float32_k63"), 1);
  EXPECT_FALSE(IsGemmCandidate(g, OpNamed(g, "float32_k63")));
  EXPECT_TRUE(IsGemmCandidate(g, OpNamed(g, "float32_k18")));
}

TEST(FuseGroupOpsTest, DoesNotGroupDifferentAlignment) {
  GraphBuilder b;
  b.Outputs({b.Fc("fc0", b.Input("x0", {256, 64}), 32),    // alignment 8
             b.Fc("fc1", b.Input("x1", {256, 36}), 32)});  // alignment 4
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupFp16K8WithK12) {
  GraphBuilder b;
  b.Outputs({b.Fc("fc0", b.Input("x0", {256, 8}), 32),     // alignment 8
             b.Fc("fc1", b.Input("x1", {256, 12}), 32)});  // alignment 4
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, GroupsFp32K8WithK12) {
  GraphBuilder b;  // fp32 caps alignment at 4, so both have 4
  b.Outputs({b.Fc("fc0", b.Input("x0", {256, 8}, DType::kFloat32), 32),
             b.Fc("fc1", b.Input("x1", {256, 12}, DType::kFloat32), 32)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc1", "fc0"}}}));  // K descending
}

// Fix (a): AITemplate compares only the alignment.
TEST(FuseGroupOpsTest, DoesNotGroupGemmsOfDifferentDtype) {
  GraphBuilder b;
  b.Outputs({b.Fc("fc0", b.Input("x0", {256, 64}, DType::kFloat16), 32),
             b.Fc("fc1", b.Input("x1", {256, 64}, DType::kBFloat16), 32),
             b.Fc("fc2", b.Input("x2", {256, 36}, DType::kFloat16), 32),
             b.Fc("fc3", b.Input("x3", {256, 36}, DType::kFloat32), 32)});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupGemmsWhoseBiasDtypeDiffers) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Gemm("fc1", OpType::kGemmRcrBias, x, b.Param("w1", {32, 64}),
                                        b.Param("b1", {32}, DType::kFloat32))});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupGemmsOfDifferentM) {
  GraphBuilder b;
  b.Outputs({b.Fc("fc0", b.Input("x0", {128, 64}), 32), b.Fc("fc1", b.Input("x1", {256, 64}), 32)});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

// Fix (d): AITemplate crashes sorting such members by N.
TEST(FuseGroupOpsTest, DoesNotGroupGemmsWithDynamicWeightN) {
  GraphBuilder b;
  b.Dim("n", 1, 64);
  const std::string x = b.Input("x", {256, 64});
  b.Outputs(
      {b.Gemm("fc0", OpType::kGemmRcrBias, x, b.Param("w0", {"n", 64}), b.Param("b0", {"n"})),
       b.Gemm("fc1", OpType::kGemmRcrBias, x, b.Param("w1", {"n", 64}), b.Param("b1", {"n"}))});
  const Graph g = b.Build();
  EXPECT_FALSE(IsGemmCandidate(g, OpNamed(g, "fc0")));
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupDifferentGemmTypes) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32, {.type = OpType::kGemmRcrBiasRelu})});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

// ---------------------------------------------------------------------------
// LayerNorm compatibility.

TEST(FuseGroupOpsTest, GroupsLayerNorms) {
  EXPECT_EQ(FuseTwoLayerNorms(64, 64), (Groups{{"group_layernorm", {"ln0", "ln1"}}}));
}

TEST(FuseGroupOpsTest, GroupsLayerNormSigmoidMul) {
  GraphBuilder b;
  const LnOptions lsm = {.type = OpType::kLayerNormSigmoidMul};
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64}), lsm),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}), lsm)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_layernorm_sigmoid_mul", {"ln0", "ln1"}}}));
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNormWithLayerNormSigmoidMul) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64})),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}), {.type = OpType::kLayerNormSigmoidMul})});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNormsOfDifferentEps) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64}), {.eps = 1e-5}),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}), {.eps = 1e-6})});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, GroupsDefaultEpsWithExplicitDefaultEps) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64})),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}), {.eps = 1e-5})});
  EXPECT_EQ(Fuse(b), (Groups{{"group_layernorm", {"ln0", "ln1"}}}));
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNormWithNullGamma) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64})),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}), {.gamma = test::kNoParam}),
             b.LayerNorm("ln2", b.Input("x2", {8, 64}), {.gamma = test::kNoParam}),
             b.LayerNorm("ln3", b.Input("x3", {8, 64}))});
  EXPECT_EQ(Fuse(b), (Groups{{"group_layernorm", {"ln0", "ln3"}}}));
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNormWithNullBeta) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64}), {.beta = test::kNoParam}),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}), {.beta = test::kNoParam})});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNormsOfDifferentInputRank) {
  GraphBuilder b;
  b.Outputs(
      {b.LayerNorm("ln0", b.Input("x0", {8, 64})), b.LayerNorm("ln1", b.Input("x1", {2, 4, 64}))});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNormsOfDifferentBatchDims) {
  GraphBuilder b;
  b.Outputs(
      {b.LayerNorm("ln0", b.Input("x0", {8, 64})), b.LayerNorm("ln1", b.Input("x1", {16, 64}))});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNormsOfDifferentNormalizedRank) {
  GraphBuilder b;  // sizes 64 and 16 would match; the ranks do not
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 4, 16}), {.normalized_rank = 2}),
             b.LayerNorm("ln1", b.Input("x1", {8, 4, 16}), {.normalized_rank = 1})});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, GroupsLayerNormsOfSameDynamicBatchDim) {
  GraphBuilder b;
  b.Dim("batch", 1, 64);
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {"batch", 64})),
             b.LayerNorm("ln1", b.Input("x1", {"batch", 64}))});
  EXPECT_EQ(Fuse(b), (Groups{{"group_layernorm", {"ln0", "ln1"}}}));
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNormsOfDifferentDynamicBatchDims) {
  GraphBuilder b;
  b.Dim("batch", 1, 64);
  b.Dim("seq", 1, 64);
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {"batch", 64})),
             b.LayerNorm("ln1", b.Input("x1", {"seq", 64}))});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

// Fix (b): AITemplate never compares layernorm dtypes.
TEST(FuseGroupOpsTest, DoesNotGroupLayerNormsOfDifferentDtype) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64}, DType::kFloat16)),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}, DType::kFloat32)),
             b.LayerNorm("ln2", b.Input("x2", {8, 64}, DType::kBFloat16))});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

// _check_layernorm_n_match, size by size. The first argument is the leader.
TEST(FuseGroupOpsTest, LayerNormSizeBuckets) {
  EXPECT_TRUE(LayerNormSizesMatch(64, 100));    // both below 128
  EXPECT_TRUE(LayerNormSizesMatch(64, 99));     // ... whatever the alignment
  EXPECT_FALSE(LayerNormSizesMatch(128, 100));  // half4 range vs below it
  EXPECT_FALSE(LayerNormSizesMatch(127, 128));  // alignment 1 vs 4
  EXPECT_TRUE(LayerNormSizesMatch(128, 256));
  EXPECT_FALSE(LayerNormSizesMatch(128, 512));  // exactly 4x apart
  EXPECT_FALSE(LayerNormSizesMatch(1024, 128));
  EXPECT_FALSE(LayerNormSizesMatch(256, 130));    // alignment 4 vs 1 up to 4096
  EXPECT_TRUE(LayerNormSizesMatch(130, 131));     // alignment 1 and 1
  EXPECT_FALSE(LayerNormSizesMatch(4096, 4097));  // leader's alignment 4: range differs
  EXPECT_TRUE(LayerNormSizesMatch(4097, 4096));   // leader's alignment 1: no range check
  EXPECT_TRUE(LayerNormSizesMatch(5001, 2000));
  EXPECT_FALSE(LayerNormSizesMatch(2000, 5001));
  EXPECT_TRUE(LayerNormSizesMatch(5000, 8000));  // both above the range
  EXPECT_FALSE(LayerNormSizesMatch(5000, 64));
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNormSizesFourTimesApart) {
  EXPECT_THAT(FuseTwoLayerNorms(128, 1024), IsEmpty());
}

TEST(FuseGroupOpsTest, GroupsLayerNormSizesBelow128) {
  EXPECT_EQ(FuseTwoLayerNorms(64, 100), (Groups{{"group_layernorm", {"ln0", "ln1"}}}));
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNormSizesOfDifferentAlignmentUpTo4096) {
  EXPECT_THAT(FuseTwoLayerNorms(256, 130), IsEmpty());
}

TEST(FuseGroupOpsTest, GroupsLayerNormSizesOfDifferentAlignmentAbove4096) {
  EXPECT_EQ(FuseTwoLayerNorms(5000, 5001), (Groups{{"group_layernorm", {"ln0", "ln1"}}}));
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNorm5000With64) {
  EXPECT_THAT(FuseTwoLayerNorms(5000, 64), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupHalf4LayerNormWithOneBelow128) {
  EXPECT_THAT(FuseTwoLayerNorms(128, 100), IsEmpty());
}

// The largest layernorm (5001) comes first and leads; 2001 and 2000 each
// match it but not each other, and both join; 1001 matches 2001 but not the
// leader, and stays out.
TEST(FuseGroupOpsTest, ChecksLayerNormCompatibilityAgainstLeaderOnly) {
  GraphBuilder b;
  std::vector<std::string> outs;
  for (int64_t n : {1001, 2000, 2001, 5001}) {
    outs.push_back(b.LayerNorm(fmt::format("ln{}", n), b.Input(fmt::format("x{}", n), {8, n})));
  }
  b.Outputs(outs);
  EXPECT_EQ(Fuse(b), (Groups{{"group_layernorm", {"ln2000", "ln2001", "ln5001"}}}));
}

// ---------------------------------------------------------------------------
// LayerNorm groups above 39.

std::vector<std::string> Names(const std::string& prefix, int begin, int end) {
  std::vector<std::string> names;
  for (int i = begin; i < end; ++i) names.push_back(fmt::format("{}{:02}", prefix, i));
  return names;
}

// Fix (e): AITemplate builds a one-member group op of the 40th.
TEST(FuseGroupOpsTest, LeavesLoneLayerNormOfLastChunkUngrouped) {
  GraphBuilder b;
  std::vector<std::string> outs;
  for (const std::string& ln : Names("ln", 0, 40)) {
    outs.push_back(b.LayerNorm(ln, b.Input("x_" + ln, {8, 64})));
  }
  b.Outputs(outs);
  Graph g = b.Build();
  const FuseGroupOpsResult result = FuseGroupOps(g);
  ASSERT_THAT(result.groups, SizeIs(1));
  EXPECT_EQ(result.groups[0].members, Names("ln", 0, 39));
  EXPECT_EQ(g.op(OpNamed(g, "ln39")).type, OpType::kLayerNorm);
  EXPECT_EQ(result.ops_after, 2);
}

TEST(FuseGroupOpsTest, CutsLayerNormGroupsIntoChunksOf39) {
  GraphBuilder b;
  std::vector<std::string> outs;
  for (const std::string& ln : Names("ln", 0, 80)) {
    outs.push_back(b.LayerNorm(ln, b.Input("x_" + ln, {8, 64})));
  }
  b.Outputs(outs);
  const Groups groups = Fuse(b);
  ASSERT_THAT(groups, SizeIs(3));
  EXPECT_EQ(groups[0].second, Names("ln", 0, 39));
  EXPECT_EQ(groups[1].second, Names("ln", 39, 78));
  EXPECT_EQ(groups[2].second, Names("ln", 78, 80));
}

// The small layernorms come first (the big ones wait for a gamma built by a
// concatenate of small pieces) and lead; the group of 40 is sorted by size,
// descending, before it is cut, so the one left over is the last small one.
TEST(FuseGroupOpsTest, SortsLayerNormGroupBySizeBeforeChunking) {
  GraphBuilder b;
  std::vector<std::string> outs;
  for (const std::string& ln : Names("small", 0, 20)) {
    outs.push_back(b.LayerNorm(ln, b.Input("x_" + ln, {8, 64})));
  }
  for (const std::string& ln : Names("big", 0, 20)) {
    const std::string gamma =
        b.Concat("gcat_" + ln, {b.Param("ga_" + ln, {50}), b.Param("gb_" + ln, {50})}, 0);
    outs.push_back(b.LayerNorm(ln, b.Input("x_" + ln, {8, 100}), {.gamma = gamma}));
  }
  b.Outputs(outs);
  std::vector<std::string> expected = Names("small", 0, 19);  // "g_small.." < "gcat_big.."
  for (const std::string& ln : Names("big", 0, 20)) expected.push_back(ln);
  EXPECT_EQ(Fuse(b), (Groups{{"group_layernorm", expected}}));
}

// ---------------------------------------------------------------------------
// The hfuse rule set (RuleSet::kHfuse): LayerNorms uncapped, of any sizes.

FuseGroupOpsOptions HfuseRules() {
  FuseGroupOpsOptions options;
  options.rules = RuleSet::kHfuse;
  return options;
}

TEST(FuseGroupOpsTest, HfuseRulesPutAllCompatibleLayerNormsInOneGroup) {
  GraphBuilder b;
  std::vector<std::string> outs;
  for (const std::string& ln : Names("ln", 0, 80)) {
    outs.push_back(b.LayerNorm(ln, b.Input("x_" + ln, {8, 64})));
  }
  b.Outputs(outs);
  EXPECT_EQ(Fuse(b, HfuseRules()), (Groups{{"group_layernorm", Names("ln", 0, 80)}}));
  EXPECT_THAT(Fuse(b), SizeIs(3));  // the seed's chunks of 39
}

TEST(FuseGroupOpsTest, HfuseRulesGroupLayerNormsOfAnySizes) {
  GraphBuilder b;
  std::vector<std::string> outs;
  for (int64_t n : {64, 100, 128, 130, 1024, 5001}) {
    outs.push_back(b.LayerNorm(fmt::format("ln{:04}", n), b.Input(fmt::format("x{}", n), {8, n})));
  }
  b.Outputs(outs);
  const Groups groups = Fuse(b, HfuseRules());
  ASSERT_THAT(groups, SizeIs(1));
  EXPECT_THAT(groups[0].second, SizeIs(6));
  // The seed's size buckets: only the two below 128 meet.
  EXPECT_EQ(Fuse(b), (Groups{{"group_layernorm", {"ln0064", "ln0100"}}}));
}

TEST(FuseGroupOpsTest, HfuseRulesKeepLayerNormEpsDtypeAndBatchChecks) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64})),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}), {.eps = 1e-3}),
             b.LayerNorm("ln2", b.Input("x2", {8, 64}, DType::kBFloat16)),
             b.LayerNorm("ln3", b.Input("x3", {16, 64}))});
  EXPECT_THAT(Fuse(b, HfuseRules()), IsEmpty());
}

TEST(FuseGroupOpsTest, RuleSetNamesRoundTrip) {
  RuleSet rules = RuleSet::kSeed;
  ASSERT_TRUE(ParseRuleSet("hfuse", rules));
  EXPECT_EQ(rules, RuleSet::kHfuse);
  EXPECT_STREQ(RuleSetName(rules), "hfuse");
  ASSERT_TRUE(ParseRuleSet("seed", rules));
  EXPECT_EQ(rules, RuleSet::kSeed);
  EXPECT_FALSE(ParseRuleSet("aitemplate", rules));
  EXPECT_EQ(FuseGroupOpsOptions{}.rules, RuleSet::kSeed);
}

// ---------------------------------------------------------------------------
// Dependencies between members.

TEST(FuseGroupOpsTest, DoesNotGroupGemmWithItsDescendant) {
  GraphBuilder b;
  const std::string y0 = b.Fc("fc0", b.Input("x", {256, 64}), 64);
  b.Outputs({b.Fc("fc1", b.Elementwise("relu", "relu", {y0}), 64)});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

TEST(FuseGroupOpsTest, DoesNotGroupLayerNormWithItsDescendant) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln1", b.LayerNorm("ln0", b.Input("x", {8, 64})))});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

// L -> Z and M -> K, all alike; the order is L, Z, M, K. M joins L and brings
// its descendant K into the group's descendants, so K is skipped rather than
// taken and then dropped by the cycle check; K stays free and pairs with Z.
TEST(FuseGroupOpsTest, SkipsDescendantsOfMembersThatJoined) {
  GraphBuilder b;
  const std::string y_l = b.Fc("fcL", b.Input("xl", {256, 64}), 64);
  const std::string y_m = b.Fc("fcM", b.Input("xm", {256, 64}), 64);
  b.Outputs({b.Fc("fcZ", y_l, 64), b.Fc("fcK", y_m, 64)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fcL", "fcM"}},
                             {"group_gemm_rcr_bias", {"fcK", "fcZ"}}}));
}

// Fix (j): O reads P2's output as B and a relu's as A. AITemplate's walk
// reaches O's output first through the relu, then misses O below P2, so O
// joins P2, is dropped by the cycle check and never offered again. With
// exact descendants O is skipped, and pairs with Y once P2 has taken Z.
TEST(FuseGroupOpsTest, UsesExactDescendants) {
  GraphBuilder b;
  const std::string p1 = b.Elementwise("e1", "relu", {b.Input("x1", {256, 64})});
  const std::string p2 = b.Fc("P2", b.Input("x2", {256, 64}), 64, {.type = OpType::kGemmRcr});
  b.Outputs({b.Gemm("O", OpType::kGemmRcr, p1, p2), b.Fc("Y", p2, 64, {.type = OpType::kGemmRcr}),
             b.Fc("Z", b.Input("x3", {256, 64}), 64, {.type = OpType::kGemmRcr})});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr", {"P2", "Z"}}, {"group_gemm_rcr", {"O", "Y"}}}));
}

// P -> A and X -> Q (shared/conformance/edge/cycle_pattern.json). X comes
// first and takes A; [P, Q] would then close a cycle through the group op.
// `op_name` renames ops (tensor names stay).
Graph CyclePattern(GraphBuilder& b, const std::function<std::string(const std::string&)>& op_name) {
  auto fc = [&](const std::string& id, const std::string& a, int64_t n) {
    const int64_t k = b.ShapeOf(a).back().value;
    return b.Gemm(op_name(id), OpType::kGemmRcrBias, a, b.Param("w_" + id, {n, k}),
                  b.Param("b_" + id, {n}), "y_" + id);
  };
  const std::string y_p = fc("P", b.Input("xp", {128, 64}), 36);  // alignment 8
  const std::string y_x = fc("X", b.Input("xx", {128, 36}), 64);  // alignment 4
  const std::string y_a = fc("A", y_p, 16);                       // alignment 4
  const std::string y_q = fc("Q", y_x, 16);                       // alignment 8
  b.Outputs({y_a, y_q});
  return b.Build();
}

TEST(FuseGroupOpsTest, KeepsOneGroupOfTheCyclePattern) {
  GraphBuilder b;
  Graph g = CyclePattern(b, [](const std::string& id) { return id; });
  EXPECT_EQ(FuseAndGetGroups(g), (Groups{{"group_gemm_rcr_bias", {"X", "A"}}}));
}

// As the cycle pattern, plus T below P (through a concatenate) that matches
// P and Q. P leads after X, takes Q, and the cycle check drops Q; T, which
// cannot join P, leads next but Q is not offered again, so [T, Q] never forms.
TEST(FuseGroupOpsTest, DoesNotOfferMemberDroppedByCycleCheckAgain) {
  GraphBuilder b;
  auto fc = [&](const std::string& id, const std::string& a, int64_t n) {
    const int64_t k = b.ShapeOf(a).back().value;
    return b.Gemm(id, OpType::kGemmRcrBias, a, b.Param("w_" + id, {n, k}), b.Param("b_" + id, {n}),
                  "y_" + id);
  };
  const std::string y_p = fc("P", b.Input("xp", {128, 64}), 36);
  const std::string y_x = fc("X", b.Input("xx", {128, 36}), 64);
  const std::string y_a = fc("A", y_p, 16);
  const std::string y_q = fc("Q", y_x, 16);
  const std::string y_t = fc("T", b.Concat("C", {y_p, y_p}, 1), 16);  // K = 72: alignment 8
  b.Outputs({y_a, y_q, y_t});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"X", "A"}}}));
}

// ---------------------------------------------------------------------------
// The split rule: a split's GEMM consumers are grouped first, one group per
// split.

TEST(FuseGroupOpsTest, GroupsSplitConsumersBeforeOtherGemms) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 128}), {64, 64}, 1);
  b.Outputs({b.Fc("fc0", s[0], 32), b.Fc("fc1", s[1], 32),
             b.Fc("fc2", b.Input("x2", {256, 64}), 32)});  // would join a greedy group
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc0", "fc1"}}}));
}

TEST(FuseGroupOpsTest, AppliesSplitRuleToDimMinusOneOfRank2) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 128}), {64, 64}, -1);
  b.Outputs(
      {b.Fc("fc0", s[0], 32), b.Fc("fc1", s[1], 32), b.Fc("fc2", b.Input("x2", {256, 64}), 32)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc0", "fc1"}}}));
}

TEST(FuseGroupOpsTest, FormsOneGroupPerSplit) {
  GraphBuilder b;
  const auto s = b.Split("s", b.Input("x", {256, 128}), {64, 64}, 1);
  const auto t = b.Split("t", b.Input("x2", {256, 128}), {64, 64}, 1);
  b.Outputs(
      {b.Fc("fc0", s[0], 32), b.Fc("fc1", s[1], 32), b.Fc("fc2", t[0], 32), b.Fc("fc3", t[1], 32)});
  const Groups groups = Fuse(b);
  EXPECT_THAT(groups, ::testing::UnorderedElementsAre(
                          Groups::value_type{"group_gemm_rcr_bias", {"fc0", "fc1"}},
                          Groups::value_type{"group_gemm_rcr_bias", {"fc2", "fc3"}}));
}

TEST(FuseGroupOpsTest, DoesNotApplySplitRuleToSplitOnDim0) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 64}), {128, 128}, 0);
  b.Outputs(
      {b.Fc("fc0", s[0], 32), b.Fc("fc1", s[1], 32), b.Fc("fc2", b.Input("x2", {128, 64}), 32)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc0", "fc1", "fc2"}}}));
}

TEST(FuseGroupOpsTest, DoesNotSplitGroupWhenAConsumerFailsTheFilter) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 128}), {64, 64}, 1);
  b.Outputs({b.Fc("fc0", s[0], 32, {.alpha = 2.0}), b.Fc("fc1", s[1], 32),
             b.Fc("fc2", b.Input("x2", {256, 64}), 32)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc1", "fc2"}}}));
}

TEST(FuseGroupOpsTest, DoesNotSplitGroupConsumersOfDifferentAlignment) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 100}), {64, 36}, 1);
  b.Outputs(
      {b.Fc("fc0", s[0], 32), b.Fc("fc1", s[1], 32), b.Fc("fc2", b.Input("x2", {256, 64}), 32)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc0", "fc2"}}}));
}

TEST(FuseGroupOpsTest, DoesNotSplitGroupWhenAnOutputIsUnused) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 192}), {64, 64, 64}, 1);
  b.Outputs(
      {b.Fc("fc0", s[0], 32), b.Fc("fc1", s[1], 32), b.Fc("fc2", b.Input("x2", {256, 64}), 32)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc0", "fc1", "fc2"}}}));
}

TEST(FuseGroupOpsTest, DoesNotSplitGroupWhenFirstConsumerIsNotAGemm) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 128}), {64, 64}, 1);
  const std::string r = b.Elementwise("relu", "relu", {s[1]});
  b.Outputs(
      {b.Fc("fc0", s[0], 32), r, b.Fc("fc1", s[1], 32), b.Fc("fc2", b.Input("x2", {256, 64}), 32)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc0", "fc1", "fc2"}}}));
}

TEST(FuseGroupOpsTest, DoesNotSplitGroupDependentConsumers) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 128}), {64, 64}, 1);
  const std::string y0 = b.Fc("fc0", s[0], 64, {.type = OpType::kGemmRcr});
  b.Outputs({b.Gemm("fc1", OpType::kGemmRcr, s[1], y0)});  // B = [256, 64] from fc0
  EXPECT_THAT(Fuse(b), IsEmpty());
}

// Fix (c): AITemplate groups the GEMM with itself and crashes.
TEST(FuseGroupOpsTest, DoesNotSplitGroupAGemmReadingTwoSplitOutputs) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 128}), {64, 64}, 1);
  b.Outputs({b.Gemm("fc", OpType::kGemmRcr, s[0], s[1])});
  EXPECT_THAT(Fuse(b), IsEmpty());
}

// Fix (c): split outputs read as B are not split-grouped; the ordinary rule
// still groups their GEMMs, and with a third one.
TEST(FuseGroupOpsTest, DoesNotSplitGroupGemmsReadingSplitOutputsAsWeights) {
  GraphBuilder b;
  const auto w = b.Split("wsplit", b.Param("w", {64, 128}), {64, 64}, 1);
  b.Outputs({b.Gemm("fc0", OpType::kGemmRcr, b.Input("x0", {256, 64}), w[0]),
             b.Gemm("fc1", OpType::kGemmRcr, b.Input("x1", {256, 64}), w[1]),
             b.Gemm("fc2", OpType::kGemmRcr, b.Input("x2", {256, 64}), b.Param("w2", {64, 64}))});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr", {"fc2", "fc0", "fc1"}}}));  // "w2" < "wsplit_.."
}

// Fix (e): a one-output split kept as a graph output does not make a group
// of one of its consumer, which stays free to join a greedy group.
TEST(FuseGroupOpsTest, DoesNotSplitGroupTheConsumerOfAOneOutputSplit) {
  GraphBuilder b;
  const auto s = b.Split("split", b.Input("x", {256, 64}), {64}, 1);
  b.Outputs({s[0], b.Fc("fc0", s[0], 32), b.Fc("fc1", b.Input("x2", {256, 64}), 32)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr_bias", {"fc0", "fc1"}}}));
}

// ---------------------------------------------------------------------------
// Member order.

TEST(FuseGroupOpsTest, OrdersGemmMembersByWeightNameThenKAndNDescending) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Gemm("fc0", OpType::kGemmRcr, x, b.Param("w_z", {32, 64})),  // K 64, N 32
             b.Gemm("fc1", OpType::kGemmRcr, x, b.Param("w_a", {16, 64})),  // K 64, N 16
             b.Gemm("fc2", OpType::kGemmRcr, x, b.Param("w_m", {32, 64})),  // K 64, N 32
             b.Gemm("fc3", OpType::kGemmRcr, b.Input("x3", {256, 128}),
                    b.Param("w_q", {8, 128}))});  // K 128, N 8
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr", {"fc3", "fc2", "fc0", "fc1"}}}));
}

TEST(FuseGroupOpsTest, OrdersLayerNormMembersByGammaNameBytes) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64}), {.gamma = "g_b"}),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}), {.gamma = "g_B"}),
             b.LayerNorm("ln2", b.Input("x2", {8, 64}), {.gamma = "g_a"})});
  EXPECT_EQ(Fuse(b), (Groups{{"group_layernorm", {"ln1", "ln2", "ln0"}}}));
}

// ---------------------------------------------------------------------------
// A tensor read twice by one op (fix (f)).

TEST(FuseGroupOpsTest, GroupsGemmsReadingOneTensorAsAAndB) {
  GraphBuilder b;
  const std::string x0 = b.Input("x0", {64, 64});
  const std::string x1 = b.Input("x1", {64, 64});
  b.Outputs({b.Gemm("sq0", OpType::kGemmRcr, x0, x0), b.Gemm("sq1", OpType::kGemmRcr, x1, x1)});
  Graph g = b.Build();
  EXPECT_EQ(FuseAndGetGroups(g), (Groups{{"group_gemm_rcr", {"sq0", "sq1"}}}));
  EXPECT_NO_THROW(VerifyGraph(g));
  EXPECT_THAT(g.tensor(TensorNamed(g, "x0")).users, SizeIs(1));
}

TEST(FuseGroupOpsTest, GroupsLayerNormsWhoseGammaIsBeta) {
  GraphBuilder b;
  b.Outputs({b.LayerNorm("ln0", b.Input("x0", {8, 64}), {.gamma = "p0", .beta = "p0"}),
             b.LayerNorm("ln1", b.Input("x1", {8, 64}), {.gamma = "p1", .beta = "p1"})});
  Graph g = b.Build();
  EXPECT_EQ(FuseAndGetGroups(g), (Groups{{"group_layernorm", {"ln0", "ln1"}}}));
  EXPECT_NO_THROW(VerifyGraph(g));
  EXPECT_THAT(g.tensor(TensorNamed(g, "p0")).users, SizeIs(1));
}

// ---------------------------------------------------------------------------
// Fix (g): no recursion limit. 100,000 elementwise ops in front of two GEMMs;
// the JSON is written directly, the builder being slow at this size.
TEST(FuseGroupOpsTest, HandlesAChainOf100000Ops) {
  constexpr int kChain = 100000;
  std::string json = R"({"graph_format": 1, "tensors": [)";
  auto out = std::back_inserter(json);
  fmt::format_to(out, R"({{"name": "t0", "shape": [8, 64], "dtype": "float16", "role": "input"}})");
  for (int i = 1; i <= kChain; ++i) {
    fmt::format_to(out, R"(,{{"name": "t{}", "shape": [8, 64], "dtype": "float16"}})", i);
  }
  for (int i = 0; i < 2; ++i) {
    fmt::format_to(out,
                   R"(,{{"name": "w{0}", "shape": [64, 64], "dtype": "float16", "role": "param"}})"
                   R"(,{{"name": "y{0}", "shape": [8, 64], "dtype": "float16"}})",
                   i);
  }
  json += R"(], "ops": [)";
  for (int i = 1; i <= kChain; ++i) {
    fmt::format_to(out,
                   R"({{"name": "relu{0}", "op": "elementwise", "func": "relu", )"
                   R"("inputs": ["t{1}"], "outputs": ["t{0}"]}},)",
                   i, i - 1);
  }
  fmt::format_to(
      out,
      R"({{"name": "fc0", "op": "gemm_rcr", "inputs": ["t{0}", "w0"], "outputs": ["y0"]}},)"
      R"({{"name": "fc1", "op": "gemm_rcr", "inputs": ["t{0}", "w1"], "outputs": ["y1"]}}],)"
      R"("outputs": ["y0", "y1"]}})",
      kChain);
  Graph g = ParseGraphJson(json, "chain");
  const FuseGroupOpsResult result = FuseGroupOps(g);
  ASSERT_THAT(result.groups, SizeIs(1));
  EXPECT_THAT(result.groups[0].members, ElementsAre("fc0", "fc1"));
  EXPECT_EQ(result.ops_after, kChain + 1);
}

// ---------------------------------------------------------------------------
// Fix (h): op names play no part. The cycle pattern with names whose numbers
// run against the graph's order (AITemplate sorts by them) and names with no
// number at all gives the same groups, modulo the renaming.
TEST(FuseGroupOpsTest, GroupsDoNotDependOnOpNames) {
  const std::map<std::string, std::string> renamed = {{"P", "gemm_rcr_bias_3"},
                                                      {"X", "gemm_rcr_bias_2"},
                                                      {"A", "gemm_rcr_bias_1"},
                                                      {"Q", "gemm_rcr_bias_0"}};
  for (const auto& rename : std::vector<std::function<std::string(const std::string&)>>{
           [&](const std::string& id) { return renamed.at(id); },
           [](const std::string& id) { return "op" + id; }}) {
    GraphBuilder b;
    Graph g = CyclePattern(b, rename);
    EXPECT_EQ(FuseAndGetGroups(g), (Groups{{"group_gemm_rcr_bias", {rename("X"), rename("A")}}}));
  }
}

// ---------------------------------------------------------------------------
// Op types, in the seed's order.

TEST(FuseGroupOpsTest, GroupsOpTypesInSeedOrder) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  const std::string xl = b.Input("xl", {8, 64});
  const LnOptions lsm = {.type = OpType::kLayerNormSigmoidMul};
  b.Outputs({b.LayerNorm("ln0", xl), b.LayerNorm("ln1", xl),
             b.Fc("s0", x, 32, {.type = OpType::kGemmRcrBiasSigmoid}),
             b.Fc("s1", x, 32, {.type = OpType::kGemmRcrBiasSigmoid}), b.LayerNorm("lsm0", xl, lsm),
             b.LayerNorm("lsm1", xl, lsm), b.Fc("r0", x, 32, {.type = OpType::kGemmRcrBiasRelu}),
             b.Fc("r1", x, 32, {.type = OpType::kGemmRcrBiasRelu}), b.Fc("b0", x, 32),
             b.Fc("b1", x, 32), b.Fc("g0", x, 32, {.type = OpType::kGemmRcr}),
             b.Fc("g1", x, 32, {.type = OpType::kGemmRcr})});
  EXPECT_EQ(Fuse(b), (Groups{{"group_gemm_rcr", {"g0", "g1"}},
                             {"group_gemm_rcr_bias", {"b0", "b1"}},
                             {"group_gemm_rcr_bias_relu", {"r0", "r1"}},
                             {"group_gemm_rcr_bias_sigmoid", {"s0", "s1"}},
                             {"group_layernorm_sigmoid_mul", {"lsm0", "lsm1"}},
                             {"group_layernorm", {"ln0", "ln1"}}}));
}

// ln0 -> fc1 and fc0 -> ln1: whichever pair is grouped first makes the other
// pair a cycle. GEMMs go first.
GraphBuilder Crossing() {
  GraphBuilder b;
  const std::string y_ln0 = b.LayerNorm("ln0", b.Input("x0", {256, 64}));
  const std::string y_fc0 = b.Fc("fc0", b.Input("x1", {256, 64}), 64);
  b.Outputs({b.Fc("fc1", y_ln0, 64), b.LayerNorm("ln1", y_fc0)});
  return b;
}

TEST(FuseGroupOpsTest, GroupsGemmsBeforeLayerNorms) {
  EXPECT_EQ(Fuse(Crossing()), (Groups{{"group_gemm_rcr_bias", {"fc0", "fc1"}}}));
}

TEST(FuseGroupOpsTest, NoGroupGemmLeavesGemmsAlone) {
  EXPECT_EQ(Fuse(Crossing(), {.group_gemm = false}), (Groups{{"group_layernorm", {"ln0", "ln1"}}}));
}

TEST(FuseGroupOpsTest, GroupsLayerNormSigmoidMulBeforeLayerNorm) {
  GraphBuilder b;
  const LnOptions lsm = {.type = OpType::kLayerNormSigmoidMul};
  const std::string y_ln0 = b.LayerNorm("ln0", b.Input("x0", {8, 64}));
  const std::string y_lsm0 = b.LayerNorm("lsm0", b.Input("x1", {8, 64}), lsm);
  b.Outputs({b.LayerNorm("lsm1", y_ln0, lsm), b.LayerNorm("ln1", y_lsm0)});
  EXPECT_EQ(Fuse(b), (Groups{{"group_layernorm_sigmoid_mul", {"lsm0", "lsm1"}}}));
}

// ---------------------------------------------------------------------------
// The rewrite.

TEST(FuseGroupOpsTest, GroupOpProducesTheMembersOutputTensors) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
  Graph g = b.Build();
  FuseGroupOps(g);
  const OpId group = g.tensor(TensorNamed(g, "fc0_y")).producer;
  ASSERT_NE(group, kNone);
  EXPECT_EQ(g.tensor(TensorNamed(g, "fc1_y")).producer, group);
  const Op& op = g.op(group);
  EXPECT_EQ(op.type, OpType::kGroupGemmRcrBias);
  EXPECT_EQ(NumMembers(op), 2u);
  EXPECT_THAT(test::TensorNames(g, op.inputs),
              ElementsAre("x", "w_fc0", "b_fc0", "x", "w_fc1", "b_fc1"));
  EXPECT_THAT(test::TensorNames(g, op.outputs), ElementsAre("fc0_y", "fc1_y"));
  EXPECT_THAT(test::TensorNames(g, g.outputs()), ElementsAre("fc0_y", "fc1_y"));
  EXPECT_THAT(g.tensor(TensorNamed(g, "x")).users, ElementsAre(group));  // once
  EXPECT_FALSE(g.FindOp("fc0"));
  EXPECT_NO_THROW(VerifyGraph(g));
}

TEST(FuseGroupOpsTest, GroupLayerNormReadsAllXThenGammasThenBetas) {
  GraphBuilder b;
  b.Outputs(
      {b.LayerNorm("ln0", b.Input("x0", {8, 64})), b.LayerNorm("ln1", b.Input("x1", {8, 100}))});
  Graph g = b.Build();
  ASSERT_THAT(FuseAndGetGroups(g), SizeIs(1));
  const Op& op = g.op(g.tensor(TensorNamed(g, "ln0_y")).producer);
  EXPECT_EQ(op.type, OpType::kGroupLayerNorm);
  EXPECT_THAT(test::TensorNames(g, op.inputs),
              ElementsAre("x0", "x1", "g_ln0", "g_ln1", "be_ln0", "be_ln1"));
  EXPECT_THAT(op.attrs.normalized_shapes, ElementsAre(ElementsAre(64), ElementsAre(100)));
  EXPECT_NO_THROW(VerifyGraph(g));
}

// A dead op and a no-op concatenate go before the pass counts ops; their
// tensors go with them.
GraphBuilder WithDeadOpAndNoOpConcat() {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Elementwise("dead", "relu", {x});
  const std::string c = b.Concat("cat", {x}, 1);
  b.Outputs({b.Fc("fc0", c, 32), b.Fc("fc1", c, 32)});
  return b;
}

TEST(FuseGroupOpsTest, CountsOpsAfterCleanUpAndAfterFusion) {
  Graph g = WithDeadOpAndNoOpConcat().Build();
  const FuseGroupOpsResult result = FuseGroupOps(g);
  EXPECT_EQ(result.ops_before, 2);
  EXPECT_EQ(result.ops_after, 1);
  EXPECT_EQ(g.NumLiveOps(), 1);
}

TEST(FuseGroupOpsTest, RemovesDeadTensors) {
  Graph g = WithDeadOpAndNoOpConcat().Build();
  const FuseGroupOpsResult result = FuseGroupOps(g);
  EXPECT_FALSE(g.FindTensor("dead_y"));
  EXPECT_FALSE(g.FindTensor("cat_y"));
  const std::string json = WriteGraphJson(g, result.op_order);
  EXPECT_EQ(json.find("dead_y"), std::string::npos);
  EXPECT_EQ(json.find("cat_y"), std::string::npos);
  EXPECT_NO_THROW(VerifyGraph(g));
}

TEST(FuseGroupOpsTest, FusedGraphRereadsAndFusesToNothingMore) {
  GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.LayerNorm("ln0", b.Fc("fc0", x, 64)), b.LayerNorm("ln1", b.Fc("fc1", x, 64)),
             b.Fc("fc2", b.Input("x2", {128, 64}), 64)});
  Graph g = b.Build();
  const FuseGroupOpsResult result = FuseGroupOps(g);
  ASSERT_THAT(result.groups, SizeIs(2));
  const std::string json = WriteGraphJson(g, result.op_order);
  Graph reread = ParseGraphJson(json, "fused");
  EXPECT_EQ(WriteGraphJson(reread), json);
  EXPECT_EQ(reread.NumLiveOps(), result.ops_after);
  EXPECT_THAT(FuseAndGetGroups(reread), IsEmpty());
}

}  // namespace
}  // namespace hfuse
