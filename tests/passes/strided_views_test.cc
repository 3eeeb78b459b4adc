// elide-split-concat: which splits and concatenates become views, and that
// running through the views computes exactly what the copies computed.
#include <gtest/gtest.h>

#include "hfuse/exec/cpu_executor.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/passes/strided_views.h"
#include "testing/graph_builder.h"
#include "testing/tool_runner.h"

namespace hfuse {
namespace {

Graph Towers() {
  return ReadGraphJsonFile(test::ExamplePath("towers_small.json"));
}

bool Elided(const Graph& g, const std::string& name) { return g.op(*g.FindOp(name)).elided; }

TEST(ElideSplitConcat, TowersLoseTheirSplitAndConcatCopies) {
  Graph g = Towers();
  FuseGroupOps(g);
  EXPECT_EQ(ElideSplitConcat(g), 2);
  EXPECT_TRUE(Elided(g, "split"));
  EXPECT_TRUE(Elided(g, "concat"));
  const Tensor& x0 = g.tensor(*g.FindTensor("x0"));
  EXPECT_EQ(x0.storage, *g.FindTensor("x"));
  EXPECT_EQ(x0.storage_offset, 0);
  const Tensor& x1 = g.tensor(*g.FindTensor("x1"));
  EXPECT_EQ(x1.storage_offset, x0.shape.back().value);
  EXPECT_EQ(g.tensor(*g.FindTensor("y0")).storage, *g.FindTensor("out"));
}

TEST(ElideSplitConcat, ViewsComputeWhatCopiesComputed) {
  Graph plain = Towers();
  FuseGroupOps(plain);
  Graph viewed = plain;
  ASSERT_EQ(ElideSplitConcat(viewed), 2);
  const DimValues dims = BindDims(plain);
  const TensorMap feeds = RandomFeeds(plain, dims, 3);
  EXPECT_EQ(RunOnCpu(plain, feeds, dims).at("out").bytes, RunOnCpu(viewed, feeds, dims).at("out").bytes);
}

TEST(ElideSplitConcat, KeepsSplitWhoseOutputFeedsAnElementwise) {
  test::GraphBuilder b;
  const auto parts = b.Split("split", b.Input("x", {8, 16}), {8, 8}, 1);
  b.Outputs({b.Elementwise("r", "relu", {parts[0]}), b.Elementwise("s", "relu", {parts[1]})});
  Graph g = b.Build();
  EXPECT_EQ(ElideSplitConcat(g), 0);
}

TEST(ElideSplitConcat, KeepsSplitNotOnTheLastDim) {
  test::GraphBuilder b;
  const auto parts = b.Split("split", b.Input("x", {8, 16}), {4, 4}, 0);
  b.Outputs({b.Fc("fc0", parts[0], 8), b.Fc("fc1", parts[1], 8)});
  Graph g = b.Build();
  EXPECT_EQ(ElideSplitConcat(g), 0);
}

TEST(ElideSplitConcat, KeepsConcatOfAGraphInput) {
  test::GraphBuilder b;
  const std::string y = b.Fc("fc", b.Input("x", {8, 16}), 8);
  b.Outputs({b.Concat("cat", {y, b.Input("z", {8, 8})}, 1)});
  Graph g = b.Build();
  EXPECT_EQ(ElideSplitConcat(g), 0);
}

}  // namespace
}  // namespace hfuse
