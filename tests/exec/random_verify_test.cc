// `hfuse verify` on 1,000 seeded random graphs: each graph fused, then the
// original and the fused graph run on the CPU on the same random inputs
// must give the same bytes (group ops run their members' own kernels).
#include <gtest/gtest.h>

#include "hfuse/exec/compare.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "testing/random_graph.h"

namespace hfuse {
namespace {

class RandomVerify : public ::testing::TestWithParam<int> {};

// 10 chunks of 100 seeds, so ctest shows progress and runs them in parallel.
TEST_P(RandomVerify, FusedEqualsOriginalBitwise) {
  RandomGraphOptions options;
  options.max_ops = 40;
  int groups = 0;
  for (int i = 0; i < 100; ++i) {
    const uint64_t seed = static_cast<uint64_t>(GetParam() * 100 + i);
    options.wide = seed % 4 == 0;
    const Graph original = ParseGraphJson(RandomGraphJson(seed, options), "random");
    Graph fused = original;
    const FuseGroupOpsResult result = FuseGroupOps(fused);
    groups += static_cast<int>(result.groups.size());
    fused = ParseGraphJson(WriteGraphJson(fused, result.op_order), "fused");
    const DimValues dims = BindDims(original);
    const TensorMap feeds = RandomFeeds(original, dims, seed);
    const TensorMap want = RunOnCpu(original, feeds, dims);
    const TensorMap got = RunOnCpu(fused, feeds, BindDims(fused));
    for (const OutputComparison& c : CompareOutputs(want, got)) {
      ASSERT_TRUE(c.problem.empty()) << "seed " << seed << " " << c.name << ": " << c.problem;
      ASSERT_TRUE(c.bitwise_equal) << "seed " << seed << " " << c.name << ": " << c.max_abs;
    }
  }
  EXPECT_GT(groups, 50) << "the random graphs should form groups";
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomVerify, ::testing::Range(0, 10));

}  // namespace
}  // namespace hfuse
