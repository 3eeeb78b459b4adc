// Fusion never changes results: every conformance graph, fused, gives on the
// CPU exactly the bytes the original gives, on the same random inputs (group
// ops run their members with the ungrouped kernels, so equality is bitwise).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "hfuse/exec/compare.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/io/graph_text.h"
#include "hfuse/ir/op_members.h"
#include "testing/conformance.h"

namespace hfuse {
namespace {

class FusedEqualsUnfused : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedEqualsUnfused, BitwiseOnConformanceGraph) {
  const Graph original = ReadGraphJsonFile(testing::ConformancePath(GetParam()) + ".json");
  Graph fused = original;
  const FuseGroupOpsResult result = FuseGroupOps(fused, testing::ConformanceOptions(GetParam()));
  // Round-trip the fused graph through its file form, as `hfuse verify` would.
  fused = ParseGraphJson(WriteGraphJson(fused, result.op_order), "fused");

  const DimValues dims = BindDims(original);
  const TensorMap feeds = RandomFeeds(original, dims, 1234);
  const TensorMap want = RunOnCpu(original, feeds, dims);
  const TensorMap got = RunOnCpu(fused, feeds, BindDims(fused));
  ASSERT_EQ(want.size(), original.outputs().size());
  for (const OutputComparison& c : CompareOutputs(want, got)) {
    EXPECT_TRUE(c.problem.empty()) << c.name << ": " << c.problem;
    EXPECT_TRUE(c.bitwise_equal) << c.name << ": max_abs " << c.max_abs;
  }
  // With a poisoned buffer pool (every buffer it hands out, fresh or
  // reused, is 0xFF bytes first): the same bytes, so every kernel writes
  // all of its output and none reads stale or zeroed memory.
  CpuBufferPool pool;
  pool.set_poison(true);
  CpuRunOptions pooled;
  pooled.pool = &pool;
  for (const OutputComparison& c : CompareOutputs(got, RunOnCpu(fused, feeds, BindDims(fused), pooled))) {
    EXPECT_TRUE(c.bitwise_equal) << "poisoned pool: " << c.name << ": " << c.problem;
  }
  // (These graphs are float16: RunOnCpu runs them on the reference kernels;
  // cpu_fast_kernels_test checks the fast ones on float32 groups.)
}

// The same under the hfuse rules (mixed-epilogue GEMM groups, uncapped
// LayerNorm groups): fused, on every conformance graph, the bytes of the
// original; and every reachability strategy forms the same groups, each
// mixed group listing its members' own kinds.
TEST_P(FusedEqualsUnfused, BitwiseUnderTheHfuseRules) {
  const Graph original = ReadGraphJsonFile(testing::ConformancePath(GetParam()) + ".json");
  FuseGroupOpsOptions options = testing::ConformanceOptions(GetParam());
  options.rules = RuleSet::kHfuse;
  Graph fused = original;
  const FuseGroupOpsResult result = FuseGroupOps(fused, options);
  for (const FusedGroup& g : result.groups) {
    if (g.type != OpType::kGroupGemmRcrMixed) continue;
    ASSERT_EQ(g.member_ops.size(), g.members.size());
    for (size_t i = 0; i < g.members.size(); ++i) {
      EXPECT_EQ(original.op(*original.FindOp(g.members[i])).type, g.member_ops[i]) << g.members[i];
    }
  }
  for (ReachStrategy reach : {ReachStrategy::kWindows, ReachStrategy::kChains, ReachStrategy::kSearch}) {
    Graph again = original;
    FuseGroupOpsOptions forced = options;
    forced.reach = reach;
    const FuseGroupOpsResult other = FuseGroupOps(again, forced);
    ASSERT_EQ(other.groups.size(), result.groups.size()) << static_cast<int>(reach);
    for (size_t i = 0; i < other.groups.size(); ++i) {
      EXPECT_EQ(other.groups[i].members, result.groups[i].members) << static_cast<int>(reach);
      EXPECT_EQ(other.groups[i].member_ops, result.groups[i].member_ops) << static_cast<int>(reach);
    }
  }
  fused = ParseGraphJson(WriteGraphJson(fused, result.op_order), "fused");
  const DimValues dims = BindDims(original);
  const TensorMap feeds = RandomFeeds(original, dims, 1234);
  const TensorMap want = RunOnCpu(original, feeds, dims);
  const TensorMap got = RunOnCpu(fused, feeds, BindDims(fused));
  for (const OutputComparison& c : CompareOutputs(want, got)) {
    EXPECT_TRUE(c.problem.empty()) << c.name << ": " << c.problem;
    EXPECT_TRUE(c.bitwise_equal) << c.name << ": max_abs " << c.max_abs;
  }
}

// GEMMs of every epilogue, some sharing their A (DCNv2's cross layer and
// DNN), form one group_gemm_rcr_mixed under the hfuse rules; on the CPU it
// gives the bytes its members give alone: float32 on the fast kernels (the
// packed tiles of all members in one loop, each tile with its member's
// bias and activation; the group rule's paths and one by one), float16 on
// the reference ones.
std::string MixedEpilogueGraph(std::string_view dtype) {
  std::string text = fmt::format("input x: {0}[96, 72]\ninput z: {0}[96, 40]\n", dtype);
  const char* kinds[] = {"gemm_rcr", "gemm_rcr_bias", "gemm_rcr_bias_relu", "gemm_rcr_bias_sigmoid",
                         "gemm_rcr_bias_relu", "gemm_rcr"};
  const int ns[] = {48, 33, 64, 17, 40, 1};
  std::vector<std::string> outs;
  for (int i = 0; i < 6; ++i) {
    const std::string_view kind = kinds[i];
    const bool bias = kind != "gemm_rcr";
    const char* a = i % 3 == 2 ? "z" : "x";
    const int k = i % 3 == 2 ? 40 : 72;
    text += fmt::format("param w{1}: {0}[{2}, {3}]\n", dtype, i, ns[i], k);
    if (bias) text += fmt::format("param b{1}: {0}[{2}]\n", dtype, i, ns[i]);
    text += fmt::format("tensor y{1}: {0}[96, {2}]\n", dtype, i, ns[i]);
    text += fmt::format("y{0} = {1}({2}, w{0}{3})  # fc{0}\n", i, kind, a,
                        bias ? fmt::format(", b{}", i) : "");
    outs.push_back(fmt::format("y{}", i));
  }
  return text + fmt::format("output {}\n", fmt::join(outs, ", "));
}

TEST(MixedEpilogueGroup, FusedEqualsUnfusedBitwise) {
  for (const char* dtype : {"float32", "float16"}) {
    SCOPED_TRACE(dtype);
    const Graph original = ParseGraphText(MixedEpilogueGraph(dtype), "mixed");
    Graph fused = original;
    FuseGroupOpsOptions options;
    options.rules = RuleSet::kHfuse;
    const FuseGroupOpsResult result = FuseGroupOps(fused, options);
    ASSERT_EQ(result.groups.size(), 1u);
    EXPECT_EQ(result.groups[0].type, OpType::kGroupGemmRcrMixed);
    EXPECT_EQ(result.groups[0].members.size(), 6u);
    EXPECT_EQ(result.groups[0].member_ops.size(), 6u);
    // Through the file form, as `hfuse verify` reads it.
    fused = ParseGraphJson(WriteGraphJson(fused, result.op_order), "fused");
    const OpId group = *fused.FindOp(result.groups[0].name);
    EXPECT_EQ(fused.op(group).attrs.member_ops, result.groups[0].member_ops);

    const DimValues dims = BindDims(original);
    const TensorMap feeds = RandomFeeds(original, dims, 99);
    CpuRunOptions reference;
    reference.reference = true;
    const TensorMap want = RunOnCpu(original, feeds, dims, reference);
    for (uint8_t mode : {0, 1, 2}) {
      for (bool ref : {false, true}) {
        CpuRunOptions run;
        run.group_mode = mode;
        run.reference = ref;
        SCOPED_TRACE(fmt::format("group_mode {}, reference {}", mode, ref));
        // Unfused on the same kernels, then fused: the same bytes.
        const TensorMap alone = RunOnCpu(original, feeds, dims, run);
        const TensorMap got = RunOnCpu(fused, feeds, BindDims(fused), run);
        for (const OutputComparison& c : CompareOutputs(alone, got)) {
          EXPECT_TRUE(c.problem.empty()) << c.name << ": " << c.problem;
          EXPECT_TRUE(c.bitwise_equal) << c.name << ": max_abs " << c.max_abs;
        }
        for (const OutputComparison& c : CompareOutputs(want, got)) {
          EXPECT_TRUE(c.problem.empty()) << c.name << ": " << c.problem;
          EXPECT_LE(c.normalized, 1e-4) << c.name;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, FusedEqualsUnfused,
                         ::testing::ValuesIn(testing::ConformanceCases()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return testing::CaseTestName(info.param);
                         });

}  // namespace
}  // namespace hfuse
