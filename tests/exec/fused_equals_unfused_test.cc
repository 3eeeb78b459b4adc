// Fusion never changes results: every conformance graph, fused, gives on the
// CPU exactly the bytes the original gives, on the same random inputs (group
// ops run their members with the ungrouped kernels, so equality is bitwise).
#include <gtest/gtest.h>

#include "hfuse/exec/compare.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/io/graph_json.h"
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

INSTANTIATE_TEST_SUITE_P(Shared, FusedEqualsUnfused,
                         ::testing::ValuesIn(testing::ConformanceCases()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return testing::CaseTestName(info.param);
                         });

}  // namespace
}  // namespace hfuse
