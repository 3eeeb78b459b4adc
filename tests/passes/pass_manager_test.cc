// The pass manager (registry, pipelines, --verify-each, --print-after,
// --stop-after, timings), the printer and its reader.
#include "hfuse/passes/pass_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "hfuse/io/graph_json.h"
#include "hfuse/io/graph_text.h"
#include "hfuse/ir/printer.h"
#include "hfuse/support/error.h"
#include "testing/conformance.h"

namespace hfuse {
namespace {

constexpr const char* kTwoGemms = R"(graph two
input x: float16[256, 64]
param w0: float16[32, 64]
param b0: float16[32]
param w1: float16[32, 64]
param b1: float16[32]
tensor y0: float16[256, 32]
tensor y1: float16[256, 32]
y0 = gemm_rcr_bias(x, w0, b0)  # fc0
y1 = gemm_rcr_bias(x, w1, b1)  # fc1
output y0, y1
)";

std::string ReadAll(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  return s;
}

TEST(PassRegistryTest, NamesAreKebabCaseAndUnique) {
  std::set<std::string_view> names;
  for (const PassInfo& p : RegisteredPasses()) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
    for (char c : p.name) EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '-') << p.name;
    EXPECT_EQ(FindPass(p.name), &p);
  }
  EXPECT_EQ(FindPass("no-such-pass"), nullptr);
  for (const NamedPipeline& p : NamedPipelines()) {
    EXPECT_EQ(PipelineNamed(p.name).size(), p.passes.size()) << p.name;
  }
}

TEST(PassRegistryTest, ParsesPassesAndPipelines) {
  const std::vector<const PassInfo*> passes = ParsePassList("onnx-import,seed,elide-split-concat");
  std::vector<std::string_view> names;
  for (const PassInfo* p : passes) names.push_back(p->name);
  EXPECT_THAT(names, ::testing::ElementsAre("einsum-to-gemm", "einsum-to-matmul",
                                            "left-matmul-to-gemm", "pointwise-conv-to-gemm",
                                            "fold-batchnorm",
                                            "fuse-mm-elementwise", "flatten-gemm-inputs",
                                            "fuse-group-ops", "elide-split-concat"));
  EXPECT_THROW(ParsePassList("fuse-group-ops,fuse-everything"), InputError);
}

TEST(PassManagerTest, ReportsChangedAndStatistics) {
  Graph g = ParseGraphText(kTwoGemms, "two");
  PassState state(g);
  PassManager manager(PipelineNamed("gpu"), PassManagerOptions::VerifyingEach());
  manager.Run(state);
  ASSERT_EQ(manager.records().size(), 3u);
  EXPECT_EQ(manager.records()[0].name, "fuse-group-ops");
  EXPECT_TRUE(manager.records()[0].result.changed);
  EXPECT_EQ(manager.records()[0].result.stats[2], (std::pair<std::string, int64_t>{"groups", 1}));
  EXPECT_EQ(manager.records()[1].name, "fuse-group-gathers");
  EXPECT_FALSE(manager.records()[1].result.changed);  // seed rules: it does nothing
  EXPECT_EQ(manager.records()[2].name, "elide-split-concat");
  EXPECT_FALSE(manager.records()[2].result.changed);  // no split here
  EXPECT_TRUE(state.fused);
  EXPECT_EQ(state.op_order.size(), 1u);  // kept: elide-split-concat adds and removes no ops
}

TEST(PassManagerTest, StopsAfterAndPrintsAfter) {
  Graph g = ParseGraphText(kTwoGemms, "two");
  PassState state(g);
  std::FILE* out = std::tmpfile();
  PassManagerOptions options;
  options.print_after = "fuse-group-ops";
  options.stop_after = "fuse-group-ops";
  options.time_passes = true;
  options.debug_out = out;
  PassManager manager(PipelineNamed("gpu"), options);
  manager.Run(state);
  EXPECT_EQ(manager.records().size(), 1u);
  const std::string text = ReadAll(out);
  std::fclose(out);
  EXPECT_NE(text.find("// after fuse-group-ops\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(y0, y1) = group_gemm_rcr_bias(x, w0, b0, x, w1, b1)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("pass timings:"), std::string::npos) << text;
  EXPECT_EQ(text.find("elide-split-concat"), std::string::npos) << text;
}

TEST(PassManagerTest, RejectsUnknownPassInFlags) {
  Graph g = ParseGraphText(kTwoGemms, "two");
  PassState state(g);
  PassManagerOptions options;
  options.stop_after = "fuse";
  EXPECT_THROW(PassManager(PipelineNamed("seed"), options).Run(state), InputError);
}

// A pass with a bug: it rewires an op's input by hand, not through
// Graph::SetOperand, so the user lists no longer mirror the inputs.
PassResult BreakUseLists(PassState& state, const PassOptions&) {
  Graph& g = state.graph;
  g.mutable_op(*g.FindOp("fc0")).inputs[2] = *g.FindTensor("b1");
  return {true, {}};
}

TEST(PassManagerTest, VerifyEachNamesThePassThatBrokeTheGraph) {
  Graph g = ParseGraphText(kTwoGemms, "two");
  PassState state(g);
  const PassInfo broken{"break-use-lists", false, "a bug", &BreakUseLists};
  try {
    PassManager({FindPass("elide-split-concat"), &broken}, PassManagerOptions::VerifyingEach()).Run(state);
    FAIL() << "no InternalError";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("after pass 'break-use-lists'"), std::string::npos)
        << e.what();
  }
}

TEST(PassManagerTest, VerifyEachNamesAPassThatBrokeShapeRules) {
  Graph g = ParseGraphText(kTwoGemms, "two");
  PassState state(g);
  const PassInfo bad_shape{"bad-shape", false, "a bug",
                           [](PassState& s, const PassOptions&) {
                             s.graph.mutable_tensor(*s.graph.FindTensor("y0")).shape[1] =
                                 Dim::Static(7);
                             return PassResult{true, {}};
                           }};
  try {
    PassManager({&bad_shape}, PassManagerOptions::VerifyingEach()).Run(state);
    FAIL() << "no InternalError";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("after pass 'bad-shape'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("op 'fc0'"), std::string::npos) << e.what();
  }
}

TEST(GraphTextTest, NamesTheLineOfAnError) {
  try {
    ParseGraphText("input x: float16[4, 8]\ny = gemm_rcr(x, w)\noutput y\n", "bad.hfuse");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.hfuse:2:"), std::string::npos) << e.what();
  }
}

TEST(GraphTextTest, QuotesNamesWithOtherCharacters) {
  Graph g = ParseGraphText(
      "input \"a b\": float32[2, 2]\ntensor \"/t:0\": float32[2, 2]\n"
      "\"/t:0\" = elementwise(\"a b\") {func = relu}  # \"op, 1\"\noutput \"/t:0\"\n",
      "q");
  EXPECT_EQ(PrintOp(g, 0), "\"/t:0\" = elementwise(\"a b\") {func = relu}  # \"op, 1\"");
}

// Print, read back, print again: the same text, on every conformance graph
// before and after fusion.
TEST(GraphTextTest, RoundTripsEveryConformanceGraph) {
  int count = 0;
  for (const std::string& id : testing::ConformanceCases()) {
    const std::string path = testing::ConformancePath(id) + ".json";
    Graph g = ReadGraphJsonFile(path);
    for (int fused = 0; fused < 2; ++fused) {
      const std::string text = PrintGraph(g);
      const Graph back = ParseGraphText(text, path);
      ASSERT_EQ(PrintGraph(back), text) << path;
      PassState state(g);
      PassManager(PipelineNamed("gpu"), PassManagerOptions::VerifyingEach()).Run(state);
    }
    ++count;
  }
  EXPECT_GT(count, 300);
}

}  // namespace
}  // namespace hfuse
